//! How the runtime says it cannot work, on a real (in-process) API server: a manager whose
//! controller's CRD is not installed, or whose API server does not answer, stops at once
//! with a typed error naming the kind, the server and what to do; a failed reconcile is
//! logged at ERROR as controller-runtime's "Reconciler error", with the object, the
//! controller, the error's message (not kube's Debug dump) and the retry backoff. This
//! binary installs a global subscriber that captures the log.

use std::io::Write;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use opkit::{Action, Context, Controller, Manager, ManagerArgs, ManagerError, ManagerOptions, ReconcileResult};
use opkit_testenv::TestEnv;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How long a check may take; the manager's own cache sync timeout is 120 s.
const FAST: Duration = Duration::from_secs(15);

mod gadget {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// A kind whose CRD these tests never install.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(group = "missing.opkit.dev", version = "v1beta2", kind = "Gadget", namespaced)]
    pub(super) struct GadgetSpec {
        pub size: i64,
    }
}

/// The manager flags of an operator run with `args`.
#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    manager: ManagerArgs,
}

/// The manager flags `--kubeconfig <kubeconfig>`.
fn flags(kubeconfig: &std::path::Path) -> ManagerArgs {
    let args = [std::ffi::OsStr::new("op"), "--kubeconfig".as_ref(), kubeconfig.as_os_str()];
    Flags::parse_from(args).manager
}

/// A manager built as an operator's `main` builds it, from `--kubeconfig <kubeconfig>`.
async fn manager_for(kubeconfig: &std::path::Path) -> Manager {
    let config = flags(kubeconfig).config().await.expect("config");
    Manager::from_config(config, ManagerOptions::default()).expect("manager")
}

async fn done(_ctx: Context<gadget::Gadget>) -> ReconcileResult {
    Ok(Action::done())
}

#[tokio::test]
async fn a_controller_whose_crd_is_missing_stops_the_manager_at_once() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let mgr = manager_for(env.kubeconfig_path()).await;
    Controller::new(&mgr, done).build().expect("build");
    let result = tokio::time::timeout(FAST, mgr.run_until(CancellationToken::new())).await.expect("fails fast");
    let err = result.expect_err("the Gadget CRD is not installed");
    match &err {
        ManagerError::KindNotServed { controller, kind, group, version, resource, server } => {
            assert_eq!((controller.as_str(), kind.as_str()), ("gadget", "Gadget"));
            assert_eq!(
                (group.as_str(), version.as_str(), resource.as_str()),
                ("missing.opkit.dev", "v1beta2", "gadgets")
            );
            assert_eq!(
                server.as_deref().map(|s| s.trim_end_matches('/')),
                Some(env.server().url().trim_end_matches('/'))
            );
        }
        other => panic!("expected KindNotServed, got {other}"),
    }
    let message = err.to_string();
    for part in
        ["Gadget", "missing.opkit.dev/v1beta2", "gadgets", env.server().url().trim_end_matches('/'), "make install"]
    {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
}

#[tokio::test]
async fn an_unreachable_api_server_is_named_with_what_to_do() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    // A loopback port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let url = format!("https://{closed}");
    let mut config = flags(env.kubeconfig_path()).config().await.expect("config");
    config.cluster_url = url.parse().expect("url");
    let mgr = Manager::from_config(config, ManagerOptions::default()).expect("manager");
    Controller::new(&mgr, done).build().expect("build");
    let result = tokio::time::timeout(FAST, mgr.run_until(CancellationToken::new())).await.expect("fails fast");
    let err = result.expect_err("nothing listens");
    assert!(matches!(&err, ManagerError::Unreachable { server: Some(s), .. } if *s == url), "{err:?}");
    let message = err.to_string();
    for part in [url.as_str(), "is the cluster running?", "opkit cluster start", "refused"] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
}

/// The log lines written while the test runs, to wait on.
#[derive(Clone, Default)]
struct Captured {
    text: Arc<Mutex<String>>,
    changed: Arc<Notify>,
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.text.lock().push_str(&String::from_utf8_lossy(buf));
        self.changed.notify_waiters();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// The log, installed once for this binary.
    fn global() -> Captured {
        static LOG: OnceLock<Captured> = OnceLock::new();
        LOG.get_or_init(|| {
            let log = Captured::default();
            let writer = log.clone();
            tracing_subscriber::fmt()
                .with_env_filter("opkit=info")
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .init();
            log
        })
        .clone()
    }

    /// Waits for a line containing every one of `parts`; returns it.
    async fn line_with(&self, parts: &[&str]) -> String {
        let find = || self.text.lock().lines().find(|l| parts.iter().all(|p| l.contains(p))).map(String::from);
        let waiting = async {
            loop {
                let notified = self.changed.notified();
                if let Some(line) = find() {
                    return line;
                }
                notified.await;
            }
        };
        match tokio::time::timeout(FAST, waiting).await {
            Ok(line) => line,
            Err(_) => panic!("no log line with {parts:?} in:\n{}", self.text.lock()),
        }
    }
}

#[tokio::test]
async fn a_failed_reconcile_is_logged_as_reconciler_error_with_its_backoff() {
    let log = Captured::global();
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    // Reads a ConfigMap that does not exist: kube's error is an ApiError with a Status.
    Controller::new(&mgr, |ctx: Context<ConfigMap>| async move {
        let missing: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), "default");
        missing.get(&format!("{}-settings", ctx.request.name)).await?;
        Ok::<_, opkit::ReconcileError>(Action::done())
    })
    .named("settings-reader")
    .build()
    .expect("build");
    let stop = CancellationToken::new();
    let running = tokio::spawn(mgr.run_until(stop.clone()));
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("reader".into());
    cms.create(&PostParams::default(), &cm).await.expect("create");

    let first = log.line_with(&["Reconciler error", "object=default/reader", "requeue_after=5ms"]).await;
    let second = log.line_with(&["Reconciler error", "object=default/reader", "requeue_after=10ms"]).await;
    for line in [&first, &second] {
        assert!(line.contains("ERROR"), "logged at ERROR: {line}");
        assert!(line.contains("controller=settings-reader"), "names the controller: {line}");
        assert!(line.contains(r#"error=configmaps "reader-settings" not found"#), "the status message: {line}");
        assert!(!line.contains("Status {") && !line.contains("ApiError"), "no Debug dump: {line}");
    }
    stop.cancel();
    running.await.expect("join").expect("manager");
}
