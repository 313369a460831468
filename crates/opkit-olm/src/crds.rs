//! OLM's CustomResourceDefinitions (operator-framework/api's `crds/`, unchanged): parsed,
//! applied and waited on until established, and deleted again.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};

use crate::{FIELD_MANAGER, OlmError};

/// The CRD manifests, by file name.
const SOURCES: &[(&str, &str)] = &[
    ("catalogsources", include_str!("../crds/operators.coreos.com_catalogsources.yaml")),
    ("clusterserviceversions", include_str!("../crds/operators.coreos.com_clusterserviceversions.yaml")),
    ("installplans", include_str!("../crds/operators.coreos.com_installplans.yaml")),
    ("operatorconditions", include_str!("../crds/operators.coreos.com_operatorconditions.yaml")),
    ("operatorgroups", include_str!("../crds/operators.coreos.com_operatorgroups.yaml")),
    ("subscriptions", include_str!("../crds/operators.coreos.com_subscriptions.yaml")),
];

/// The names of OLM's CRDs (`<plural>.operators.coreos.com`).
pub fn names() -> Vec<String> {
    SOURCES.iter().map(|(plural, _)| format!("{plural}.operators.coreos.com")).collect()
}

/// OLM's CRDs.
pub fn crds() -> Result<Vec<CustomResourceDefinition>, OlmError> {
    SOURCES
        .iter()
        .map(|(plural, text)| {
            serde_saphyr::from_str(text).map_err(|e| OlmError::Catalog(format!("the {plural} CRD: {e}")))
        })
        .collect()
}

/// Applies the CRDs (server-side) and waits until each is established.
pub async fn install(client: &Client, timeout: Duration) -> Result<(), OlmError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let crds = crds()?;
    for crd in &crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(crd)).await?;
    }
    for crd in &crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        crate::objects::wait_crd_established(client, &name, timeout).await?;
    }
    Ok(())
}

/// Deletes the CRDs (and so every OLM object) and waits until they are gone.
pub async fn uninstall(client: &Client, timeout: Duration) -> Result<(), OlmError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in names() {
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if opkit::status::is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let deadline = tokio::time::Instant::now() + timeout;
    for name in names() {
        let gone =
            kube::runtime::wait::await_condition(api.clone(), &name, |crd: Option<&CustomResourceDefinition>| {
                crd.is_none()
            });
        tokio::time::timeout_at(deadline, gone)
            .await
            .map_err(|_| OlmError::Timeout(format!("CRD {name} to be deleted")))?
            .map_err(|e| OlmError::Timeout(format!("CRD {name} to be deleted: {e}")))?;
    }
    Ok(())
}
