//! The memory measurement's child process: the hidden `opkit-bench runtime-manager`
//! command runs an opkit manager (cache plus one ConfigMap controller) — or, as the
//! baseline, a bare `kube::runtime::Controller` — against the server it is told about,
//! reports once every object was reconciled, and idles until its standard input closes;
//! the parent reads its VmRSS/VmHWM from `/proc` meanwhile, so the figure is the
//! controller process's alone.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::cluster::NAMESPACE;
use super::drivers::{self, Runtime, opkit_manager};
use super::recorder::Recorder;
use crate::BenchError;
use crate::serve::{ProcMemory, ServeInfo};

/// What the parent tells the child (one JSON line on its standard input).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManagerSpec {
    /// The server to run against.
    pub server: ServeInfo,
    /// What runs in the child.
    pub runtime: Runtime,
    /// Benchmark objects to wait for.
    pub objects: usize,
    /// The controller's concurrent reconciles.
    pub concurrency: usize,
    /// How long to wait for every object to be reconciled, in seconds.
    pub timeout_secs: u64,
}

/// What the child reports (one JSON line on its standard output) once it is ready to be
/// measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManagerReady {
    /// The child's process id.
    pub pid: u32,
    /// Objects reconciled.
    pub reconciled: usize,
    /// Whether the cache reported itself synced.
    pub synced: bool,
    /// From manager start to the last first reconcile, in seconds.
    pub seconds: f64,
    /// The child's VmRSS before it built a client and a manager.
    pub rss_before_bytes: u64,
}

fn own_memory() -> Result<ProcMemory, BenchError> {
    let s = std::fs::read_to_string("/proc/self/status")?;
    ProcMemory::parse(&s).ok_or_else(|| BenchError::Setup("no VmRSS/VmHWM in /proc/self/status".into()))
}

/// Runs the hidden `runtime-manager` command (see the module docs).
pub async fn run_child() -> Result<(), BenchError> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let line = lines.next_line().await?.ok_or_else(|| BenchError::Setup("no manager spec on stdin".into()))?;
    let spec: ManagerSpec =
        serde_json::from_str(&line).map_err(|e| BenchError::Setup(format!("bad manager spec: {e}")))?;
    let before = own_memory()?;
    let client = spec.server.kube_client(NAMESPACE)?;
    let rec = Arc::new(Recorder::new(spec.objects));
    let start = rec.stamp();
    rec.set_trigger_all(start);
    let timeout = Duration::from_secs(spec.timeout_secs);
    let (all, synced, stop) = match spec.runtime {
        Runtime::Opkit => {
            let mgr = opkit_manager(client, spec.concurrency, rec.clone());
            let cache = mgr.cache().clone();
            let stop = CancellationToken::new();
            let task = tokio::spawn(mgr.run_until(stop.clone()));
            let all = rec.wait_all(timeout).await;
            let synced = cache.wait_for_sync(Duration::from_secs(if all { 10 } else { 0 })).await;
            (all, synced, Stop::Opkit(stop, task))
        }
        Runtime::Kube => {
            let running = drivers::start(Runtime::Kube, client, spec.concurrency, rec.clone());
            let all = rec.wait_all(timeout).await;
            (all, all, Stop::Kube(running))
        }
    };
    let stats = rec.stats(start, !all);
    let ready = ManagerReady {
        pid: std::process::id(),
        reconciled: stats.reconciled,
        synced,
        seconds: stats.seconds,
        rss_before_bytes: before.rss_bytes,
    };
    let line = serde_json::to_string(&ready).map_err(|e| BenchError::Setup(e.to_string()))?;
    let mut out = tokio::io::stdout();
    out.write_all(format!("{line}\n").as_bytes()).await?;
    out.flush().await?;
    // Idle (manager still running, cache populated) until the parent closes our stdin.
    while let Ok(Some(_)) = lines.next_line().await {}
    match stop {
        Stop::Opkit(token, task) => {
            token.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(20), task).await;
        }
        Stop::Kube(running) => {
            running.stop().await;
        }
    }
    Ok(())
}

enum Stop {
    Opkit(CancellationToken, tokio::task::JoinHandle<Result<(), opkit::ManagerError>>),
    Kube(drivers::Running),
}

/// The controller process's memory once it cached and reconciled every object.
#[derive(Debug, Clone, Serialize)]
pub struct ManagerMemory {
    /// What ran in the child.
    pub runtime: Runtime,
    /// Objects in the cache.
    pub objects: usize,
    /// Approximate request size of one object, in bytes.
    pub payload_bytes: usize,
    /// Total size of the objects as the server returned them on create (JSON).
    pub json_bytes: u64,
    /// Objects the manager had reconciled when measured.
    pub reconciled: usize,
    /// Whether its cache was synced.
    pub synced: bool,
    /// From manager start to the last first reconcile, in seconds.
    pub sync_seconds: f64,
    /// VmRSS of the child before it built a client and a manager.
    pub rss_before_bytes: u64,
    /// VmRSS of the child running the manager.
    pub rss_bytes: u64,
    /// VmHWM (peak RSS) of the child.
    pub hwm_bytes: u64,
}

/// Spawns `exe runtime-manager` running `runtime` against `server`, waits (bounded) for it
/// to report, and reads its memory.
pub async fn measure(
    exe: &Path,
    runtime: Runtime,
    server: &ServeInfo,
    objects: usize,
    concurrency: usize,
    timeout: Duration,
) -> Result<(ManagerReady, ProcMemory), BenchError> {
    let mut child = Command::new(exe)
        .arg("runtime-manager")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| BenchError::Setup(format!("spawning {} runtime-manager: {e}", exe.display())))?;
    let mut stdin = child.stdin.take().ok_or_else(|| BenchError::Setup("no stdin pipe".into()))?;
    let stdout = child.stdout.take().ok_or_else(|| BenchError::Setup("no stdout pipe".into()))?;
    let spec =
        ManagerSpec { server: server.clone(), runtime, objects, concurrency, timeout_secs: timeout.as_secs().max(1) };
    let line = serde_json::to_string(&spec).map_err(|e| BenchError::Setup(e.to_string()))?;
    stdin.write_all(format!("{line}\n").as_bytes()).await?;
    stdin.flush().await?;
    let mut lines = BufReader::new(stdout).lines();
    let reply = tokio::time::timeout(timeout + Duration::from_secs(30), lines.next_line())
        .await
        .map_err(|_| BenchError::Setup("the manager process did not report in time".into()))??
        .ok_or_else(|| BenchError::Setup("the manager process exited before reporting".into()))?;
    let ready: ManagerReady =
        serde_json::from_str(&reply).map_err(|e| BenchError::Setup(format!("bad manager report {reply:?}: {e}")))?;
    let status = std::fs::read_to_string(format!("/proc/{}/status", ready.pid))?;
    let mem = ProcMemory::parse(&status).ok_or_else(|| BenchError::Setup("no VmRSS/VmHWM in /proc status".into()))?;
    drop(stdin);
    if tokio::time::timeout(Duration::from_secs(30), child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
    Ok((ready, mem))
}
