//! The API server a runtime scenario runs against: a fresh in-memory server child process
//! (the hidden `serve` command), a `kube::Client` pointed at it, and the benchmark
//! namespace filled with ConfigMaps over the bench's own HTTP client.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http::Method;

use super::recorder::object_name;
use crate::BenchError;
use crate::client::Endpoint;
use crate::fixtures::{configmap, ensure_namespace};
use crate::load::{MakeRequest, Phase, run_phase};
use crate::serve::{Backend, ServerProcess};

/// The namespace the benchmark objects live in.
pub const NAMESPACE: &str = "bench-runtime";

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
    let body = Arc::new(move |i: usize| {
        if let Some(f) = &before_send {
            f(i);
        }
        configmap(NAMESPACE, &object_name(i), payload, i as u64)
    });
    create_with(ep, &format!("/api/v1/namespaces/{NAMESPACE}/configmaps"), n, concurrency, limit, body).await
}

/// Creates `n` objects by POSTing `body(i)` to the collection `path` at `concurrency`
/// (`body` is called just before each create is sent). Fails unless all succeed.
pub async fn create_with(
    ep: &Endpoint,
    path: &str,
    n: usize,
    concurrency: usize,
    limit: Duration,
    body: Arc<dyn Fn(usize) -> bytes::Bytes + Send + Sync>,
) -> Result<Filled, BenchError> {
    let (ep2, path) = (ep.clone(), path.to_string());
    let make: MakeRequest = Arc::new(move |i| ep2.request(Method::POST, &path, body(i)));
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
        self.server.info.kube_client(NAMESPACE)
    }

    /// Stops the server.
    pub async fn stop(self) {
        self.server.stop().await;
    }
}
