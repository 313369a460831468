//! The memory of a cache of Pods, three ways: managedFields kept, managedFields removed
//! (the default transform), and metadata only. Each is a child process (the hidden
//! `opkit-bench cache-memory` command) that fills one opkit cache from the server it is
//! told about, reports once it holds every Pod, and idles while the parent reads its
//! VmRSS from `/proc`, so the figure is that cache's alone.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use opkit::{Cache, CacheScope};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use crate::BenchError;
use crate::child::{Spawned, spawn_child_with_input};
use crate::fixtures::pod;
use crate::runtime::cluster::{Cluster, NAMESPACE, create_with};
use crate::serve::{ProcMemory, ServeInfo};

/// How the child caches the Pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheMode {
    /// Whole Pods, managedFields included (`CacheScope::keeping_managed_fields`).
    KeepManagedFields,
    /// Whole Pods without managedFields (the default).
    Default,
    /// Metadata only (`Cache::metadata_informer`), managedFields removed.
    MetadataOnly,
}

impl std::fmt::Display for CacheMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CacheMode::KeepManagedFields => "whole pods, managedFields kept",
            CacheMode::Default => "whole pods, managedFields removed (default)",
            CacheMode::MetadataOnly => "metadata only",
        })
    }
}

/// What the parent tells the child.
#[derive(Debug, Serialize, Deserialize)]
struct CacheSpec {
    server: ServeInfo,
    mode: CacheMode,
    objects: usize,
}

/// What the child reports once its cache holds every Pod.
#[derive(Debug, Serialize, Deserialize)]
struct CacheReady {
    pid: u32,
    cached: usize,
    rss_before_bytes: u64,
}

/// One measurement.
#[derive(Debug, Clone, Serialize)]
pub struct CacheMemory {
    /// How the Pods were cached.
    pub mode: CacheMode,
    /// Pods cached.
    pub objects: usize,
    /// The child's VmRSS before it built a client and a cache.
    pub rss_before_bytes: u64,
    /// Its VmRSS holding the cache.
    pub rss_bytes: u64,
}

fn own_rss() -> Result<u64, BenchError> {
    let s = std::fs::read_to_string("/proc/self/status")?;
    ProcMemory::parse(&s).map(|m| m.rss_bytes).ok_or_else(|| BenchError::Setup("no VmRSS in /proc/self/status".into()))
}

/// Runs the hidden `cache-memory` command (see the module docs).
pub async fn run_child() -> Result<(), BenchError> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let line = lines.next_line().await?.ok_or_else(|| BenchError::Setup("no cache spec on stdin".into()))?;
    let spec: CacheSpec = serde_json::from_str(&line).map_err(|e| BenchError::Setup(format!("bad cache spec: {e}")))?;
    let rss_before_bytes = own_rss()?;
    let client = spec.server.kube_client(NAMESPACE)?;
    let scope = CacheScope::namespaces(vec![NAMESPACE.to_string()]);
    let scope = if spec.mode == CacheMode::KeepManagedFields { scope.keeping_managed_fields() } else { scope };
    let cache = Cache::new(client, scope);
    let held: Box<dyn Fn() -> usize + Send + Sync> = match spec.mode {
        CacheMode::MetadataOnly => {
            let informer = cache.metadata_informer::<Pod>();
            Box::new(move || informer.len())
        }
        _ => {
            let informer = cache.informer::<Pod>();
            Box::new(move || informer.len())
        }
    };
    let stop = CancellationToken::new();
    cache.start(stop.clone());
    let all = cache.wait_until(Duration::from_secs(300), || cache.is_synced() && held() >= spec.objects).await;
    if !all {
        return Err(BenchError::Setup(format!("the cache held {} of {} pods in time", held(), spec.objects)));
    }
    let ready = CacheReady { pid: std::process::id(), cached: held(), rss_before_bytes };
    let line = serde_json::to_string(&ready).map_err(|e| BenchError::Setup(e.to_string()))?;
    let mut out = tokio::io::stdout();
    out.write_all(format!("{line}\n").as_bytes()).await?;
    out.flush().await?;
    while let Ok(Some(_)) = lines.next_line().await {}
    stop.cancel();
    Ok(())
}

/// Fills a fresh server with `objects` Pods and measures a cache of them in each mode.
pub async fn measure_all(
    exe: &std::path::Path,
    objects: usize,
    limit: Duration,
) -> Result<Vec<CacheMemory>, BenchError> {
    let cluster = Cluster::start(exe).await?;
    let result = async {
        let sa = serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
        let sa_path = format!("/api/v1/namespaces/{NAMESPACE}/serviceaccounts");
        let one_sa = Arc::new(move |_| bytes::Bytes::from(sa.to_string()));
        // The namespace's default ServiceAccount may already exist; its pods need it.
        let _ = create_with(&cluster.endpoint, &sa_path, 1, 1, limit, one_sa).await;
        let body = Arc::new(|i: usize| pod(NAMESPACE, &format!("pod-{i:06}")));
        create_with(&cluster.endpoint, &format!("/api/v1/namespaces/{NAMESPACE}/pods"), objects, 16, limit, body)
            .await?;
        let mut out = Vec::new();
        for mode in [CacheMode::KeepManagedFields, CacheMode::Default, CacheMode::MetadataOnly] {
            out.push(measure(exe, &cluster.server.info, mode, objects, limit).await?);
        }
        Ok(out)
    }
    .await;
    cluster.stop().await;
    result
}

async fn measure(
    exe: &std::path::Path,
    server: &ServeInfo,
    mode: CacheMode,
    objects: usize,
    limit: Duration,
) -> Result<CacheMemory, BenchError> {
    let spec = serde_json::to_string(&CacheSpec { server: server.clone(), mode, objects })
        .map_err(|e| BenchError::Setup(e.to_string()))?;
    let mut cmd = Command::new(exe);
    cmd.arg("cache-memory");
    let spawned: Spawned<CacheReady> = spawn_child_with_input(cmd, "the cache process", limit, Some(&spec)).await?;
    let ready = spawned.ready;
    let status = std::fs::read_to_string(format!("/proc/{}/status", ready.pid))?;
    let mem = ProcMemory::parse(&status).ok_or_else(|| BenchError::Setup("no VmRSS in /proc status".into()))?;
    let mut child = spawned.child;
    drop(child.stdin.take());
    if tokio::time::timeout(Duration::from_secs(30), child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
    Ok(CacheMemory { mode, objects: ready.cached, rss_before_bytes: ready.rss_before_bytes, rss_bytes: mem.rss_bytes })
}
