//! The CustomResourceDefinition of a watched kind, as `opkit init --plugins helm`
//! scaffolds it: spec and status keep unknown fields (the spec is the chart's values),
//! the status subresource is on, and `kubectl get` shows the release's revision and
//! whether it is deployed.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::json;

use crate::OperatorError;

/// The CRD for `group`/`version` `kind` (namespaced), served as `plural`.
pub fn crd_for(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Result<CustomResourceDefinition, OperatorError> {
    let open = json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true });
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
                        "spec": open.clone(),
                        "status": open,
                    },
                }},
            }],
        },
    });
    serde_json::from_value(crd).map_err(|e| OperatorError::Manifest(format!("the CRD for {kind}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_keeps_unknown_fields_and_has_printer_columns() {
        let crd = crd_for("demo.example.com", "v1alpha1", "Nginx", "nginxes").expect("valid");
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
}
