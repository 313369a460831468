//! One replica of the failover benchmark (the hidden `failover-replica` command): an
//! opkit manager with leader election and one controller that stamps the probe
//! ConfigMap with the replica's identity and the probe's sequence number. It reads its
//! spec from `--spec` or stdin; with no server in it, it runs in a pod and talks to the
//! cluster as the pod's ServiceAccount.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use opkit::leader::LeaderElectionConfig;
use opkit::{Action, CacheScope, Context, Controller, Manager, ManagerOptions, ReconcileResult};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::{LEASE, PROBE, STAMP};
use crate::BenchError;
use crate::serve::ServeInfo;

/// The lease timings, in seconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct LeaseTimings {
    /// leaseDuration.
    pub duration: u64,
    /// renewDeadline.
    pub renew_deadline: u64,
    /// retryPeriod.
    pub retry_period: u64,
}

impl LeaseTimings {
    /// controller-runtime's defaults: 15 s, 10 s, 2 s.
    pub const CONTROLLER_RUNTIME: LeaseTimings = LeaseTimings { duration: 15, renew_deadline: 10, retry_period: 2 };
}

/// What a replica is told.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct ReplicaSpec {
    /// The server and its namespace; `None` in a pod (in-cluster config, the pod's own
    /// namespace, and the pod's name as identity).
    pub server: Option<ServeInfo>,
    /// The namespace of the probe and the lease.
    pub namespace: String,
    /// The identity, when not in a pod.
    pub identity: Option<String>,
    /// The lease timings.
    pub lease: LeaseTimings,
}

/// What a replica prints once its cache synced.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct ReplicaReady {
    pub synced: bool,
}

/// Runs the hidden `failover-replica` command: a manager with leader election whose one
/// controller stamps the probe; says whether its cache synced (one JSON line on stdout),
/// then runs until signalled.
pub async fn run_replica(spec_arg: Option<String>) -> Result<(), BenchError> {
    let line = match spec_arg {
        Some(s) => s,
        None => BufReader::new(tokio::io::stdin())
            .lines()
            .next_line()
            .await?
            .ok_or_else(|| BenchError::Setup("no replica spec on stdin".into()))?,
    };
    let spec: ReplicaSpec =
        serde_json::from_str(&line).map_err(|e| BenchError::Setup(format!("bad replica spec: {e}")))?;
    let client = match &spec.server {
        Some(server) => server.kube_client(&spec.namespace)?,
        None => kube::Client::try_default().await.map_err(|e| BenchError::Setup(format!("in-cluster client: {e}")))?,
    };
    let identity = spec
        .identity
        .clone()
        .or_else(|| std::env::var("POD_NAME").ok())
        .ok_or_else(|| BenchError::Setup("no identity, and no POD_NAME".into()))?;
    let mut election = LeaderElectionConfig::new(LEASE, &spec.namespace);
    election.identity = identity.clone();
    election.release_on_cancel = true;
    election.lease_duration = Duration::from_secs(spec.lease.duration);
    election.renew_deadline = Duration::from_secs(spec.lease.renew_deadline);
    election.retry_period = Duration::from_secs(spec.lease.retry_period);
    let opts = ManagerOptions {
        cache: CacheScope::namespaces(vec![spec.namespace.clone()]),
        leader_election: Some(election),
        ..ManagerOptions::default()
    };
    let mgr = Manager::new(client, opts);
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
