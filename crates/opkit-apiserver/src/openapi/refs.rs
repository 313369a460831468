//! `$ref` handling shared by the v2 and v3 builders: collecting referenced definition names,
//! computing the closure of definitions a document needs, and rewriting v2-style schemas
//! (`#/definitions/...`) into v3 style (`#/components/schemas/...`, `allOf`-wrapped refs).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// Prefix of a swagger 2.0 definition reference.
pub(crate) const REF_V2: &str = "#/definitions/";
/// Prefix of an OpenAPI 3 component schema reference.
pub(crate) const REF_V3: &str = "#/components/schemas/";

/// Adds to `out` the names of all definitions referenced (with the v2 prefix) inside `v`.
pub(crate) fn collect_refs(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                if let (true, Some(r)) = (k == "$ref", child.as_str()) {
                    if let Some(name) = r.strip_prefix(REF_V2) {
                        out.insert(name.to_string());
                    }
                } else {
                    collect_refs(child, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_refs(i, out)),
        _ => {}
    }
}

/// The transitive closure of `roots` over the references found by `lookup`. Names that
/// `lookup` does not know are kept out of the result.
pub(crate) fn closure<'a>(
    roots: impl IntoIterator<Item = String>,
    lookup: &dyn Fn(&str) -> Option<&'a Value>,
) -> BTreeSet<String> {
    let mut done = BTreeSet::new();
    let mut todo: Vec<String> = roots.into_iter().collect();
    while let Some(name) = todo.pop() {
        if done.contains(&name) {
            continue;
        }
        let Some(def) = lookup(&name) else {
            continue;
        };
        done.insert(name);
        let mut found = BTreeSet::new();
        collect_refs(def, &mut found);
        todo.extend(found.into_iter().filter(|n| !done.contains(n)));
    }
    done
}

/// A `$ref` schema object pointing at a v2 definition.
pub(crate) fn ref_v2(name: &str) -> Value {
    let mut m = Map::new();
    m.insert("$ref".into(), Value::String(format!("{REF_V2}{name}")));
    Value::Object(m)
}

/// A `$ref` schema object pointing at a v3 component schema.
pub(crate) fn ref_v3(name: &str) -> Value {
    let mut m = Map::new();
    m.insert("$ref".into(), Value::String(format!("{REF_V3}{name}")));
    Value::Object(m)
}

/// Rewrites a v2-style schema into v3 style: references point into `#/components/schemas/`
/// and a reference with sibling keywords (e.g. a description) becomes
/// `{"allOf":[{"$ref":...}], <siblings>}`, as kube-apiserver publishes it.
pub(crate) fn to_v3_schema(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut out = Map::new();
            let mut reference = None;
            for (k, child) in map {
                if k == "$ref" && child.is_string() {
                    let target = child
                        .as_str()
                        .map(|r| match r.strip_prefix(REF_V2) {
                            Some(name) => format!("{REF_V3}{name}"),
                            None => r.to_string(),
                        })
                        .map(Value::String)
                        .unwrap_or_else(|| child.clone());
                    reference = Some(target);
                } else if is_schema_map_keyword(k) {
                    // Keys of these maps are names, not keywords: convert values only.
                    let converted = match child {
                        Value::Object(m) => {
                            Value::Object(m.iter().map(|(name, s)| (name.clone(), to_v3_schema(s))).collect())
                        }
                        other => other.clone(),
                    };
                    out.insert(k.clone(), converted);
                } else if is_literal_keyword(k) {
                    out.insert(k.clone(), child.clone());
                } else {
                    out.insert(k.clone(), to_v3_schema(child));
                }
            }
            match reference {
                None => Value::Object(out),
                Some(target) => {
                    let mut r = Map::new();
                    r.insert("$ref".into(), target);
                    if out.is_empty() {
                        Value::Object(r)
                    } else {
                        let mut wrapped = Map::new();
                        wrapped.insert("allOf".into(), Value::Array(vec![Value::Object(r)]));
                        wrapped.extend(out);
                        Value::Object(wrapped)
                    }
                }
            }
        }
        Value::Array(items) => Value::Array(items.iter().map(to_v3_schema).collect()),
        other => other.clone(),
    }
}

/// Keywords whose value maps names to schemas.
fn is_schema_map_keyword(k: &str) -> bool {
    matches!(k, "properties" | "patternProperties" | "definitions")
}

/// Keywords whose value is data, never a schema to rewrite.
fn is_literal_keyword(k: &str) -> bool {
    matches!(k, "default" | "enum" | "example" | "x-kubernetes-validations") || k == "const"
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn v3_rewrite_wraps_refs_with_siblings() {
        let v2 = json!({"properties": {
            "metadata": {"$ref": "#/definitions/a.B", "description": "d"},
            "items": {"type": "array", "items": {"$ref": "#/definitions/c.D"}},
            "$ref": {"type": "string"}
        }, "default": {"$ref": "literal"}});
        let v3 = to_v3_schema(&v2);
        assert_eq!(
            v3["properties"]["metadata"],
            json!({"allOf": [{"$ref": "#/components/schemas/a.B"}], "description": "d"})
        );
        assert_eq!(v3["properties"]["items"]["items"], json!({"$ref": "#/components/schemas/c.D"}));
        // A property literally called "$ref" is a property, not a reference.
        assert_eq!(v3["properties"]["$ref"], json!({"type": "string"}));
        assert_eq!(v3["default"], json!({"$ref": "literal"}));
    }

    #[test]
    fn closure_follows_refs_and_skips_unknown() {
        let a = json!({"properties": {"b": {"$ref": "#/definitions/b"}}});
        let b = json!({"items": {"$ref": "#/definitions/missing"}});
        let lookup = |n: &str| match n {
            "a" => Some(&a),
            "b" => Some(&b),
            _ => None,
        };
        let got = closure(vec!["a".to_string()], &lookup);
        assert_eq!(got.into_iter().collect::<Vec<_>>(), vec!["a", "b"]);
    }
}
