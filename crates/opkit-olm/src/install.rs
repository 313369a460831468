//! OLM's footprint on a cluster, as `operator-sdk olm install|status|uninstall` sees it:
//! the CRDs, the `olm` namespace (where the controllers' Lease lives), the `operators`
//! namespace with its `global-operators` OperatorGroup, and whether OLM's controllers
//! run (the Lease `olm-operator` held and renewed by a `opkit olm run` process).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::{FIELD_MANAGER, OlmError};

/// The namespace of OLM itself.
pub const OLM_NAMESPACE: &str = "olm";
/// The namespace for operators installed for all namespaces.
pub const OPERATORS_NAMESPACE: &str = "operators";
/// The OperatorGroup of [`OPERATORS_NAMESPACE`] (all namespaces).
pub const GLOBAL_OPERATOR_GROUP: &str = "global-operators";
/// The Lease the running OLM controllers hold, in [`OLM_NAMESPACE`].
pub const LEASE: &str = "olm-operator";

/// Applies OLM's CRDs, its namespaces and the global OperatorGroup.
pub async fn install(client: &Client, timeout: Duration) -> Result<(), OlmError> {
    crate::crds::install(client, timeout).await?;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in [OLM_NAMESPACE, OPERATORS_NAMESPACE] {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        namespaces.patch(name, &params, &Patch::Apply(&body)).await?;
    }
    let groups: Api<crate::types::OperatorGroup> = Api::namespaced(client.clone(), OPERATORS_NAMESPACE);
    let body = json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": GLOBAL_OPERATOR_GROUP, "namespace": OPERATORS_NAMESPACE}, "spec": {},
    });
    groups.patch(GLOBAL_OPERATOR_GROUP, &params, &Patch::Apply(&body)).await?;
    Ok(())
}

/// Deletes OLM's CRDs (every OLM object with them) and namespaces, and waits until the
/// CRDs are gone.
pub async fn uninstall(client: &Client, timeout: Duration) -> Result<(), OlmError> {
    crate::crds::uninstall(client, timeout).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in [OPERATORS_NAMESPACE, OLM_NAMESPACE] {
        match namespaces.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if opkit::status::is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// What `olm status` reports.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Each CRD and whether it is installed and established.
    pub crds: Vec<(String, bool)>,
    /// The identity holding the controllers' Lease, when it is renewed in time.
    pub running: Option<String>,
}

impl Status {
    /// Whether every CRD is established.
    pub fn installed(&self) -> bool {
        self.crds.iter().all(|(_, ok)| *ok)
    }
}

/// Reads OLM's status on the cluster.
pub async fn status(client: &Client) -> Result<Status, OlmError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut status = Status::default();
    for name in crate::crds::names() {
        let crd = crds.get_opt(&name).await?;
        status.crds.push((name, crate::objects::crd_established(crd.as_ref())));
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), OLM_NAMESPACE);
    if let Some(spec) = leases.get_opt(LEASE).await.ok().flatten().and_then(|l| l.spec) {
        let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
        let fresh = spec.renew_time.is_some_and(|t| jiff::Timestamp::now().duration_since(t.0).as_secs() <= duration);
        if fresh {
            status.running = spec.holder_identity.filter(|h| !h.is_empty());
        }
    }
    Ok(status)
}

/// The leader-election identity of an `opkit olm run` process: `opkit-olm-<pid>@<host>`.
pub fn runner_identity(pid: u32, host: &str) -> String {
    format!("opkit-olm-{pid}@{host}")
}

/// The pid and host of a runner identity.
pub fn runner_of(identity: &str) -> Option<(u32, &str)> {
    let (pid, host) = identity.strip_prefix("opkit-olm-")?.split_once('@')?;
    Some((pid.parse().ok()?, host))
}
