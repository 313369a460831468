//! autoscaling/v1 HorizontalPodAutoscalers next to autoscaling/v2: one stored object read,
//! written, patched, applied, listed and watched at both versions, with kube's
//! conversion (v1's CPU target is v2's cpu Utilization metric; what v1 cannot hold
//! travels in kube's round-trip annotations, so v2 → v1 → v2 loses nothing).

use futures::StreamExt;
use k8s_openapi::api::autoscaling::{v1, v2};
use kube::api::{Api, Patch, PatchParams, PostParams, WatchParams};
use serde_json::json;

use crate::common::{env, raw, wait_for_item, within};

const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";

fn v2_hpa(name: &str) -> v2::HorizontalPodAutoscaler {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 5,
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}},
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}
            ],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}
        }
    }))
    .expect("a v2 HorizontalPodAutoscaler")
}

fn annotation<'a>(hpa: &'a v1::HorizontalPodAutoscaler, key: &str) -> Option<&'a str> {
    hpa.metadata.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

#[tokio::test]
async fn one_object_at_v1_and_v2_round_trips_without_loss() {
    let env = env().await;
    let at_v2: Api<v2::HorizontalPodAutoscaler> = Api::namespaced(env.client(), "default");
    let at_v1: Api<v1::HorizontalPodAutoscaler> = Api::namespaced(env.client(), "default");
    let created = at_v2.create(&PostParams::default(), &v2_hpa("web")).await.expect("create at v2");

    let read = at_v1.get("web").await.expect("get at v1");
    let spec = read.spec.as_ref().expect("spec");
    assert_eq!(spec.target_cpu_utilization_percentage, Some(70));
    assert_eq!((spec.min_replicas, spec.max_replicas), (Some(2), 5));
    let others: serde_json::Value = serde_json::from_str(annotation(&read, METRICS).expect("metrics annotation"))
        .expect("the annotation holds JSON");
    assert_eq!(others[0]["resource"]["name"], "memory");
    assert!(annotation(&read, BEHAVIOR).is_some_and(|b| b.contains("stabilizationWindowSeconds")));

    // A v1 client changes what v1 has and sends the annotations back: nothing is lost.
    let mut edited = read.clone();
    edited.spec.as_mut().expect("spec").max_replicas = 8;
    edited.spec.as_mut().expect("spec").target_cpu_utilization_percentage = Some(60);
    at_v1.replace("web", &PostParams::default(), &edited).await.expect("replace at v1");
    let back = at_v2.get("web").await.expect("get at v2");
    let spec = back.spec.as_ref().expect("spec");
    assert_eq!(spec.max_replicas, 8);
    let metrics = serde_json::to_value(&spec.metrics).expect("metrics");
    assert_eq!(metrics[0]["resource"]["target"]["averageUtilization"], 60);
    assert_eq!(metrics[1]["resource"]["name"], "memory");
    assert_eq!(spec.behavior, created.spec.as_ref().expect("spec").behavior, "behavior survives v1");
    assert!(
        back.metadata.annotations.as_ref().is_none_or(|a| !a.contains_key(METRICS) && !a.contains_key(BEHAVIOR)),
        "v2 objects carry no round-trip annotations: {:?}",
        back.metadata.annotations
    );
}

#[tokio::test]
async fn v1_status_current_cpu_and_conditions_round_trip() {
    let env = env().await;
    let at_v2: Api<v2::HorizontalPodAutoscaler> = Api::namespaced(env.client(), "default");
    let at_v1: Api<v1::HorizontalPodAutoscaler> = Api::namespaced(env.client(), "default");
    at_v2.create(&PostParams::default(), &v2_hpa("web")).await.expect("create");
    let status = json!({"status": {"currentReplicas": 2, "desiredReplicas": 3,
        "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40, "averageValue": "40m"}}}],
        "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    at_v2.patch_status("web", &PatchParams::default(), &Patch::Merge(&status)).await.expect("status at v2");

    let read = at_v1.get("web").await.expect("get at v1");
    assert_eq!(read.status.as_ref().and_then(|s| s.current_cpu_utilization_percentage), Some(40));
    // A v1 main-resource update that drops the annotations keeps the status (the
    // status annotations follow the status subresource's rules).
    let mut edited = read.clone();
    edited.metadata.annotations = None;
    edited.spec.as_mut().expect("spec").max_replicas = 6;
    at_v1.replace("web", &PostParams::default(), &edited).await.expect("replace at v1");
    let back = at_v2.get("web").await.expect("get at v2");
    let status = back.status.expect("status");
    assert_eq!(status.conditions.expect("conditions kept")[0].type_, "AbleToScale");
    let current = serde_json::to_value(status.current_metrics).expect("current metrics");
    assert_eq!(current[0]["resource"]["current"]["averageValue"], "40m", "the raw value survives v1");
    assert_eq!(
        back.spec.expect("spec").metrics.expect("metrics").len(),
        1,
        "v1 without the annotation has only its CPU target"
    );
}

#[tokio::test]
async fn created_at_v1_gets_kubes_defaults_and_serves_at_v2() {
    let env = env().await;
    let at_v1: Api<v1::HorizontalPodAutoscaler> = Api::namespaced(env.client(), "default");
    let at_v2: Api<v2::HorizontalPodAutoscaler> = Api::namespaced(env.client(), "default");
    let hpa: v1::HorizontalPodAutoscaler = serde_json::from_value(json!({
        "metadata": {"name": "plain"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3}
    }))
    .expect("v1 HPA");
    let created = at_v1.create(&PostParams::default(), &hpa).await.expect("create at v1");
    assert_eq!(created.spec.as_ref().and_then(|s| s.min_replicas), Some(1));
    assert_eq!(created.spec.as_ref().and_then(|s| s.target_cpu_utilization_percentage), Some(80));
    let v2 = at_v2.get("plain").await.expect("get at v2");
    let metrics = serde_json::to_value(v2.spec.expect("spec").metrics).expect("metrics");
    assert_eq!(
        metrics,
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}])
    );
    let listed = at_v1.list(&Default::default()).await.expect("list at v1");
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].spec.as_ref().and_then(|s| s.target_cpu_utilization_percentage), Some(80));
}

#[tokio::test]
async fn patches_apply_and_watch_at_v1() {
    let env = env().await;
    let at_v1: Api<v1::HorizontalPodAutoscaler> = Api::namespaced(env.client(), "default");
    let at_v2: Api<v2::HorizontalPodAutoscaler> = Api::namespaced(env.client(), "default");
    at_v2.create(&PostParams::default(), &v2_hpa("web")).await.expect("create");
    let mut events = within("watch at v1", at_v1.watch(&WatchParams::default(), "0")).await.expect("watch").boxed();

    let merged = at_v1
        .patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"targetCPUUtilizationPercentage": 55}})))
        .await
        .expect("merge patch at v1");
    assert_eq!(merged.spec.as_ref().and_then(|s| s.target_cpu_utilization_percentage), Some(55));
    let strategic = at_v1
        .patch("web", &PatchParams::default(), &Patch::Strategic(json!({"spec": {"maxReplicas": 9}})))
        .await
        .expect("strategic patch at v1");
    assert_eq!(strategic.spec.as_ref().map(|s| s.max_replicas), Some(9));
    let applied = at_v1
        .patch(
            "web",
            &PatchParams::apply("hpa-v1-test").force(),
            &Patch::Apply(json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "web"},
                "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"}, "maxReplicas": 4, "targetCPUUtilizationPercentage": 65}})),
        )
        .await
        .expect("apply at v1");
    assert_eq!(
        applied.spec.as_ref().map(|s| (s.max_replicas, s.target_cpu_utilization_percentage)),
        Some((4, Some(65)))
    );
    let v2 = at_v2.get("web").await.expect("get at v2");
    let metrics = serde_json::to_value(v2.spec.expect("spec").metrics).expect("metrics");
    assert_eq!(metrics[0]["resource"]["target"]["averageUtilization"], 65);

    let seen = wait_for_item("a v1 watch event with the applied target", &mut events, |e| {
        matches!(e, Ok(kube::api::WatchEvent::Modified(h))
            if h.spec.as_ref().and_then(|s| s.target_cpu_utilization_percentage) == Some(65))
    })
    .await;
    assert!(seen.is_ok());
}

#[tokio::test]
async fn discovery_serves_both_versions_with_v2_preferred() {
    let env = env().await;
    let group = raw(&env.client(), "GET", "/apis/autoscaling", None, Vec::new()).await;
    assert_eq!(group.json["preferredVersion"]["version"], "v2", "{}", group.text);
    let versions: Vec<&str> =
        group.json["versions"].as_array().expect("versions").iter().filter_map(|v| v["version"].as_str()).collect();
    assert_eq!(versions, ["v2", "v1"]);
    let v1 = raw(&env.client(), "GET", "/apis/autoscaling/v1", None, Vec::new()).await;
    assert!(v1.text.contains("\"horizontalpodautoscalers\""), "{}", v1.text);
    assert!(v1.text.contains("\"horizontalpodautoscalers/status\""), "{}", v1.text);
}
