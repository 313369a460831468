//! The `cert-manager.io/v1` kinds the stand-in serves: Issuer, ClusterIssuer and
//! Certificate, with the printer columns and status subresource cert-manager's CRDs
//! have. Their schemas keep unknown fields (cert-manager's full schemas are large, and
//! the stand-in reads only what it implements), so manifests written for cert-manager
//! apply as they are.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use super::GROUP;

/// The field manager the stand-in installs its kinds with.
const FIELD_MANAGER: &str = "opkit-cert-manager";

/// The Certificate kind.
pub(super) fn certificate_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Certificate"), "certificates")
}

/// The Issuer kind.
pub(super) fn issuer_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Issuer"), "issuers")
}

/// The ClusterIssuer kind.
pub(super) fn cluster_issuer_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "ClusterIssuer"), "clusterissuers")
}

/// A CRD of `kind` with cert-manager's Ready columns.
fn definition(kind: &str, plural: &str, scope: &str, short_names: &[&str], extra_columns: &[Value]) -> Value {
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let mut columns =
        vec![json!({"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"})];
    columns.extend(extra_columns.iter().cloned());
    columns.push(json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}));
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}"), "labels": {"app.kubernetes.io/name": "cert-manager"}},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": format!("{kind}List"),
                "plural": plural,
                "singular": kind.to_lowercase(),
                "shortNames": short_names,
                "categories": ["cert-manager"],
            },
            "scope": scope,
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": columns,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": open,
                        "status": open,
                    },
                }},
            }],
        },
    })
}

/// The three CRDs.
fn definitions() -> Vec<Value> {
    let secret = json!({"name": "Secret", "type": "string", "jsonPath": ".spec.secretName"});
    let issuer = json!({"name": "Issuer", "type": "string", "jsonPath": ".spec.issuerRef.name", "priority": 1});
    vec![
        definition("Issuer", "issuers", "Namespaced", &[], &[]),
        definition("ClusterIssuer", "clusterissuers", "Cluster", &[], &[]),
        definition("Certificate", "certificates", "Namespaced", &["cert", "certs"], &[secret, issuer]),
    ]
}

/// Installs (or updates) the stand-in's kinds and waits until they are served.
pub async fn install(client: kube::Client) -> Result<(), kube::Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut names = Vec::new();
    for crd in definitions() {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
        api.patch(&name, &params, &Patch::Apply(&crd)).await?;
        names.push(name);
    }
    for name in names {
        let established = kube::runtime::wait::await_condition(
            api.clone(),
            &name,
            kube::runtime::wait::conditions::is_crd_established(),
        );
        // The local API server serves a CRD as soon as it is stored; the wait is bounded
        // so a slow server only delays the controllers' first sync.
        let _ = tokio::time::timeout(Duration::from_secs(30), established).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definitions_are_crds_kube_can_read() {
        for crd in definitions() {
            let parsed: CustomResourceDefinition = serde_json::from_value(crd).expect("a CRD");
            assert_eq!(parsed.spec.group, GROUP);
            assert_eq!(parsed.spec.versions[0].name, "v1");
        }
        assert_eq!(certificate_resource().plural, "certificates");
        assert_eq!(issuer_resource().kind, "Issuer");
        assert_eq!(cluster_issuer_resource().plural, "clusterissuers");
    }
}
