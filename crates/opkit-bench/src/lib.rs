//! Benchmarks for opkit's API server, with the load generated from a separate process.
//!
//! `opkit-bench apiserver` spawns the server under test as a child process (its own
//! hidden `serve` command), drives it over HTTPS from the bench process, and reports for
//! both storage backends (in-memory and durable SQLite):
//! - create, get and update throughput with p50/p99 latency at concurrency 1, 16 and 64;
//! - a full list of 10,000 objects and the same list paged by 500;
//! - watch fan-out: 100 watchers each receiving 1,000 events;
//! - Lease renewal latency while 16 clients list 50,000 ConfigMaps by label in a loop,
//!   and the server's memory with 20 unread watches from resourceVersion 0 over them
//!   ([`label_lists`]);
//! - the server's resident memory after 100,000 objects, relative to their JSON size;
//! - in-process `ApiServer::start` time;
//! - Debian etcd's put throughput at the same payload and concurrency, as a ratio.
//!
//! `opkit-bench watch-memory` ([`watch_memory`]) measures the server's memory per watch
//! from resourceVersion 0, with the watches open and after they close.
//!
//! `opkit-bench runtime` ([`runtime`]) compares the opkit controller runtime with a bare
//! `kube::runtime::Controller` on the same trivial reconciler, and measures an opkit
//! manager's memory in its own process.
//!
//! `opkit-bench cluster` ([`cluster`]) creates 1,000 Deployments of 10 replicas at once on
//! the local control plane (API server and cluster controllers in a child process) and
//! measures the time until all are available, pods started per second and the server
//! process's peak memory.
//!
//! `opkit-bench admission` ([`admission`]) measures what one validating admission webhook
//! adds to a create, against an in-process server and webhook server.
//!
//! `opkit-bench charts` ([`charts`]) is the chart corpus conformance run: the real helm
//! client installs, upgrades, tests and uninstalls every chart of a directory on the local
//! control plane, compared with an expectations file (see `docs/helm.md`).
//!
//! All traffic goes to 127.0.0.1, and every loop is bounded in count and time. Figures
//! are printed next to their targets but never asserted. See `docs/benchmarks.md`.
//!
//! # Layout
//! - [`config`]: workload presets and run options.
//! - [`serve`]: the server child process and its memory.
//! - [`client`] and [`load`]: the HTTP/1.1 client and the closed-loop load generator.
//! - [`apiserver`] and [`etcd`]: the scenarios.
//! - [`stats`] and [`report`]: percentiles, the report and its rendering.
//! - [`runtime`]: the controller runtime benchmark.
//! - [`memcached`]: the Memcached operator benchmark (`opkit-bench memcached`).
//! - [`cluster`]: the 10,000-pod cluster benchmark.
//! - [`charts`]: the chart corpus conformance run.
//! - [`kudo`]: the KUDO corpus run and the KUDO engine's scale benchmark.
//! - [`kudo_kuttl`]: the KUDO corpus's kuttl suites under opkit's kuttl runner.
//!
//! # Example
//! From the command line (see `docs/benchmarks.md` for the flags):
//! ```text
//! cargo run --release -p opkit-bench -- apiserver --quick
//! ```
//! From code, a tiny run (the one the smoke test does), with `server_exe` the `opkit-bench` binary:
//! ```no_run
//! use opkit_bench::{Backend, Options, Workload, render_text, run};
//!
//! # async fn demo() -> Result<(), opkit_bench::BenchError> {
//! let opts = Options {
//!     workload: Workload::tiny(),
//!     backends: vec![Backend::Memory],
//!     etcd_bin: None,
//!     server_exe: "target/release/opkit-bench".into(),
//!     tmp_root: None,
//!     progress: false,
//! };
//! let report = run(&opts).await?;
//! println!("{}", render_text(&report));
//! # Ok(())
//! # }
//! ```

pub mod admission;
pub mod ansible;
pub mod apiserver;
pub mod charts;
mod child;
pub mod client;
pub mod cluster;
pub mod config;
pub mod crds;
pub mod etcd;
pub mod failover;
pub mod fixtures;
pub mod helm_template;
pub mod kudo;
pub mod kudo_kuttl;
pub mod label_lists;
pub mod load;
pub mod memcached;
pub mod olm_install;
pub mod olm_validate;
pub mod real_pods;
pub mod report;
pub mod runtime;
pub mod scaling;
pub mod serve;
pub mod sharding;
pub mod stats;
pub mod watch_memory;

use std::time::Duration;

pub use config::{Options, Workload};
pub use report::{Report, render_text};
pub use serve::Backend;

use report::{EtcdRatio, EtcdReport, Machine};

/// Errors that stop a benchmark (or one of its sections).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Preparing or running a scenario failed.
    #[error("{0}")]
    Setup(String),
    /// The etcd binary is not installed.
    #[error("{0}")]
    EtcdMissing(String),
    /// A request got an unexpected status.
    #[error("{what}: HTTP {status}: {body}")]
    Status {
        /// The request.
        what: String,
        /// Its status code.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// A request got no complete response in time (the server stalled).
    #[error("no response within {0:?}")]
    Timeout(Duration),
    /// An HTTP transport error.
    #[error("http: {0}")]
    Http(String),
    /// File or socket I/O failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The in-process server failed to start.
    #[error("server: {0}")]
    Server(#[from] opkit_apiserver::ServerError),
}

impl BenchError {
    /// Wraps a hyper error.
    pub fn http(e: impl std::fmt::Display) -> BenchError {
        BenchError::Http(e.to_string())
    }
}

fn etcd_version(bin: &std::path::Path) -> Option<String> {
    let out = std::process::Command::new(bin).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().next().map(|l| l.trim().to_string())
}

async fn etcd_baseline(opts: &Options, backends: &[report::BackendReport]) -> EtcdReport {
    let mut rep = EtcdReport { version: None, skipped: None, puts: Vec::new(), ratios: Vec::new() };
    let Some(bin) = &opts.etcd_bin else {
        rep.skipped = Some("disabled with --no-etcd".into());
        return rep;
    };
    let w = &opts.workload;
    let etcd = match etcd::Etcd::start(bin).await {
        Ok(e) => e,
        Err(e) => {
            rep.skipped =
                Some(if etcd::is_missing(&e) { format!("etcd is not installed: {e}") } else { e.to_string() });
            return rep;
        }
    };
    rep.version = etcd_version(bin);
    let value = fixtures::configmap("bench", "c1-0000000", w.payload_bytes, 0);
    for &c in &w.concurrencies {
        if opts.progress {
            eprintln!("[opkit-bench] etcd: put c={c}");
        }
        match etcd.puts(c, w.ops(c), Duration::from_secs(w.phase_limit_secs), &value).await {
            Ok(p) => rep.puts.push(p),
            Err(e) => {
                rep.skipped = Some(format!("etcd puts failed: {e}"));
                break;
            }
        }
    }
    etcd.stop().await;
    for b in backends {
        for p in &rep.puts {
            if let Some(ours) = b.phase("create", p.concurrency) {
                rep.ratios.push(EtcdRatio {
                    backend: b.backend,
                    concurrency: p.concurrency,
                    ours_ops_per_sec: ours.ops_per_sec,
                    etcd_ops_per_sec: p.ops_per_sec,
                    ratio: if p.ops_per_sec > 0.0 { ours.ops_per_sec / p.ops_per_sec } else { 0.0 },
                });
            }
        }
    }
    rep
}

/// Runs the whole API server benchmark.
pub async fn run(opts: &Options) -> Result<Report, BenchError> {
    if opts.progress {
        eprintln!("[opkit-bench] in-process start-up x{}", opts.workload.startup_runs);
    }
    let startup = apiserver::startup(opts.workload.startup_runs).await?;
    let mut backends = Vec::new();
    for &b in &opts.backends {
        match apiserver::bench_backend(opts, b).await {
            Ok(r) => backends.push(r),
            Err(e) => backends.push(report::BackendReport::failed(b, format!("aborted: {e}"))),
        }
    }
    let etcd = etcd_baseline(opts, &backends).await;
    let mut report = Report {
        machine: Machine::detect(),
        workload: opts.workload.clone(),
        startup,
        backends,
        etcd,
        targets: Vec::new(),
    };
    report.targets = report::targets(&report);
    Ok(report)
}
