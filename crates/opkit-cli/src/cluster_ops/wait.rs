//! Watch-based waits (via `kube::runtime::wait::await_condition`, never polling): CRDs
//! Established or gone, Deployments available, pods ready, arbitrary objects deleted.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject};
use kube::runtime::wait::{self, Condition, await_condition, conditions};
use kube::runtime::watcher;

use super::{ClusterOpsError, ObjectRef};

/// Whether a wait failed because the resource type itself is not served (HTTP 404 on the list
/// or watch): when waiting for an object to disappear, that means it is gone.
fn type_not_served(e: &wait::Error) -> bool {
    let wait::Error::ProbeFailed(w) = e;
    matches!(
        w,
        watcher::Error::InitialListFailed(kube::Error::Api(s)) | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            if s.is_not_found()
    ) || matches!(w, watcher::Error::WatchError(s) if s.is_not_found())
}

/// Waits for one object to meet `cond`, bounded by `timeout`; `what` describes it for errors.
/// With `absence`, the resource type disappearing also ends the wait successfully.
async fn wait_for<K>(
    api: Api<K>,
    name: &str,
    cond: impl Condition<K>,
    what: String,
    timeout: Duration,
    absence: bool,
) -> Result<(), ClusterOpsError>
where
    K: Clone + std::fmt::Debug + Send + serde::de::DeserializeOwned + kube::Resource + 'static,
{
    match tokio::time::timeout(timeout, await_condition(api, name, cond)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if absence && type_not_served(&e) => Ok(()),
        Ok(Err(e)) => Err(ClusterOpsError::Wait { what, message: e.to_string() }),
        Err(_) => Err(ClusterOpsError::Timeout { what, timeout }),
    }
}

/// Waits until every named CRD has the condition `Established=True`, sharing one `timeout`.
pub async fn wait_crds_established(
    client: &kube::Client,
    names: &[String],
    timeout: Duration,
) -> Result<(), ClusterOpsError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let waits = names.iter().map(|n| {
        let what = format!("customresourcedefinition {n} to be established");
        wait_for(api.clone(), n, conditions::is_crd_established(), what, timeout, false)
    });
    futures::future::try_join_all(waits).await.map(|_| ())
}

/// Waits until none of the named CRDs exists any more, sharing one `timeout`.
pub async fn wait_crds_gone(client: &kube::Client, names: &[String], timeout: Duration) -> Result<(), ClusterOpsError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let waits = names.iter().map(|n| {
        let what = format!("customresourcedefinition {n} to be deleted");
        wait_for(api.clone(), n, |o: Option<&CustomResourceDefinition>| o.is_none(), what, timeout, true)
    });
    futures::future::try_join_all(waits).await.map(|_| ())
}

/// Whether a Deployment's current generation has been observed and all its replicas are
/// updated and available, with `Available=True`.
fn deployment_available(d: Option<&Deployment>) -> bool {
    let Some(d) = d else { return false };
    let Some(status) = &d.status else { return false };
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let observed = status.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0);
    let available = status.conditions.iter().flatten().any(|c| c.type_ == "Available" && c.status == "True");
    observed
        && available
        && status.updated_replicas.unwrap_or(0) >= want
        && status.available_replicas.unwrap_or(0) >= want
}

/// Waits until the Deployment `ns/name` is available: generation observed, `Available=True`,
/// and updated/available replicas reaching `spec.replicas`.
pub async fn wait_deployment_available(
    client: &kube::Client,
    ns: &str,
    name: &str,
    timeout: Duration,
) -> Result<(), ClusterOpsError> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let what = format!("deployment {ns}/{name} to become available");
    wait_for(api, name, deployment_available, what, timeout, false).await
}

/// Whether a pod has the condition `Ready=True`.
fn pod_ready(p: Option<&Pod>) -> bool {
    let conditions = p.and_then(|p| p.status.as_ref()?.conditions.as_ref());
    conditions.into_iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Waits until the pod `ns/name` exists and is ready.
pub async fn wait_pod_ready(
    client: &kube::Client,
    ns: &str,
    name: &str,
    timeout: Duration,
) -> Result<(), ClusterOpsError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let what = format!("pod {ns}/{name} to be ready");
    wait_for(api, name, pod_ready, what, timeout, false).await
}

/// Waits until one object is gone.
pub(super) async fn wait_gone(
    api: Api<DynamicObject>,
    r: &ObjectRef,
    timeout: Duration,
) -> Result<(), ClusterOpsError> {
    let what = format!("{r} to be deleted");
    wait_for(api, &r.name, |o: Option<&DynamicObject>| o.is_none(), what, timeout, true).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deployment_availability_rules() {
        let mk = |v: serde_json::Value| -> Deployment { serde_json::from_value(v).expect("deployment") };
        let ready = mk(json!({
            "metadata": {"name": "d", "generation": 2},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": {"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 2,
                "conditions": [{"type": "Available", "status": "True"}]}
        }));
        assert!(deployment_available(Some(&ready)));
        let mut stale = ready.clone();
        stale.metadata.generation = Some(3);
        assert!(!deployment_available(Some(&stale)));
        let mut short = ready.clone();
        if let Some(s) = short.status.as_mut() {
            s.available_replicas = Some(1);
        }
        assert!(!deployment_available(Some(&short)));
        assert!(!deployment_available(None));
    }

    #[test]
    fn a_pod_is_ready_with_its_ready_condition_only() {
        let mk = |status: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p"},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": status}]}}))
            .expect("pod")
        };
        assert!(pod_ready(Some(&mk("True"))));
        assert!(!pod_ready(Some(&mk("False"))));
        assert!(!pod_ready(None));
    }
}
