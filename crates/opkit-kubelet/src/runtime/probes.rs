//! Container probes as the kubelet runs them: `httpGet` (to the pod IP or `host`; HTTPS
//! without verifying the certificate; 200–399 succeed), `tcpSocket` (a connection
//! succeeds) and `exec` (a command in the container's sandbox and environment exits 0),
//! each under `timeoutSeconds`, and the success/failure thresholds that turn single
//! results into a probe's state.

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::container::JoinPlan;
use super::process::{ContainerProcess, Containment, ProcessSpec};
use crate::network::PodSandbox;

/// Which probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeKind {
    /// `startupProbe`.
    Startup,
    /// `livenessProbe`.
    Liveness,
    /// `readinessProbe`.
    Readiness,
}

impl ProbeKind {
    /// The name kube's events use (`Liveness probe failed: …`).
    pub(crate) fn title(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
        }
    }
}

/// A probe's timing and thresholds, with kube's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProbeTiming {
    /// `initialDelaySeconds` (0).
    pub initial_delay: Duration,
    /// `periodSeconds` (10).
    pub period: Duration,
    /// `timeoutSeconds` (1).
    pub timeout: Duration,
    /// `successThreshold` (1).
    pub success_threshold: u32,
    /// `failureThreshold` (3).
    pub failure_threshold: u32,
}

fn seconds(v: Option<i32>, default: u64) -> Duration {
    Duration::from_secs(v.and_then(|s| u64::try_from(s).ok()).unwrap_or(default))
}

impl ProbeTiming {
    /// The timing of `probe`.
    pub(crate) fn of(probe: &Probe) -> ProbeTiming {
        let count = |v: Option<i32>, d: u32| v.and_then(|s| u32::try_from(s).ok()).filter(|s| *s > 0).unwrap_or(d);
        ProbeTiming {
            initial_delay: seconds(probe.initial_delay_seconds, 0),
            period: seconds(probe.period_seconds, 10).max(Duration::from_secs(1)),
            timeout: seconds(probe.timeout_seconds, 1).max(Duration::from_secs(1)),
            success_threshold: count(probe.success_threshold, 1),
            failure_threshold: count(probe.failure_threshold, 3),
        }
    }
}

/// Turns results into a state: it changes after `successThreshold` successes or
/// `failureThreshold` failures in a row.
#[derive(Debug, Clone, Default)]
pub(crate) struct Thresholds {
    successes: u32,
    failures: u32,
}

impl Thresholds {
    /// Records one result; returns the new state when a threshold is reached.
    pub(crate) fn record(&mut self, ok: bool, timing: &ProbeTiming) -> Option<bool> {
        if ok {
            self.failures = 0;
            self.successes = self.successes.saturating_add(1);
            (self.successes >= timing.success_threshold).then_some(true)
        } else {
            self.successes = 0;
            self.failures = self.failures.saturating_add(1);
            (self.failures >= timing.failure_threshold).then_some(false)
        }
    }
}

/// What a probe needs of its container.
pub(crate) struct ProbeTarget<'a> {
    /// The container (for named ports).
    pub container: &'a Container,
    /// The pod's IP.
    pub pod_ip: IpAddr,
    /// The container's environment and working directory, for exec probes.
    pub exec: &'a ProcessSpec,
    /// The pod's sandbox, for exec probes.
    pub sandbox: &'a PodSandbox,
    /// The contained container exec probes run in (`None`: uncontained).
    pub join: Option<JoinPlan>,
}

/// A port given as a number or as the name of one of the container's ports.
fn port(p: &IntOrString, c: &Container) -> Result<u16, String> {
    let n = match p {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => match name.parse::<i32>() {
            Ok(n) => n,
            Err(_) => c
                .ports
                .iter()
                .flatten()
                .find(|cp| cp.name.as_deref() == Some(name.as_str()))
                .map(|cp| cp.container_port)
                .ok_or_else(|| format!("couldn't find port: {name} in container {}", c.name))?,
        },
    };
    u16::try_from(n).ok().filter(|p| *p > 0).ok_or_else(|| format!("invalid port number: {n}"))
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

/// Runs one probe of a container instance, keeping its HTTP client between runs.
#[derive(Default)]
pub(crate) struct Prober {
    /// The HTTP(S) client of an `httpGet` probe, and the base URL it was made for.
    http: Option<(String, kube::Client)>,
}

impl Prober {
    /// Runs `probe` once; `Err` carries the failure's message as kube words it.
    pub(crate) async fn run(&mut self, probe: &Probe, target: &ProbeTarget<'_>) -> Result<(), String> {
        let timeout = ProbeTiming::of(probe).timeout;
        let Some(http) = &probe.http_get else { return run_other(probe, target, timeout).await };
        let port = port(&http.port, target.container)?;
        let host = http.host.clone().filter(|h| !h.is_empty()).unwrap_or_else(|| target.pod_ip.to_string());
        let scheme = http.scheme.as_deref().unwrap_or("HTTP").to_lowercase();
        let path = http.path.clone().filter(|p| !p.is_empty()).unwrap_or_else(|| "/".into());
        let base = format!("{scheme}://{}", host_port(&host, port));
        let url = format!("{base}{path}");
        let client = match &self.http {
            Some((b, client)) if *b == base => client.clone(),
            _ => {
                let client = http_client(&base, timeout).map_err(|e| format!("Get {url:?}: {e}"))?;
                self.http = Some((base, client.clone()));
                client
            }
        };
        http_get(&client, &url, &path, http.http_headers.iter().flatten(), timeout).await
    }
}

/// A client for `base` that, as kube's prober, does not verify HTTPS certificates.
fn http_client(base: &str, timeout: Duration) -> Result<kube::Client, String> {
    let uri: http::Uri = base.parse().map_err(|e: http::uri::InvalidUri| e.to_string())?;
    let mut config = kube::Config::new(uri);
    config.accept_invalid_certs = true;
    config.read_timeout = Some(timeout);
    config.connect_timeout = Some(timeout);
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// Runs a `tcpSocket` or `exec` probe once.
async fn run_other(probe: &Probe, target: &ProbeTarget<'_>, timeout: Duration) -> Result<(), String> {
    if let Some(tcp) = &probe.tcp_socket {
        let port = port(&tcp.port, target.container)?;
        let host = tcp.host.clone().filter(|h| !h.is_empty()).unwrap_or_else(|| target.pod_ip.to_string());
        let addr = host_port(&host, port);
        return match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(&addr)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("dial tcp {addr}: connect: {e}")),
            Err(_) => Err(format!("dial tcp {addr}: i/o timeout")),
        };
    }
    if let Some(exec) = &probe.exec {
        let command = exec.command.clone().unwrap_or_default();
        let Some((program, args)) = command.split_first() else {
            return Err("exec probe has no command".into());
        };
        let spec = ProcessSpec {
            program: program.into(),
            args: args.to_vec(),
            env: target.exec.env.clone(),
            working_dir: target.exec.working_dir.clone(),
            service_account: None,
            mounts: Vec::new(),
            stdin: false,
            containment: target.join.clone().map(Containment::Join),
        };
        let (mut process, stdout, stderr) =
            ContainerProcess::spawn(&spec, target.sandbox).map_err(|e| format!("exec {program:?}: {e}"))?;
        let collect = async {
            let mut out = Vec::new();
            if let Some(mut s) = stdout {
                let _ = tokio::io::AsyncReadExt::read_to_end(&mut s, &mut out).await;
            }
            if let Some(mut s) = stderr {
                let _ = tokio::io::AsyncReadExt::read_to_end(&mut s, &mut out).await;
            }
            (out, process.wait().await)
        };
        return match tokio::time::timeout(timeout, collect).await {
            Ok((_, exit)) if exit.code == 0 => Ok(()),
            Ok((out, _)) => Err(String::from_utf8_lossy(&out).into_owned()),
            Err(_) => Err(format!("command {:?} timed out", command.join(" "))),
        };
    }
    Err("probe has no handler".into())
}

/// One HTTP(S) GET as the kubelet's prober sends it.
async fn http_get(
    client: &kube::Client,
    url: &str,
    path: &str,
    headers: impl Iterator<Item = &k8s_openapi::api::core::v1::HTTPHeader>,
    timeout: Duration,
) -> Result<(), String> {
    let mut req = http::Request::get(path).header("User-Agent", "kube-probe/1.33").header("Accept", "*/*");
    for h in headers {
        req = req.header(h.name.as_str(), h.value.as_str());
    }
    let req = req.body(Vec::new()).map_err(|e| format!("Get {url:?}: {e}"))?;
    let res = match tokio::time::timeout(timeout, client.send(req.map(kube::client::Body::from))).await {
        Ok(Ok(res)) => res,
        Ok(Err(e)) => return Err(format!("Get {url:?}: {e}")),
        Err(_) => {
            return Err(format!(
                "Get {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
            ));
        }
    };
    let code = res.status().as_u16();
    if (200..400).contains(&code) { Ok(()) } else { Err(format!("HTTP probe failed with statuscode: {code}")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_need_runs_in_a_row() {
        let timing = ProbeTiming {
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            success_threshold: 2,
            failure_threshold: 2,
        };
        let mut t = Thresholds::default();
        assert_eq!(t.record(true, &timing), None);
        assert_eq!(t.record(false, &timing), None);
        assert_eq!(t.record(false, &timing), Some(false));
        assert_eq!(t.record(true, &timing), None);
        assert_eq!(t.record(true, &timing), Some(true));
    }
}
