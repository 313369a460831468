//! `opkit-bench scaling`: what issue 34's runtime features cost and save.
//!
//! - **Read-your-own-writes' cost** (`ryow`): a controller that writes each object once
//!   and reads it back, with the guard on and off, alternating, on a fresh server per run;
//!   the median throughput of each, and their ratio.
//! - **Cache memory** (`cache_memory`): a cache of N Pods in a child process, with
//!   managedFields kept, removed (the default), and metadata only.

pub mod cache_memory;
pub mod ryow;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::BenchError;
use crate::report::Machine;
use cache_memory::CacheMemory;
use ryow::RyowRun;

/// Sizes of the scaling benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct ScalingWorkload {
    /// Objects each read-your-own-writes run writes (0: skip).
    pub ryow_objects: usize,
    /// Runs with the guard on, and as many off.
    pub repeats: usize,
    /// Concurrent reconciles.
    pub concurrency: usize,
    /// Pods cached in the memory measurement (0: skip).
    pub memory_pods: usize,
    /// Wall-time limit of each fill and run, in seconds.
    pub limit_secs: u64,
}

impl ScalingWorkload {
    /// 5,000 objects × 5 runs each way; 10,000 Pods.
    pub fn full() -> ScalingWorkload {
        ScalingWorkload { ryow_objects: 5_000, repeats: 5, concurrency: 16, memory_pods: 10_000, limit_secs: 300 }
    }
    /// One run each way.
    pub fn quick() -> ScalingWorkload {
        ScalingWorkload { repeats: 1, ..ScalingWorkload::full() }
    }
    /// Seconds-long (the smoke test).
    pub fn tiny() -> ScalingWorkload {
        ScalingWorkload { ryow_objects: 30, repeats: 1, concurrency: 4, memory_pods: 30, limit_secs: 60 }
    }
}

/// How to run it.
#[derive(Debug, Clone)]
pub struct ScalingOptions {
    /// Sizes.
    pub workload: ScalingWorkload,
    /// The executable whose hidden `serve` and `cache-memory` commands run the server and
    /// the cache child (normally this one).
    pub exe: PathBuf,
    /// Progress on stderr.
    pub progress: bool,
}

/// The medians of one side of the read-your-own-writes comparison.
#[derive(Debug, Clone, Serialize)]
pub struct RyowSummary {
    /// Guard on.
    pub guarded: bool,
    /// Median objects per second.
    pub median_per_sec: f64,
    /// Each run.
    pub runs: Vec<RyowRun>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct ScalingReport {
    /// The machine.
    pub machine: Machine,
    /// The sizes.
    pub workload: ScalingWorkload,
    /// Guard on, then off.
    pub ryow: Vec<RyowSummary>,
    /// Throughput with the guard on ÷ off (target ≥ 0.95).
    pub ryow_ratio: Option<f64>,
    /// The cache memory, per mode.
    pub cache_memory: Vec<CacheMemory>,
    /// Runs that failed, and why.
    pub failures: Vec<String>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Runs the benchmark.
pub async fn run(opts: &ScalingOptions) -> Result<ScalingReport, BenchError> {
    let w = &opts.workload;
    let limit = Duration::from_secs(w.limit_secs);
    let progress = |msg: &str| {
        if opts.progress {
            eprintln!("[opkit-bench] scaling: {msg}");
        }
    };
    let mut failures = Vec::new();
    let mut sides = [(true, Vec::new()), (false, Vec::new())];
    if w.ryow_objects > 0 {
        for rep in 0..w.repeats.max(1) {
            let order = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                let guarded = sides[i].0;
                progress(&format!(
                    "read-your-own-writes {} run {}/{}",
                    if guarded { "on" } else { "off" },
                    rep + 1,
                    w.repeats
                ));
                match ryow::one_run(&opts.exe, guarded, w.ryow_objects, w.concurrency, limit).await {
                    Ok(run) if run.timed_out => failures.push(format!("ryow guarded={guarded}: timed out")),
                    Ok(run) => sides[i].1.push(run),
                    Err(e) => failures.push(format!("ryow guarded={guarded}: {e}")),
                }
            }
        }
    }
    let ryow: Vec<RyowSummary> = sides
        .into_iter()
        .filter(|(_, runs)| !runs.is_empty())
        .map(|(guarded, runs)| RyowSummary {
            guarded,
            median_per_sec: median(runs.iter().map(|r| r.per_sec).collect()),
            runs,
        })
        .collect();
    let ryow_ratio = match ryow.as_slice() {
        [on, off] if on.guarded && !off.guarded && off.median_per_sec > 0.0 => {
            Some(on.median_per_sec / off.median_per_sec)
        }
        _ => None,
    };
    let mut cache_memory = Vec::new();
    if w.memory_pods > 0 {
        progress(&format!("cache memory with {} pods", w.memory_pods));
        match cache_memory::measure_all(&opts.exe, w.memory_pods, limit).await {
            Ok(m) => cache_memory = m,
            Err(e) => failures.push(format!("cache memory: {e}")),
        }
    }
    Ok(ScalingReport { machine: Machine::detect(), workload: w.clone(), ryow, ryow_ratio, cache_memory, failures })
}

/// The report for people.
pub fn render_text(r: &ScalingReport) -> String {
    let mut out = String::new();
    let m = &r.machine;
    let _ = writeln!(
        out,
        "opkit-bench scaling — {} CPUs ({}), {:.1} GiB",
        m.cpus,
        m.cpu_model,
        m.memory_bytes as f64 / (1u64 << 30) as f64
    );
    for side in &r.ryow {
        let runs: Vec<String> = side.runs.iter().map(|x| format!("{:.0}", x.per_sec)).collect();
        let _ = writeln!(
            out,
            "read-your-own-writes {:>3}: {:>8.0} objects/s written and read back (median of {}: {})",
            if side.guarded { "on" } else { "off" },
            side.median_per_sec,
            side.runs.len(),
            runs.join(", ")
        );
    }
    if let Some(ratio) = r.ryow_ratio {
        let _ = writeln!(out, "read-your-own-writes on ÷ off: {ratio:.3} (target ≥ 0.95)");
    }
    for c in &r.cache_memory {
        let _ = writeln!(
            out,
            "cache of {} pods, {}: VmRSS {:.1} MB ({:.1} MB before the cache)",
            c.objects,
            c.mode,
            c.rss_bytes as f64 / 1e6,
            c.rss_before_bytes as f64 / 1e6
        );
    }
    for f in &r.failures {
        let _ = writeln!(out, "FAILED: {f}");
    }
    out
}
