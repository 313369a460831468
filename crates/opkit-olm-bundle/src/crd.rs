//! The CustomResourceDefinitions of a bundle, at `apiextensions.k8s.io/v1` or the old
//! `v1beta1`: what validators and OLM need of them (names, versions, schemas), and the
//! object turned into `v1` to be applied to a cluster that no longer serves `v1beta1`.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

/// `apiextensions.k8s.io/v1`.
pub(crate) const CRD_V1: &str = "apiextensions.k8s.io/v1";
/// `apiextensions.k8s.io/v1beta1`, removed in Kubernetes 1.22 but still in old bundles.
pub(crate) const CRD_V1BETA1: &str = "apiextensions.k8s.io/v1beta1";

/// One CRD of a bundle's `manifests/`.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleCrd {
    /// The file it was read from (empty for a CRD built in memory).
    pub file: PathBuf,
    /// `apiextensions.k8s.io/v1` or `apiextensions.k8s.io/v1beta1`.
    pub api_version: String,
    /// `metadata.name` (`<plural>.<group>`).
    pub name: String,
    /// `spec.group`.
    pub group: String,
    /// `spec.names.kind`.
    pub kind: String,
    /// `spec.names.plural`.
    pub plural: String,
    /// `spec.scope` (`Namespaced` or `Cluster`).
    pub scope: String,
    /// The versions, with the v1beta1 top-level `version`/`validation` folded in.
    pub versions: Vec<CrdVersion>,
    /// The object as read.
    pub object: Value,
}

/// One version of a CRD.
#[derive(Debug, Clone, PartialEq)]
pub struct CrdVersion {
    /// The version's name.
    pub name: String,
    /// Served by the API server.
    pub served: bool,
    /// The storage version.
    pub storage: bool,
    /// `openAPIV3Schema`, if any (per version, or the v1beta1 top-level one).
    pub schema: Option<Value>,
}

impl BundleCrd {
    /// Reads the parts of a CRD object validators and OLM use.
    pub fn from_object(file: PathBuf, object: Value) -> BundleCrd {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
        let spec = object.get("spec");
        let top_schema = spec.and_then(|s| s.pointer("/validation/openAPIV3Schema")).cloned();
        let mut versions: Vec<CrdVersion> = spec
            .and_then(|s| s.get("versions"))
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .map(|v| CrdVersion {
                        name: text(v.get("name")),
                        served: v.get("served").and_then(Value::as_bool).unwrap_or(false),
                        storage: v.get("storage").and_then(Value::as_bool).unwrap_or(false),
                        schema: v.pointer("/schema/openAPIV3Schema").cloned().or_else(|| top_schema.clone()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        if versions.is_empty()
            && let Some(version) = spec.and_then(|s| s.get("version")).and_then(Value::as_str)
        {
            versions.push(CrdVersion { name: version.to_string(), served: true, storage: true, schema: top_schema });
        }
        BundleCrd {
            file,
            api_version: text(object.get("apiVersion")),
            name: text(object.pointer("/metadata/name")),
            group: text(spec.and_then(|s| s.get("group"))),
            kind: text(spec.and_then(|s| s.pointer("/names/kind"))),
            plural: text(spec.and_then(|s| s.pointer("/names/plural"))),
            scope: text(spec.and_then(|s| s.get("scope"))),
            versions,
            object,
        }
    }

    /// Whether the CRD serves `version` (as listed, served or not).
    pub fn has_version(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v.name == version)
    }

    /// The object at `apiextensions.k8s.io/v1`, converted from `v1beta1` as the API
    /// server converts it: the top-level version, schema, subresources and printer
    /// columns moved into each version, `JSONPath` renamed `jsonPath`, the conversion
    /// webhook's client config moved under `webhook`. A version left without a schema gets
    /// one that keeps every field, since `v1` requires one; and since `v1` refuses
    /// `preserveUnknownFields: true` (v1beta1's default), a CRD that did not set it to
    /// `false` keeps unknown fields with `x-kubernetes-preserve-unknown-fields` on each
    /// version's schema instead, as OLM installs old bundles. `status` is dropped.
    pub fn to_v1(&self) -> Value {
        let mut object = self.object.clone();
        if let Some(map) = object.as_object_mut() {
            map.remove("status");
        }
        if self.api_version != CRD_V1BETA1 {
            return object;
        }
        object["apiVersion"] = json!(CRD_V1);
        let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else { return object };
        let top_version = spec.remove("version");
        let top_schema = spec.remove("validation").and_then(|v| v.get("openAPIV3Schema").cloned());
        let top_subresources = spec.remove("subresources");
        let top_columns = spec.remove("additionalPrinterColumns");
        let preserve = spec.remove("preserveUnknownFields").and_then(|p| p.as_bool()).unwrap_or(true);
        let mut versions = spec.remove("versions").and_then(|v| v.as_array().cloned()).unwrap_or_default();
        if versions.is_empty()
            && let Some(name) = top_version
        {
            versions.push(json!({"name": name, "served": true, "storage": true}));
        }
        for version in &mut versions {
            let Some(v) = version.as_object_mut() else { continue };
            let mut schema = v
                .remove("schema")
                .and_then(|s| s.get("openAPIV3Schema").cloned())
                .or_else(|| top_schema.clone())
                .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
            if preserve && let Some(root) = schema.as_object_mut() {
                root.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
                root.entry("type").or_insert(json!("object"));
            }
            v.insert("schema".into(), json!({ "openAPIV3Schema": schema }));
            if !v.contains_key("subresources")
                && let Some(sub) = &top_subresources
            {
                v.insert("subresources".into(), sub.clone());
            }
            let columns = v.remove("additionalPrinterColumns").or_else(|| top_columns.clone());
            if let Some(Value::Array(columns)) = columns {
                let renamed: Vec<Value> = columns.into_iter().map(rename_json_path).collect();
                v.insert("additionalPrinterColumns".into(), Value::Array(renamed));
            }
        }
        spec.insert("versions".into(), Value::Array(versions));
        if let Some(conversion) = spec.get_mut("conversion").and_then(Value::as_object_mut) {
            let client_config = conversion.remove("webhookClientConfig");
            let review_versions = conversion.remove("conversionReviewVersions");
            if conversion.get("strategy").and_then(Value::as_str) == Some("Webhook") {
                let mut webhook = Map::new();
                if let Some(c) = client_config {
                    webhook.insert("clientConfig".into(), c);
                }
                webhook
                    .insert("conversionReviewVersions".into(), review_versions.unwrap_or_else(|| json!(["v1beta1"])));
                conversion.insert("webhook".into(), Value::Object(webhook));
            }
        }
        object
    }
}

fn rename_json_path(mut column: Value) -> Value {
    if let Some(c) = column.as_object_mut()
        && let Some(path) = c.remove("JSONPath")
    {
        c.insert("jsonPath".into(), path);
    }
    column
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1beta1(preserve: Option<bool>) -> BundleCrd {
        let mut object = json!({
            "apiVersion": CRD_V1BETA1, "kind": "CustomResourceDefinition",
            "metadata": {"name": "keycloaks.keycloak.org"},
            "spec": {"group": "keycloak.org", "scope": "Namespaced", "version": "v1alpha1",
                     "names": {"kind": "Keycloak", "plural": "keycloaks"},
                     "subresources": {"status": {}},
                     "additionalPrinterColumns": [{"name": "Ready", "type": "string", "JSONPath": ".status.ready"}],
                     "validation": {"openAPIV3Schema": {"properties": {"spec": {"type": "object"}}}}},
        });
        if let Some(preserve) = preserve {
            object["spec"]["preserveUnknownFields"] = json!(preserve);
        }
        BundleCrd::from_object(PathBuf::new(), object)
    }

    #[test]
    fn a_v1beta1_crd_keeps_unknown_fields_unless_it_said_not_to() {
        let v1 = v1beta1(None).to_v1();
        assert_eq!(v1["apiVersion"], CRD_V1);
        assert!(v1["spec"].get("preserveUnknownFields").is_none(), "v1 refuses preserveUnknownFields: true");
        let version = &v1["spec"]["versions"][0];
        assert_eq!(version["name"], "v1alpha1");
        assert_eq!(version["storage"], true);
        let schema = &version["schema"]["openAPIV3Schema"];
        assert_eq!(schema["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["spec"]["type"], "object");
        assert_eq!(version["subresources"], json!({"status": {}}));
        assert_eq!(version["additionalPrinterColumns"][0]["jsonPath"], ".status.ready");

        let pruned = v1beta1(Some(false)).to_v1();
        let schema = &pruned["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        assert!(schema.get("x-kubernetes-preserve-unknown-fields").is_none(), "{schema}");
    }
}
