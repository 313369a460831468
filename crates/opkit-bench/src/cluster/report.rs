//! The cluster benchmark's report (serialized as the `-o json` output): the timeline from
//! the first create to the last Deployment available, pod start rates, the server
//! process's memory, the targets, and the human-readable rendering.

use std::fmt::Write as _;

use serde::Serialize;

use super::ClusterWorkload;
use crate::report::{Machine, TargetCheck};
use crate::stats::PhaseStats;

/// kwok's published pod start rate (pods/s), the floor the benchmark compares with.
pub const KWOK_PODS_PER_SEC: f64 = 20.0;
/// The pod start rate to reach: 10× kwok's.
pub const PODS_PER_SEC_TARGET: f64 = 10.0 * KWOK_PODS_PER_SEC;
/// The time to reach for every Deployment to be available, in seconds.
pub const ALL_AVAILABLE_TARGET_SECS: f64 = 60.0;

/// When the stages of the run ended, in seconds from the first create request.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timeline {
    /// The last Deployment create request answered.
    pub deployments_created_secs: f64,
    /// The last pod first seen (created by its ReplicaSet).
    pub last_pod_created_secs: Option<f64>,
    /// The last pod first seen bound to a node.
    pub last_pod_bound_secs: Option<f64>,
    /// The last pod first seen Running and Ready.
    pub last_pod_ready_secs: Option<f64>,
    /// The last Deployment first seen available (`None` if some never were).
    pub all_available_secs: Option<f64>,
}

/// Pods started per second.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PodRate {
    /// Pods expected (deployments × replicas).
    pub expected: usize,
    /// Pods seen created.
    pub created: usize,
    /// Pods seen bound.
    pub bound: usize,
    /// Pods seen Running and Ready.
    pub ready: usize,
    /// Ready pods over the time from the first create to the last pod Ready.
    pub average_per_sec: f64,
    /// The most pods that became Ready within one second (1-second buckets from the first
    /// create).
    pub peak_per_sec: usize,
    /// Pods that became Ready in each second from the first create.
    pub per_second: Vec<usize>,
}

/// The server process's memory (API server and controllers), in bytes.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerMemory {
    /// VmRSS once the nodes were ready, before the first create.
    pub rss_idle_bytes: u64,
    /// VmRSS at the end of the run.
    pub rss_end_bytes: u64,
    /// VmHWM (peak resident set) at the end of the run.
    pub hwm_bytes: u64,
}

/// Everything one `opkit-bench cluster` run measured.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterReport {
    /// The machine it ran on.
    pub machine: Machine,
    /// The workload used.
    pub workload: ClusterWorkload,
    /// The storage backend of the server.
    pub backend: String,
    /// `ApiServer::start` in the child, in ms.
    pub server_startup_ms: f64,
    /// From spawning the server to all nodes Ready, in seconds.
    pub nodes_ready_secs: f64,
    /// The Deployment creates.
    pub creates: PhaseStats,
    /// Deployments seen available.
    pub deployments_available: usize,
    /// When each stage ended.
    pub timeline: Timeline,
    /// Pod start rates.
    pub pods: PodRate,
    /// The server process's memory.
    pub memory: ServerMemory,
    /// Watch events the bench received.
    pub watch_events: u64,
    /// Whether the run hit its time limit before every Deployment was available.
    pub timed_out: bool,
    /// What went wrong, if anything.
    pub failures: Vec<String>,
    /// Each figure next to its target.
    pub targets: Vec<TargetCheck>,
}

/// Compares the figures with the targets.
pub fn targets(r: &ClusterReport) -> Vec<TargetCheck> {
    let w = &r.workload;
    let mut out = Vec::new();
    let avail = r.timeline.all_available_secs;
    out.push(TargetCheck {
        what: format!("all {} Deployments × {} available", w.deployments, w.replicas),
        measured: avail.map_or_else(
            || format!("not reached ({} of {})", r.deployments_available, w.deployments),
            |s| format!("{s:.1} s"),
        ),
        target: format!("<= {ALL_AVAILABLE_TARGET_SECS:.0} s"),
        met: avail.is_some_and(|s| s <= ALL_AVAILABLE_TARGET_SECS),
    });
    let complete = r.pods.ready >= r.pods.expected;
    out.push(TargetCheck {
        what: "pods started per second (average)".into(),
        measured: format!("{:.0}/s{}", r.pods.average_per_sec, if complete { "" } else { " (incomplete)" }),
        target: format!(">= {PODS_PER_SEC_TARGET:.0}/s (10x kwok's {KWOK_PODS_PER_SEC:.0}/s)"),
        met: complete && r.pods.average_per_sec >= PODS_PER_SEC_TARGET,
    });
    out
}

fn mb(b: u64) -> f64 {
    b as f64 / 1_000_000.0
}

fn secs(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |s| format!("{s:.2} s"))
}

/// Renders the report for a terminal.
pub fn render_text(r: &ClusterReport) -> String {
    let mut s = String::new();
    render_header(&mut s, r);
    let _ = writeln!(s);
    render_timeline(&mut s, r);
    let _ = writeln!(s);
    render_rates_and_failures(&mut s, r);
    let _ = writeln!(s);
    let _ = writeln!(s, "targets:");
    for t in &r.targets {
        let mark = if t.met { "ok " } else { "NOT" };
        let _ = writeln!(s, "  [{mark}] {}: {} (target {})", t.what, t.measured, t.target);
    }
    s
}

/// The machine, the workload and the start-up.
fn render_header(s: &mut String, r: &ClusterReport) {
    let w = &r.workload;
    let _ = writeln!(s, "opkit-bench cluster");
    let _ = writeln!(
        s,
        "machine: {} CPUs, {}, {:.1} GB",
        r.machine.cpus,
        r.machine.cpu_model,
        r.machine.memory_bytes as f64 / 1e9
    );
    let _ = writeln!(
        s,
        "workload: {} Deployments × {} replicas = {} pods on {} simulated nodes; pod start/ready delay {}/{} ms; \
         {} storage",
        w.deployments,
        w.replicas,
        w.deployments * w.replicas,
        w.nodes,
        w.pod_start_delay_ms,
        w.pod_ready_delay_ms,
        r.backend
    );
    let _ = writeln!(s, "server start-up {:.1} ms; nodes Ready after {:.2} s", r.server_startup_ms, r.nodes_ready_secs);
}

/// When each milestone was reached, from the first create.
fn render_timeline(s: &mut String, r: &ClusterReport) {
    let _ = writeln!(s, "timeline (from the first create):");
    let t = &r.timeline;
    let c = &r.creates;
    let _ = writeln!(
        s,
        "  Deployments created      {:>9}   ({} ok, {} errors, {:.0}/s at c={})",
        secs(Some(t.deployments_created_secs)),
        c.ok,
        c.errors,
        c.ops_per_sec,
        c.concurrency
    );
    let _ = writeln!(
        s,
        "  last pod created         {:>9}   ({} of {})",
        secs(t.last_pod_created_secs),
        r.pods.created,
        r.pods.expected
    );
    let _ = writeln!(s, "  last pod bound           {:>9}   ({})", secs(t.last_pod_bound_secs), r.pods.bound);
    let _ = writeln!(s, "  last pod Running+Ready   {:>9}   ({})", secs(t.last_pod_ready_secs), r.pods.ready);
    let _ = writeln!(
        s,
        "  all Deployments available{:>9}   ({} of {})",
        secs(t.all_available_secs),
        r.deployments_available,
        r.workload.deployments
    );
}

/// Pod start rate, server memory, watch events, then a time-out and failures.
fn render_rates_and_failures(s: &mut String, r: &ClusterReport) {
    let _ = writeln!(
        s,
        "pods started: {:.0}/s average, {}/s peak (1-second buckets)",
        r.pods.average_per_sec, r.pods.peak_per_sec
    );
    let m = &r.memory;
    let _ = writeln!(
        s,
        "server process (API server + controllers): VmHWM {:.0} MB, VmRSS {:.0} MB idle, {:.0} MB at the end",
        mb(m.hwm_bytes),
        mb(m.rss_idle_bytes),
        mb(m.rss_end_bytes)
    );
    let _ = writeln!(s, "watch events received by the bench: {}", r.watch_events);
    if r.timed_out {
        let _ = writeln!(s, "TIMED OUT after {} s", r.workload.limit_secs);
    }
    for f in &r.failures {
        let _ = writeln!(s, "failure: {f}");
    }
}
