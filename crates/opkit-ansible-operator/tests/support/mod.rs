//! What the operator tests share: the check that ansible is installed, and the operator
//! run in the test's process (stopped when the test ends, also when it fails).

use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use opkit::{Manager, ManagerOptions};
use opkit_ansible_operator::LogEvents;
use opkit_ansible_operator::OperatorOptions;
use opkit_ansible_operator::parse_watches;
use opkit_testenv::TestEnv;
use tokio_util::sync::CancellationToken;

/// Fails the test, saying how to install them, when ansible-runner or kubernetes.core is missing.
pub(crate) fn require_ansible() {
    let runner = std::process::Command::new("ansible-runner").arg("--version").output();
    assert!(
        runner.as_ref().is_ok_and(|o| o.status.success()),
        "ansible-runner is not installed ({runner:?}): run crates/opkit-ansible-operator/install-ansible.sh, as .ci/run does"
    );
    let collections =
        std::process::Command::new("ansible-galaxy").args(["collection", "list", "kubernetes.core"]).output();
    assert!(
        collections.as_ref().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("kubernetes.core")),
        "the kubernetes.core collection is not installed: run crates/opkit-ansible-operator/install-ansible.sh, as .ci/run does"
    );
}

/// The operator in this process; stopped when the test ends, also when it fails.
pub(crate) struct RunningOperator {
    /// The manager's metrics registry.
    pub metrics: opkit::metrics::Metrics,
    stop: CancellationToken,
    _proxy: opkit_ansible_operator::ProxyGuard,
    _runner_dir: tempfile::TempDir,
}

impl Drop for RunningOperator {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Installs the project's CRD (`crd_file` under `project`) and runs the operator for its
/// watches.yaml in this process.
pub(crate) async fn start_operator(env: &TestEnv, project: &Path, crd_file: &str) -> RunningOperator {
    start_operator_logging(env, project, crd_file, LogEvents::Tasks).await
}

/// [`start_operator`] with `--ansible-log-events` at `log_events`.
pub(crate) async fn start_operator_logging(
    env: &TestEnv,
    project: &Path,
    crd_file: &str,
    log_events: LogEvents,
) -> RunningOperator {
    require_ansible();
    let crd: CustomResourceDefinition =
        serde_saphyr::from_str(&std::fs::read_to_string(project.join(crd_file)).expect("CRD file")).expect("CRD");
    env.install_crds([crd]).await.expect("install the CRD");
    let watches_text = std::fs::read_to_string(project.join("watches.yaml")).expect("watches.yaml");
    let watches = parse_watches(&watches_text, project, &|_| None, 2).expect("watches");
    let runner_dir = tempfile::tempdir().expect("runner dir");
    let options = OperatorOptions {
        proxy_address: "127.0.0.1:0".parse().expect("address"),
        runner_dir: runner_dir.path().to_path_buf(),
        verbosity: 0,
        log_events,
        metrics_api_address: None,
        ..OperatorOptions::default()
    };
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let proxy = opkit_ansible_operator::setup(&mgr, watches, options).await.expect("set up the operator");
    let metrics = mgr.metrics().clone();
    let stop = CancellationToken::new();
    tokio::spawn(mgr.run_until(stop.clone()));
    RunningOperator { metrics, stop, _proxy: proxy, _runner_dir: runner_dir }
}
