//! What a benchmark run does: the workload sizes (full, `--quick` and the tiny preset the
//! smoke test uses) and the run options (backends, etcd, where the server binary is).

use std::path::PathBuf;

use serde::Serialize;

use crate::serve::Backend;

/// Sizes and limits of every part of the API server benchmark. Every loop is bounded by
/// one of these counts and by a wall-time limit.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    /// Concurrency levels for create, get, update and etcd puts.
    pub concurrencies: Vec<usize>,
    /// Operations per phase at concurrency 1.
    pub ops_serial: usize,
    /// Operations per phase at higher concurrency.
    pub ops_concurrent: usize,
    /// Wall-time limit of one phase, in seconds.
    pub phase_limit_secs: u64,
    /// Approximate size of one ConfigMap request body, in bytes.
    pub payload_bytes: usize,
    /// Objects in the listed namespace.
    pub list_objects: usize,
    /// Page size of the paged list.
    pub page_size: usize,
    /// How often each list is repeated (the median is reported).
    pub list_repeats: usize,
    /// Concurrent watchers.
    pub watchers: usize,
    /// Events every watcher must receive.
    pub watch_events: usize,
    /// ConfigMaps listed by label while a Lease is renewed.
    pub label_list_objects: usize,
    /// Distinct values of their label (each list selects one).
    pub label_values: usize,
    /// Clients listing them by label, each in a loop.
    pub label_listers: usize,
    /// How long the Lease renewals are measured while the lists run, in seconds.
    pub lease_renew_secs: u64,
    /// Time between Lease renewals, in milliseconds.
    pub lease_renew_every_ms: u64,
    /// Watches from resourceVersion 0 over those ConfigMaps that are never read.
    pub idle_watches: usize,
    /// Objects created for the memory measurement.
    pub memory_objects: usize,
    /// Wall-time limit of the memory fill, in seconds.
    pub memory_limit_secs: u64,
    /// In-process start-ups measured.
    pub startup_runs: usize,
}

impl Workload {
    /// The full benchmark as specified: c = 1/16/64, 10,000-object lists, 100×1,000
    /// fan-out, Lease renewals while 16 clients list 50,000 objects by label, 100,000
    /// objects for memory.
    pub fn full() -> Workload {
        Workload {
            concurrencies: vec![1, 16, 64],
            ops_serial: 3_000,
            ops_concurrent: 20_000,
            phase_limit_secs: 30,
            payload_bytes: 500,
            list_objects: 10_000,
            page_size: 500,
            list_repeats: 7,
            watchers: 100,
            watch_events: 1_000,
            label_list_objects: 50_000,
            label_values: 5,
            label_listers: 16,
            lease_renew_secs: 30,
            lease_renew_every_ms: 150,
            idle_watches: 20,
            memory_objects: 100_000,
            memory_limit_secs: 300,
            startup_runs: 9,
        }
    }

    /// A shorter run (about a minute and a half) with the same shape; the label lists keep
    /// their 50,000 objects and 16 clients, measured for 10 s instead of 30 s.
    pub fn quick() -> Workload {
        Workload {
            lease_renew_secs: 10,
            ops_serial: 500,
            ops_concurrent: 3_000,
            phase_limit_secs: 10,
            list_objects: 2_000,
            list_repeats: 3,
            watchers: 20,
            watch_events: 200,
            memory_objects: 10_000,
            memory_limit_secs: 60,
            startup_runs: 3,
            ..Workload::full()
        }
    }

    /// A seconds-long run for smoke tests (debug builds).
    pub fn tiny() -> Workload {
        Workload {
            concurrencies: vec![1, 4],
            ops_serial: 20,
            ops_concurrent: 40,
            phase_limit_secs: 20,
            list_objects: 60,
            page_size: 25,
            list_repeats: 2,
            watchers: 3,
            watch_events: 10,
            label_list_objects: 300,
            label_values: 3,
            label_listers: 4,
            lease_renew_secs: 2,
            lease_renew_every_ms: 100,
            idle_watches: 3,
            memory_objects: 50,
            memory_limit_secs: 30,
            startup_runs: 1,
            ..Workload::full()
        }
    }

    /// Operations for a phase at `concurrency`.
    pub fn ops(&self, concurrency: usize) -> usize {
        if concurrency <= 1 { self.ops_serial } else { self.ops_concurrent }
    }
}

/// How to run the benchmark.
#[derive(Debug, Clone)]
pub struct Options {
    /// Workload sizes.
    pub workload: Workload,
    /// Backends to measure, in order.
    pub backends: Vec<Backend>,
    /// The etcd binary for the baseline; `None` skips it.
    pub etcd_bin: Option<PathBuf>,
    /// The executable whose hidden `serve` command runs the server (normally this one).
    pub server_exe: PathBuf,
    /// Where durable data directories go (default: the system temp dir).
    pub tmp_root: Option<PathBuf>,
    /// Print progress to stderr.
    pub progress: bool,
}

/// Prints a progress line to stderr unless progress is switched off.
pub fn progress(opts: &Options, msg: &str) {
    if opts.progress {
        eprintln!("[opkit-bench] {msg}");
    }
}
