//! The resource quota controller against a real opkit API server: `status.hard` follows
//! `spec.hard`; `status.used` counts what is in the namespace (objects there before the
//! quota, a Deployment's pods and their requests, kinds found through discovery) and
//! goes down on deletes; with the quota full, the API server refuses the next pod.

use crate::common;

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ResourceQuota};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use opkit_testenv::TestEnv;
use serde_json::json;

use common::{Error, wait};

const NS: &str = "quota";

/// `status.used` as (name, quantity) pairs.
fn used(q: &ResourceQuota) -> BTreeMap<String, String> {
    let used = q.status.as_ref().and_then(|s| s.used.clone()).unwrap_or_default();
    used.into_iter().map(|(k, v)| (k, v.0)).collect()
}

/// Waits until the quota's `status.used` of `name` is `want`.
async fn used_becomes(quotas: &Api<ResourceQuota>, name: &str, want: &str) -> Result<ResourceQuota, Error> {
    let (name, want) = (name.to_string(), want.to_string());
    wait(quotas, "compute", move |q: Option<&ResourceQuota>| q.is_some_and(|q| used(q).get(&name) == Some(&want))).await
}

#[tokio::test]
async fn quota_usage_follows_the_objects_in_the_namespace() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let client = env.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace { metadata: ObjectMeta { name: Some(NS.into()), ..Default::default() }, ..Default::default() };
    namespaces.create(&PostParams::default(), &ns).await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    for name in ["a", "b"] {
        let cm =
            ConfigMap { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() };
        configmaps.create(&PostParams::default(), &cm).await?;
    }

    wait(&configmaps, "kube-root-ca.crt", |c: Option<&ConfigMap>| c.is_some()).await?;

    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), NS);
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "compute"},
        "spec": {"hard": {
            "pods": "3", "requests.cpu": "2", "configmaps": "10", "count/deployments.apps": "2",
            "count/leases.coordination.k8s.io": "2",
        }},
    }))?;
    quotas.create(&PostParams::default(), &quota).await?;
    let q = wait(&quotas, "compute", |q: Option<&ResourceQuota>| {
        q.is_some_and(|q| q.status.as_ref().and_then(|s| s.hard.as_ref()).is_some_and(|h| h.len() == 5))
    })
    .await?;
    let hard: BTreeMap<String, String> =
        q.status.and_then(|s| s.hard).unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
    assert_eq!(hard["requests.cpu"], "2");
    // What was there before the quota counts: a, b and the namespace's kube-root-ca.crt.
    let present = configmaps.list(&Default::default()).await?.items.len();
    used_becomes(&quotas, "configmaps", &present.to_string()).await?;
    used_becomes(&quotas, "pods", "0").await?;

    env.apply_yaml(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: quota}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx, resources: {requests: {cpu: 500m}}}]}
"#,
    )
    .await?;
    used_becomes(&quotas, "pods", "2").await?;
    used_becomes(&quotas, "requests.cpu", "1").await?;
    used_becomes(&quotas, "count/deployments.apps", "1").await?;

    // A kind the controller does not watch is counted through discovery.
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let lease =
        Lease { metadata: ObjectMeta { name: Some("lock".into()), ..Default::default() }, ..Default::default() };
    leases.create(&PostParams::default(), &lease).await?;
    used_becomes(&quotas, "count/leases.coordination.k8s.io", "1").await?;

    // Deletes give the usage back.
    configmaps.delete("a", &DeleteParams::default()).await?;
    used_becomes(&quotas, "configmaps", &(present - 1).to_string()).await?;

    // One more pod fits; then the API server refuses with kube's message.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod = |name: &str| -> Result<Pod, serde_json::Error> {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]}}))
    };
    pods.create(&PostParams::default(), &pod("extra")?).await?;
    used_becomes(&quotas, "pods", "3").await?;
    let refused = pods.create(&PostParams::default(), &pod("one-too-many")?).await;
    match refused {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403);
            assert_eq!(
                status.message,
                "pods \"one-too-many\" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=3, limited: pods=3"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    Ok(())
}
