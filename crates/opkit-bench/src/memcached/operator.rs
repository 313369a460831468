//! The operator under test in its own process: the hidden `opkit-bench memcached-operator
//! --kubeconfig PATH` command runs `memcached_operator::controller::setup` in an opkit
//! manager with `/metrics` on 127.0.0.1 (a random port), prints one [`OperatorReady`]
//! JSON line once its manager runs and its caches are synced, and runs until its standard
//! input closes. [`OperatorProcess`] is the parent's handle on it: spawning, scraping its
//! metrics, reading its memory from `/proc`.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::config::{KubeConfigOptions, Kubeconfig};
use opkit::{Manager, ManagerOptions, Runnable, RunnableError};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::metrics::{ReconcileCounts, reconcile_counts, scrape};
use crate::BenchError;
use crate::child::{Spawned, spawn_child};
use crate::serve::ProcMemory;

/// The name of the controller whose counters are read (`Controller::new` names it after
/// the kind, lowercased).
pub const CONTROLLER: &str = "memcached";
/// How long the child may take to start and sync its caches.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the child may take to stop after its standard input closed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// What the child prints once it is running.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OperatorReady {
    /// The child's process id.
    pub pid: u32,
    /// Where its `/metrics` endpoint listens.
    pub metrics_addr: SocketAddr,
    /// Whether its caches finished their initial lists within the timeout.
    pub synced: bool,
    /// The child's VmRSS before it built a client and a manager.
    pub rss_before_bytes: u64,
}

/// Signals the child's main task once the manager starts its runnables (by then the
/// metrics endpoint is bound and `bound_addresses` filled), then idles until shutdown.
struct Started(Option<oneshot::Sender<()>>);

impl Runnable for Started {
    fn name(&self) -> String {
        "opkit-bench/started".into()
    }
    fn needs_leader_election(&self) -> bool {
        false
    }
    fn start(mut self: Box<Self>, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), RunnableError>> {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
        Box::pin(async move {
            shutdown.cancelled().await;
            Ok(())
        })
    }
}

fn own_memory() -> Result<ProcMemory, BenchError> {
    let s = std::fs::read_to_string("/proc/self/status")?;
    ProcMemory::parse(&s).ok_or_else(|| BenchError::Setup("no VmRSS/VmHWM in /proc/self/status".into()))
}

async fn client_from(kubeconfig: &Path) -> Result<kube::Client, BenchError> {
    let kc = Kubeconfig::read_from(kubeconfig)
        .map_err(|e| BenchError::Setup(format!("kubeconfig {}: {e}", kubeconfig.display())))?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| BenchError::Setup(format!("kubeconfig {}: {e}", kubeconfig.display())))?;
    kube::Client::try_from(cfg).map_err(|e| BenchError::Setup(format!("kube client: {e}")))
}

/// Runs the hidden `memcached-operator` command (see the module docs).
pub async fn run_child(kubeconfig: &Path) -> Result<(), BenchError> {
    let before = own_memory()?;
    let client = client_from(kubeconfig).await?;
    let options = ManagerOptions { metrics_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))), ..Default::default() };
    let mgr = Manager::new(client, options);
    memcached_operator::controller::setup(&mgr).map_err(|e| BenchError::Setup(e.to_string()))?;
    let (tx, rx) = oneshot::channel();
    mgr.add(Started(Some(tx)));
    let handle = mgr.clone();
    let stop = CancellationToken::new();
    let mut task = tokio::spawn(mgr.run_until(stop.clone()));
    // Either the manager started its runnables, or it stopped (e.g. could not bind).
    tokio::select! {
        started = rx => {
            if started.is_err() {
                return Err(BenchError::Setup("the manager dropped its runnables before starting".into()));
            }
        }
        ended = &mut task => {
            return Err(BenchError::Setup(match ended {
                Ok(Ok(())) => "the manager stopped before starting".into(),
                Ok(Err(e)) => format!("manager: {e}"),
                Err(e) => format!("manager task: {e}"),
            }));
        }
    }
    let metrics_addr =
        handle.bound_addresses().0.ok_or_else(|| BenchError::Setup("the manager bound no metrics address".into()))?;
    let synced = handle.cache().wait_for_sync(READY_TIMEOUT).await;
    let ready = OperatorReady { pid: std::process::id(), metrics_addr, synced, rss_before_bytes: before.rss_bytes };
    let line = serde_json::to_string(&ready).map_err(|e| BenchError::Setup(e.to_string()))?;
    let mut out = tokio::io::stdout();
    out.write_all(format!("{line}\n").as_bytes()).await?;
    out.flush().await?;
    // Run until the parent closes our stdin (or exits), or the manager stops by itself.
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 256];
    let eof = async {
        while let Ok(n) = stdin.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    };
    tokio::select! {
        _ = eof => {
            stop.cancel();
            match tokio::time::timeout(STOP_TIMEOUT, task).await {
                Ok(Ok(Err(e))) => Err(BenchError::Setup(format!("manager: {e}"))),
                _ => Ok(()),
            }
        }
        ended = &mut task => match ended {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(BenchError::Setup(format!("manager: {e}"))),
            Err(e) => Err(BenchError::Setup(format!("manager task: {e}"))),
        },
    }
}

/// An operator child process; killed when dropped.
pub struct OperatorProcess {
    child: Child,
    /// What the child printed once it was running.
    pub ready: OperatorReady,
}

impl OperatorProcess {
    /// Spawns `exe memcached-operator --kubeconfig PATH` and waits (bounded) for its
    /// [`OperatorReady`] line.
    pub async fn spawn(exe: &Path, kubeconfig: &Path) -> Result<OperatorProcess, BenchError> {
        let mut cmd = Command::new(exe);
        cmd.arg("memcached-operator").arg("--kubeconfig").arg(kubeconfig);
        let what = format!("{} memcached-operator", exe.display());
        let Spawned { child, ready, .. } = spawn_child(cmd, &what, READY_TIMEOUT + Duration::from_secs(10)).await?;
        Ok(OperatorProcess { child, ready })
    }

    /// The child's current VmRSS and VmHWM.
    pub fn memory(&self) -> Result<ProcMemory, BenchError> {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.ready.pid))?;
        ProcMemory::parse(&s).ok_or_else(|| BenchError::Setup("no VmRSS/VmHWM in /proc status".into()))
    }

    /// The memcached controller's reconcile counters, scraped from `/metrics`.
    pub async fn reconciles(&self) -> Result<ReconcileCounts, BenchError> {
        Ok(reconcile_counts(&scrape(self.ready.metrics_addr).await?, CONTROLLER))
    }

    /// Stops the child: closes its stdin, then kills it if it has not exited promptly.
    pub async fn stop(mut self) {
        drop(self.child.stdin.take());
        if tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_line_round_trips() {
        let r = OperatorReady {
            pid: 42,
            metrics_addr: "127.0.0.1:9090".parse().expect("addr"),
            synced: true,
            rss_before_bytes: 1,
        };
        let back: OperatorReady = serde_json::from_str(&serde_json::to_string(&r).expect("json")).expect("parse");
        assert_eq!((back.pid, back.metrics_addr.port(), back.synced), (42, 9090, true));
    }

    #[tokio::test]
    async fn started_runnable_signals_then_waits_for_shutdown() {
        let (tx, rx) = oneshot::channel();
        let stop = CancellationToken::new();
        let r: Box<dyn Runnable> = Box::new(Started(Some(tx)));
        assert!(!r.needs_leader_election());
        let fut = r.start(stop.clone());
        rx.await.expect("signalled on start");
        stop.cancel();
        assert!(fut.await.is_ok());
    }
}
