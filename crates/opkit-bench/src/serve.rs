//! The server under test in its own process: the hidden `opkit-bench serve` command that
//! starts an [`ApiServer`] (and, for the cluster benchmark, the cluster controllers next to
//! it, as `opkit cluster start` does) and prints how to reach it, the parent's handle on
//! that child process, and reading its memory from `/proc/PID/status`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use opkit_apiserver::{ApiServer, ServerConfig};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

use crate::BenchError;
use crate::child::{Spawned, spawn_child};
use crate::client::{Endpoint, parse_url_addr};

/// The line that asks the `serve` child how many watches are open.
const OPEN_WATCHES_QUERY: &str = "open-watches";

/// How long the child may take to print its address.
const SPAWN_TIMEOUT: Duration = Duration::from_secs(60);

/// Which storage backend the server uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Objects only in memory.
    Memory,
    /// SQLite (WAL, synchronous=FULL) in a temporary directory.
    Durable,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Memory => "in-memory",
            Backend::Durable => "durable (SQLite)",
        })
    }
}

/// The line `serve` prints once the server accepts connections.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServeInfo {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// The admin bearer token.
    pub token: String,
    /// The CA certificate (PEM).
    pub ca_pem: String,
    /// The server's process id.
    pub pid: u32,
    /// How long `ApiServer::start` took, in milliseconds.
    pub startup_ms: f64,
}

impl ServeInfo {
    /// A `kube::Client` for this server (loopback only), trusting its CA, authenticating
    /// with its bearer token, and defaulting to `namespace`.
    pub fn kube_client(&self, namespace: &str) -> Result<kube::Client, BenchError> {
        parse_url_addr(&self.url)?;
        let uri: http::Uri =
            self.url.parse().map_err(|e| BenchError::Setup(format!("server URL {}: {e}", self.url)))?;
        let mut roots = Vec::new();
        for cert in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| BenchError::Setup(format!("CA PEM: {e}")))?;
            roots.push(cert.to_vec());
        }
        if roots.is_empty() {
            return Err(BenchError::Setup("the server printed no CA certificate".into()));
        }
        let mut cfg = kube::Config::new(uri);
        cfg.root_cert = Some(roots);
        cfg.auth_info.token = Some(self.token.clone().into());
        cfg.default_namespace = namespace.into();
        kube::Client::try_from(cfg).map_err(|e| BenchError::Setup(format!("kube client: {e}")))
    }
}

/// The cluster controllers the `serve` child runs next to its server (the cluster benchmark).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ControllerSettings {
    /// Simulated nodes to register.
    pub nodes: usize,
    /// How long a scheduled pod stays Pending before it starts, in milliseconds.
    pub pod_start_delay_ms: u64,
    /// How long a started pod takes to become Ready, in milliseconds.
    pub pod_ready_delay_ms: u64,
}

impl ControllerSettings {
    /// The arguments of `serve` that ask for these controllers.
    fn args(&self) -> Vec<String> {
        vec![
            "--nodes".into(),
            self.nodes.to_string(),
            "--pod-start-delay-ms".into(),
            self.pod_start_delay_ms.to_string(),
            "--pod-ready-delay-ms".into(),
            self.pod_ready_delay_ms.to_string(),
        ]
    }

    fn config(&self) -> opkit_controllers::ControllersConfig {
        opkit_controllers::ControllersConfig {
            nodes: self.nodes,
            pod_start_delay: Duration::from_millis(self.pod_start_delay_ms),
            pod_ready_delay: Duration::from_millis(self.pod_ready_delay_ms),
            ..opkit_controllers::ControllersConfig::default()
        }
    }
}

/// Runs the hidden `serve` command: starts a server (and `controllers`, if given), prints
/// one [`ServeInfo`] JSON line and serves until standard input closes (so it ends with the
/// bench that spawned it).
pub async fn serve(
    backend: Backend,
    data_dir: Option<PathBuf>,
    controllers: Option<ControllerSettings>,
) -> Result<(), BenchError> {
    let cfg = match (backend, data_dir) {
        (Backend::Memory, _) => ServerConfig::in_memory(),
        (Backend::Durable, Some(d)) => ServerConfig::durable(&d),
        (Backend::Durable, None) => {
            return Err(BenchError::Setup("durable storage needs --data-dir".into()));
        }
    };
    let server = ApiServer::start(cfg).await?;
    let info = ServeInfo {
        url: server.url(),
        token: server.token().to_string(),
        ca_pem: server.ca_pem().to_string(),
        pid: std::process::id(),
        startup_ms: server.startup_time().as_secs_f64() * 1000.0,
    };
    let stop = tokio_util::sync::CancellationToken::new();
    if let Some(c) = controllers {
        let client = info.kube_client("default")?;
        opkit_controllers::spawn(client, &c.config().root_ca(server.ca_pem()), stop.clone());
    }
    let line = serde_json::to_string(&info).map_err(|e| BenchError::Setup(e.to_string()))?;
    println!("{line}");
    // Each `open-watches` line is answered with the number of open watches on stdout;
    // serving ends at EOF (the parent closed the pipe or exited) or on a read error.
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = stdin.next_line().await {
        if line.trim() == OPEN_WATCHES_QUERY {
            println!("{}", server.registry().open_watches());
        }
    }
    stop.cancel();
    server.shutdown().await;
    Ok(())
}

/// A server child process; killed when dropped.
pub struct ServerProcess {
    child: Child,
    /// The child's standard output after its [`ServeInfo`] line: answers to queries.
    answers: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    /// What the child printed.
    pub info: ServeInfo,
    _dir: Option<tempfile::TempDir>,
}

impl ServerProcess {
    /// Spawns `exe serve --backend B [--data-dir D]` and waits for its [`ServeInfo`] line.
    /// A durable server gets a fresh temporary directory under `tmp_root`.
    pub async fn spawn(exe: &Path, backend: Backend, tmp_root: Option<&Path>) -> Result<ServerProcess, BenchError> {
        Self::spawn_with(exe, backend, tmp_root, None).await
    }

    /// Like [`ServerProcess::spawn`], with the cluster controllers running in the child.
    pub async fn spawn_with(
        exe: &Path,
        backend: Backend,
        tmp_root: Option<&Path>,
        controllers: Option<ControllerSettings>,
    ) -> Result<ServerProcess, BenchError> {
        let mut cmd = Command::new(exe);
        cmd.arg("serve").arg("--backend").arg(match backend {
            Backend::Memory => "memory",
            Backend::Durable => "durable",
        });
        if let Some(c) = &controllers {
            cmd.args(c.args());
        }
        let dir = match backend {
            Backend::Memory => None,
            Backend::Durable => {
                let d = match tmp_root {
                    Some(r) => tempfile::Builder::new().prefix("opkit-bench-").tempdir_in(r)?,
                    None => tempfile::Builder::new().prefix("opkit-bench-").tempdir()?,
                };
                cmd.arg("--data-dir").arg(d.path());
                Some(d)
            }
        };
        let spawned = spawn_child::<ServeInfo>(cmd, &format!("{} serve", exe.display()), SPAWN_TIMEOUT).await?;
        let Spawned { child, lines, ready: info } = spawned;
        Ok(ServerProcess { child, answers: lines, info, _dir: dir })
    }

    /// An HTTPS endpoint for this server, as the admin.
    pub fn endpoint(&self) -> Result<Endpoint, BenchError> {
        self.endpoint_with_token(&self.info.token)
    }

    /// An HTTPS endpoint for this server authenticated with `token`.
    pub fn endpoint_with_token(&self, token: &str) -> Result<Endpoint, BenchError> {
        Endpoint::tls(parse_url_addr(&self.info.url)?, &self.info.ca_pem, token)
    }

    /// The server's current memory use.
    pub fn memory(&self) -> Result<ProcMemory, BenchError> {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.info.pid))?;
        ProcMemory::parse(&s).ok_or_else(|| BenchError::Setup("no VmRSS/VmHWM in /proc status".into()))
    }

    /// How many watches the server has open now (its registry's count).
    pub async fn open_watches(&mut self) -> Result<usize, BenchError> {
        let stdin = self.child.stdin.as_mut().ok_or_else(|| BenchError::Setup("no stdin pipe".into()))?;
        stdin.write_all(format!("{OPEN_WATCHES_QUERY}\n").as_bytes()).await?;
        let line = tokio::time::timeout(SPAWN_TIMEOUT, self.answers.next_line())
            .await
            .map_err(|_| BenchError::Setup("the server process did not answer in time".into()))??
            .ok_or_else(|| BenchError::Setup("the server process exited".into()))?;
        line.trim().parse().map_err(|e| BenchError::Setup(format!("bad open-watches answer {line:?}: {e}")))
    }

    /// Stops the child: closes its stdin, then kills it if it has not exited promptly.
    pub async fn stop(mut self) {
        drop(self.child.stdin.take());
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}

/// Resident memory of a process, in bytes.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ProcMemory {
    /// Current resident set (VmRSS).
    pub rss_bytes: u64,
    /// Peak resident set (VmHWM).
    pub hwm_bytes: u64,
}

impl ProcMemory {
    /// Reads VmRSS and VmHWM (in kB) from the text of `/proc/PID/status`.
    pub fn parse(status: &str) -> Option<ProcMemory> {
        let field = |name: &str| {
            status.lines().find_map(|l| {
                let rest = l.strip_prefix(name)?.strip_prefix(':')?;
                rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok().map(|kb| kb * 1024)
            })
        };
        Some(ProcMemory { rss_bytes: field("VmRSS")?, hwm_bytes: field("VmHWM")? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_status() {
        let s = "Name:\topkit-bench\nVmPeak:\t  999 kB\nVmHWM:\t   2048 kB\nVmRSS:\t    1024 kB\n";
        let m = ProcMemory::parse(s).unwrap();
        assert_eq!(m.rss_bytes, 1024 * 1024);
        assert_eq!(m.hwm_bytes, 2048 * 1024);
        assert!(ProcMemory::parse("VmRSS:\t1 kB\n").is_none());
    }

    #[test]
    fn reads_own_memory() {
        let s = std::fs::read_to_string("/proc/self/status").unwrap();
        let m = ProcMemory::parse(&s).unwrap();
        assert!(m.rss_bytes > 0 && m.hwm_bytes >= m.rss_bytes);
    }
}
