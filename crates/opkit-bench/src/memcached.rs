//! The Memcached operator benchmark (`opkit-bench memcached`): the sample operator
//! (`examples/memcached-operator`) against a local control plane, end to end.
//!
//! Every run starts fresh:
//! - the control plane **in this process**: an `opkit_testenv::TestEnv` (in-memory API
//!   server plus the cluster controllers — deployments, replica sets, scheduler, simulated
//!   nodes and kubelets) with `--nodes` nodes of 110 pods each;
//! - the Memcached CRD installed, then the operator **in a child process** (the hidden
//!   `memcached-operator` command, [`operator`]) running `memcached_operator::controller::
//!   setup` in an opkit manager with `/metrics` on a random loopback port; the clock
//!   starts only once its caches are synced;
//! - a watch on Memcached objects, then `--crs` Memcached CRs of `--size` created at once
//!   (all requests concurrently).
//!
//! Measured: the time from the first create until every CR's `status.nodes` lists `size`
//! pod names (seen on the watch, no polling), the operator process's VmRSS and VmHWM from
//! `/proc/PID/status` at that moment, and the memcached controller's reconciles
//! (`controller_runtime_reconcile_total{controller="memcached"}` scraped from its
//! `/metrics`, by result) per CR. Every wait is bounded; all traffic stays on loopback.
//!
//! # Layout
//! - [`operator`]: the operator child process and the parent's handle on it.
//! - [`metrics`]: scraping and parsing the reconcile counters.
//! - [`tracker`]: which CRs are done, and when.
//! - [`report`]: the report and its rendering.

pub mod metrics;
pub mod operator;
pub mod report;
pub mod tracker;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use memcached_operator::api::cache_v1alpha1::{Memcached, MemcachedSpec};
use opkit_controllers::ControllersConfig;
use opkit_testenv::TestEnv;
use serde::Serialize;

use crate::BenchError;
use crate::report::Machine;
use operator::OperatorProcess;
pub use report::{MemcachedReport, render_text};
use report::{MemcachedRun, MemcachedSummary, OperatorMemory};
use tracker::{Tracker, cr_name};

/// The namespace the benchmark CRs live in.
pub const NAMESPACE: &str = "bench-memcached";
/// Pods one simulated node takes (kubelet's default `maxPods`).
pub const PODS_PER_NODE: usize = 110;
/// The sizes the Memcached CRD accepts.
pub const SIZE_RANGE: std::ops::RangeInclusive<usize> = 1..=5;

/// Sizes and limits of the Memcached benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct MemcachedWorkload {
    /// Memcached CRs created at once.
    pub crs: usize,
    /// `spec.size` of each (pods per CR).
    pub size: usize,
    /// Simulated nodes of the control plane.
    pub nodes: usize,
    /// Runs, each on a fresh control plane and operator.
    pub repeats: usize,
    /// Limit of the wait for every CR to be done, in seconds.
    pub run_limit_secs: u64,
}

impl MemcachedWorkload {
    /// The full benchmark: 100 CRs of size 3 (300 pods) on 5 nodes, 3 runs.
    pub fn full() -> MemcachedWorkload {
        MemcachedWorkload { crs: 100, size: 3, nodes: 5, repeats: 3, run_limit_secs: 300 }
    }

    /// A seconds-long run: 5 CRs of size 1 on one node, once (the smoke test).
    pub fn tiny() -> MemcachedWorkload {
        MemcachedWorkload { crs: 5, size: 1, nodes: 1, repeats: 1, run_limit_secs: 60 }
    }

    /// Checks that the CRs are valid and their pods fit on the nodes.
    pub fn check(&self) -> Result<(), BenchError> {
        if self.crs == 0 || self.nodes == 0 || self.repeats == 0 {
            return Err(BenchError::Setup("--crs, --nodes and --repeats must be at least 1".into()));
        }
        if !SIZE_RANGE.contains(&self.size) {
            return Err(BenchError::Setup(format!(
                "--size {} is outside what the Memcached CRD accepts ({}..={})",
                self.size,
                SIZE_RANGE.start(),
                SIZE_RANGE.end()
            )));
        }
        let pods = self.crs.saturating_mul(self.size);
        let capacity = self.nodes.saturating_mul(PODS_PER_NODE);
        if pods > capacity {
            return Err(BenchError::Setup(format!(
                "{pods} pods do not fit on {} nodes of {PODS_PER_NODE} pods; use --nodes {} or more",
                self.nodes,
                pods.div_ceil(PODS_PER_NODE)
            )));
        }
        Ok(())
    }
}

/// How to run the Memcached benchmark.
#[derive(Debug, Clone)]
pub struct MemcachedOptions {
    /// Workload sizes.
    pub workload: MemcachedWorkload,
    /// The executable whose hidden `memcached-operator` command runs the operator
    /// (normally this one).
    pub exe: PathBuf,
    /// Print progress to stderr.
    pub progress: bool,
}

fn progress(opts: &MemcachedOptions, msg: &str) {
    if opts.progress {
        eprintln!("[opkit-bench] memcached: {msg}");
    }
}

fn setup_err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> BenchError + '_ {
    move |e| BenchError::Setup(format!("{what}: {e}"))
}

/// Creates every CR at once; returns how long until every request had returned.
async fn create_all(api: Api<Memcached>, crs: usize, size: usize) -> Result<Duration, BenchError> {
    let start = Instant::now();
    let spec_size = i32::try_from(size).map_err(|_| BenchError::Setup(format!("size {size} is too large")))?;
    let creates = (0..crs).map(|i| {
        let api = api.clone();
        async move {
            let cr = Memcached::new(&cr_name(i), MemcachedSpec { size: spec_size });
            api.create(&PostParams::default(), &cr).await.map(|_| ()).map_err(|e| (i, e))
        }
    });
    let results = futures::future::join_all(creates).await;
    let failed: Vec<_> = results.into_iter().filter_map(Result::err).collect();
    if let Some((i, e)) = failed.first() {
        return Err(BenchError::Setup(format!("{} of {crs} creates failed; {}: {e}", failed.len(), cr_name(*i))));
    }
    Ok(start.elapsed())
}

/// The measurement on a running control plane and operator.
async fn measure(env: &TestEnv, op: &OperatorProcess, w: &MemcachedWorkload) -> Result<MemcachedRun, BenchError> {
    let limit = Duration::from_secs(w.run_limit_secs);
    let rss_ready_bytes = op.memory()?.rss_bytes;
    let api: Api<Memcached> = Api::namespaced(env.client(), NAMESPACE);
    let mut events = watcher(api.clone(), watcher::Config::default()).default_backoff().boxed();
    // Wait for the watch's initial (empty) list, so no status change can be missed.
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, events.next()).await {
            Ok(Some(Ok(watcher::Event::InitDone))) => break,
            Ok(Some(_)) => {}
            Ok(None) => return Err(BenchError::Setup("the Memcached watch ended".into())),
            Err(_) => return Err(BenchError::Setup("the Memcached watch did not start in time".into())),
        }
    }
    let origin = Instant::now();
    let deadline = tokio::time::Instant::from_std(origin) + limit;
    let mut tracker = Tracker::new(w.crs, w.size, origin);
    let mut creates = tokio::spawn(create_all(api, w.crs, w.size));
    let mut create_seconds = None;
    let mut nodes: HashMap<String, usize> = HashMap::new();
    while !tracker.complete() || create_seconds.is_none() {
        tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(watcher::Event::Apply(m) | watcher::Event::InitApply(m))) => {
                    let name = m.metadata.name.clone().unwrap_or_default();
                    let n = m.status.as_ref().map_or(0, |s| s.nodes.len());
                    tracker.observe(&name, n, Instant::now());
                    nodes.insert(name, n);
                }
                Some(Ok(_)) | Some(Err(_)) => {}
                None => return Err(BenchError::Setup("the Memcached watch ended".into())),
            },
            done = &mut creates, if create_seconds.is_none() => {
                let took = done.map_err(setup_err("the create task"))??;
                create_seconds = Some(took.as_secs_f64());
            }
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    let timed_out = !tracker.complete();
    let mem = op.memory()?;
    let reconciles = op.reconciles().await?;
    Ok(MemcachedRun {
        completion: tracker.stats(),
        create_seconds: create_seconds.unwrap_or(0.0),
        pods: nodes.values().sum(),
        synced: op.ready.synced,
        memory: OperatorMemory {
            rss_before_bytes: op.ready.rss_before_bytes,
            rss_ready_bytes,
            rss_bytes: mem.rss_bytes,
            hwm_bytes: mem.hwm_bytes,
        },
        reconciles_per_cr: reconciles.total as f64 / w.crs as f64,
        reconciles,
        timed_out,
    })
}

/// One run on a fresh control plane and operator.
async fn one_run(opts: &MemcachedOptions) -> Result<MemcachedRun, BenchError> {
    let w = &opts.workload;
    let controllers = ControllersConfig { nodes: w.nodes, ..ControllersConfig::default() };
    let env = TestEnv::builder().controllers(controllers).start().await.map_err(setup_err("control plane"))?;
    env.install_crds(memcached_operator::api::crds()).await.map_err(setup_err("installing the CRD"))?;
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}})).map_err(setup_err("namespace"))?;
    Api::<Namespace>::all(env.client())
        .create(&PostParams::default(), &ns)
        .await
        .map_err(setup_err("creating the namespace"))?;
    let op = OperatorProcess::spawn(&opts.exe, env.kubeconfig_path()).await?;
    progress(
        opts,
        &format!(
            "operator running (pid {}, metrics on {}); creating {} CRs",
            op.ready.pid, op.ready.metrics_addr, w.crs
        ),
    );
    let result = measure(&env, &op, w).await;
    op.stop().await;
    drop(env);
    result
}

/// Runs the whole Memcached benchmark. Failed or incomplete runs are listed in the
/// report's `failures`.
pub async fn run(opts: &MemcachedOptions) -> Result<MemcachedReport, BenchError> {
    let w = &opts.workload;
    w.check()?;
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    for i in 0..w.repeats {
        let what = format!("run {}/{}", i + 1, w.repeats);
        progress(opts, &format!("{what}: {} CRs of size {} on {} nodes", w.crs, w.size, w.nodes));
        match one_run(opts).await {
            Ok(r) => {
                if r.timed_out {
                    failures.push(format!(
                        "{what}: only {} of {} CRs had {} nodes after {} s",
                        r.completion.done, w.crs, w.size, w.run_limit_secs
                    ));
                } else {
                    progress(opts, &format!("{what}: every CR done in {:.2} s", r.completion.all_seconds));
                }
                runs.push(r);
            }
            Err(e) => failures.push(format!("{what}: {e}")),
        }
    }
    Ok(MemcachedReport {
        machine: Machine::detect(),
        workload: w.clone(),
        summary: MemcachedSummary::of(&runs),
        runs,
        failures,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_are_checked() {
        assert!(MemcachedWorkload::full().check().is_ok());
        assert!(MemcachedWorkload::tiny().check().is_ok());
        let too_big = MemcachedWorkload { size: 6, ..MemcachedWorkload::full() };
        assert!(too_big.check().is_err());
        let crowded = MemcachedWorkload { crs: 200, size: 3, nodes: 5, ..MemcachedWorkload::full() };
        let msg = crowded.check().expect_err("600 pods on 550 slots").to_string();
        assert!(msg.contains("--nodes 6"), "{msg}");
        assert!(MemcachedWorkload { crs: 0, ..MemcachedWorkload::tiny() }.check().is_err());
    }
}
