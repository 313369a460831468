//! The API server a runtime scenario runs against: a fresh in-memory server child process
//! (the hidden `serve` command), a `kube::Client` pointed at it, and the benchmark
//! namespace filled with ConfigMaps over the bench's own HTTP client.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::json;

use super::recorder::object_name;
use crate::BenchError;
use crate::apiserver::configmap;
use crate::client::{Endpoint, parse_url_addr, snippet};
use crate::load::{MakeRequest, Phase, run_phase};
use crate::serve::{Backend, ServeInfo, ServerProcess};

/// The namespace the benchmark objects live in.
pub const NAMESPACE: &str = "bench-runtime";

/// A `kube::Client` for the server described by `info` (loopback only), trusting its CA
/// and authenticating with its bearer token.
pub fn kube_client(info: &ServeInfo) -> Result<kube::Client, BenchError> {
    parse_url_addr(&info.url)?;
    let uri: http::Uri = info.url.parse().map_err(|e| BenchError::Setup(format!("server URL {}: {e}", info.url)))?;
    let mut roots = Vec::new();
    for cert in CertificateDer::pem_slice_iter(info.ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| BenchError::Setup(format!("CA PEM: {e}")))?;
        roots.push(cert.to_vec());
    }
    if roots.is_empty() {
        return Err(BenchError::Setup("the server printed no CA certificate".into()));
    }
    let mut cfg = kube::Config::new(uri);
    cfg.root_cert = Some(roots);
    cfg.auth_info.token = Some(info.token.clone().into());
    cfg.default_namespace = NAMESPACE.into();
    kube::Client::try_from(cfg).map_err(|e| BenchError::Setup(format!("kube client: {e}")))
}

/// Creates `ns` (an existing one is fine).
pub async fn ensure_namespace(ep: &Endpoint, ns: &str) -> Result<(), BenchError> {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}).to_string();
    let mut c = ep.connect().await?;
    let (status, resp) = c.send(ep.request(Method::POST, "/api/v1/namespaces", Bytes::from(body))).await?;
    if status.is_success() || status == http::StatusCode::CONFLICT {
        Ok(())
    } else {
        Err(BenchError::Status {
            what: format!("creating namespace {ns}"),
            status: status.as_u16(),
            body: snippet(&resp),
        })
    }
}

/// What filling the namespace took.
#[derive(Debug, Clone, Copy)]
pub struct Filled {
    /// Creates per second.
    pub creates_per_sec: f64,
    /// Total size of the created objects as the server returned them (JSON).
    pub json_bytes: u64,
}

/// Creates ConfigMaps `0..n` of about `payload` bytes in [`NAMESPACE`] at `concurrency`,
/// calling `before_send(i)` just before each create is sent. Fails unless all succeed.
pub async fn create_objects(
    ep: &Endpoint,
    n: usize,
    payload: usize,
    concurrency: usize,
    limit: Duration,
    before_send: Option<Arc<dyn Fn(usize) + Send + Sync>>,
) -> Result<Filled, BenchError> {
    let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
    let ep2 = ep.clone();
    let make: MakeRequest = Arc::new(move |i| {
        let body = configmap(NAMESPACE, &object_name(i), payload, i as u64);
        let req = ep2.request(Method::POST, &path, body);
        if let Some(f) = &before_send {
            f(i);
        }
        req
    });
    let phase = Phase { op: "create".into(), concurrency, total: n, limit };
    let out = run_phase(ep, &phase, make).await?;
    if out.stats.ok != n {
        return Err(BenchError::Setup(format!(
            "created {} of {n} objects ({} errors; first: {})",
            out.stats.ok,
            out.stats.errors,
            out.stats.first_error.as_deref().unwrap_or("time limit")
        )));
    }
    Ok(Filled { creates_per_sec: out.stats.ops_per_sec, json_bytes: out.response_bytes })
}

/// A fresh in-memory server with the benchmark namespace created.
pub struct Cluster {
    /// The server child process.
    pub server: ServerProcess,
    /// The bench's HTTP endpoint for it.
    pub endpoint: Endpoint,
}

impl Cluster {
    /// Spawns `exe serve --backend memory` and creates [`NAMESPACE`].
    pub async fn start(exe: &Path) -> Result<Cluster, BenchError> {
        let server = ServerProcess::spawn(exe, Backend::Memory, None).await?;
        let endpoint = server.endpoint()?;
        ensure_namespace(&endpoint, NAMESPACE).await?;
        Ok(Cluster { server, endpoint })
    }

    /// A new `kube::Client` for this server.
    pub fn client(&self) -> Result<kube::Client, BenchError> {
        kube_client(&self.server.info)
    }

    /// Stops the server.
    pub async fn stop(self) {
        self.server.stop().await;
    }
}
