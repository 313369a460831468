//! The manager on a real (in-process) API server: metrics and probes, leader election
//! between two managers, graceful shutdown.

mod common;

use std::time::Duration;

use common::{Log, configmap, eventually, http_get};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::CustomResourceExt;
use kube::api::Api;
use opkit::leader::LeaderElectionConfig;
use opkit::{Action, Context, Controller, Manager, ManagerOptions, ReconcileError};
use opkit_testenv::TestEnv;
use tokio_util::sync::CancellationToken;

mod widget {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// A kind whose CRD is installed late, to hold the cache unsynced.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(group = "late.opkit.dev", version = "v1", kind = "Gadget", namespaced)]
    pub struct GadgetSpec {
        pub size: i64,
    }
}

fn local() -> Option<std::net::SocketAddr> {
    Some("127.0.0.1:0".parse().expect("addr"))
}

fn counting_controller(mgr: &Manager, log: &Log, tag: &'static str) {
    let l = log.clone();
    Controller::new(mgr, move |ctx: Context<ConfigMap>| {
        let l = l.clone();
        async move {
            l.record(&ctx.request, tag);
            Ok::<_, ReconcileError>(Action::done())
        }
    })
    .build();
}

#[tokio::test]
async fn metrics_count_reconciles_and_readyz_waits_for_sync() {
    let env = TestEnv::start().await.expect("env");
    let opts = ManagerOptions { metrics_addr: local(), health_addr: local(), ..Default::default() };
    let mgr = Manager::new(env.client(), opts);
    let log = Log::default();
    counting_controller(&mgr, &log, "m");
    // Watching a kind that is not served yet keeps the cache unsynced.
    let _ = mgr.cache().informer::<widget::Gadget>();
    let handle = mgr.clone();
    let token = CancellationToken::new();
    let t = token.clone();
    let run = tokio::spawn(async move { mgr.run_until(t).await });
    let (metrics_addr, health_addr) = eventually("servers bound", || async {
        match handle.bound_addresses() {
            (Some(m), Some(h)) => Some((m, h)),
            _ => None,
        }
    })
    .await;
    assert_eq!(http_get(health_addr, "/healthz").await.0, 200);
    assert_eq!(http_get(health_addr, "/readyz").await.0, 500, "not ready before the caches sync");
    env.install_crds([widget::Gadget::crd()]).await.expect("crd");
    eventually("readyz to pass", || async { (http_get(health_addr, "/readyz").await.0 == 200).then_some(()) }).await;

    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for i in 0..3 {
        configmap(&cms, &format!("m{i}"), &[]).await;
    }
    for i in 0..3 {
        log.wait_calls(&format!("m{i}"), 1).await;
    }
    let body = eventually("metrics to show 3 successes", || async {
        let (_, body) = http_get(metrics_addr, "/metrics").await;
        body.contains(r#"controller_runtime_reconcile_total{controller="configmap",result="success"} 3"#)
            .then_some(body)
    })
    .await;
    for name in [
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_reconcile_time_seconds",
        "controller_runtime_max_concurrent_reconciles",
        "controller_runtime_active_workers",
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds",
        "workqueue_retries_total",
    ] {
        assert!(body.contains(name), "missing {name}:\n{body}");
    }
    token.cancel();
    run.await.expect("join").expect("clean shutdown");
}

fn elected(env: &TestEnv, identity: &str, release_on_cancel: bool) -> ManagerOptions {
    let mut le = LeaderElectionConfig::new("test-leader".to_string(), "default".to_string());
    le.identity = identity.to_string();
    le.lease_duration = Duration::from_secs(3);
    le.renew_deadline = Duration::from_secs(2);
    le.retry_period = Duration::from_millis(200);
    le.release_on_cancel = release_on_cancel;
    let _ = env;
    ManagerOptions { leader_election: Some(le), ..Default::default() }
}

async fn holder(env: &TestEnv) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(env.client(), "default");
    leases.get_opt("test-leader").await.ok().flatten().and_then(|l| l.spec).and_then(|s| s.holder_identity)
}

async fn two_managers(release_on_cancel: bool) {
    let env = TestEnv::start().await.expect("env");
    let log = Log::default();
    let first = Manager::new(env.client(), elected(&env, "first", release_on_cancel));
    counting_controller(&first, &log, "first");
    let first_token = CancellationToken::new();
    let t = first_token.clone();
    let first_run = tokio::spawn(async move { first.run_until(t).await });
    eventually("first to lead", || async { (holder(&env).await.as_deref() == Some("first")).then_some(()) }).await;

    let second = Manager::new(env.client(), elected(&env, "second", release_on_cancel));
    counting_controller(&second, &log, "second");
    let second_token = CancellationToken::new();
    let t = second_token.clone();
    let _second_run = tokio::spawn(async move { second.run_until(t).await });

    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    configmap(&cms, "one", &[]).await;
    log.wait_calls("one", 1).await;
    // A second object reconciled by the leader: the follower saw both events and did nothing.
    configmap(&cms, "two", &[]).await;
    log.wait_calls("two", 1).await;
    let all: Vec<String> = ["one", "two"].iter().flat_map(|n| log.calls(n)).map(|(_, t)| t).collect();
    assert!(all.iter().all(|t| t == "first"), "only the leader reconciles: {all:?}");

    let stopped = tokio::time::Instant::now();
    first_token.cancel();
    first_run.await.expect("join").expect("leader stops cleanly");
    if release_on_cancel {
        // run_until returns only after the release: a process exiting right after it
        // must not leave its name on the lease.
        let now = holder(&env).await;
        assert_ne!(now.as_deref(), Some("first"), "the stopped leader released the lease");
    }
    configmap(&cms, "three", &[]).await;
    log.wait("the follower to take over", |l| l.calls("three").iter().any(|(_, t)| t == "second")).await;
    let took = stopped.elapsed();
    if release_on_cancel {
        assert!(took < Duration::from_secs(3), "released lease taken over at once, took {took:?}");
    } else {
        assert!(
            took < Duration::from_secs(3) + Duration::from_secs(5),
            "taken over within the lease duration, took {took:?}"
        );
    }
    second_token.cancel();
}

#[tokio::test]
async fn leader_election_with_release_on_cancel() {
    two_managers(true).await;
}

#[tokio::test]
async fn leader_election_after_lease_expiry() {
    two_managers(false).await;
}
