//! The cluster scale benchmark (`opkit-bench cluster`): 1,000 Deployments of 10 replicas
//! (10,000 pods) created at once on the local control plane — the API server and the
//! cluster controllers (deployment, replicaset, scheduler, simulated nodes and kubelets,
//! ...) in one child process, as `opkit cluster start` runs them, with in-memory storage.
//!
//! The bench process waits for the simulated nodes to be Ready, then creates the
//! Deployments from a few connections while it watches Pods and Deployments, and
//! measures from the first create request:
//! - when the last Deployment reported available (`availableReplicas` equal to
//!   `spec.replicas` and the `Available` condition true);
//! - pods started per second: pods over the time until the last pod was Running and
//!   Ready, and the peak number that became Ready within one second;
//! - the server process's peak resident memory (VmHWM).
//!
//! Every wait is bounded and all traffic goes to 127.0.0.1.
//!
//! # Layout
//! - [`watch`]: following Pods and Deployments and recording when each got where.
//! - [`report`]: the report, targets and rendering.

pub mod report;
pub mod watch;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::BenchError;
use crate::client::{Endpoint, call};
use crate::fixtures::ensure_namespace;
use crate::load::{MakeRequest, Phase, PhaseOutcome, run_phase};
use crate::report::Machine;
use crate::serve::{Backend, ControllerSettings, ProcMemory, ServerProcess};
use crate::stats::PhaseStats;
pub use report::{ClusterReport, render_text};
use report::{PodRate, ServerMemory, Timeline};
use watch::{Kind, PodTimes, Progress, Tracker};

/// The namespace of the benchmark's Deployments.
pub const NAMESPACE: &str = "bench-cluster";
/// How often progress is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);
/// How often the node list is polled while the nodes register.
const NODE_POLL: Duration = Duration::from_millis(100);

/// Sizes and limits of the cluster benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterWorkload {
    /// Deployments created.
    pub deployments: usize,
    /// Replicas of each.
    pub replicas: usize,
    /// Simulated nodes (at most 110 pods each).
    pub nodes: usize,
    /// How long a scheduled pod stays Pending before it starts, in milliseconds.
    pub pod_start_delay_ms: u64,
    /// How long a started pod takes to become Ready, in milliseconds.
    pub pod_ready_delay_ms: u64,
    /// Concurrent Deployment create requests.
    pub create_concurrency: usize,
    /// Wall-time limit from the first create, in seconds.
    pub limit_secs: u64,
}

impl ClusterWorkload {
    /// The full benchmark: 1,000 Deployments × 10 replicas on 100 nodes.
    pub fn full() -> ClusterWorkload {
        ClusterWorkload {
            deployments: 1_000,
            replicas: 10,
            nodes: 100,
            pod_start_delay_ms: 0,
            pod_ready_delay_ms: 0,
            create_concurrency: 8,
            limit_secs: 600,
        }
    }

    /// A tenth of it: 100 Deployments × 10 replicas on 10 nodes.
    pub fn quick() -> ClusterWorkload {
        ClusterWorkload { deployments: 100, nodes: 10, limit_secs: 300, ..Self::full() }
    }

    /// A smoke test: 5 Deployments × 2 replicas on 2 nodes.
    pub fn tiny() -> ClusterWorkload {
        ClusterWorkload { deployments: 5, replicas: 2, nodes: 2, create_concurrency: 2, limit_secs: 60, ..Self::full() }
    }

    /// Pods expected.
    pub fn pods(&self) -> usize {
        self.deployments * self.replicas
    }

    /// The fewest nodes that hold every pod (110 pods per node).
    pub fn min_nodes(&self) -> usize {
        self.pods().div_ceil(110).max(1)
    }
}

/// How to run the cluster benchmark.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Sizes and limits.
    pub workload: ClusterWorkload,
    /// The `opkit-bench` binary (its hidden `serve` command runs the control plane).
    pub exe: PathBuf,
    /// Print progress on stderr.
    pub progress: bool,
}

fn progress(opts: &ClusterOptions, msg: &str) {
    if opts.progress {
        eprintln!("[opkit-bench] {msg}");
    }
}

/// The request body of Deployment number `i`.
pub fn deployment(i: usize, replicas: usize) -> Bytes {
    let name = format!("d-{i:05}");
    Bytes::from(
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/part-of": "opkit-bench"}},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
                },
            },
        })
        .to_string(),
    )
}

#[derive(Deserialize)]
struct NodeList {
    #[serde(default)]
    items: Vec<NodeItem>,
}

#[derive(Deserialize)]
struct NodeItem {
    #[serde(default)]
    status: Option<NodeStatus>,
}

#[derive(Deserialize)]
struct NodeStatus {
    #[serde(default)]
    conditions: Vec<NodeCondition>,
}

#[derive(Deserialize)]
struct NodeCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

/// Ready nodes, from one list.
async fn ready_nodes(ep: &Endpoint) -> Result<usize, BenchError> {
    let body = call(ep, Method::GET, "/api/v1/nodes", Bytes::new()).await?;
    let list: NodeList = serde_json::from_slice(&body).map_err(|e| BenchError::Setup(format!("node list: {e}")))?;
    Ok(list
        .items
        .iter()
        .filter(|n| n.status.iter().flat_map(|s| &s.conditions).any(|c| c.type_ == "Ready" && c.status == "True"))
        .count())
}

/// Waits until `want` nodes are Ready, within `limit`.
async fn wait_for_nodes(ep: &Endpoint, want: usize, limit: Duration) -> Result<(), BenchError> {
    let deadline = Instant::now() + limit;
    loop {
        let n = ready_nodes(ep).await?;
        if n >= want {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Setup(format!("only {n} of {want} nodes became Ready within {limit:?}")));
        }
        tokio::time::sleep(NODE_POLL).await;
    }
}

/// Runs the cluster benchmark once: start the control plane, create the Deployments,
/// wait until they are available, then summarise what the watches saw.
pub async fn run(opts: &ClusterOptions) -> Result<ClusterReport, BenchError> {
    let w = &opts.workload;
    check_node_count(w)?;
    let plane = start_control_plane(opts).await?;
    let ep = plane.server.endpoint()?;

    let tracker = Arc::new(Tracker::default());
    let stop = CancellationToken::new();
    for kind in [Kind::Pods, Kind::Deployments] {
        tokio::spawn(watch::follow(ep.clone(), kind, NAMESPACE.to_string(), tracker.clone(), stop.clone()));
    }

    let creates = create_deployments(opts, &ep).await?;
    // run_phase opens its connections first and times from its first request: the run's
    // clock starts there too.
    let t0 = Instant::now().checked_sub(Duration::from_secs_f64(creates.stats.seconds)).unwrap_or_else(Instant::now);
    let timed_out = wait_until_available(opts, &tracker, t0).await;
    stop.cancel();
    let end = plane.server.memory()?;
    let server_startup_ms = plane.server.info.startup_ms;
    plane.server.stop().await;

    let p = tracker.progress.lock();
    let clock = RunClock { t0 };
    let pods = pod_rate(w, &p, clock);
    let timeline = timeline(w, &p, clock, creates.stats.seconds);
    let failures = failures(w, &creates.stats, timed_out, &p, &pods);
    let mut report = ClusterReport {
        machine: Machine::detect(),
        workload: w.clone(),
        backend: Backend::Memory.to_string(),
        server_startup_ms,
        nodes_ready_secs: plane.nodes_ready_secs,
        creates: creates.stats,
        deployments_available: p.available.len(),
        timeline,
        pods,
        memory: ServerMemory {
            rss_idle_bytes: plane.idle.rss_bytes,
            rss_end_bytes: end.rss_bytes,
            hwm_bytes: end.hwm_bytes,
        },
        watch_events: p.events,
        timed_out,
        failures,
        targets: Vec::new(),
    };
    report.targets = report::targets(&report);
    Ok(report)
}

/// Refuses a workload whose pods do not fit on its nodes.
fn check_node_count(w: &ClusterWorkload) -> Result<(), BenchError> {
    if w.nodes < w.min_nodes() {
        return Err(BenchError::Setup(format!(
            "{} pods need at least {} nodes (110 pods each), not {}",
            w.pods(),
            w.min_nodes(),
            w.nodes
        )));
    }
    Ok(())
}

/// The control plane once its nodes are Ready and the namespace exists.
struct StartedPlane {
    /// The child process running the API server and controllers.
    server: ServerProcess,
    /// Seconds from spawning the process until every node was Ready.
    nodes_ready_secs: f64,
    /// The server's memory before any Deployment was created.
    idle: ProcMemory,
}

/// Spawns the control plane, waits for its nodes and creates the benchmark namespace.
async fn start_control_plane(opts: &ClusterOptions) -> Result<StartedPlane, BenchError> {
    let w = &opts.workload;
    let settings = ControllerSettings {
        nodes: w.nodes,
        pod_start_delay_ms: w.pod_start_delay_ms,
        pod_ready_delay_ms: w.pod_ready_delay_ms,
    };
    progress(opts, &format!("starting the control plane with {} simulated nodes", w.nodes));
    let spawned = Instant::now();
    let server = ServerProcess::spawn_with(&opts.exe, Backend::Memory, None, Some(settings)).await?;
    let ep = server.endpoint()?;
    wait_for_nodes(&ep, w.nodes, Duration::from_secs(120)).await?;
    let nodes_ready_secs = spawned.elapsed().as_secs_f64();
    ensure_namespace(&ep, NAMESPACE).await?;
    let idle = server.memory()?;
    Ok(StartedPlane { server, nodes_ready_secs, idle })
}

/// The measured phase: creates every Deployment from a few connections.
async fn create_deployments(opts: &ClusterOptions, ep: &Endpoint) -> Result<PhaseOutcome, BenchError> {
    let w = &opts.workload;
    progress(opts, &format!("creating {} Deployments × {} replicas", w.deployments, w.replicas));
    let path = format!("/apis/apps/v1/namespaces/{NAMESPACE}/deployments");
    let (ep2, replicas) = (ep.clone(), w.replicas);
    let make: MakeRequest = Arc::new(move |i| ep2.request(Method::POST, &path, deployment(i, replicas)));
    let limit = Duration::from_secs(w.limit_secs);
    let phase = Phase { op: "create".into(), concurrency: w.create_concurrency, total: w.deployments, limit };
    run_phase(ep, &phase, make).await
}

/// Waits until every Deployment is available or the time limit from `t0` passes, printing
/// progress on the way. Returns whether the limit was hit.
async fn wait_until_available(opts: &ClusterOptions, tracker: &Tracker, t0: Instant) -> bool {
    let w = &opts.workload;
    let deadline = t0 + Duration::from_secs(w.limit_secs);
    let mut last_print = Instant::now();
    loop {
        let notified = tracker.changed.notified();
        let (available, ready, seen) = {
            let p = tracker.progress.lock();
            (p.available.len(), p.ready_now, p.pods.len())
        };
        if available >= w.deployments {
            return false;
        }
        if Instant::now() >= deadline {
            return true;
        }
        if opts.progress && last_print.elapsed() >= PROGRESS_EVERY {
            last_print = Instant::now();
            progress(
                opts,
                &format!(
                    "{:.0} s: {seen} pods created, {ready} Running+Ready, {available} of {} Deployments available",
                    t0.elapsed().as_secs_f64(),
                    w.deployments
                ),
            );
        }
        let _ = tokio::time::timeout(Duration::from_millis(500), notified).await;
    }
}

/// The run's clock: instants as seconds since the first create request.
#[derive(Clone, Copy)]
struct RunClock {
    /// The first create request.
    t0: Instant,
}

impl RunClock {
    /// Seconds from the first create to `t` (zero if before).
    fn since(self, t: Instant) -> f64 {
        t.saturating_duration_since(self.t0).as_secs_f64()
    }

    /// The latest of one recorded instant over all pods, in seconds.
    fn last_pod(self, p: &Progress, f: impl Fn(&PodTimes) -> Option<Instant>) -> Option<f64> {
        p.pods.values().filter_map(f).max().map(|t| self.since(t))
    }
}

/// How fast pods got Running and Ready: the average and the per-second histogram.
fn pod_rate(w: &ClusterWorkload, p: &Progress, clock: RunClock) -> PodRate {
    let ready_times: Vec<f64> = p.pods.values().filter_map(|t| t.ready).map(|t| clock.since(t)).collect();
    let mut per_second = vec![0usize; ready_times.iter().map(|s| *s as usize + 1).max().unwrap_or(0)];
    for s in &ready_times {
        if let Some(b) = per_second.get_mut(*s as usize) {
            *b += 1;
        }
    }
    let last_ready = clock.last_pod(p, |t| t.ready);
    PodRate {
        expected: w.pods(),
        created: p.pods.len(),
        bound: p.pods.values().filter(|t| t.bound.is_some()).count(),
        ready: ready_times.len(),
        average_per_sec: last_ready.filter(|s| *s > 0.0).map_or(0.0, |s| ready_times.len() as f64 / s),
        peak_per_sec: per_second.iter().copied().max().unwrap_or(0),
        per_second,
    }
}

/// When the run passed each milestone, in seconds from the first create.
fn timeline(w: &ClusterWorkload, p: &Progress, clock: RunClock, created_secs: f64) -> Timeline {
    Timeline {
        deployments_created_secs: created_secs,
        last_pod_created_secs: clock.last_pod(p, |t| Some(t.seen)),
        last_pod_bound_secs: clock.last_pod(p, |t| t.bound),
        last_pod_ready_secs: clock.last_pod(p, |t| t.ready),
        all_available_secs: (p.available.len() >= w.deployments)
            .then(|| p.available.values().max().map(|t| clock.since(*t)))
            .flatten(),
    }
}

/// What went wrong: failed creates and a hit time limit.
fn failures(w: &ClusterWorkload, creates: &PhaseStats, timed_out: bool, p: &Progress, pods: &PodRate) -> Vec<String> {
    let mut failures = Vec::new();
    if creates.errors > 0 {
        failures.push(format!(
            "{} Deployment creates failed; first: {}",
            creates.errors,
            creates.first_error.as_deref().unwrap_or("-")
        ));
    }
    if timed_out {
        failures.push(format!(
            "time limit: {} of {} Deployments available, {} of {} pods Ready after {} s",
            p.available.len(),
            w.deployments,
            pods.ready,
            pods.expected,
            w.limit_secs
        ));
    }
    failures
}
