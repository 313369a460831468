// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The Memcached operator end to end on an in-process control plane with the cluster
//! controllers (deployments, replica sets, scheduler, simulated kubelets, garbage
//! collector): size 3 gives 3 running pods listed in `status.nodes`, resizing follows,
//! a deleted pod is replaced, deleting the Memcached collects everything, and the
//! schema rejects sizes outside 1..=5.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{Condition, conditions};
use memcached_operator::api::cache_v1alpha1::{Memcached, MemcachedSpec};
use opkit::{Manager, ManagerOptions};
use opkit_testenv::{TestEnv, wait_for};
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(60);

type TestResult = Result<(), Box<dyn std::error::Error>>;

struct Operator {
    env: TestEnv,
    stop: CancellationToken,
    running: tokio::task::JoinHandle<Result<(), opkit::ManagerError>>,
}

async fn start_operator() -> Result<Operator, Box<dyn std::error::Error>> {
    let env = TestEnv::start().await?;
    env.install_crds(memcached_operator::api::crds()).await?;
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    memcached_operator::controller::setup(&mgr)?;
    let stop = CancellationToken::new();
    let running = tokio::spawn(mgr.run_until(stop.clone()));
    Ok(Operator { env, stop, running })
}

impl Operator {
    async fn stop(self) -> TestResult {
        self.stop.cancel();
        self.running.await??;
        Ok(())
    }
}

fn memcached(name: &str, size: i32) -> Memcached {
    Memcached::new(name, MemcachedSpec { size })
}

/// The Memcached is Available at its current generation with `size` nodes.
fn ready_with(size: usize) -> impl Condition<Memcached> {
    move |m: Option<&Memcached>| {
        let Some(m) = m else { return false };
        let Some(status) = &m.status else { return false };
        let available = status
            .conditions
            .iter()
            .any(|c| c.type_ == "Available" && c.status == "True" && c.observed_generation == m.metadata.generation);
        available && status.nodes.len() == size
    }
}

async fn pods_of(api: &Api<Pod>, name: &str) -> kube::Result<Vec<Pod>> {
    Ok(api.list(&ListParams::default().labels(&format!("app=memcached,memcached_cr={name}"))).await?.items)
}

fn names(pods: &[Pod]) -> Vec<String> {
    let mut n: Vec<String> = pods.iter().filter_map(|p| p.metadata.name.clone()).collect();
    n.sort();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_runs_resizes_heals_and_is_collected() -> TestResult {
    let op = start_operator().await?;
    let client = op.env.client();
    let memcacheds: Api<Memcached> = Api::namespaced(client.clone(), "default");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    // Size 3: a Deployment with 3 replicas, 3 running pods, their names in status.nodes.
    memcacheds.create(&PostParams::default(), &memcached("cache", 3)).await?;
    let m = wait_for(&memcacheds, "cache", "to be Available with 3 nodes", ready_with(3), TIMEOUT)
        .await?
        .ok_or("memcached gone")?;
    let dep = deployments.get("cache").await?;
    let spec = dep.spec.as_ref().ok_or("no spec")?;
    assert_eq!(spec.replicas, Some(3));
    let pod_spec = spec.template.spec.as_ref().ok_or("no pod spec")?;
    let container = &pod_spec.containers[0];
    assert_eq!(container.image.as_deref(), Some("memcached:1.4.36-alpine"));
    assert_eq!(container.command.as_deref(), Some(&["memcached", "-m=64", "-o", "modern", "-v"].map(String::from)[..]));
    assert_eq!(container.ports.as_ref().ok_or("no ports")?[0].name.as_deref(), Some("memcached"));
    let owner = &dep.metadata.owner_references.as_ref().ok_or("no owner")?[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.controller), ("Memcached", "cache", Some(true)));
    let running = pods_of(&pods, "cache").await?;
    assert_eq!(running.len(), 3);
    assert!(running.iter().all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")));
    assert_eq!(m.status.as_ref().ok_or("no status")?.nodes, names(&running));

    // Size 5 gives 5.
    let patch = serde_json::json!({"spec": {"size": 5}});
    memcacheds.patch("cache", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let m = wait_for(&memcacheds, "cache", "to be Available with 5 nodes", ready_with(5), TIMEOUT)
        .await?
        .ok_or("memcached gone")?;
    assert_eq!(deployments.get("cache").await?.spec.and_then(|s| s.replicas), Some(5));
    let five = pods_of(&pods, "cache").await?;
    assert_eq!(m.status.ok_or("no status")?.nodes, names(&five));

    // A deleted pod is replaced and the status follows.
    let victim = five[0].metadata.name.clone().ok_or("no name")?;
    pods.delete(&victim, &DeleteParams::default()).await?;
    let healed = move |m: Option<&Memcached>| {
        ready_with(5).matches_object(m) && m.and_then(|m| m.status.as_ref()).is_some_and(|s| !s.nodes.contains(&victim))
    };
    let m = wait_for(&memcacheds, "cache", "to list the replacement pod", healed, TIMEOUT)
        .await?
        .ok_or("memcached gone")?;
    assert_eq!(m.status.ok_or("no status")?.nodes, names(&pods_of(&pods, "cache").await?));

    // Deleting the Memcached garbage-collects the Deployment and its pods.
    let dep_uid = deployments.get("cache").await?.metadata.uid.ok_or("no uid")?;
    let left = pods_of(&pods, "cache").await?;
    memcacheds.delete("cache", &DeleteParams::default()).await?;
    wait_for(&deployments, "cache", "to be collected", conditions::is_deleted(&dep_uid), TIMEOUT).await?;
    for pod in left {
        let (name, uid) = (pod.metadata.name.ok_or("no name")?, pod.metadata.uid.ok_or("no uid")?);
        wait_for(&pods, &name, "to be collected", conditions::is_deleted(&uid), TIMEOUT).await?;
    }
    assert!(pods_of(&pods, "cache").await?.is_empty());
    op.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_outside_one_to_five_is_rejected() -> TestResult {
    let env = TestEnv::builder().without_controllers().start().await?;
    env.install_crds(memcached_operator::api::crds()).await?;
    let memcacheds: Api<Memcached> = Api::namespaced(env.client(), "default");
    for size in [0, 6] {
        let err = memcacheds.create(&PostParams::default(), &memcached("bad", size)).await.expect_err("rejected");
        let kube::Error::Api(status) = err else { panic!("expected an API error, got {err:?}") };
        assert_eq!(status.code, 422, "{status:?}");
        assert!(status.message.contains("spec.size"), "{}", status.message);
    }
    memcacheds.create(&PostParams::default(), &memcached("good", 5)).await?;
    Ok(())
}

#[test]
fn image_can_be_overridden_and_pods_are_restricted() -> TestResult {
    use memcached_operator::controller::memcached::{deployment_for, labels_for};
    let mut m = memcached("x", 2);
    m.metadata.namespace = Some("ns".into());
    m.metadata.uid = Some("uid-1".into());
    let dep = deployment_for(&m, "registry.example.com/memcached:1.6")?;
    let spec = dep.spec.ok_or("no spec")?;
    let pod = spec.template.spec.ok_or("no pod spec")?;
    assert_eq!(pod.containers[0].image.as_deref(), Some("registry.example.com/memcached:1.6"));
    let psc = pod.security_context.ok_or("no pod security context")?;
    assert_eq!(psc.run_as_non_root, Some(true));
    assert_eq!(psc.seccomp_profile.map(|s| s.type_).as_deref(), Some("RuntimeDefault"));
    let sc = pod.containers[0].security_context.clone().ok_or("no security context")?;
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.capabilities.and_then(|c| c.drop), Some(vec!["ALL".to_string()]));
    assert_eq!(spec.template.metadata.and_then(|m| m.labels), Some(labels_for("x")));
    Ok(())
}

#[test]
fn generated_role_holds_exactly_the_seed_rules() {
    let role =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/rbac/role.yaml")).expect("role.yaml");
    let expected = "---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: manager-role
rules:
- apiGroups:
  - \"\"
  resources:
  - pods
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - apps
  resources:
  - deployments
  verbs:
  - create
  - delete
  - get
  - list
  - patch
  - update
  - watch
- apiGroups:
  - cache.example.com
  resources:
  - memcacheds
  verbs:
  - create
  - delete
  - get
  - list
  - patch
  - update
  - watch
- apiGroups:
  - cache.example.com
  resources:
  - memcacheds/finalizers
  verbs:
  - update
- apiGroups:
  - cache.example.com
  resources:
  - memcacheds/status
  verbs:
  - get
  - patch
  - update
";
    assert_eq!(role, expected);
}
