//! The Ansible Memcached benchmark (`opkit-bench ansible`): the Memcached operator of
//! operator-sdk's Ansible tutorial (the role in `crates/opkit-ansible-operator/tests/
//! fixtures/memcached-operator`) run by the generic Ansible operator, on the same load as
//! `opkit-bench memcached --crs 50 --size 1` runs the Rust Memcached operator: `--crs`
//! Memcached CRs of `--size` created at once on a fresh in-process control plane
//! (TestEnv), the operator in this process with `--max-concurrent-reconciles`.
//!
//! Measured: the time from the first create until every CR's `Successful` condition is
//! True (seen on a watch, no polling), and so the completed reconciles per second. Every
//! wait is bounded; all traffic stays on loopback. Needs ansible
//! (`crates/opkit-ansible-operator/install-ansible.sh`).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use opkit_testenv::TestEnv;
use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::BenchError;
use crate::report::Machine;

/// The namespace the benchmark CRs live in.
pub const NAMESPACE: &str = "default";

/// How to run the Ansible benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct AnsibleOptions {
    /// Memcached CRs created at once.
    pub crs: usize,
    /// `spec.size` of each.
    pub size: usize,
    /// Runs of ansible-runner at once.
    pub max_concurrent_reconciles: usize,
    /// The Ansible project (watches.yaml, roles, config/crd).
    pub project: PathBuf,
    /// Limit of the wait for every CR to be done, in seconds.
    pub run_limit_secs: u64,
    /// Print progress to stderr.
    #[serde(skip)]
    pub progress: bool,
}

impl AnsibleOptions {
    /// 50 CRs of size 1, two runs at once.
    pub fn new(progress: bool) -> AnsibleOptions {
        AnsibleOptions {
            crs: 50,
            size: 1,
            max_concurrent_reconciles: 2,
            project: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../opkit-ansible-operator/tests/fixtures/memcached-operator"),
            run_limit_secs: 1200,
            progress,
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct AnsibleReport {
    /// The machine it ran on.
    pub machine: Machine,
    /// The workload.
    pub options: AnsibleOptions,
    /// From the first create until every CR was Successful, in seconds.
    pub seconds: f64,
    /// CRs reconciled (to Successful) per second.
    pub reconciles_per_second: f64,
}

/// Renders the report for people.
pub fn render_text(r: &AnsibleReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "opkit-bench ansible — {} CPUs ({})", r.machine.cpus, r.machine.cpu_model);
    let _ = writeln!(
        out,
        "{} Memcached CRs of size {}, {} runs at once: all Successful in {:.1} s, {:.2} reconciles/s",
        r.options.crs, r.options.size, r.options.max_concurrent_reconciles, r.seconds, r.reconciles_per_second
    );
    out
}

fn setup_err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> BenchError + '_ {
    move |e| BenchError::Setup(format!("{what}: {e}"))
}

/// Runs the benchmark once: start the operator, create the CRs, wait until every CR is
/// Successful.
pub async fn run(opts: &AnsibleOptions) -> Result<AnsibleReport, BenchError> {
    let operator = start_operator(opts).await?;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Memcached"),
        "memcacheds",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(operator.env.client(), NAMESPACE, &resource);
    let done_stream = watcher(api.clone(), watcher::Config::default()).applied_objects();
    say(opts, &format!("creating {} CRs", opts.crs));
    let start = Instant::now();
    create_crs(&api, opts).await?;
    let limit = Duration::from_secs(opts.run_limit_secs);
    tokio::time::timeout(limit, wait_all_successful(opts, done_stream, start))
        .await
        .map_err(|_| BenchError::Setup(format!("not every CR was Successful within {limit:?}")))??;
    let seconds = start.elapsed().as_secs_f64();
    Ok(AnsibleReport {
        machine: Machine::detect(),
        options: opts.clone(),
        seconds,
        reconciles_per_second: opts.crs as f64 / seconds,
    })
}

/// Prints progress on stderr when asked to.
fn say(opts: &AnsibleOptions, msg: &str) {
    if opts.progress {
        eprintln!("[opkit-bench] ansible: {msg}");
    }
}

/// The control plane and the Ansible operator running on it; dropping it stops the
/// operator and removes its runner directory.
struct RunningOperator {
    /// The in-process control plane.
    env: TestEnv,
    /// Keeps the operator's API proxy serving.
    _proxy: opkit_ansible_operator::ProxyGuard,
    /// Where ansible-runner keeps its files.
    _runner_dir: tempfile::TempDir,
    /// Cancels the manager on drop.
    _stop: DropGuard,
}

/// Starts the control plane, installs the Memcached CRD and runs the operator on it.
async fn start_operator(opts: &AnsibleOptions) -> Result<RunningOperator, BenchError> {
    let env = TestEnv::start().await.map_err(setup_err("starting the control plane"))?;
    let crd_text = std::fs::read_to_string(opts.project.join("config/crd/bases/cache.example.com_memcacheds.yaml"))
        .map_err(setup_err("reading the CRD"))?;
    let crd: CustomResourceDefinition = serde_saphyr::from_str(&crd_text).map_err(setup_err("the CRD"))?;
    env.install_crds([crd]).await.map_err(setup_err("installing the CRD"))?;
    let watches =
        opkit_ansible_operator::load_watches(&opts.project.join("watches.yaml"), opts.max_concurrent_reconciles)
            .map_err(setup_err("watches.yaml"))?;
    let runner_dir = tempfile::tempdir().map_err(setup_err("the runner directory"))?;
    let options = opkit_ansible_operator::OperatorOptions {
        proxy_address: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        runner_dir: runner_dir.path().to_path_buf(),
        verbosity: 0,
        ..opkit_ansible_operator::OperatorOptions::default()
    };
    let mgr = opkit::Manager::new(env.client(), opkit::ManagerOptions::default());
    let proxy = opkit_ansible_operator::setup(&mgr, watches, options).await.map_err(setup_err("the operator"))?;
    let stop = CancellationToken::new();
    let stop_guard = stop.clone().drop_guard();
    tokio::spawn(mgr.run_until(stop));
    Ok(RunningOperator { env, _proxy: proxy, _runner_dir: runner_dir, _stop: stop_guard })
}

/// Creates every CR at once.
async fn create_crs(api: &Api<DynamicObject>, opts: &AnsibleOptions) -> Result<(), BenchError> {
    let creates = (0..opts.crs).map(|i| {
        let api = api.clone();
        let size = opts.size;
        async move {
            let cr: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "cache.example.com/v1alpha1",
                "kind": "Memcached",
                "metadata": {"name": format!("memcached-{i:04}")},
                "spec": {"size": size},
            }))
            .map_err(setup_err("a CR"))?;
            api.create(&PostParams::default(), &cr).await.map_err(setup_err("creating a CR"))
        }
    });
    for created in futures::future::join_all(creates).await {
        created?;
    }
    Ok(())
}

/// Follows the CRs until every one has been seen with `Successful` True.
async fn wait_all_successful(
    opts: &AnsibleOptions,
    done_stream: impl Stream<Item = Result<DynamicObject, watcher::Error>>,
    start: Instant,
) -> Result<(), BenchError> {
    let mut done_stream = std::pin::pin!(done_stream);
    let mut done: HashSet<String> = HashSet::new();
    while done.len() < opts.crs {
        match done_stream.next().await {
            Some(Ok(o)) => {
                if is_successful(&o)
                    && done.insert(o.metadata.name.clone().unwrap_or_default())
                    && done.len().is_multiple_of(10)
                {
                    say(
                        opts,
                        &format!(
                            "{} of {} Successful after {:.1} s",
                            done.len(),
                            opts.crs,
                            start.elapsed().as_secs_f64()
                        ),
                    );
                }
            }
            Some(Err(e)) => return Err(BenchError::Setup(format!("the watch: {e}"))),
            None => return Err(BenchError::Setup("the watch ended".into())),
        }
    }
    Ok(())
}

/// Whether the CR's `Successful` condition is True.
fn is_successful(o: &DynamicObject) -> bool {
    o.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Successful" && c["status"] == "True"))
}
