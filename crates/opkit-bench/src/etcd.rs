//! The etcd baseline: starts Debian's `etcd` on loopback with a temporary data directory
//! and drives puts through its v3 JSON gateway (`POST /v3/kv/put`, base64 key and value).

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use http::Method;
use tokio::process::{Child, Command};

use crate::BenchError;
use crate::client::{Endpoint, call};
use crate::load::{MakeRequest, Phase, run_phase};
use crate::stats::PhaseStats;

/// How long etcd may take to answer its first request.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A running etcd; killed when dropped.
pub struct Etcd {
    child: Child,
    /// The client address (`127.0.0.1:PORT`).
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

fn free_port() -> Result<u16, BenchError> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Whether `err` means the etcd binary is missing.
pub fn is_missing(err: &BenchError) -> bool {
    matches!(err, BenchError::EtcdMissing(_))
}

impl Etcd {
    /// Starts `bin` (e.g. `etcd`) on free loopback ports and waits until it serves.
    pub async fn start(bin: &Path) -> Result<Etcd, BenchError> {
        let dir = tempfile::Builder::new().prefix("opkit-bench-etcd-").tempdir()?;
        let (client, peer) = (free_port()?, free_port()?);
        let curl = format!("http://127.0.0.1:{client}");
        let purl = format!("http://127.0.0.1:{peer}");
        let mut cmd = Command::new(bin);
        cmd.arg("--name")
            .arg("bench")
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--listen-client-urls", &curl, "--advertise-client-urls", &curl])
            .args(["--listen-peer-urls", &purl, "--initial-advertise-peer-urls", &purl])
            .args(["--initial-cluster", &format!("bench={purl}"), "--initial-cluster-state", "new"])
            .args(["--logger", "zap", "--log-level", "error"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let child = cmd.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => BenchError::EtcdMissing(format!(
                "{} not found (install it with `apt-get install -y etcd-server`)",
                bin.display()
            )),
            _ => BenchError::Setup(format!("spawning {}: {e}", bin.display())),
        })?;
        let addr = SocketAddr::from(([127, 0, 0, 1], client));
        let mut etcd = Etcd { child, addr, _dir: dir };
        etcd.wait_ready().await?;
        Ok(etcd)
    }

    async fn wait_ready(&mut self) -> Result<(), BenchError> {
        let ep = Endpoint::plain(self.addr)?;
        let start = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        let body = Bytes::from(format!("{{\"key\":\"{}\"}}", B64.encode("ready")));
        loop {
            tick.tick().await;
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(BenchError::Setup(format!("etcd exited at start-up ({status})")));
            }
            if call(&ep, Method::POST, "/v3/kv/range", body.clone()).await.is_ok() {
                return Ok(());
            }
            if start.elapsed() > READY_TIMEOUT {
                return Err(BenchError::Setup("etcd did not become ready within 30 s".into()));
            }
        }
    }

    /// Runs `total` puts of `value` at `concurrency` under distinct keys.
    pub async fn puts(
        &self,
        concurrency: usize,
        total: usize,
        limit: Duration,
        value: &[u8],
    ) -> Result<PhaseStats, BenchError> {
        let ep = Endpoint::plain(self.addr)?;
        let value = Arc::new(B64.encode(value));
        let prefix = format!("/registry/configmaps/bench/c{concurrency}-");
        let ep2 = ep.clone();
        let make: MakeRequest = Arc::new(move |i| {
            let key = B64.encode(format!("{prefix}{i:07}"));
            let body = format!("{{\"key\":\"{key}\",\"value\":\"{value}\"}}");
            ep2.request(Method::POST, "/v3/kv/put", Bytes::from(body))
        });
        let phase = Phase { op: "put".into(), concurrency, total, limit };
        Ok(run_phase(&ep, &phase, make).await?.stats)
    }

    /// Stops etcd.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}
