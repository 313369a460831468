//! The logical junctors of a chart's `values.schema.json` (`allOf`, `anyOf`, `oneOf`,
//! `not`) in the CRD's structural spec schema ([`crate::crd::spec_schema`]).
//! kube-apiserver takes only value validations under a junctor: no `type`,
//! `description`, `default`, `nullable`, `additionalProperties` or `x-kubernetes-*`, and
//! only properties (and items) the schema also specifies outside the junctor. So each
//! branch keeps its value validations (`enum`/`const`, bounds, lengths, `pattern`,
//! `required`, item and property counts, declared properties and items, nested
//! junctors). Dropping anything else only widens a branch, which is safe under `allOf`
//! and `anyOf` (the API server accepts a superset of what Helm accepts) but not under
//! `oneOf` (a widened branch can make a value match twice) or `not`: those are dropped
//! whole when a branch lost something, and Helm still validates the full schema. Branches
//! that are bare types (`anyOf: [{type: integer}, {type: string}]`) are read as a type
//! list ([`type_union`]).

use serde_json::{Map, Value};

use crate::schema_keywords::{MAX_REF_DEPTH, bound, copy_keywords};

/// The types of a node without `type` whose `anyOf` or `oneOf` branches are bare types
/// (`anyOf: [{type: integer}, {type: string}]`, a common spelling of `type: [integer,
/// string]`), so it converts as that type list; empty otherwise. A `oneOf` of `integer`
/// and `number` is not a union (an integer matches both).
pub(crate) fn type_union(node: &Map<String, Value>) -> Vec<&str> {
    for key in ["anyOf", "oneOf"] {
        let Some(branches) = node.get(key).and_then(Value::as_array) else { continue };
        let types: Option<Vec<&str>> = branches
            .iter()
            .map(|branch| {
                let branch = branch.as_object()?;
                let bare = branch.keys().all(|k| matches!(k.as_str(), "type" | "description" | "title" | "$comment"));
                branch.get("type").and_then(Value::as_str).filter(|_| bare)
            })
            .collect();
        match types {
            Some(types) if key == "oneOf" && types.contains(&"integer") && types.contains(&"number") => {}
            Some(types) if !types.is_empty() => return types,
            _ => {}
        }
    }
    Vec::new()
}

/// Adds `node`'s junctors, as value validations, to its converted schema `out`.
pub(crate) fn add_junctors(node: &Map<String, Value>, out: &mut Map<String, Value>, root: &Value, depth: usize) {
    let outer = out.clone();
    let mut widened = false;
    junctors(node, &outer, root, depth, out, &mut widened);
}

/// Converts `node`'s `allOf`/`anyOf`/`oneOf`/`not` into `out`, under the converted schema
/// `outer` they apply to; sets `widened` when the result accepts more than `node`'s.
fn junctors(
    node: &Map<String, Value>,
    outer: &Map<String, Value>,
    root: &Value,
    depth: usize,
    out: &mut Map<String, Value>,
    widened: &mut bool,
) {
    for key in ["allOf", "anyOf", "oneOf"] {
        let Some(branches) = node.get(key) else { continue };
        let Some(branches) = branches.as_array() else {
            *widened = true;
            continue;
        };
        let mut branch_widened = false;
        let mut converted: Vec<Map<String, Value>> =
            branches.iter().map(|branch| value_validations(branch, outer, root, depth, &mut branch_widened)).collect();
        if key == "oneOf" && branch_widened {
            *widened = true;
            continue;
        }
        *widened |= branch_widened;
        match key {
            // An empty branch constrains nothing.
            "allOf" => converted.retain(|branch| !branch.is_empty()),
            // An empty branch accepts every value, so the anyOf does.
            "anyOf" if converted.iter().any(Map::is_empty) => converted.clear(),
            _ => {}
        }
        if !converted.is_empty() {
            out.insert(key.to_string(), Value::Array(converted.into_iter().map(Value::Object).collect()));
        }
    }
    if let Some(not) = node.get("not") {
        let mut not_widened = false;
        let converted = value_validations(not, outer, root, depth, &mut not_widened);
        if not_widened {
            *widened = true;
        } else {
            out.insert("not".to_string(), Value::Object(converted));
        }
    }
}

/// Keywords of a junctor branch that constrain nothing (annotations).
const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "default",
    "examples",
    "$comment",
    "$schema",
    "$id",
    "definitions",
    "$defs",
    "readOnly",
    "writeOnly",
    "deprecated",
];

/// Keywords of a junctor branch copied after the others (bounds, lengths, counts) or
/// converted as nested junctors.
const COPIED_AFTER: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
];

/// The value validations of one junctor branch `node`, applying to the converted schema
/// `outer`; sets `widened` when something that constrains values was dropped.
fn value_validations(
    node: &Value,
    outer: &Map<String, Value>,
    root: &Value,
    depth: usize,
    widened: &mut bool,
) -> Map<String, Value> {
    let node = match node {
        Value::Object(node) => node,
        // JSON Schema's `true` accepts everything; `false` nothing (not representable).
        Value::Bool(true) => return Map::new(),
        _ => {
            *widened = true;
            return Map::new();
        }
    };
    if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
        return ref_validations(reference, outer, root, depth, widened);
    }
    let mut out = Map::new();
    for (key, value) in node {
        match key.as_str() {
            key if ANNOTATIONS.contains(&key) || COPIED_AFTER.contains(&key) => {}
            // A type is not allowed here; it is redundant only when the outer schema has it.
            "type" => *widened |= outer.get("type") != Some(value),
            "enum" if value.is_array() => {
                out.insert("enum".into(), value.clone());
            }
            "const" => {
                out.insert("enum".into(), Value::Array(vec![value.clone()]));
            }
            "required" if value.as_array().is_some_and(|names| names.iter().all(Value::is_string)) => {
                out.insert("required".into(), value.clone());
            }
            "properties" => {
                let properties = property_validations(value, outer, root, depth, widened);
                if !properties.is_empty() {
                    out.insert("properties".into(), Value::Object(properties));
                }
            }
            "items" => match outer.get("items").and_then(Value::as_object) {
                Some(items) => {
                    let converted = value_validations(value, items, root, depth, widened);
                    if !converted.is_empty() {
                        out.insert("items".into(), Value::Object(converted));
                    }
                }
                None => *widened = true,
            },
            // format, uniqueItems, additionalProperties, patternProperties, if/then/else, ...
            _ => *widened = true,
        }
    }
    let keywords =
        ["multipleOf", "minLength", "maxLength", "pattern", "minItems", "maxItems", "minProperties", "maxProperties"];
    copy_keywords(node, &mut out, &keywords);
    bound(node, &mut out, "minimum", "exclusiveMinimum");
    bound(node, &mut out, "maximum", "exclusiveMaximum");
    junctors(node, outer, root, depth, &mut out, widened);
    out
}

/// The value validations of a `$ref` branch: those of the local definition it points to
/// (none, and `widened`, when it is not local, not found or too deep).
fn ref_validations(
    reference: &str,
    outer: &Map<String, Value>,
    root: &Value,
    depth: usize,
    widened: &mut bool,
) -> Map<String, Value> {
    let target = reference
        .strip_prefix('#')
        .filter(|_| depth < MAX_REF_DEPTH)
        .and_then(|pointer| root.pointer(pointer))
        .filter(|target| target.is_object() || target.is_boolean());
    match target {
        Some(target) => value_validations(target, outer, root, depth + 1, widened),
        None => {
            *widened = true;
            Map::new()
        }
    }
}

/// The value validations of a branch's `properties`, each under the outer schema's
/// property of that name; a property the outer schema does not declare (kube refuses it)
/// is dropped and `widened` set.
fn property_validations(
    properties: &Value,
    outer: &Map<String, Value>,
    root: &Value,
    depth: usize,
    widened: &mut bool,
) -> Map<String, Value> {
    let declared = outer.get("properties").and_then(Value::as_object);
    let mut out = Map::new();
    for (name, schema) in properties.as_object().into_iter().flatten() {
        match declared.and_then(|d| d.get(name)).and_then(Value::as_object) {
            Some(field) => {
                let converted = value_validations(schema, field, root, depth, widened);
                if !converted.is_empty() {
                    out.insert(name.clone(), Value::Object(converted));
                }
            }
            // Not specified outside the junctor: kube refuses it.
            None => *widened = true,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::crd::spec_schema;

    #[test]
    fn value_validations_under_junctors_are_kept_as_kube_allows_them() {
        let values_schema = json!({
            "type": "object",
            "definitions": { "small": { "maximum": 10 } },
            "properties": {
                "auth": {
                    "type": "object",
                    "properties": {
                        "password": { "type": "string" },
                        "secretName": { "type": "string" }
                    },
                    "oneOf": [
                        { "required": ["password"], "description": "inline" },
                        { "required": ["secretName"], "type": "object" }
                    ]
                },
                "replicas": {
                    "type": "integer",
                    "allOf": [{ "minimum": 1 }, { "$ref": "#/definitions/small" }, { "title": "nothing" }],
                    "not": { "const": 7 }
                },
                "mode": {
                    "type": "string",
                    "anyOf": [{ "enum": ["a", "b"] }, { "pattern": "^x-", "format": "hostname" }]
                },
                "size": {
                    "type": "string",
                    "oneOf": [{ "pattern": "^[0-9]+$" }, { "format": "quantity" }],
                    "anyOf": [{ "minLength": 1 }, {}]
                },
                "port": { "anyOf": [{ "type": "integer" }, { "type": "string", "description": "a name" }] },
                "tag": { "oneOf": [{ "type": "string" }, { "type": "null" }] },
                "amount": { "oneOf": [{ "type": "integer" }, { "type": "number" }] },
                "ports": {
                    "type": "array",
                    "items": { "type": "object", "properties": { "port": { "type": "integer" } } },
                    "anyOf": [{ "items": { "properties": { "port": { "minimum": 1 }, "undeclared": { "minimum": 1 } } } }]
                }
            }
        });
        let spec = spec_schema(&values_schema);
        let property = |name: &str| spec.pointer(&format!("/properties/{name}")).cloned().unwrap_or_default();
        assert_eq!(property("auth")["oneOf"], json!([{ "required": ["password"] }, { "required": ["secretName"] }]));
        assert_eq!(property("replicas")["allOf"], json!([{ "minimum": 1 }, { "maximum": 10 }]));
        assert_eq!(property("replicas")["not"], json!({ "enum": [7] }));
        // A dropped format only widens an anyOf branch: kept.
        assert_eq!(property("mode")["anyOf"], json!([{ "enum": ["a", "b"] }, { "pattern": "^x-" }]));
        // A widened oneOf branch could accept a value twice: the oneOf goes. An anyOf with
        // an empty branch accepts everything: it goes too.
        assert_eq!(property("size").get("oneOf"), None);
        assert_eq!(property("size").get("anyOf"), None);
        // Bare type branches are a type list.
        assert_eq!(property("port"), json!({ "x-kubernetes-int-or-string": true }));
        assert_eq!(property("tag"), json!({ "type": "string", "nullable": true }));
        assert_eq!(property("amount"), json!({ "x-kubernetes-preserve-unknown-fields": true }));
        // Only properties declared outside the junctor.
        assert_eq!(property("ports")["anyOf"], json!([{ "items": { "properties": { "port": { "minimum": 1 } } } }]));
    }
}
