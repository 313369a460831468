//! Definitions of custom resources built from a CRD version's `openAPIV3Schema`, the way
//! kube-apiserver publishes them: `apiVersion`/`kind`/`metadata` fields added (metadata
//! referencing ObjectMeta), and for OpenAPI v2 the constructs v2 and kubectl cannot handle
//! removed (junctors, nullable types, typed preserve-unknown-fields nodes).

use serde_json::{Map, Value, json};

use super::builtin::type_meta_description;
use super::refs::ref_v2;
use super::{LIST_METADATA_DESCRIPTION, ResourceDoc, add_definition_gvk, gvk_object, names};

/// Which document a definition is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// Swagger 2.0.
    V2,
    /// OpenAPI 3.0.
    V3,
}

/// The schema used when a CRD version has no usable schema.
fn permissive() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// The published definition of a custom resource's kind (refs in v2 style; callers convert
/// to v3 with `to_v3_schema`).
pub(crate) fn kind_definition(r: &ResourceDoc, schema: &Value, flavor: Flavor) -> Value {
    let mut root = if schema.is_object() { schema.clone() } else { permissive() };
    if flavor == Flavor::V2 {
        to_v2_compatible(&mut root);
    } else if let Some(obj) = root.as_object_mut()
        && !obj.contains_key("type")
    {
        obj.insert("type".into(), Value::String("object".into()));
    }
    add_type_meta(&mut root);
    add_definition_gvk(&mut root, gvk_object(&r.group, &r.version, &r.kind));
    root
}

/// The published definition of a custom resource's list kind.
pub(crate) fn list_definition(r: &ResourceDoc) -> Value {
    let mut metadata = ref_v2(names::LIST_META);
    if let Some(m) = metadata.as_object_mut() {
        m.insert("description".into(), Value::String(LIST_METADATA_DESCRIPTION.into()));
    }
    let items = ref_v2(&r.definition_name());
    let mut def = json!({
        "description": format!("{}List is a list of {}", r.kind, r.kind),
        "type": "object",
        "properties": {
            "apiVersion": string_field("apiVersion"),
            "items": {
                "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", r.plural),
                "type": "array",
                "items": items,
            },
            "kind": string_field("kind"),
            "metadata": metadata,
        },
        "required": ["items"],
    });
    add_definition_gvk(&mut def, gvk_object(&r.group, &r.version, &format!("{}List", r.kind)));
    def
}

fn string_field(field: &str) -> Value {
    let mut m = Map::new();
    if let Some(d) = type_meta_description(field) {
        m.insert("description".into(), Value::String(d));
    }
    m.insert("type".into(), Value::String("string".into()));
    Value::Object(m)
}

/// Sets the `apiVersion`, `kind` and `metadata` properties of a custom resource's root.
fn add_type_meta(root: &mut Value) {
    let Some(obj) = root.as_object_mut() else {
        return;
    };
    let props = obj.entry("properties").or_insert_with(|| Value::Object(Map::new()));
    if !props.is_object() {
        *props = Value::Object(Map::new());
    }
    let Some(props) = props.as_object_mut() else {
        return;
    };
    for field in ["apiVersion", "kind"] {
        let entry = props.entry(field).or_insert_with(|| string_field(field));
        if let Some(e) = entry.as_object_mut()
            && !e.contains_key("description")
            && let Some(d) = type_meta_description(field)
        {
            e.insert("description".into(), Value::String(d));
        }
    }
    let mut metadata = ref_v2(names::OBJECT_META);
    if let (Some(m), Some(d)) = (metadata.as_object_mut(), type_meta_description("metadata")) {
        m.insert("description".into(), Value::String(d));
    }
    props.insert("metadata".into(), metadata);
}

/// Applies kube-apiserver's v2 conversion of a structural schema, recursively.
pub(crate) fn to_v2_compatible(v: &mut Value) {
    let Some(obj) = v.as_object_mut() else {
        return;
    };
    for junctor in ["allOf", "oneOf", "anyOf", "not"] {
        obj.remove(junctor);
    }
    let nullable = obj.remove("nullable").and_then(|n| n.as_bool()) == Some(true);
    if nullable {
        obj.remove("type");
        obj.remove("items");
        obj.remove("properties");
    }
    let preserve = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if preserve {
        obj.remove("items");
        obj.remove("properties");
    }
    let ty = obj.get("type").and_then(Value::as_str).map(str::to_string);
    if ty.as_deref() == Some("array") && !obj.contains_key("items") {
        obj.remove("type");
    }
    if preserve && ty.as_deref() == Some("object") {
        obj.remove("type");
    }

    // Fields whose schema is nullable may not be required in v2.
    let nullable_props: Vec<String> = obj
        .get("properties")
        .and_then(Value::as_object)
        .map(|ps| {
            ps.iter().filter(|(_, s)| s.get("nullable") == Some(&Value::Bool(true))).map(|(n, _)| n.clone()).collect()
        })
        .unwrap_or_default();
    let additional_nullable =
        obj.get("additionalProperties").and_then(|a| a.get("nullable")) == Some(&Value::Bool(true));
    if additional_nullable {
        obj.remove("required");
    } else if !nullable_props.is_empty()
        && let Some(Value::Array(req)) = obj.get_mut("required")
    {
        req.retain(|r| r.as_str().is_none_or(|n| !nullable_props.iter().any(|p| p == n)));
        if req.is_empty() {
            obj.remove("required");
        }
    }

    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        props.values_mut().for_each(to_v2_compatible);
    }
    if let Some(items) = obj.get_mut("items") {
        match items {
            Value::Array(list) => list.iter_mut().for_each(to_v2_compatible),
            other => to_v2_compatible(other),
        }
    }
    if let Some(additional) = obj.get_mut("additionalProperties")
        && additional.is_object()
    {
        to_v2_compatible(additional);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_conversion_drops_what_kubectl_cannot_handle() {
        let mut s = json!({
            "type": "object",
            "required": ["a", "b"],
            "properties": {
                "a": {"type": "string", "nullable": true},
                "b": {"type": "integer", "anyOf": [{"minimum": 1}]},
                "c": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                      "properties": {"d": {"type": "string"}}},
                "e": {"x-kubernetes-int-or-string": true,
                      "anyOf": [{"type": "integer"}, {"type": "string"}]}
            }
        });
        to_v2_compatible(&mut s);
        assert_eq!(s["required"], json!(["b"]));
        assert_eq!(s["properties"]["a"], json!({}));
        assert_eq!(s["properties"]["b"], json!({"type": "integer"}));
        assert_eq!(s["properties"]["c"], json!({"x-kubernetes-preserve-unknown-fields": true}));
        assert_eq!(s["properties"]["e"], json!({"x-kubernetes-int-or-string": true}));
    }
}
