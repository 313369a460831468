//! Self-contained schemas of built-in kinds with every `$ref` inlined, for unknown-field
//! detection. Recursive types (e.g. JSONSchemaProps) are cut off with an object schema that
//! preserves unknown fields. Results are cached per kind.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use serde_json::{Map, Value, json};

use super::builtin::{builtin_definition_name, builtin_definitions};
use super::refs::REF_V2;

type Cache = Mutex<HashMap<String, Option<Arc<Value>>>>;

static CACHE: OnceLock<Cache> = OnceLock::new();

/// A self-contained schema for a built-in kind with every `$ref` inlined (recursive types
/// replaced by `{"type":"object","x-kubernetes-preserve-unknown-fields":true}`), or `None` for
/// a kind that is not built in. Cached.
pub(crate) fn builtin_inline_schema(group: &str, version: &str, kind: &str) -> Option<Arc<Value>> {
    let name = builtin_definition_name(group, version, kind)?;
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(hit) = cache.lock().get(&name) {
        return hit.clone();
    }
    let defs = builtin_definitions();
    let result = defs.get(&name).map(|root| {
        let mut stack = vec![name.clone()];
        Arc::new(inline(root, &mut stack, &|n| defs.get(n)))
    });
    cache.lock().insert(name, result.clone());
    result
}

/// The schema used in place of a reference back into a type being inlined.
fn recursion_stub() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// Inlines every reference inside `schema`; `stack` holds the definitions being expanded.
pub(crate) fn inline<'a>(schema: &Value, stack: &mut Vec<String>, lookup: &dyn Fn(&str) -> Option<&'a Value>) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let target = map.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(REF_V2));
    if let Some(name) = target {
        let mut resolved = if stack.iter().any(|s| s == name) {
            recursion_stub()
        } else if let Some(def) = lookup(name) {
            stack.push(name.to_string());
            let v = inline(def, stack, lookup);
            stack.pop();
            v
        } else {
            // A dangling reference: accept anything rather than reject valid objects.
            recursion_stub()
        };
        if let Some(obj) = resolved.as_object_mut() {
            for (k, v) in map {
                if k != "$ref" {
                    obj.insert(k.clone(), v.clone());
                }
            }
        }
        return resolved;
    }
    let mut out = Map::new();
    for (k, v) in map {
        let converted = match k.as_str() {
            "properties" | "patternProperties" => match v {
                Value::Object(props) => {
                    Value::Object(props.iter().map(|(n, s)| (n.clone(), inline(s, stack, lookup))).collect())
                }
                other => other.clone(),
            },
            "items" | "additionalProperties" | "not" => inline(v, stack, lookup),
            "allOf" | "anyOf" | "oneOf" => match v {
                Value::Array(items) => Value::Array(items.iter().map(|s| inline(s, stack, lookup)).collect()),
                other => other.clone(),
            },
            _ => v.clone(),
        };
        out.insert(k.clone(), converted);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_containers_have_image() {
        let s = builtin_inline_schema("apps", "v1", "Deployment").expect("deployment schema");
        let container = &s["properties"]["spec"]["properties"]["template"]["properties"]["spec"]["properties"]["containers"]
            ["items"];
        assert!(container["properties"]["image"].is_object(), "{container}");
        assert_eq!(container["properties"]["image"]["type"], "string");
        // No reference survives inlining.
        assert!(!serde_json::to_string(&*s).unwrap().contains("\"$ref\""));
        // Cached: same allocation on the second call.
        let again = builtin_inline_schema("apps", "v1", "Deployment").expect("cached");
        assert!(Arc::ptr_eq(&s, &again));
    }

    #[test]
    fn recursive_crd_schema_is_cut() {
        let s = builtin_inline_schema("apiextensions.k8s.io", "v1", "CustomResourceDefinition").expect("crd schema");
        let props = &s["properties"]["spec"]["properties"]["versions"]["items"]["properties"]["schema"]["properties"]["openAPIV3Schema"]
            ["properties"]["properties"];
        assert_eq!(props["additionalProperties"]["x-kubernetes-preserve-unknown-fields"], true);
        assert!(builtin_inline_schema("flights.com", "v1", "FlightTicket").is_none());
    }
}
