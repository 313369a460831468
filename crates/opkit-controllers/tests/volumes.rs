//! Storage as kind gives it, against a real opkit API server: the default `standard` class,
//! claims Pending until their first consumer is scheduled, local-path volumes provisioned
//! and bound with kube's fields, static volumes bound, pods held Pending by missing or
//! unbound immediate claims with kube's message, reclaim policies and the protection
//! finalizers.

use crate::common;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use opkit_testenv::TestEnv;
use serde_json::json;

use common::{Error, kubectl, wait};

fn claim(name: &str, class: Option<&str>) -> PersistentVolumeClaim {
    let mut spec = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}});
    if let Some(class) = class {
        spec["storageClassName"] = json!(class);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("a claim")
}

fn pod_using(name: &str, claim: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {
        "containers": [{"name": "app", "image": "busybox", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}}))
    .expect("a pod")
}

fn phase(c: &PersistentVolumeClaim) -> Option<String> {
    c.status.as_ref().and_then(|s| s.phase.clone())
}

fn scheduled_message(p: Option<&Pod>) -> Option<String> {
    let conditions = p?.status.as_ref()?.conditions.clone()?;
    conditions.into_iter().find(|c| c.type_ == "PodScheduled" && c.status == "False").and_then(|c| c.message)
}

#[tokio::test]
async fn a_claim_waits_for_its_first_consumer_then_gets_a_local_path_volume() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(env.client());
    let created = claims.create(&PostParams::default(), &claim("data", None)).await?;
    assert_eq!(phase(&created).as_deref(), Some("Pending"), "a new claim is Pending");
    assert!(created.finalizers().contains(&"kubernetes.io/pvc-protection".to_string()));
    // The default class is `standard` (made at start, or given retroactively).
    let data = wait(&claims, "data", |c: Option<&PersistentVolumeClaim>| {
        c.is_some_and(|c| c.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()) == Some("standard"))
    })
    .await?;
    assert_eq!(phase(&data).as_deref(), Some("Pending"), "WaitForFirstConsumer: no volume before a pod");

    let pods: Api<Pod> = Api::default_namespaced(env.client());
    pods.create(&PostParams::default(), &pod_using("app", "data")).await?;
    let bound = wait(&claims, "data", |c: Option<&PersistentVolumeClaim>| {
        c.is_some_and(|c| phase(c).as_deref() == Some("Bound"))
    })
    .await?;
    let volume = bound.spec.as_ref().and_then(|s| s.volume_name.clone()).unwrap_or_default();
    assert_eq!(volume, format!("pvc-{}", bound.uid().unwrap_or_default()));
    assert_eq!(bound.annotations().get("pv.kubernetes.io/bind-completed").map(String::as_str), Some("yes"));
    let node =
        bound.annotations().get("volume.kubernetes.io/selected-node").cloned().expect("the scheduler chose a node");
    let status = bound.status.clone().unwrap_or_default();
    assert_eq!(status.capacity.and_then(|c| c.get("storage").cloned()).map(|q| q.0).as_deref(), Some("1Gi"));

    let volumes: Api<PersistentVolume> = Api::all(env.client());
    let pv = volumes.get(&volume).await?;
    assert_eq!(
        pv.annotations().get("pv.kubernetes.io/provisioned-by").map(String::as_str),
        Some("rancher.io/local-path")
    );
    assert_eq!(pv.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Bound"));
    assert_eq!(pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).and_then(|r| r.name.as_deref()), Some("data"));
    let app = wait(&pods, "app", |p: Option<&Pod>| {
        p.is_some_and(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()).is_some())
    })
    .await?;
    assert_eq!(app.spec.and_then(|s| s.node_name), Some(node), "the pod runs where its volume is");
    let table = kubectl(&env, &["get", "pvc", "data", "--no-headers"]).await?;
    assert!(table.contains("Bound") && table.contains(&volume) && table.contains("standard"), "{table}");

    // Protection: the claim stays while the pod uses it; reclaim Delete removes the volume.
    claims.delete("data", &DeleteParams::default()).await?;
    let held = claims.get("data").await?;
    assert!(
        held.metadata.deletion_timestamp.is_some()
            && held.finalizers().contains(&"kubernetes.io/pvc-protection".to_string())
    );
    pods.delete("app", &DeleteParams::default().grace_period(0)).await?;
    wait(&claims, "data", |c: Option<&PersistentVolumeClaim>| c.is_none())
        .await
        .or_else(|e| if e.to_string().contains("is gone") { Ok(PersistentVolumeClaim::default()) } else { Err(e) })?;
    wait(&volumes, &volume, |v: Option<&PersistentVolume>| v.is_none())
        .await
        .or_else(|e| if e.to_string().contains("is gone") { Ok(PersistentVolume::default()) } else { Err(e) })?;
    Ok(())
}

#[tokio::test]
async fn missing_and_unbound_immediate_claims_keep_pods_pending() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let pods: Api<Pod> = Api::default_namespaced(env.client());
    pods.create(&PostParams::default(), &pod_using("orphan", "nope")).await?;
    // (counted over the three nodes once all have registered)
    let expected = "0/3 nodes are available: persistentvolumeclaim \"nope\" not found. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";
    wait(&pods, "orphan", |p: Option<&Pod>| scheduled_message(p).as_deref() == Some(expected)).await?;

    let classes = r#"{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "manual"},
        "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate"}"#;
    env.apply_yaml(classes).await?;
    let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(env.client());
    claims.create(&PostParams::default(), &claim("manual-data", Some("manual"))).await?;
    pods.create(&PostParams::default(), &pod_using("waiting", "manual-data")).await?;
    let p = wait(&pods, "waiting", |p: Option<&Pod>| scheduled_message(p).is_some()).await?;
    assert!(
        scheduled_message(Some(&p)).is_some_and(|m| m.contains("pod has unbound immediate PersistentVolumeClaims")),
        "{:?}",
        scheduled_message(Some(&p))
    );

    // A matching static volume binds the claim, and the pod is scheduled.
    let pv = r#"{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "disk-1"},
        "spec": {"storageClassName": "manual", "capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/mnt/disk-1"}}}"#;
    env.apply_yaml(pv).await?;
    let bound = wait(&claims, "manual-data", |c: Option<&PersistentVolumeClaim>| {
        c.is_some_and(|c| phase(c).as_deref() == Some("Bound"))
    })
    .await?;
    assert_eq!(bound.spec.and_then(|s| s.volume_name).as_deref(), Some("disk-1"));
    wait(&pods, "waiting", |p: Option<&Pod>| {
        p.is_some_and(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()).is_some())
    })
    .await?;

    // Retain: once the claim is gone, the volume is Released and kept.
    pods.delete("waiting", &DeleteParams::default().grace_period(0)).await?;
    claims.delete("manual-data", &DeleteParams::default()).await?;
    let volumes: Api<PersistentVolume> = Api::all(env.client());
    wait(&volumes, "disk-1", |v: Option<&PersistentVolume>| {
        v.is_some_and(|v| v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released"))
    })
    .await?;
    Ok(())
}
