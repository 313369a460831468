//! `pods/eviction` against a real opkit API server and its disruption controller: an
//! eviction the PodDisruptionBudget allows deletes the pod and takes one disruption from
//! the budget at once; the next is refused with kube's 429 and `DisruptionBudget` cause
//! (the pod is kept) until another healthy pod restores the allowance; pods no budget
//! selects are simply deleted. kubectl finds the subresource in discovery. The pods are
//! bare (no controller replaces them), so each step's budget is known.

use crate::common;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, PostParams};
use opkit_testenv::TestEnv;
use serde_json::{Value, json};

use common::{Error, kubectl, wait};

const BUDGET: &str = r#"
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec: {minAvailable: 2, selector: {matchLabels: {app: web}}}
"#;

fn allowed(n: i32, healthy: i32) -> impl Fn(Option<&PodDisruptionBudget>) -> bool {
    move |b| {
        b.and_then(|b| b.status.as_ref()).is_some_and(|s| s.disruptions_allowed == n && s.current_healthy == healthy)
    }
}

fn is_ready(p: Option<&Pod>) -> bool {
    let conditions = p.and_then(|p| p.status.as_ref()).and_then(|s| s.conditions.clone()).unwrap_or_default();
    conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
}

async fn ready_pod(pods: &Api<Pod>, name: &str, app: &str) -> Result<(), Error> {
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))?;
    pods.create(&PostParams::default(), &pod).await?;
    wait(pods, name, is_ready).await?;
    Ok(())
}

/// POSTs a policy/v1 Eviction for `pod`, as kubectl drain does; returns the code and body.
async fn evict_raw(env: &TestEnv, pod: &str) -> Result<(u16, Value), Error> {
    let body =
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": "default"}});
    let request = http::Request::post(format!("/api/v1/namespaces/default/pods/{pod}/eviction"))
        .header("content-type", "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(&body)?))?;
    let response = env.client_without_retry().await?.send(request).await?;
    let code = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body()).await?.to_bytes();
    Ok((code, serde_json::from_slice(&bytes)?))
}

#[tokio::test]
async fn evictions_respect_the_disruption_budget() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let pods: Api<Pod> = Api::default_namespaced(env.client());
    for name in ["web-a", "web-b", "web-c"] {
        ready_pod(&pods, name, "web").await?;
    }
    env.apply_yaml(BUDGET).await?;
    let budgets: Api<PodDisruptionBudget> = Api::default_namespaced(env.client());
    wait(&budgets, "web", allowed(1, 3)).await?;

    // The first eviction is allowed, and takes the budget's one disruption at once.
    let (code, status) = evict_raw(&env, "web-a").await?;
    assert_eq!((code, &status["status"]), (201, &json!("Success")), "{status}");
    let budget = budgets.get_status("web").await?;
    assert_eq!(budget.status.clone().unwrap_or_default().disruptions_allowed, 0);

    // The second is refused with kube's 429, and the pod is kept.
    let (code, status) = evict_raw(&env, "web-b").await?;
    assert_eq!(code, 429, "{status}");
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(status["message"], "Cannot evict pod as it would violate the pod's disruption budget.");
    assert_eq!(status["details"]["causes"][0]["reason"], "DisruptionBudget");
    assert_eq!(
        status["details"]["causes"][0]["message"],
        "The disruption budget web needs 2 healthy pods and has 2 currently"
    );
    let kept = pods.get("web-b").await?;
    assert!(kept.metadata.deletion_timestamp.is_none());
    // kube-rs sees the same refusal (without retries: kube's client retries a 429).
    let without_retry: Api<Pod> = Api::default_namespaced(env.client_without_retry().await?);
    match without_retry.evict("web-b", &EvictParams::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 429),
        other => panic!("the eviction must be refused: {other:?}"),
    }

    // Another healthy pod restores the allowance.
    ready_pod(&pods, "web-d", "web").await?;
    wait(&budgets, "web", allowed(1, 3)).await?;
    pods.evict("web-b", &EvictParams::default()).await?;

    // A pod no budget selects is simply deleted.
    ready_pod(&pods, "lone", "other").await?;
    pods.evict("lone", &EvictParams::default()).await?;

    let resources = kubectl(&env, &["get", "--raw", "/api/v1"]).await?;
    assert!(resources.contains("\"name\":\"pods/eviction\""), "{resources}");
    Ok(())
}
