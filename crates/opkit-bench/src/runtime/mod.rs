//! The controller runtime benchmark (`opkit-bench runtime`): the same trivial ConfigMap
//! reconciler under an `opkit` manager and under a bare `kube::runtime::Controller`,
//! against a fresh in-memory API server child process for every run.
//!
//! - **backlog**: N objects (1,000 and 10,000) exist before the controller starts;
//!   throughput is N over the time from the controller's start to the end of the last
//!   object's first reconcile, latency is from that start to each object's first
//!   reconcile ending.
//! - **live**: the controller runs (and has reconciled a warm-up object) while N objects
//!   are created; latency is from each create request being sent to the end of that
//!   object's first reconcile.
//! - **memory**: a child process (hidden `runtime-manager` command) runs only an opkit
//!   manager caching 10,000 ConfigMaps of ~1 KB; its VmRSS/VmHWM are read from `/proc`.
//!   The same with a bare kube::runtime::Controller in the child is the baseline.
//!
//! Runtimes alternate order between repeats; the report gives medians and opkit/kube
//! ratios. Every wait is bounded and all traffic goes to 127.0.0.1.
//!
//! # Layout
//! - [`cluster`]: the server child process, the kube client, filling the namespace.
//! - [`recorder`]: what the reconciler records, and the per-run statistics.
//! - [`drivers`]: the opkit and kube::runtime controllers.
//! - [`manager_proc`]: the memory child process.
//! - [`report`]: the report, targets and rendering.

pub mod cluster;
pub mod drivers;
pub mod manager_proc;
pub mod recorder;
pub mod report;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::BenchError;
use crate::fixtures::configmap;
use crate::report::Machine;
use cluster::{Cluster, NAMESPACE, create_objects};
use drivers::Runtime;
use manager_proc::ManagerMemory;
use recorder::{RunStats, WARMUP_NAME};
pub use report::{RuntimeReport, render_text};
use report::{Scenario, ScenarioResult, Summary};

/// Sizes and limits of the runtime benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeWorkload {
    /// Backlog sizes (objects created before the controller starts).
    pub backlog_objects: Vec<usize>,
    /// Objects created while the controller runs (0: skip the live scenario).
    pub live_objects: usize,
    /// Concurrent create requests in the live scenario.
    pub live_create_concurrency: usize,
    /// Runs per scenario, size and runtime.
    pub repeats: usize,
    /// Concurrent reconciles of both controllers.
    pub concurrency: usize,
    /// Approximate size of one ConfigMap request body, in bytes.
    pub payload_bytes: usize,
    /// Concurrent create requests when filling a backlog.
    pub fill_concurrency: usize,
    /// Objects the memory child caches (0: skip).
    pub memory_objects: usize,
    /// Wall-time limit of each fill and each wait for reconciles, in seconds.
    pub run_limit_secs: u64,
}

impl RuntimeWorkload {
    /// The full benchmark: backlogs of 1,000 and 10,000, 1,000 live creates, 5 repeats,
    /// memory with 10,000 objects (about 20 seconds in release on 2 cores).
    pub fn full() -> RuntimeWorkload {
        RuntimeWorkload {
            backlog_objects: vec![1_000, 10_000],
            live_objects: 1_000,
            live_create_concurrency: 4,
            repeats: 5,
            concurrency: 16,
            payload_bytes: 1_024,
            fill_concurrency: 16,
            memory_objects: 10_000,
            run_limit_secs: 120,
        }
    }

    /// The same shape with one run per row.
    pub fn quick() -> RuntimeWorkload {
        RuntimeWorkload { repeats: 1, live_objects: 500, ..RuntimeWorkload::full() }
    }

    /// A seconds-long run on tiny numbers (the smoke test).
    pub fn tiny() -> RuntimeWorkload {
        RuntimeWorkload {
            backlog_objects: vec![30],
            live_objects: 10,
            live_create_concurrency: 2,
            repeats: 1,
            concurrency: 4,
            fill_concurrency: 4,
            memory_objects: 40,
            run_limit_secs: 60,
            ..RuntimeWorkload::full()
        }
    }
}

/// How to run the runtime benchmark.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// Workload sizes.
    pub workload: RuntimeWorkload,
    /// The executable whose hidden `serve` and `runtime-manager` commands run the server
    /// and the memory child (normally this one).
    pub exe: PathBuf,
    /// Print progress to stderr.
    pub progress: bool,
}

fn progress(opts: &RuntimeOptions, msg: &str) {
    if opts.progress {
        eprintln!("[opkit-bench] runtime: {msg}");
    }
}

/// One run on a fresh server; the controller's stop error, if any, comes back as a note.
async fn one_run(
    opts: &RuntimeOptions,
    scenario: Scenario,
    runtime: Runtime,
    n: usize,
) -> Result<(RunStats, Option<String>), BenchError> {
    let w = &opts.workload;
    let limit = Duration::from_secs(w.run_limit_secs);
    let cluster = Cluster::start(&opts.exe).await?;
    let result = async {
        let ep = &cluster.endpoint;
        let rec = Arc::new(recorder::Recorder::new(n));
        match scenario {
            Scenario::Backlog => {
                create_objects(ep, n, w.payload_bytes, w.fill_concurrency, limit, None).await?;
                let client = cluster.client()?;
                let start = rec.stamp();
                rec.set_trigger_all(start);
                let running = drivers::start(runtime, client, w.concurrency, rec.clone());
                let all = rec.wait_all(limit).await;
                let stats = rec.stats(start, !all);
                Ok((stats, running.stop().await))
            }
            Scenario::Live => {
                let running = drivers::start(runtime, cluster.client()?, w.concurrency, rec.clone());
                let warm = async {
                    let mut c = ep.connect().await?;
                    let body = configmap(NAMESPACE, WARMUP_NAME, 100, 0);
                    let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
                    let (status, _) = c.send(ep.request(http::Method::POST, &path, body)).await?;
                    if !status.is_success() {
                        return Err(BenchError::Setup(format!("creating the warm-up object: HTTP {status}")));
                    }
                    if !rec.wait_warm(limit).await {
                        return Err(BenchError::Setup("the warm-up object was not reconciled in time".into()));
                    }
                    let start = rec.stamp();
                    let r2 = rec.clone();
                    let trigger: Arc<dyn Fn(usize) + Send + Sync> = Arc::new(move |i| r2.trigger(i));
                    create_objects(ep, n, w.payload_bytes, w.live_create_concurrency, limit, Some(trigger)).await?;
                    let all = rec.wait_all(limit).await;
                    Ok(rec.stats(start, !all))
                }
                .await;
                let note = running.stop().await;
                Ok((warm?, note))
            }
        }
    }
    .await;
    cluster.stop().await;
    result
}

async fn memory(opts: &RuntimeOptions, runtime: Runtime) -> Result<ManagerMemory, BenchError> {
    let w = &opts.workload;
    let limit = Duration::from_secs(w.run_limit_secs);
    let cluster = Cluster::start(&opts.exe).await?;
    let result = async {
        let filled =
            create_objects(&cluster.endpoint, w.memory_objects, w.payload_bytes, w.fill_concurrency, limit, None)
                .await?;
        let (ready, mem) =
            manager_proc::measure(&opts.exe, runtime, &cluster.server.info, w.memory_objects, w.concurrency, limit)
                .await?;
        Ok(ManagerMemory {
            runtime,
            objects: w.memory_objects,
            payload_bytes: w.payload_bytes,
            json_bytes: filled.json_bytes,
            reconciled: ready.reconciled,
            synced: ready.synced,
            sync_seconds: ready.seconds,
            rss_before_bytes: ready.rss_before_bytes,
            rss_bytes: mem.rss_bytes,
            hwm_bytes: mem.hwm_bytes,
        })
    }
    .await;
    cluster.stop().await;
    result
}

/// Runs the whole runtime benchmark. Failed runs are listed in the report's `failures`.
pub async fn run(opts: &RuntimeOptions) -> Result<RuntimeReport, BenchError> {
    let w = &opts.workload;
    let mut plan: Vec<(Scenario, usize)> = w.backlog_objects.iter().map(|&n| (Scenario::Backlog, n)).collect();
    if w.live_objects > 0 {
        plan.push((Scenario::Live, w.live_objects));
    }
    let mut results: Vec<ScenarioResult> = Vec::new();
    for &(scenario, objects) in &plan {
        for runtime in [Runtime::Opkit, Runtime::Kube] {
            results.push(ScenarioResult { scenario, runtime, objects, runs: Vec::new(), summary: Summary::default() });
        }
    }
    let mut failures = Vec::new();
    for rep in 0..w.repeats.max(1) {
        let order = if rep % 2 == 0 { [Runtime::Opkit, Runtime::Kube] } else { [Runtime::Kube, Runtime::Opkit] };
        for &(scenario, objects) in &plan {
            for runtime in order {
                let what = format!("{scenario:?} {objects} {runtime} (run {}/{})", rep + 1, w.repeats.max(1));
                progress(opts, &what);
                match one_run(opts, scenario, runtime, objects).await {
                    Ok((stats, note)) => {
                        if stats.timed_out {
                            failures.push(format!("{what}: only {} of {objects} reconciled in time", stats.reconciled));
                        }
                        if let Some(n) = note {
                            failures.push(format!("{what}: {n}"));
                        }
                        let slot = results
                            .iter_mut()
                            .find(|r| r.scenario == scenario && r.runtime == runtime && r.objects == objects);
                        if let Some(slot) = slot {
                            slot.runs.push(stats);
                        }
                    }
                    Err(e) => failures.push(format!("{what}: {e}")),
                }
            }
        }
    }
    for r in &mut results {
        r.summary = Summary::of(&r.runs);
    }
    let mut memories = Vec::new();
    if w.memory_objects > 0 {
        for runtime in [Runtime::Opkit, Runtime::Kube] {
            progress(opts, &format!("{runtime} process memory with {} objects", w.memory_objects));
            match memory(opts, runtime).await {
                Ok(m) => memories.push(m),
                Err(e) => failures.push(format!("memory ({runtime}): {e}")),
            }
        }
    }
    let mut report = RuntimeReport {
        machine: Machine::detect(),
        workload: w.clone(),
        ratios: report::ratios(&results),
        results,
        memory: memories,
        failures,
        targets: Vec::new(),
    };
    report.targets = report::targets(&report);
    Ok(report)
}
