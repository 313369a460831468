//! `opkit-bench failover`: how long an operator with two replicas is without a leader
//! when the leader dies. Each replica is a child process (the hidden `failover-replica`
//! command) running an opkit manager with leader election at controller-runtime's
//! default timings (lease 15 s, renew deadline 10 s, retry 2 s) and one controller that
//! stamps a probe ConfigMap with its identity and the probe's sequence number. A run
//! starts the leader, then the standby (ready once its cache synced), kills the leader
//! with SIGKILL or SIGTERM, bumps the probe's sequence at the same instant, and times
//! until the probe carries the standby's stamp for that sequence.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use opkit::leader::LeaderElectionConfig;
use opkit::{Action, CacheScope, Context, Controller, Manager, ManagerOptions, ReconcileResult};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

use crate::BenchError;
use crate::child::{Spawned, spawn_child_with_input};
use crate::report::Machine;
use crate::runtime::cluster::{Cluster, NAMESPACE};
use crate::serve::ServeInfo;

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
    /// The process dies at once; the lease must expire.
    Sigkill,
    /// The manager shuts down and releases the lease (`release_on_cancel`).
    Sigterm,
}

/// How to run it.
#[derive(Debug, Clone)]
pub struct FailoverOptions {
    /// Runs per signal.
    pub runs: usize,
    /// The executable whose hidden commands run the server and the replicas.
    pub exe: std::path::PathBuf,
    /// Progress on stderr.
    pub progress: bool,
}

/// One signal's runs.
#[derive(Debug, Clone, Serialize)]
pub struct FailoverSeries {
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
    /// SIGKILL, then SIGTERM.
    pub series: Vec<FailoverSeries>,
    /// Runs that failed, and why.
    pub failures: Vec<String>,
}

/// What the parent tells a replica.
#[derive(Debug, Serialize, Deserialize)]
struct ReplicaSpec {
    server: ServeInfo,
    identity: String,
}

/// Runs the hidden `failover-replica` command: a manager with leader election whose one
/// controller stamps the probe; says whether its cache synced (one JSON line), then runs
/// until signalled.
pub async fn run_replica() -> Result<(), BenchError> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let line = lines.next_line().await?.ok_or_else(|| BenchError::Setup("no replica spec on stdin".into()))?;
    let spec: ReplicaSpec =
        serde_json::from_str(&line).map_err(|e| BenchError::Setup(format!("bad replica spec: {e}")))?;
    let client = spec.server.kube_client(NAMESPACE)?;
    let mut election = LeaderElectionConfig::new(LEASE, NAMESPACE);
    election.identity = spec.identity.clone();
    election.release_on_cancel = true;
    let opts = ManagerOptions {
        cache: CacheScope::namespaces(vec![NAMESPACE.to_string()]),
        leader_election: Some(election),
        ..ManagerOptions::default()
    };
    let mgr = Manager::new(client, opts);
    let identity = spec.identity.clone();
    let reconcile = move |ctx: Context<ConfigMap>| {
        let identity = identity.clone();
        async move {
            let Some(cm) = ctx.object.as_ref().filter(|_| ctx.request.name == PROBE) else {
                return ReconcileResult::Ok(Action::done());
            };
            let seq = cm.data.as_ref().and_then(|d| d.get("seq")).cloned().unwrap_or_default();
            let want = format!("{identity}/{seq}");
            if cm.metadata.annotations.as_ref().and_then(|a| a.get(STAMP)) != Some(&want) {
                let patch = serde_json::json!({"metadata": {"annotations": {STAMP: want}}});
                ctx.api().patch(PROBE, &PatchParams::default(), &Patch::Merge(&patch)).await?;
            }
            Ok(Action::done())
        }
    };
    Controller::new(&mgr, reconcile).build().map_err(|e| BenchError::Setup(e.to_string()))?;
    let cache = mgr.cache().clone();
    let running = tokio::spawn(mgr.run());
    // Everywhere-runnables (and the cache) start before the election: a synced cache is
    // what a warm standby has.
    let ready = ReplicaReady { synced: cache.wait_for_sync(Duration::from_secs(60)).await };
    let line = serde_json::to_string(&ready).map_err(|e| BenchError::Setup(e.to_string()))?;
    let mut out = tokio::io::stdout();
    out.write_all(format!("{line}\n").as_bytes()).await?;
    out.flush().await?;
    match running.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(BenchError::Setup(format!("manager: {e}"))),
        Err(e) => Err(BenchError::Setup(format!("manager task: {e}"))),
    }
}

/// What a replica prints once its cache synced.
#[derive(Debug, Serialize, Deserialize)]
struct ReplicaReady {
    synced: bool,
}

struct Replica {
    child: Child,
}

impl Replica {
    async fn start(exe: &std::path::Path, server: &ServeInfo, identity: &str) -> Result<Replica, BenchError> {
        let spec = serde_json::to_string(&ReplicaSpec { server: server.clone(), identity: identity.to_string() })
            .map_err(|e| BenchError::Setup(e.to_string()))?;
        let mut cmd = Command::new(exe);
        cmd.arg("failover-replica");
        let what = format!("replica {identity}");
        let spawned: Spawned<ReplicaReady> =
            spawn_child_with_input(cmd, &what, Duration::from_secs(60), Some(&spec)).await?;
        if !spawned.ready.synced {
            return Err(BenchError::Setup(format!("{what}: its cache did not sync")));
        }
        Ok(Replica { child: spawned.child })
    }

    fn signal(&self, signal: KillSignal) -> Result<(), BenchError> {
        let pid = self.child.id().ok_or_else(|| BenchError::Setup("the replica already exited".into()))?;
        let sig = match signal {
            KillSignal::Sigkill => "-KILL",
            KillSignal::Sigterm => "-TERM",
        };
        let status = std::process::Command::new("kill").arg(sig).arg(pid.to_string()).status()?;
        if status.success() { Ok(()) } else { Err(BenchError::Setup(format!("kill {sig} {pid} failed"))) }
    }
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

/// One failover on a fresh server: seconds from the kill to the standby's stamp.
async fn one_run(exe: &std::path::Path, signal: KillSignal, run: usize) -> Result<f64, BenchError> {
    let cluster = Cluster::start(exe).await?;
    let result = async {
        let client = cluster.client()?;
        let probes: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
        let mut probe = ConfigMap::default();
        probe.metadata.name = Some(PROBE.into());
        probe.data = Some([("seq".to_string(), "0".to_string())].into());
        probes.create(&PostParams::default(), &probe).await.map_err(|e| BenchError::Setup(format!("probe: {e}")))?;
        let leader = Replica::start(exe, &cluster.server.info, &format!("leader-{run}")).await?;
        wait_stamp(&probes, &format!("leader-{run}/0"), Duration::from_secs(60)).await?;
        let standby = Replica::start(exe, &cluster.server.info, &format!("standby-{run}")).await?;
        let leases: Api<Lease> = Api::namespaced(client, NAMESPACE);
        let holder = leases.get(LEASE).await.ok().and_then(|l| l.spec?.holder_identity);
        if holder.as_deref() != Some(&format!("leader-{run}")) {
            return Err(BenchError::Setup(format!("the lease is held by {holder:?}, not the first replica")));
        }
        let killed = Instant::now();
        leader.signal(signal)?;
        set_seq(&probes, 1).await?;
        wait_stamp(&probes, &format!("standby-{run}/1"), Duration::from_secs(60)).await?;
        let seconds = killed.elapsed().as_secs_f64();
        drop((leader, standby));
        Ok(seconds)
    }
    .await;
    cluster.stop().await;
    result
}

/// Runs `opts.runs` failovers per signal.
pub async fn run(opts: &FailoverOptions) -> Result<FailoverReport, BenchError> {
    let mut series = Vec::new();
    let mut failures = Vec::new();
    for signal in [KillSignal::Sigkill, KillSignal::Sigterm] {
        let mut seconds = Vec::new();
        for run in 0..opts.runs.max(1) {
            if opts.progress {
                eprintln!("[opkit-bench] failover: {signal:?} run {}/{}", run + 1, opts.runs);
            }
            match one_run(&opts.exe, signal, run).await {
                Ok(s) => seconds.push(s),
                Err(e) => failures.push(format!("{signal:?} run {}: {e}", run + 1)),
            }
        }
        let mut sorted = seconds.clone();
        sorted.sort_by(f64::total_cmp);
        let median_seconds = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
        series.push(FailoverSeries { signal, seconds, median_seconds });
    }
    Ok(FailoverReport { machine: Machine::detect(), series, failures })
}

/// The report for people.
pub fn render_text(r: &FailoverReport) -> String {
    let mut out = String::new();
    for s in &r.series {
        let runs: Vec<String> = s.seconds.iter().map(|x| format!("{x:.2}")).collect();
        out.push_str(&format!(
            "failover after {:?}: median {:.2} s over {} runs ({})\n",
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
