//! The runtime benchmark's report: per-scenario runs and their medians, the opkit/kube
//! ratios, the manager's memory, the targets (serialized as the `-o json` output), and the
//! human-readable rendering.

use std::fmt::Write as _;

use serde::Serialize;

use super::RuntimeWorkload;
use super::drivers::Runtime;
use super::manager_proc::ManagerMemory;
use super::recorder::RunStats;
use crate::report::{Machine, TargetCheck};

/// The opkit/kube throughput ratio the runtime should reach (≤ 10 % overhead).
pub const RATIO_TARGET: f64 = 0.9;
/// The manager's resident memory target with 10,000 cached ConfigMaps, in bytes (60 MB).
pub const MEMORY_TARGET_BYTES: u64 = 60_000_000;

/// How the objects reach the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    /// The objects exist before the controller starts; latency counts from its start.
    Backlog,
    /// The controller runs (and has reconciled a warm-up object) while the objects are
    /// created; latency counts from each create request being sent.
    Live,
}

/// Medians over a scenario's runs.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Summary {
    /// Median reconciles per second.
    pub per_sec: f64,
    /// Slowest run's reconciles per second.
    pub min_per_sec: f64,
    /// Fastest run's reconciles per second.
    pub max_per_sec: f64,
    /// Median of the runs' p50 latencies, in ms.
    pub p50_ms: f64,
    /// Median of the runs' p99 latencies, in ms.
    pub p99_ms: f64,
}

fn median_of(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    crate::stats::percentile(&v, 50.0).unwrap_or(0.0)
}

impl Summary {
    /// Summarizes complete runs (runs that timed out are left out).
    pub fn of(runs: &[RunStats]) -> Summary {
        let ok: Vec<&RunStats> = runs.iter().filter(|r| !r.timed_out).collect();
        if ok.is_empty() {
            return Summary::default();
        }
        let rates: Vec<f64> = ok.iter().map(|r| r.per_sec).collect();
        Summary {
            per_sec: median_of(rates.clone()),
            min_per_sec: rates.iter().copied().fold(f64::INFINITY, f64::min),
            max_per_sec: rates.iter().copied().fold(0.0, f64::max),
            p50_ms: median_of(ok.iter().map(|r| r.p50_ms).collect()),
            p99_ms: median_of(ok.iter().map(|r| r.p99_ms).collect()),
        }
    }
}

/// One runtime in one scenario at one size.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    /// The scenario.
    pub scenario: Scenario,
    /// The runtime.
    pub runtime: Runtime,
    /// Objects per run.
    pub objects: usize,
    /// Every run, in order.
    pub runs: Vec<RunStats>,
    /// Medians over the complete runs.
    pub summary: Summary,
}

/// opkit relative to kube::runtime for one scenario and size.
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeRatio {
    /// The scenario.
    pub scenario: Scenario,
    /// Objects per run.
    pub objects: usize,
    /// opkit / kube median reconciles per second (≥ 1: opkit faster).
    pub throughput: f64,
    /// opkit / kube median p50 latency (≤ 1: opkit faster).
    pub p50: f64,
    /// opkit / kube median p99 latency.
    pub p99: f64,
}

/// Everything one `opkit-bench runtime` run measured.
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeReport {
    /// The machine it ran on.
    pub machine: Machine,
    /// The workload used.
    pub workload: RuntimeWorkload,
    /// Per scenario, size and runtime.
    pub results: Vec<ScenarioResult>,
    /// opkit/kube per scenario and size.
    pub ratios: Vec<RuntimeRatio>,
    /// The controller processes' memory (opkit, then the kube::runtime baseline).
    pub memory: Vec<ManagerMemory>,
    /// Runs or sections that failed, with the reason.
    pub failures: Vec<String>,
    /// Each figure next to its target.
    pub targets: Vec<TargetCheck>,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// The opkit/kube ratios of every scenario and size both runtimes completed.
pub fn ratios(results: &[ScenarioResult]) -> Vec<RuntimeRatio> {
    let mut out = Vec::new();
    for o in results.iter().filter(|r| r.runtime == Runtime::Opkit && r.summary.per_sec > 0.0) {
        let kube = results.iter().find(|k| {
            k.runtime == Runtime::Kube && k.scenario == o.scenario && k.objects == o.objects && k.summary.per_sec > 0.0
        });
        if let Some(k) = kube {
            out.push(RuntimeRatio {
                scenario: o.scenario,
                objects: o.objects,
                throughput: ratio(o.summary.per_sec, k.summary.per_sec),
                p50: ratio(o.summary.p50_ms, k.summary.p50_ms),
                p99: ratio(o.summary.p99_ms, k.summary.p99_ms),
            });
        }
    }
    out
}

fn mb(b: u64) -> String {
    format!("{:.1} MB", b as f64 / 1e6)
}

/// Compares the figures with the targets.
pub fn targets(r: &RuntimeReport) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    for x in r.ratios.iter().filter(|x| x.scenario == Scenario::Backlog) {
        out.push(TargetCheck {
            what: format!("opkit/kube throughput, backlog of {}", x.objects),
            measured: format!("{:.2}x", x.throughput),
            target: format!(">= {RATIO_TARGET}x"),
            met: x.throughput >= RATIO_TARGET,
        });
    }
    for m in r.memory.iter().filter(|m| m.runtime == Runtime::Opkit) {
        for (what, v) in [("VmRSS", m.rss_bytes), ("VmHWM", m.hwm_bytes)] {
            out.push(TargetCheck {
                what: format!("manager {what} with {} cached ConfigMaps", m.objects),
                measured: mb(v),
                target: format!("<= {}", mb(MEMORY_TARGET_BYTES)),
                met: v <= MEMORY_TARGET_BYTES && m.reconciled == m.objects,
            });
        }
    }
    out
}

fn section(out: &mut String, r: &RuntimeReport, scenario: Scenario, title: &str) {
    let rows: Vec<&ScenarioResult> = r.results.iter().filter(|x| x.scenario == scenario).collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n== {title} ==");
    let _ = writeln!(
        out,
        "  {:<14} {:>7} {:>13} {:>9} {:>9} {:>7}  runs (reconciles/s)",
        "runtime", "objects", "reconciles/s", "p50 ms", "p99 ms", "calls"
    );
    for x in rows {
        let s = &x.summary;
        let calls = x.runs.iter().map(|r| r.reconcile_calls).max().unwrap_or(0);
        let runs: Vec<String> = x
            .runs
            .iter()
            .map(|r| {
                if r.timed_out {
                    format!("TIMEOUT({}/{})", r.reconciled, r.objects)
                } else {
                    format!("{:.0}", r.per_sec)
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "  {:<14} {:>7} {:>13.0} {:>9.1} {:>9.1} {:>7}  {}",
            x.runtime.to_string(),
            x.objects,
            s.per_sec,
            s.p50_ms,
            s.p99_ms,
            calls,
            runs.join(" ")
        );
    }
    for x in r.ratios.iter().filter(|x| x.scenario == scenario) {
        let _ =
            writeln!(out, "  opkit/kube     {:>7} {:>12.2}x {:>8.2}x {:>8.2}x", x.objects, x.throughput, x.p50, x.p99);
    }
}

/// Renders the report for people.
pub fn render_text(r: &RuntimeReport) -> String {
    let mut out = String::new();
    let m = &r.machine;
    let w = &r.workload;
    let _ = writeln!(
        out,
        "opkit-bench runtime — {} CPUs ({}), {:.1} GiB RAM",
        m.cpus,
        m.cpu_model,
        m.memory_bytes as f64 / (1u64 << 30) as f64
    );
    let _ = writeln!(
        out,
        "trivial reconciler over ConfigMaps of ~{} bytes, {} concurrent reconciles; in-memory API server in a child \
         process, fresh for every run; {} run(s) per row (median), runtime order alternating",
        w.payload_bytes, w.concurrency, w.repeats
    );
    section(
        &mut out,
        r,
        Scenario::Backlog,
        "backlog: objects created first, then the controller started; latency from controller start to end of first reconcile",
    );
    section(
        &mut out,
        r,
        Scenario::Live,
        &format!(
            "live: controller running, objects created at c={}; latency from create request sent to end of first reconcile",
            w.live_create_concurrency
        ),
    );
    render_memory(&mut out, r);
    for f in &r.failures {
        let _ = writeln!(out, "  FAILED: {f}");
    }
    let _ = writeln!(out, "\n== targets (reported, not asserted) ==");
    for t in &r.targets {
        let _ = writeln!(
            out,
            "  [{}] {:<48} {:<12} target {}",
            if t.met { " ok " } else { "MISS" },
            t.what,
            t.measured,
            t.target
        );
    }
    out
}

/// The memory section: each runtime's controller process, then opkit/kube ratios.
fn render_memory(out: &mut String, r: &RuntimeReport) {
    if !r.memory.is_empty() {
        let _ = writeln!(out, "\n== memory of a child process running only the controller ==");
    }
    for mm in &r.memory {
        let _ = writeln!(
            out,
            "  {}: {} ConfigMaps of ~{} bytes ({:.1} MiB JSON) cached, {} reconciled in {:.2} s, synced: {}",
            mm.runtime,
            mm.objects,
            mm.payload_bytes,
            mm.json_bytes as f64 / (1u64 << 20) as f64,
            mm.reconciled,
            mm.sync_seconds,
            mm.synced
        );
        let _ = writeln!(
            out,
            "    VmRSS {} (process before the controller: {}), VmHWM {}  [MB = 10^6 bytes]",
            mb(mm.rss_bytes),
            mb(mm.rss_before_bytes),
            mb(mm.hwm_bytes)
        );
    }
    let by = |rt| r.memory.iter().find(|m| m.runtime == rt);
    if let (Some(o), Some(k)) = (by(Runtime::Opkit), by(Runtime::Kube)) {
        let _ = writeln!(
            out,
            "  opkit/kube: VmRSS {:.2}x, VmHWM {:.2}x",
            ratio(o.rss_bytes as f64, k.rss_bytes as f64),
            ratio(o.hwm_bytes as f64, k.hwm_bytes as f64)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(per_sec: f64, p50: f64, timed_out: bool) -> RunStats {
        RunStats {
            objects: 10,
            reconciled: 10,
            reconcile_calls: 10,
            other_calls: 0,
            seconds: 10.0 / per_sec,
            per_sec,
            p50_ms: p50,
            p99_ms: p50 * 2.0,
            max_ms: p50 * 3.0,
            timed_out,
        }
    }

    fn result(runtime: Runtime, runs: Vec<RunStats>) -> ScenarioResult {
        let summary = Summary::of(&runs);
        ScenarioResult { scenario: Scenario::Backlog, runtime, objects: 10, runs, summary }
    }

    #[test]
    fn summary_takes_medians_of_complete_runs() {
        let s =
            Summary::of(&[run(100.0, 5.0, false), run(300.0, 1.0, false), run(200.0, 3.0, false), run(1e9, 0.1, true)]);
        assert_eq!((s.per_sec, s.min_per_sec, s.max_per_sec), (200.0, 100.0, 300.0));
        assert_eq!((s.p50_ms, s.p99_ms), (3.0, 6.0));
        assert_eq!(Summary::of(&[run(5.0, 1.0, true)]).per_sec, 0.0);
    }

    #[test]
    fn ratios_pair_runtimes_and_targets_use_them() {
        let results = vec![
            result(Runtime::Opkit, vec![run(90.0, 2.0, false)]),
            result(Runtime::Kube, vec![run(100.0, 1.0, false)]),
        ];
        let rs = ratios(&results);
        assert_eq!(rs.len(), 1);
        assert!((rs[0].throughput - 0.9).abs() < 1e-9 && (rs[0].p50 - 2.0).abs() < 1e-9);
        let mut report = RuntimeReport {
            machine: Machine::detect(),
            workload: RuntimeWorkload::tiny(),
            results,
            ratios: rs,
            memory: Vec::new(),
            failures: vec!["one run failed".into()],
            targets: Vec::new(),
        };
        report.targets = targets(&report);
        assert_eq!(report.targets.len(), 1);
        assert!(report.targets[0].met);
        let text = render_text(&report);
        assert!(text.contains("opkit/kube") && text.contains("FAILED: one run failed") && text.contains("[ ok ]"));
        // Without kube figures there is no ratio.
        assert!(ratios(&report.results[..1]).is_empty());
    }
}
