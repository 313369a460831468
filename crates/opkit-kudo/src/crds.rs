//! KUDO's CustomResourceDefinitions (`Operator`, `OperatorVersion`, `Instance`, all
//! `kudo.dev/v1beta1` and namespaced), as KUDO's `config/crds` defines them (the files
//! under `crds/`, unchanged), and their installation.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;

use crate::KudoError;

/// The field manager `opkit kudo init` applies the CRDs with.
pub(crate) const FIELD_MANAGER: &str = "kudo-init";

/// How long [`install`] waits for each CRD to be Established.
pub(crate) const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);

const SOURCES: [(&str, &str); 3] = [
    ("kudo.dev_operators.yaml", include_str!("../crds/kudo.dev_operators.yaml")),
    ("kudo.dev_operatorversions.yaml", include_str!("../crds/kudo.dev_operatorversions.yaml")),
    ("kudo.dev_instances.yaml", include_str!("../crds/kudo.dev_instances.yaml")),
];

/// The three CRDs as JSON objects (without the generated empty `status`).
pub fn crd_manifests() -> Vec<Value> {
    SOURCES
        .iter()
        .filter_map(|(_, text)| serde_saphyr::from_multiple::<Value>(text).ok())
        .flatten()
        .filter(|v| !v.is_null())
        .map(|mut v| {
            if let Some(o) = v.as_object_mut() {
                o.remove("status");
                if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("creationTimestamp");
                }
            }
            v
        })
        .collect()
}

/// The three CRDs, typed.
pub(crate) fn crds() -> Result<Vec<CustomResourceDefinition>, KudoError> {
    crd_manifests()
        .into_iter()
        .map(|v| serde_json::from_value(v).map_err(|e| KudoError::Crd(format!("KUDO's CRDs do not decode: {e}"))))
        .collect()
}

/// Server-side applies the CRDs and waits until each is Established.
pub async fn install_crds(client: &kube::Client) -> Result<(), KudoError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for crd in crds()? {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&crd)).await?;
        let established = kube::runtime::wait::await_condition(
            api.clone(),
            &name,
            kube::runtime::wait::conditions::is_crd_established(),
        );
        match tokio::time::timeout(ESTABLISH_TIMEOUT, established).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(KudoError::Crd(format!("waiting for CRD {name}: {e}"))),
            Err(_) => return Err(KudoError::Crd(format!("CRD {name} was not Established within 60s"))),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_three_crds_decode() {
        let crds = super::crds().expect("decode");
        let names: Vec<_> = crds.iter().filter_map(|c| c.metadata.name.clone()).collect();
        assert_eq!(names, ["operators.kudo.dev", "operatorversions.kudo.dev", "instances.kudo.dev"]);
    }
}
