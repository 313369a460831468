//! The CustomResourceDefinition of a watched kind, as `opkit init --plugins helm`
//! scaffolds it: the spec (the chart's values) is the chart's `values.schema.json`
//! converted to a structural schema, or keeps unknown fields when the chart has none; the
//! status keeps unknown fields, the status subresource is on, and `kubectl get` shows the
//! release's revision and whether it is deployed.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Map, Value, json};

use crate::OperatorError;
use crate::junctors::{add_junctors, type_union};
use crate::schema_keywords::{MAX_REF_DEPTH, bound, copy_keywords};

/// The CRD for `group`/`version` `kind` (namespaced), served as `plural`; its spec schema
/// is [`spec_schema`] of the chart's `values_schema` when there is one.
pub fn crd_for(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    values_schema: Option<&Value>,
) -> Result<CustomResourceDefinition, OperatorError> {
    let open = json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true });
    let spec = values_schema.map_or_else(|| open.clone(), spec_schema);
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{plural}.{group}") },
        "spec": {
            "group": group,
            "names": {
                "kind": kind,
                "listKind": format!("{kind}List"),
                "plural": plural,
                "singular": kind.to_lowercase(),
            },
            "scope": "Namespaced",
            "versions": [{
                "name": version,
                "served": true,
                "storage": true,
                "subresources": { "status": {} },
                "additionalPrinterColumns": [
                    { "name": "Revision", "type": "integer", "jsonPath": ".status.deployedRelease.revision", "description": "The release's revision" },
                    { "name": "Deployed", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Deployed\")].status", "description": "Whether the release is deployed" },
                    { "name": "Reason", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Deployed\")].reason", "description": "How the release got there" },
                    { "name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp" },
                ],
                "schema": { "openAPIV3Schema": {
                    "description": format!("{kind} is the Schema for the {plural} API"),
                    "type": "object",
                    "properties": {
                        "apiVersion": { "type": "string" },
                        "kind": { "type": "string" },
                        "metadata": { "type": "object" },
                        "spec": spec,
                        "status": open,
                    },
                }},
            }],
        },
    });
    serde_json::from_value(crd).map_err(|e| OperatorError::Manifest(format!("the CRD for {kind}: {e}")))
}

/// Converts a chart's `values.schema.json` (JSON Schema) to the structural OpenAPI v3
/// schema a CRD's `spec` needs: types, properties, required, enums (`const` too), bounds,
/// lengths, item counts, patterns and descriptions are kept, local `$ref`s
/// (`#/definitions/...`, `#/$defs/...`) are followed; a type list with `null` is
/// `nullable`, integer-or-string is `x-kubernetes-int-or-string`; keywords kube does not
/// take (`$schema`, `$id`, `title`, `default`, `format`, `uniqueItems`, ...) are
/// dropped; `allOf`/`anyOf`/`oneOf`/`not` keep the value validations kube allows under
/// them (kube's rules for junctors). A node with no single type, or an object that allows
/// additional properties (JSON Schema's default), keeps unknown fields
/// (`x-kubernetes-preserve-unknown-fields: true`), so the spec never loses a value Helm
/// would accept. The root is always an object.
pub fn spec_schema(values_schema: &Value) -> Value {
    let mut spec = convert(values_schema, values_schema, 0);
    if let Some(spec) = spec.as_object_mut() {
        spec.insert("type".into(), json!("object"));
        spec.remove("nullable");
        spec.remove("x-kubernetes-int-or-string");
    }
    spec
}

/// One node of [`spec_schema`]; `root` resolves `$ref`s.
fn convert(node: &Value, root: &Value, depth: usize) -> Value {
    let Some(node) = node.as_object() else { return open_node() };
    if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
        return convert_ref(node, reference, root, depth);
    }
    let mut out = Map::new();
    if let Some(description) = node.get("description").filter(|d| d.is_string()) {
        out.insert("description".into(), description.clone());
    }
    let mut types = node_types(node);
    let nullable = types.contains(&"null");
    types.retain(|t| *t != "null");
    if nullable {
        out.insert("nullable".into(), json!(true));
    }
    let type_ = match types.as_slice() {
        [one] => *one,
        [a, b] if (*a == "integer" && *b == "string") || (*a == "string" && *b == "integer") => {
            out.insert("x-kubernetes-int-or-string".into(), json!(true));
            ""
        }
        _ => {
            // No type, or several: any value.
            out.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
            add_junctors(node, &mut out, root, depth);
            return Value::Object(out);
        }
    };
    if !type_.is_empty() {
        out.insert("type".into(), json!(type_));
    }
    if let Some(values) = enum_values(node) {
        out.insert("enum".into(), Value::Array(values));
    }
    convert_typed(type_, node, root, depth, &mut out);
    add_junctors(node, &mut out, root, depth);
    Value::Object(out)
}

/// A node that takes any value.
fn open_node() -> Value {
    json!({ "x-kubernetes-preserve-unknown-fields": true })
}

/// A `$ref` node: the local definition it points to, converted (open when it is not
/// local, not found, or too deep), with the node's own description.
fn convert_ref(node: &Map<String, Value>, reference: &str, root: &Value, depth: usize) -> Value {
    let target = reference
        .strip_prefix('#')
        .filter(|_| depth < MAX_REF_DEPTH)
        .and_then(|pointer| root.pointer(pointer))
        .filter(|target| target.is_object());
    let mut resolved = match target {
        Some(target) => convert(target, root, depth + 1),
        None => open_node(),
    };
    if let (Some(out), Some(description)) = (resolved.as_object_mut(), node.get("description")) {
        out.insert("description".into(), description.clone());
    }
    resolved
}

/// The node's types: its `type` (one or a list), else a union of bare-type branches,
/// else what its keywords imply (`properties`: an object, `items`: an array).
fn node_types(node: &Map<String, Value>) -> Vec<&str> {
    let mut types: Vec<&str> = match node.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
        _ => type_union(node),
    };
    if types.is_empty() && (node.contains_key("properties") || node.contains_key("additionalProperties")) {
        types.push("object");
    }
    if types.is_empty() && node.contains_key("items") {
        types.push("array");
    }
    types
}

/// The node's `enum`, or its `const` as a one-value enum.
fn enum_values(node: &Map<String, Value>) -> Option<Vec<Value>> {
    match (node.get("enum"), node.get("const")) {
        (Some(Value::Array(values)), _) => Some(values.clone()),
        (_, Some(value)) => Some(vec![value.clone()]),
        _ => None,
    }
}

/// The keywords of a node of type `type_`: an object's properties, an array's items and
/// counts, a string's lengths and pattern, a number's bounds.
fn convert_typed(type_: &str, node: &Map<String, Value>, root: &Value, depth: usize, out: &mut Map<String, Value>) {
    match type_ {
        "object" => convert_object(node, root, depth, out),
        "array" => {
            let items = match node.get("items") {
                Some(items @ Value::Object(_)) => convert(items, root, depth),
                _ => open_node(),
            };
            out.insert("items".into(), items);
            copy_keywords(node, out, &["minItems", "maxItems"]);
        }
        "string" => copy_keywords(node, out, &["minLength", "maxLength", "pattern"]),
        "integer" | "number" => {
            copy_keywords(node, out, &["multipleOf"]);
            bound(node, out, "minimum", "exclusiveMinimum");
            bound(node, out, "maximum", "exclusiveMaximum");
        }
        _ => {}
    }
}

/// An object node's properties, required fields and additional properties.
fn convert_object(node: &Map<String, Value>, root: &Value, depth: usize, out: &mut Map<String, Value>) {
    let properties: Map<String, Value> = node
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| props.iter().map(|(name, schema)| (name.clone(), convert(schema, root, depth))).collect())
        .unwrap_or_default();
    let required: Vec<Value> = node
        .get("required")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter(|r| r.as_str().is_some_and(|r| properties.contains_key(r))).cloned().collect())
        .unwrap_or_default();
    copy_keywords(node, out, &["minProperties", "maxProperties"]);
    match node.get("additionalProperties") {
        // Closed: unknown fields are pruned.
        Some(Value::Bool(false)) => {}
        // A map of one schema (kube takes it only without properties).
        Some(additional @ Value::Object(_)) if properties.is_empty() => {
            out.insert("additionalProperties".into(), convert(additional, root, depth));
        }
        // JSON Schema's default: any other field is allowed.
        _ => {
            out.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
        }
    }
    if !properties.is_empty() {
        out.insert("properties".into(), Value::Object(properties));
    }
    if !required.is_empty() {
        out.insert("required".into(), Value::Array(required));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_keeps_unknown_fields_and_has_printer_columns() {
        let crd = crd_for("demo.example.com", "v1alpha1", "Nginx", "nginxes", None).expect("valid");
        assert_eq!(crd.metadata.name.as_deref(), Some("nginxes.demo.example.com"));
        let version = &crd.spec.versions[0];
        let columns: Vec<&str> = version.additional_printer_columns.iter().flatten().map(|c| c.name.as_str()).collect();
        assert_eq!(columns, ["Revision", "Deployed", "Reason", "Age"]);
        let schema = serde_json::to_value(&version.schema).expect("json");
        assert_eq!(
            schema.pointer("/openAPIV3Schema/properties/spec/x-kubernetes-preserve-unknown-fields"),
            Some(&json!(true))
        );
    }

    #[test]
    fn a_values_schema_becomes_a_structural_spec_schema() {
        let values_schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "$id": "https://example.com/values.schema.json",
            "title": "Values",
            "type": "object",
            "required": ["image"],
            "additionalProperties": false,
            "definitions": { "port": { "type": "integer", "minimum": 1, "exclusiveMaximum": 65536 } },
            "properties": {
                "replicaCount": { "type": "integer", "minimum": 0, "default": 1, "description": "Pods" },
                "image": {
                    "type": "object",
                    "required": ["repository", "missing"],
                    "properties": {
                        "repository": { "type": "string", "minLength": 1, "pattern": "^[a-z./-]+$" },
                        "pullPolicy": { "enum": ["Always", "IfNotPresent"], "type": "string" },
                        "tag": { "type": ["string", "null"], "format": "semver" }
                    }
                },
                "service": { "type": "object", "properties": { "port": { "$ref": "#/definitions/port" } },
                             "additionalProperties": false },
                "labels": { "type": "object", "additionalProperties": { "type": "string" } },
                "hosts": { "type": "array", "uniqueItems": true, "items": { "type": "string" }, "maxItems": 3 },
                "anything": { "description": "any value" },
                "port": { "type": ["integer", "string"] },
                "mode": { "const": "fast" },
                "extra": { "$ref": "#/definitions/missing" }
            }
        });
        assert_eq!(
            spec_schema(&values_schema),
            json!({
                "type": "object",
                "required": ["image"],
                "properties": {
                    "replicaCount": { "type": "integer", "minimum": 0, "description": "Pods" },
                    "image": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": true,
                        "required": ["repository"],
                        "properties": {
                            "repository": { "type": "string", "minLength": 1, "pattern": "^[a-z./-]+$" },
                            "pullPolicy": { "type": "string", "enum": ["Always", "IfNotPresent"] },
                            "tag": { "type": "string", "nullable": true }
                        }
                    },
                    "service": { "type": "object", "properties": {
                        "port": { "type": "integer", "minimum": 1, "maximum": 65536, "exclusiveMaximum": true }
                    }},
                    "labels": { "type": "object", "additionalProperties": { "type": "string" } },
                    "hosts": { "type": "array", "items": { "type": "string" }, "maxItems": 3 },
                    "anything": { "description": "any value", "x-kubernetes-preserve-unknown-fields": true },
                    "port": { "x-kubernetes-int-or-string": true },
                    "mode": { "x-kubernetes-preserve-unknown-fields": true },
                    "extra": { "x-kubernetes-preserve-unknown-fields": true }
                }
            })
        );
    }
}
