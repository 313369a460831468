//! The Memcached operator of operator-sdk's Ansible tutorial (`tests/fixtures/memcached-operator`,
//! a role with a `kubernetes.core.k8s` task and `operator_sdk.util.k8s_status`) run by the
//! generic Ansible operator against an in-process control plane: the sample creates the
//! Deployment and its pods, a size change scales it, a failing task gives the Failure
//! condition with the task's message, deleting the resource runs the finalizer role, and
//! the owner reference the API proxy added lets the garbage collector remove the
//! Deployment. Needs ansible-runner, ansible-core and kubernetes.core
//! (`crates/opkit-ansible-operator/install-ansible.sh`, which `.ci/run` runs).

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Pod};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::runtime::WatchStreamExt;
use opkit_testenv::{TestEnv, wait_for, wait_for_with};
use serde_json::{Value, json};
use support::RunningOperator;

/// Ansible runs take seconds each (ansible-runner, fact gathering, the k8s module).
const WAIT: Duration = Duration::from_secs(120);

fn project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memcached-operator")
}

async fn start_operator(env: &TestEnv) -> RunningOperator {
    support::start_operator(env, &project(), "config/crd/bases/cache.example.com_memcacheds.yaml").await
}

fn memcached() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Memcached"),
        "memcacheds",
    )
}

async fn namespace(env: &TestEnv, name: &str) {
    let namespaces: Api<Namespace> = Api::all(env.client());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace"),
        )
        .await
        .expect("create the namespace");
}

async fn create_memcached(env: &TestEnv, ns: &str, name: &str, size: i64) -> Api<DynamicObject> {
    let api: Api<DynamicObject> = Api::namespaced_with(env.client(), ns, &memcached());
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"size": size},
    }))
    .expect("memcached");
    api.create(&PostParams::default(), &object).await.expect("create the Memcached");
    api
}

fn condition<'a>(o: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    o.data.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == type_)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memcached_role_deploys_scales_and_finalizes() {
    let env = TestEnv::start().await.expect("testenv");
    let _operator = start_operator(&env).await;
    let ns = "memcached-test";
    namespace(&env, ns).await;
    let memcacheds = create_memcached(&env, ns, "sample", 1).await;

    // The Deployment, owned by the Memcached through the proxy's owner reference.
    let deployments: Api<Deployment> = Api::namespaced(env.client(), ns);
    let deployment = wait_for(&deployments, "sample-memcached", "to exist", |d: Option<&Deployment>| d.is_some(), WAIT)
        .await
        .expect("the role creates the Deployment")
        .expect("exists");
    assert_eq!(deployment.spec.as_ref().and_then(|s| s.replicas), Some(1));
    let sample = memcacheds.get("sample").await.expect("the Memcached");
    let owner = deployment.metadata.owner_references.clone().unwrap_or_default();
    assert!(
        owner
            .iter()
            .any(|r| r.kind == "Memcached" && r.name == "sample" && Some(&r.uid) == sample.metadata.uid.as_ref()),
        "the proxy added the owner reference: {owner:?}"
    );
    let pods: Api<Pod> = Api::namespaced(env.client(), ns);
    let pods_running = |n: i32| {
        let (deployments, pods) = (deployments.clone(), pods.clone());
        async move {
            let ready = move |d: Option<&Deployment>| {
                d.and_then(|d| d.status.as_ref()).and_then(|s| s.ready_replicas).unwrap_or(0) == n
                    && d.and_then(|d| d.status.as_ref()).and_then(|s| s.replicas).unwrap_or(0) == n
            };
            wait_for(&deployments, "sample-memcached", "to have its pods ready", ready, WAIT)
                .await
                .expect("the Deployment's pods run");
            let list = pods.list(&ListParams::default().labels("memcached=sample")).await.expect("list pods");
            let live = list.items.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).count();
            assert_eq!(live, usize::try_from(n).unwrap_or_default(), "the Deployment's pods");
        }
    };
    pods_running(1).await;

    // Successful, with ansibleResult, and the custom status from k8s_status.
    let successful = |o: Option<&DynamicObject>| {
        o.and_then(|o| condition(o, "Successful")).is_some_and(|c| c["status"] == "True")
            && o.and_then(|o| o.data.pointer("/status/replicas")).is_some_and(|r| r == 1)
    };
    let done = wait_for_with(&memcacheds, &memcached(), "sample", "to be Successful", successful, WAIT)
        .await
        .expect("the run succeeds")
        .expect("exists");
    let running = condition(&done, "Running").expect("Running");
    assert_eq!(running["reason"], "Successful");
    assert_eq!(running["message"], "Awaiting next reconciliation");
    assert!(running["ansibleResult"]["ok"].as_i64().is_some_and(|n| n >= 2), "{running}");
    assert_eq!(running["ansibleResult"]["failures"], 0);
    assert!(
        done.metadata.finalizers.clone().unwrap_or_default().contains(&"cache.example.com/finalizer".to_string()),
        "the watch's finalizer is added"
    );

    // A size change scales the Deployment.
    memcacheds
        .patch("sample", &PatchParams::default(), &Patch::Merge(json!({"spec": {"size": 3}})))
        .await
        .expect("change the size");
    wait_for(
        &deployments,
        "sample-memcached",
        "to have 3 replicas",
        |d: Option<&Deployment>| d.and_then(|d| d.spec.as_ref()).and_then(|s| s.replicas) == Some(3),
        WAIT,
    )
    .await
    .expect("the role scales the Deployment");
    pods_running(3).await;
    wait_for_with(
        &memcacheds,
        &memcached(),
        "sample",
        "to report 3 replicas",
        |o: Option<&DynamicObject>| o.and_then(|o| o.data.pointer("/status/replicas")).is_some_and(|r| r == 3),
        WAIT,
    )
    .await
    .expect("k8s_status reports the new size");

    // A deleted dependent is restored: the proxy watches what runs create.
    let first_uid = deployment.metadata.uid.clone();
    deployments.delete("sample-memcached", &DeleteParams::background()).await.expect("delete the Deployment");
    wait_for(
        &deployments,
        "sample-memcached",
        "to be recreated",
        move |d: Option<&Deployment>| d.is_some_and(|d| d.metadata.uid != first_uid),
        WAIT,
    )
    .await
    .expect("the dependent watch reconciles the owner, whose run recreates the Deployment");

    // Deleting runs the finalizer role, then the garbage collector removes the Deployment.
    memcacheds.delete("sample", &DeleteParams::background()).await.expect("delete the Memcached");
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let finalized = wait_for(&configmaps, "sample-finalized", "to exist", |c: Option<&ConfigMap>| c.is_some(), WAIT)
        .await
        .expect("the finalizer role runs")
        .expect("exists");
    assert_eq!(finalized.data.unwrap_or_default().get("namespace").map(String::as_str), Some(ns));
    let annotations = finalized.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations.get("operator-sdk/primary-resource").map(String::as_str),
        Some("memcached-test/sample"),
        "an object in another namespace gets the owner annotations"
    );
    wait_for_with(&memcacheds, &memcached(), "sample", "to be gone", |o: Option<&DynamicObject>| o.is_none(), WAIT)
        .await
        .expect("the finalizer is removed");
    wait_for(&deployments, "sample-memcached", "to be collected", |d: Option<&Deployment>| d.is_none(), WAIT)
        .await
        .expect("the garbage collector removes the owned Deployment");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_task_gives_the_failure_condition_and_an_event() {
    let env = TestEnv::start().await.expect("testenv");
    let operator = start_operator(&env).await;
    let ns = "default";
    let memcacheds = create_memcached(&env, ns, "huge", 10).await;
    let failed =
        |o: Option<&DynamicObject>| o.and_then(|o| condition(o, "Failure")).is_some_and(|c| c["status"] == "True");
    let object = wait_for_with(&memcacheds, &memcached(), "huge", "to fail", failed, WAIT)
        .await
        .expect("the run fails")
        .expect("exists");
    let failure = condition(&object, "Failure").expect("Failure");
    assert_eq!(failure["reason"], "Failed");
    assert_eq!(failure["message"], "size 10 is more than the limit of 5");
    assert_eq!(failure["ansibleResult"]["failures"], 1);
    assert_eq!(condition(&object, "Successful").expect("Successful")["status"], "False");
    let events: Api<Event> = Api::namespaced(env.client(), ns);
    let warning =
        kube::runtime::watcher(events, kube::runtime::watcher::Config::default()).applied_objects().try_filter(|e| {
            std::future::ready(
                e.involved_object.name.as_deref() == Some("huge")
                    && e.type_.as_deref() == Some("Warning")
                    && e.message.as_deref() == Some("size 10 is more than the limit of 5"),
            )
        });
    let mut warning = std::pin::pin!(warning);
    tokio::time::timeout(WAIT, warning.try_next())
        .await
        .expect("a Warning event for the failed run in time")
        .expect("the event watch")
        .expect("an event");
    // ansible-operator's metrics next to controller-runtime's.
    let metrics = operator.metrics.encode();
    assert!(
        metrics.contains(
            "ansible_operator_reconcile_result{GVK=\"cache.example.com/v1alpha1, Kind=Memcached\",result=\"failed\"}"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("ansible_operator_reconciles_count{"), "{metrics}");
    assert!(metrics.contains("controller_runtime_reconcile_total{"), "{metrics}");
    // Fixing the spec makes it succeed.
    memcacheds
        .patch("huge", &PatchParams::default(), &Patch::Merge(json!({"spec": {"size": 2}})))
        .await
        .expect("fix the size");
    let successful = |o: Option<&DynamicObject>| {
        o.and_then(|o| condition(o, "Successful")).is_some_and(|c| c["status"] == "True")
            && o.and_then(|o| condition(o, "Failure")).is_some_and(|c| c["status"] == "False")
    };
    wait_for_with(&memcacheds, &memcached(), "huge", "to succeed", successful, WAIT)
        .await
        .expect("the fixed run succeeds");
}
