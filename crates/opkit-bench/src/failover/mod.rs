//! `opkit-bench failover`: how long an operator with two replicas is without a leader
//! when the leader dies. Each replica runs the hidden `failover-replica` command: an
//! opkit manager with leader election at controller-runtime's default timings (lease
//! 15 s, renew deadline 10 s, retry 2 s) and one controller that stamps a probe
//! ConfigMap with its identity and the probe's sequence number. A run starts the leader,
//! then the standby (ready once its cache synced), kills the leader with SIGKILL or
//! SIGTERM, bumps the probe's sequence at the same instant, and times until the probe
//! carries the standby's stamp for that sequence.
//!
//! Two deployments are measured: replicas as plain processes (nothing tells the standby
//! that a killed leader is gone: client-go's case), and replicas in real pods, where the
//! standby watches the leader's container through the kubelet's reports.

mod pods;
mod processes;
mod replica;

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde::Serialize;

pub use pods::{NAMESPACE as POD_NAMESPACE, PodFailover, PodReplicas};
pub use replica::{LeaseTimings, run_replica};

use crate::BenchError;
use crate::report::Machine;

/// The probe ConfigMap's name.
const PROBE: &str = "failover-probe";
/// The annotation a replica stamps: `<identity>/<sequence>`.
const STAMP: &str = "bench.opkit.dev/reconciled";
/// The Lease the replicas elect on.
const LEASE: &str = "failover-bench";

/// How the leader is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum KillSignal {
    /// The process dies at once; nothing releases the lease.
    Sigkill,
    /// The manager shuts down and releases the lease (`release_on_cancel`).
    Sigterm,
}

impl KillSignal {
    fn send(self, pid: u32) -> Result<(), BenchError> {
        let sig = match self {
            KillSignal::Sigkill => "-KILL",
            KillSignal::Sigterm => "-TERM",
        };
        let status = std::process::Command::new("kill").arg(sig).arg(pid.to_string()).status()?;
        if status.success() { Ok(()) } else { Err(BenchError::Setup(format!("kill {sig} {pid} failed"))) }
    }
}

/// Where the replicas run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Deployment {
    /// Plain processes beside a server child process.
    Processes,
    /// Real pods of an in-process control plane.
    Pods,
}

/// How to run it.
#[derive(Debug, Clone)]
pub struct FailoverOptions {
    /// Runs per deployment and signal.
    pub runs: usize,
    /// The executable whose hidden commands run the server and the replicas.
    pub exe: std::path::PathBuf,
    /// Progress on stderr.
    pub progress: bool,
}

/// One deployment's and signal's runs.
#[derive(Debug, Clone, Serialize)]
pub struct FailoverSeries {
    /// Where the replicas ran.
    pub deployment: Deployment,
    /// The signal.
    pub signal: KillSignal,
    /// Seconds from the kill to the standby's first reconcile, per run.
    pub seconds: Vec<f64>,
    /// Their median.
    pub median_seconds: f64,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct FailoverReport {
    /// The machine.
    pub machine: Machine,
    /// Processes then pods, each SIGKILL then SIGTERM.
    pub series: Vec<FailoverSeries>,
    /// Runs that failed, and why.
    pub failures: Vec<String>,
}

/// Creates the probe at sequence 0.
async fn create_probe(probes: &Api<ConfigMap>) -> Result<(), BenchError> {
    let mut probe = ConfigMap::default();
    probe.metadata.name = Some(PROBE.into());
    probe.data = Some([("seq".to_string(), "0".to_string())].into());
    probes.create(&PostParams::default(), &probe).await.map_err(|e| BenchError::Setup(format!("probe: {e}")))?;
    Ok(())
}

/// Fails unless `identity` holds the lease.
async fn expect_holder(client: &kube::Client, namespace: &str, identity: &str) -> Result<(), BenchError> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let holder = leases.get(LEASE).await.ok().and_then(|l| l.spec?.holder_identity);
    if holder.as_deref() != Some(identity) {
        return Err(BenchError::Setup(format!("the lease is held by {holder:?}, not {identity}")));
    }
    Ok(())
}

/// Waits until the probe carries `want`, checking every 20 ms (a benchmark's clock, not
/// a test's synchronisation), up to `limit`.
async fn wait_stamp(probes: &Api<ConfigMap>, want: &str, limit: Duration) -> Result<Duration, BenchError> {
    let started = Instant::now();
    loop {
        let cm = probes.get(PROBE).await.map_err(|e| BenchError::Setup(format!("reading the probe: {e}")))?;
        if cm.metadata.annotations.as_ref().and_then(|a| a.get(STAMP)).map(String::as_str) == Some(want) {
            return Ok(started.elapsed());
        }
        if started.elapsed() > limit {
            return Err(BenchError::Setup(format!("the probe never showed {want:?} within {limit:?}")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn set_seq(probes: &Api<ConfigMap>, seq: usize) -> Result<(), BenchError> {
    let patch = serde_json::json!({"data": {"seq": seq.to_string()}});
    probes
        .patch(PROBE, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| BenchError::Setup(format!("bumping the probe: {e}")))?;
    Ok(())
}

/// One failover in real pods at controller-runtime's timings.
async fn one_pod_run(exe: &std::path::Path, signal: KillSignal) -> Result<f64, BenchError> {
    let mut replicas = PodReplicas::start(exe, LeaseTimings::CONTROLLER_RUNTIME).await?;
    replicas.wait_published(Duration::from_secs(30)).await?;
    Ok(replicas.failover(signal, Duration::from_secs(60)).await?.seconds)
}

/// Runs `opts.runs` failovers per deployment and signal.
pub async fn run(opts: &FailoverOptions) -> Result<FailoverReport, BenchError> {
    let mut series = Vec::new();
    let mut failures = Vec::new();
    for deployment in [Deployment::Processes, Deployment::Pods] {
        for signal in [KillSignal::Sigkill, KillSignal::Sigterm] {
            let mut seconds = Vec::new();
            for run in 0..opts.runs.max(1) {
                if opts.progress {
                    eprintln!("[opkit-bench] failover: {deployment:?} {signal:?} run {}/{}", run + 1, opts.runs);
                }
                let result = match deployment {
                    Deployment::Processes => processes::one_run(&opts.exe, signal, run).await,
                    Deployment::Pods => one_pod_run(&opts.exe, signal).await,
                };
                match result {
                    Ok(s) => seconds.push(s),
                    Err(e) => failures.push(format!("{deployment:?} {signal:?} run {}: {e}", run + 1)),
                }
            }
            let mut sorted = seconds.clone();
            sorted.sort_by(f64::total_cmp);
            let median_seconds = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
            series.push(FailoverSeries { deployment, signal, seconds, median_seconds });
        }
    }
    Ok(FailoverReport { machine: Machine::detect(), series, failures })
}

/// The report for people.
pub fn render_text(r: &FailoverReport) -> String {
    let mut out = String::new();
    for s in &r.series {
        let runs: Vec<String> = s.seconds.iter().map(|x| format!("{x:.2}")).collect();
        out.push_str(&format!(
            "failover of {:?} after {:?}: median {:.2} s over {} runs ({})\n",
            s.deployment,
            s.signal,
            s.median_seconds,
            s.seconds.len(),
            runs.join(", ")
        ));
    }
    for f in &r.failures {
        out.push_str(&format!("FAILED: {f}\n"));
    }
    out
}
