//! The manager on a real (in-process) API server: metrics and probes, leader election
//! between two managers, graceful shutdown.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{Log, configmap, env_without_root_ca, eventually, http_get};
use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::CustomResourceExt;
use kube::api::Api;
use opkit::leader::LeaderElectionConfig;
use opkit::{
    Action, Context, Controller, Manager, ManagerError, ManagerOptions, ReconcileError, Runnable, RunnableError,
};
use opkit_testenv::TestEnv;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

mod widget {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// A kind whose CRD is installed late, to hold the cache unsynced.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(group = "late.opkit.dev", version = "v1", kind = "Gadget", namespaced)]
    pub(super) struct GadgetSpec {
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
    .build()
    .expect("unique controller name");
}

#[tokio::test]
async fn metrics_count_reconciles_and_readyz_waits_for_sync() {
    let env = env_without_root_ca().await;
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
    let env = env_without_root_ca().await;
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

/// A runnable made of a closure, on every replica or leader-only.
struct FnRunnable<F> {
    name: &'static str,
    leader_only: bool,
    run: F,
}

impl<F, Fut> Runnable for FnRunnable<F>
where
    F: FnOnce(CancellationToken) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), RunnableError>> + Send + 'static,
{
    fn name(&self) -> String {
        self.name.to_string()
    }
    fn needs_leader_election(&self) -> bool {
        self.leader_only
    }
    fn start(self: Box<Self>, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), RunnableError>> {
        Box::pin((self.run)(shutdown))
    }
}

fn signal() -> (Arc<Notify>, impl Fn() -> Arc<Notify>) {
    let n = Arc::new(Notify::new());
    let c = n.clone();
    (n, move || c.clone())
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(common::WAIT, f).await.unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

#[tokio::test]
async fn a_runnable_returning_ok_leaves_the_manager_running() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let log = Log::default();
    counting_controller(&mgr, &log, "c");
    let (done, notify) = signal();
    let finished = done.notified();
    mgr.add(FnRunnable {
        name: "one-shot",
        leader_only: false,
        run: move |_| async move {
            notify().notify_one();
            Ok(())
        },
    });
    let token = CancellationToken::new();
    let mut run = tokio::spawn(mgr.run_until(token.clone()));
    within("the one-shot runnable", finished).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    configmap(&cms, "after-one-shot", &[]).await;
    log.wait_calls("after-one-shot", 1).await;
    assert!(futures::poll!(&mut run).is_pending(), "the manager stopped when a runnable returned Ok");
    token.cancel();
    within("the manager to stop", run).await.expect("join").expect("clean shutdown");
}

#[tokio::test]
async fn a_failing_or_panicking_runnable_stops_the_manager_with_its_error() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    mgr.add(FnRunnable {
        name: "panicky",
        leader_only: true,
        run: |_| async {
            tokio::task::yield_now().await;
            panic!("boom")
        },
    });
    let result = within("the manager to stop", mgr.run_until(CancellationToken::new())).await;
    match result {
        Err(ManagerError::Panicked { name, message }) => {
            assert_eq!((name.as_str(), message.as_str()), ("panicky", "boom"));
        }
        other => panic!("expected the panic, got {other:?}"),
    }

    let mgr = Manager::new(env.client(), ManagerOptions::default());
    mgr.add(FnRunnable { name: "failing", leader_only: false, run: |_| async { Err(RunnableError("broken".into())) } });
    match within("the manager to stop", mgr.run_until(CancellationToken::new())).await {
        Err(ManagerError::Runnable { name, source }) => {
            assert_eq!((name.as_str(), source.0.as_str()), ("failing", "broken"))
        }
        other => panic!("expected the runnable's error, got {other:?}"),
    }
}

#[tokio::test]
async fn runnables_added_after_start_are_started_leader_only_ones_once_leading() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let first = Manager::new(env.client(), elected(&env, "first", true));
    let first_token = CancellationToken::new();
    let first_run = tokio::spawn(first.clone().run_until(first_token.clone()));
    eventually("first to lead", || async { (holder(&env).await.as_deref() == Some("first")).then_some(()) }).await;

    let second = Manager::new(env.client(), elected(&env, "second", true));
    let (running, notify) = signal();
    let second_running = running.notified();
    second.add(FnRunnable {
        name: "marker",
        leader_only: false,
        run: move |_| async move {
            notify().notify_one();
            Ok(())
        },
    });
    let second_token = CancellationToken::new();
    let second_run = tokio::spawn(second.clone().run_until(second_token.clone()));
    within("the second manager to run", second_running).await;

    // Added while running: an everywhere runnable starts at once, on the follower too.
    let (late, notify) = signal();
    let late_started = late.notified();
    second.add(FnRunnable {
        name: "late-everywhere",
        leader_only: false,
        run: move |_| async move {
            notify().notify_one();
            Ok(())
        },
    });
    within("the late runnable", late_started).await;

    // A leader-only one waits for leadership: it records who held the lease when it started.
    let seen: Arc<Mutex<Option<Option<String>>>> = Arc::default();
    let (leading, notify) = signal();
    let leader_started = leading.notified();
    let (s, client) = (seen.clone(), env.client());
    second.add(FnRunnable {
        name: "late-leader",
        leader_only: true,
        run: move |_| async move {
            let leases: Api<Lease> = Api::namespaced(client, "default");
            let h =
                leases.get_opt("test-leader").await.ok().flatten().and_then(|l| l.spec).and_then(|s| s.holder_identity);
            *s.lock() = Some(h);
            notify().notify_one();
            Ok(())
        },
    });
    first_token.cancel();
    first_run.await.expect("join").expect("first stops cleanly");
    within("the leader-only runnable", leader_started).await;
    assert_eq!(seen.lock().clone(), Some(Some("second".to_string())), "started before this replica led");
    second_token.cancel();
    second_run.await.expect("join").expect("second stops cleanly");
}

/// Admits everything.
struct AllowAll;

impl opkit::webhook::Validator<ConfigMap> for AllowAll {
    fn validate_create(&self, _: &ConfigMap) -> Result<Vec<String>, String> {
        Ok(vec![])
    }
    fn validate_update(&self, _: &ConfigMap, _: &ConfigMap) -> Result<Vec<String>, String> {
        Ok(vec![])
    }
}

/// Writes files (named pipes) when dropped, in any order the reader opens them, and
/// waits (boundedly) until they were read.
struct WriteOnDrop(Vec<(std::path::PathBuf, String)>);

impl Drop for WriteOnDrop {
    fn drop(&mut self) {
        let (done, written) = std::sync::mpsc::channel();
        let n = self.0.len();
        for (path, content) in self.0.drain(..) {
            let done = done.clone();
            std::thread::spawn(move || {
                let _ = std::fs::write(path, content);
                let _ = done.send(());
            });
        }
        for _ in 0..n {
            if written.recv_timeout(common::WAIT).is_err() {
                return;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_the_webhook_server_to_listen() {
    use opkit::webhook::{CERT_FILE, DevCerts, KEY_FILE, WebhookServer};
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let mgr = Manager::new(env.client(), ManagerOptions { health_addr: local(), ..Default::default() });
    // The certificate files are named pipes: the server cannot load them, and so cannot
    // listen, until the test writes them.
    let certs = tempfile::tempdir().expect("tempdir");
    for file in [CERT_FILE, KEY_FILE] {
        let status = std::process::Command::new("mkfifo").arg(certs.path().join(file)).status().expect("mkfifo");
        assert!(status.success(), "mkfifo failed");
    }
    // Written when dropped, also when an assertion fails, so the server's blocked read
    // ends and the test fails instead of hanging.
    let dev = DevCerts::generate(&["localhost".into()]).expect("certs");
    let certificates = WriteOnDrop(vec![
        (certs.path().join(CERT_FILE), dev.cert_pem.clone()),
        (certs.path().join(KEY_FILE), dev.key_pem.clone()),
    ]);
    let server = WebhookServer::new()
        .bind("127.0.0.1:0".parse().expect("addr"))
        .cert_dir(certs.path().to_path_buf())
        .validating::<ConfigMap, _>("/validate", AllowAll);
    let status = mgr.add_webhook_server(server).expect("add webhook server");
    assert!(
        matches!(mgr.add_webhook_server(WebhookServer::new()), Ok(s) if !s.is_listening()),
        "a server without handlers is accepted but not started"
    );
    let handle = mgr.clone();
    let token = CancellationToken::new();
    let run = tokio::spawn(mgr.run_until(token.clone()));
    let health = eventually("the probes to be served", || async { handle.bound_addresses().1 }).await;
    eventually("the informers check to pass", || async {
        (http_get(health, "/readyz/informers").await.0 == 200).then_some(())
    })
    .await;
    let (code, body) = http_get(health, "/readyz?verbose").await;
    assert_eq!(code, 500, "ready before the webhook server listens: {body}");
    assert!(body.contains("webhook"), "{body}");
    assert!(!status.is_listening());

    drop(certificates);
    eventually("readyz to pass", || async { (http_get(health, "/readyz").await.0 == 200).then_some(()) }).await;
    let addr = status.addr().expect("listening");
    tokio::net::TcpStream::connect(addr).await.expect("the webhook server accepts connections");
    token.cancel();
    run.await.expect("join").expect("clean shutdown");
}

/// The manager flags of an operator started with `args`.
#[derive(clap::Parser)]
struct OperatorFlags {
    #[command(flatten)]
    manager: opkit::ManagerArgs,
}

#[tokio::test]
async fn kubeconfig_and_context_flags_choose_the_cluster() {
    let bare = || TestEnv::builder().without_controllers().start();
    let (a, b) = (bare().await.expect("env a"), bare().await.expect("env b"));
    let dir = tempfile::tempdir().expect("tempdir");
    let (path_a, path_b) = (dir.path().join("a"), dir.path().join("b"));
    a.server().write_kubeconfig(&path_a, "a").expect("kubeconfig a");
    b.server().write_kubeconfig(&path_b, "b").expect("kubeconfig b");
    // One kubeconfig with both clusters, `a` current.
    let read = |p: &std::path::Path| kube::config::Kubeconfig::read_from(p).expect("read");
    let merged = read(&path_a).merge(read(&path_b)).expect("merge");
    let both = dir.path().join("both");
    std::fs::write(&both, serde_json::to_vec(&merged).expect("json")).expect("write");

    let client_for = |extra: &[&str]| {
        let mut args = vec!["op".to_string(), "--kubeconfig".into(), both.display().to_string()];
        args.extend(extra.iter().map(|s| s.to_string()));
        async move {
            let flags = <OperatorFlags as clap::Parser>::parse_from(args);
            flags.manager.client().await.expect("client")
        }
    };
    configmap(&Api::namespaced(client_for(&["--context", "b"]).await, "default"), "chosen-b", &[]).await;
    configmap(&Api::namespaced(client_for(&[]).await, "default"), "current-a", &[]).await;
    let (in_a, in_b) = (configmap_names(&a).await, configmap_names(&b).await);
    assert!(in_b.contains(&"chosen-b".to_string()) && !in_a.contains(&"chosen-b".to_string()), "a {in_a:?} b {in_b:?}");
    assert!(
        in_a.contains(&"current-a".to_string()) && !in_b.contains(&"current-a".to_string()),
        "a {in_a:?} b {in_b:?}"
    );
}

async fn configmap_names(env: &TestEnv) -> Vec<String> {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    api.list(&Default::default()).await.expect("list").items.into_iter().filter_map(|c| c.metadata.name).collect()
}

/// The operator's ServiceAccount may list and watch ConfigMaps (its primary kind), not the
/// Secrets its controller owns.
const CONFIGMAPS_ONLY: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: configmaps-only
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: configmaps-only
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: configmaps-only}
subjects:
- {kind: ServiceAccount, name: operator, namespace: default}
"#;

#[tokio::test]
async fn a_controller_whose_cache_rbac_refuses_stops_the_manager_naming_the_kind_and_rule() {
    use k8s_openapi::api::core::v1::Secret;
    let env = env_without_root_ca().await;
    env.apply_yaml(CONFIGMAPS_ONLY).await.expect("rbac");
    let operator = env.service_account_client("default", "operator").await.expect("client");
    let mgr = Manager::new(operator, ManagerOptions::default());
    Controller::new(&mgr, |_: Context<ConfigMap>| async { Ok::<_, ReconcileError>(Action::done()) })
        .owns::<Secret>()
        .build()
        .expect("controller");
    // Well inside the 2-minute cache sync timeout, which is how it failed before.
    let stopped = tokio::time::timeout(Duration::from_secs(60), mgr.run_until(CancellationToken::new()))
        .await
        .expect("the manager stops on its own when a cache is refused");
    let err = stopped.expect_err("the controller fails").to_string();
    assert!(err.contains("the cache of Secret cannot sync"), "{err}");
    assert!(
        err.contains(
            r#"secrets is forbidden: User "system:serviceaccount:default:operator" cannot list resource "secrets""#
        ),
        "kube's message: {err}"
    );
}
