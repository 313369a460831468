//! Bundles may ship `apiextensions.k8s.io/v1beta1` CRDs, which Kubernetes no longer serves
//! since 1.22; OLM installs them as `v1`. The conversion is apiextensions' own: the
//! top-level `version`/`versions`, `validation`, `subresources` and
//! `additionalPrinterColumns` move into each version, `JSONPath` becomes `jsonPath`, and a
//! CRD without a schema (or with `preserveUnknownFields: true`, v1beta1's default)
//! keeps unknown fields.

use serde_json::{Map, Value, json};

/// `crd` as an `apiextensions.k8s.io/v1` CRD; `v1` CRDs and other objects are returned as
/// they are.
pub fn to_v1(crd: &Value) -> Value {
    if crd.get("apiVersion").and_then(Value::as_str) != Some("apiextensions.k8s.io/v1beta1")
        || crd.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition")
    {
        return crd.clone();
    }
    let mut out = crd.clone();
    out["apiVersion"] = json!("apiextensions.k8s.io/v1");
    let spec = crd.get("spec").cloned().unwrap_or_else(|| json!({}));
    let mut versions: Vec<Value> = spec.get("versions").and_then(Value::as_array).cloned().unwrap_or_default();
    if versions.is_empty()
        && let Some(version) = spec.get("version").and_then(Value::as_str)
    {
        versions.push(json!({"name": version, "served": true, "storage": true}));
    }
    let preserve = spec.get("preserveUnknownFields").and_then(Value::as_bool).unwrap_or(true);
    let columns = |cols: &Value| -> Value {
        Value::Array(
            cols.as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    let mut c = c.clone();
                    if let Some(o) = c.as_object_mut()
                        && let Some(path) = o.remove("JSONPath")
                    {
                        o.insert("jsonPath".into(), path);
                    }
                    c
                })
                .collect(),
        )
    };
    for version in &mut versions {
        let Some(v) = version.as_object_mut() else { continue };
        let mut schema = v
            .remove("schema")
            .or_else(|| spec.get("validation").cloned())
            .and_then(|s| s.get("openAPIV3Schema").cloned())
            .unwrap_or_else(|| json!({"type": "object"}));
        if preserve && let Some(s) = schema.as_object_mut() {
            s.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
            s.entry("type").or_insert(json!("object"));
        }
        v.insert("schema".into(), json!({"openAPIV3Schema": schema}));
        if !v.contains_key("subresources")
            && let Some(sub) = spec.get("subresources")
        {
            v.insert("subresources".into(), sub.clone());
        }
        let cols = v.remove("additionalPrinterColumns").or_else(|| spec.get("additionalPrinterColumns").cloned());
        if let Some(cols) = cols {
            v.insert("additionalPrinterColumns".into(), columns(&cols));
        }
    }
    let mut new_spec = Map::new();
    for key in ["group", "names", "scope", "conversion"] {
        if let Some(value) = spec.get(key) {
            new_spec.insert(key.into(), value.clone());
        }
    }
    if new_spec.get("conversion").and_then(|c| c.get("strategy")).and_then(Value::as_str) != Some("Webhook") {
        new_spec.remove("conversion");
    }
    new_spec.insert("versions".into(), Value::Array(versions));
    out["spec"] = Value::Object(new_spec);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1beta1_crd_becomes_v1() {
        let v1beta1 = json!({
            "apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "keycloaks.keycloak.org"},
            "spec": {"group": "keycloak.org", "scope": "Namespaced", "version": "v1alpha1",
                     "names": {"kind": "Keycloak", "plural": "keycloaks"},
                     "subresources": {"status": {}},
                     "additionalPrinterColumns": [{"name": "Ready", "type": "string", "JSONPath": ".status.ready"}],
                     "validation": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}}},
        });
        let v1 = to_v1(&v1beta1);
        assert_eq!(v1["apiVersion"], "apiextensions.k8s.io/v1");
        let version = &v1["spec"]["versions"][0];
        assert_eq!(version["name"], "v1alpha1");
        assert_eq!(version["storage"], true);
        assert_eq!(version["schema"]["openAPIV3Schema"]["properties"]["spec"]["type"], "object");
        assert_eq!(version["schema"]["openAPIV3Schema"]["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(version["subresources"], json!({"status": {}}));
        assert_eq!(version["additionalPrinterColumns"][0]["jsonPath"], ".status.ready");
        assert!(v1["spec"].get("validation").is_none() && v1["spec"].get("version").is_none());
    }
}
