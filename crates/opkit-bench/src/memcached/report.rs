//! The Memcached benchmark's report: every run (time until every CR's `status.nodes` was
//! complete, the operator process's memory, its reconcile counters), the medians over the
//! complete runs (serialized as the `-o json` output), and the human-readable rendering.

use std::fmt::Write as _;

use serde::Serialize;

use super::MemcachedWorkload;
use super::metrics::ReconcileCounts;
use super::tracker::Completion;
use crate::report::Machine;

/// The operator process's memory.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct OperatorMemory {
    /// VmRSS of the child before it built a client and a manager.
    pub rss_before_bytes: u64,
    /// VmRSS once its manager ran with synced caches, before the first create.
    pub rss_ready_bytes: u64,
    /// VmRSS once every CR was done.
    pub rss_bytes: u64,
    /// VmHWM (peak RSS) once every CR was done.
    pub hwm_bytes: u64,
}

/// One run: a fresh control plane and a fresh operator process.
#[derive(Debug, Clone, Serialize)]
pub struct MemcachedRun {
    /// When the CRs were done, from the first create.
    pub completion: Completion,
    /// From the first create until every create request had returned, in seconds.
    pub create_seconds: f64,
    /// Pod names listed in the CRs' `status.nodes` at the end (`crs * size` when complete).
    pub pods: usize,
    /// Whether the operator's caches had synced before the creates.
    pub synced: bool,
    /// The operator process's memory.
    pub memory: OperatorMemory,
    /// The memcached controller's reconcile counters at the end.
    pub reconciles: ReconcileCounts,
    /// `reconciles.total / crs`.
    pub reconciles_per_cr: f64,
    /// Whether the wait hit its time limit before every CR was done.
    pub timed_out: bool,
}

/// Medians over the complete runs (zero when none completed).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct MemcachedSummary {
    /// Runs that completed in time.
    pub complete_runs: usize,
    /// Median time until every CR was done, in seconds.
    pub all_seconds: f64,
    /// Fastest run's time until every CR was done, in seconds.
    pub min_all_seconds: f64,
    /// Slowest run's time until every CR was done, in seconds.
    pub max_all_seconds: f64,
    /// Median of the runs' median per-CR times, in seconds.
    pub p50_seconds: f64,
    /// Median of the runs' p99 per-CR times, in seconds.
    pub p99_seconds: f64,
    /// Median VmRSS at the end, in bytes.
    pub rss_bytes: u64,
    /// Median VmHWM at the end, in bytes.
    pub hwm_bytes: u64,
    /// Largest VmHWM of any complete run, in bytes.
    pub max_hwm_bytes: u64,
    /// Median reconciles per CR.
    pub reconciles_per_cr: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    crate::stats::percentile(&v, 50.0).unwrap_or(0.0)
}

impl MemcachedSummary {
    /// Summarizes the complete runs.
    pub fn of(runs: &[MemcachedRun]) -> MemcachedSummary {
        let ok: Vec<&MemcachedRun> = runs.iter().filter(|r| !r.timed_out).collect();
        if ok.is_empty() {
            return MemcachedSummary::default();
        }
        let all: Vec<f64> = ok.iter().map(|r| r.completion.all_seconds).collect();
        let med_u64 = |f: fn(&MemcachedRun) -> u64| median(ok.iter().map(|r| f(r) as f64).collect()) as u64;
        MemcachedSummary {
            complete_runs: ok.len(),
            all_seconds: median(all.clone()),
            min_all_seconds: all.iter().copied().fold(f64::INFINITY, f64::min),
            max_all_seconds: all.iter().copied().fold(0.0, f64::max),
            p50_seconds: median(ok.iter().map(|r| r.completion.p50_seconds).collect()),
            p99_seconds: median(ok.iter().map(|r| r.completion.p99_seconds).collect()),
            rss_bytes: med_u64(|r| r.memory.rss_bytes),
            hwm_bytes: med_u64(|r| r.memory.hwm_bytes),
            max_hwm_bytes: ok.iter().map(|r| r.memory.hwm_bytes).max().unwrap_or(0),
            reconciles_per_cr: median(ok.iter().map(|r| r.reconciles_per_cr).collect()),
        }
    }
}

/// Everything one `opkit-bench memcached` run measured.
#[derive(Debug, Clone, Serialize)]
pub struct MemcachedReport {
    /// The machine it ran on.
    pub machine: Machine,
    /// The workload used.
    pub workload: MemcachedWorkload,
    /// Every run, in order (failed runs are only in `failures`).
    pub runs: Vec<MemcachedRun>,
    /// Medians over the complete runs.
    pub summary: MemcachedSummary,
    /// Runs that failed or did not complete, with the reason.
    pub failures: Vec<String>,
}

fn mb(b: u64) -> String {
    format!("{:.1} MB", b as f64 / 1e6)
}

/// Renders the report for people.
pub fn render_text(r: &MemcachedReport) -> String {
    let mut out = String::new();
    let m = &r.machine;
    let w = &r.workload;
    let _ = writeln!(
        out,
        "opkit-bench memcached — {} CPUs ({}), {:.1} GiB RAM",
        m.cpus,
        m.cpu_model,
        m.memory_bytes as f64 / (1u64 << 30) as f64
    );
    let _ = writeln!(
        out,
        "{} Memcached CRs of size {} ({} pods) created at once; control plane (API server, cluster controllers, {} \
         simulated nodes) in this process, memcached-operator in a child process; fresh for every run",
        w.crs,
        w.size,
        w.crs * w.size,
        w.nodes
    );
    let _ = writeln!(
        out,
        "\n  {:>3} {:>9} {:>8} {:>8} {:>8} {:>7} {:>10} {:>10} {:>10} {:>8}  reconciles (ok/err/requeue/after)",
        "run", "all done", "p50", "p99", "creates", "pods", "VmRSS", "VmHWM", "ready RSS", "per CR"
    );
    for (i, run) in r.runs.iter().enumerate() {
        let c = &run.completion;
        let rc = &run.reconciles;
        let all =
            if run.timed_out { format!("TIMEOUT {}/{}", c.done, c.crs) } else { format!("{:.2} s", c.all_seconds) };
        let _ = writeln!(
            out,
            "  {:>3} {:>9} {:>6.2} s {:>6.2} s {:>6.2} s {:>7} {:>10} {:>10} {:>10} {:>8.2}  {}/{}/{}/{}",
            i + 1,
            all,
            c.p50_seconds,
            c.p99_seconds,
            run.create_seconds,
            run.pods,
            mb(run.memory.rss_bytes),
            mb(run.memory.hwm_bytes),
            mb(run.memory.rss_ready_bytes),
            run.reconciles_per_cr,
            rc.success,
            rc.error,
            rc.requeue,
            rc.requeue_after
        );
    }
    let s = &r.summary;
    let _ = writeln!(
        out,
        "\n== median of {} complete run(s) ==\n  time until every CR's status.nodes had {} names: {:.2} s (min {:.2}, max \
         {:.2}); per CR p50 {:.2} s, p99 {:.2} s",
        s.complete_runs, w.size, s.all_seconds, s.min_all_seconds, s.max_all_seconds, s.p50_seconds, s.p99_seconds
    );
    let _ = writeln!(
        out,
        "  operator process: VmRSS {}, VmHWM {} (max {})  [MB = 10^6 bytes]",
        mb(s.rss_bytes),
        mb(s.hwm_bytes),
        mb(s.max_hwm_bytes)
    );
    let _ = writeln!(out, "  reconciles per CR: {:.2}", s.reconciles_per_cr);
    for f in &r.failures {
        let _ = writeln!(out, "  FAILED: {f}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(all: f64, hwm: u64, per_cr: f64, timed_out: bool) -> MemcachedRun {
        MemcachedRun {
            completion: Completion {
                crs: 2,
                done: 2,
                watch_events: 10,
                all_seconds: all,
                first_seconds: all / 4.0,
                p50_seconds: all / 2.0,
                p99_seconds: all,
            },
            create_seconds: 0.1,
            pods: 6,
            synced: true,
            memory: OperatorMemory { rss_before_bytes: 1, rss_ready_bytes: 2, rss_bytes: hwm / 2, hwm_bytes: hwm },
            reconciles: ReconcileCounts { total: 8, success: 4, requeue: 4, ..Default::default() },
            reconciles_per_cr: per_cr,
            timed_out,
        }
    }

    #[test]
    fn summary_takes_medians_of_complete_runs() {
        let runs =
            [run(3.0, 30, 4.0, false), run(1.0, 10, 2.0, false), run(2.0, 20, 3.0, false), run(0.1, 1, 1.0, true)];
        let s = MemcachedSummary::of(&runs);
        assert_eq!(s.complete_runs, 3);
        assert_eq!((s.all_seconds, s.min_all_seconds, s.max_all_seconds), (2.0, 1.0, 3.0));
        assert_eq!((s.hwm_bytes, s.max_hwm_bytes, s.rss_bytes), (20, 30, 10));
        assert_eq!((s.reconciles_per_cr, s.p50_seconds), (3.0, 1.0));
        assert_eq!(MemcachedSummary::of(&runs[3..]).complete_runs, 0);
    }

    #[test]
    fn text_shows_runs_timeouts_and_failures() {
        let runs = vec![run(2.0, 20_000_000, 4.0, false), run(9.0, 1, 1.0, true)];
        let report = MemcachedReport {
            machine: Machine::detect(),
            workload: MemcachedWorkload::tiny(),
            summary: MemcachedSummary::of(&runs),
            runs,
            failures: vec!["run 3: boom".into()],
        };
        let text = render_text(&report);
        assert!(text.contains("TIMEOUT 2/2"), "{text}");
        assert!(text.contains("FAILED: run 3: boom"));
        assert!(text.contains("VmHWM 20.0 MB"));
        assert!(text.contains("reconciles per CR: 4.00"));
        assert!(text.contains("4/0/4/0"));
    }
}
