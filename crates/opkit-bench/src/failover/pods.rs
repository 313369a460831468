//! Failover between two replicas running in real pods of an in-process control plane
//! (the opkit-bench executable loaded as their image). Each leader names its container
//! on the Lease, and the standby, allowed to watch Pods, takes the lease over as soon as
//! the kubelet reports that container ended: after SIGKILL it does not wait for the
//! lease to expire.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, LogParams, PostParams};
use opkit::leader::CONTAINER_ANNOTATION;
use opkit_testenv::TestEnv;

use super::replica::{LeaseTimings, ReplicaSpec};
use super::{KillSignal, LEASE, create_probe, expect_holder, set_seq, wait_stamp};
use crate::BenchError;

/// The namespace the replicas, their lease and the probe live in.
pub const NAMESPACE: &str = "failover";
/// The image the opkit-bench executable is loaded as.
const IMAGE: &str = "opkit.dev/failover-replica:bench";
/// The replicas' container.
const CONTAINER: &str = "manager";
/// The two pods.
const PODS: [&str; 2] = ["replica-a", "replica-b"];

/// The replicas' ServiceAccount and what it may do: leader election, the probe, and
/// reading Pods (which is what lets a standby see the leader's container end).
const RBAC: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: failover}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: replica, namespace: failover}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: replica, namespace: failover}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, update, patch]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: replica, namespace: failover}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: replica}
subjects:
- {kind: ServiceAccount, name: replica, namespace: failover}
"#;

/// Two replicas in real pods, the first one leading.
pub struct PodReplicas {
    env: TestEnv,
    probes: Api<ConfigMap>,
    seq: usize,
    /// Set in the replicas' environment, to tell their processes from those of an earlier
    /// run's pods that are still stopping.
    run_id: String,
}

/// One failover.
#[derive(Debug, Clone)]
pub struct PodFailover {
    /// The pod that was killed.
    pub from: String,
    /// The pod that took over.
    pub to: String,
    /// Seconds from the kill to the new leader's stamp.
    pub seconds: f64,
}

impl PodReplicas {
    /// Starts a control plane with real pods, loads `exe` (an opkit-bench executable) as
    /// the replicas' image, and starts two replica pods with `lease` timings: the first
    /// one leads (its stamp is on the probe), the second one's cache has synced.
    pub async fn start(exe: &Path, lease: LeaseTimings) -> Result<PodReplicas, BenchError> {
        let env = TestEnv::builder().real_pods().start().await.map_err(setup("the control plane"))?;
        env.load_image(IMAGE, exe).map_err(setup("loading the image"))?;
        env.apply_yaml(RBAC).await.map_err(setup("the replicas' RBAC"))?;
        let client = env.client();
        let probes: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
        create_probe(&probes).await?;
        let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let run_id = format!("{}-{}", std::process::id(), since_epoch.as_nanos());
        let replicas = PodReplicas { env, probes, seq: 0, run_id };
        replicas.start_pod(PODS[0], lease).await?;
        wait_stamp(&replicas.probes, &format!("{}/0", PODS[0]), Duration::from_secs(60)).await?;
        replicas.start_pod(PODS[1], lease).await?;
        replicas.wait_synced(PODS[1], Duration::from_secs(60)).await?;
        expect_holder(&client, NAMESPACE, PODS[0]).await?;
        Ok(replicas)
    }

    /// An admin client of the control plane.
    pub fn client(&self) -> kube::Client {
        self.env.client()
    }

    /// The Lease the replicas elect on.
    pub async fn lease(&self) -> Result<Lease, BenchError> {
        let leases: Api<Lease> = Api::namespaced(self.client(), NAMESPACE);
        leases.get(LEASE).await.map_err(|e| BenchError::Setup(format!("reading the lease: {e}")))
    }

    /// The ID of the running container of replica pod `pod`, as its status says.
    pub async fn container_id(&self, pod: &str) -> Result<Option<String>, BenchError> {
        let pods: Api<Pod> = Api::namespaced(self.client(), NAMESPACE);
        let pod = pods.get(pod).await.map_err(|e| BenchError::Setup(format!("reading pod {pod}: {e}")))?;
        let statuses = pod.status.and_then(|s| s.container_statuses).unwrap_or_default();
        Ok(statuses.into_iter().find(|s| s.name == CONTAINER).and_then(|s| s.container_id))
    }

    /// Waits until the lease names its holder's container (the leader looks it up once
    /// the kubelet reported it running), up to `limit`; returns the container ID.
    pub async fn wait_published(&self, limit: Duration) -> Result<String, BenchError> {
        let started = Instant::now();
        loop {
            let lease = self.lease().await?;
            if let Some(id) = lease.metadata.annotations.as_ref().and_then(|a| a.get(CONTAINER_ANNOTATION)) {
                return Ok(id.clone());
            }
            if started.elapsed() > limit {
                return Err(BenchError::Setup(format!(
                    "the lease never named its holder's container within {limit:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills the leading replica's process with `signal`, bumps the probe at the same
    /// instant, and waits (up to `limit`) for the other replica's stamp.
    pub async fn failover(&mut self, signal: KillSignal, limit: Duration) -> Result<PodFailover, BenchError> {
        let lease = self.lease().await?;
        let from = lease.spec.and_then(|s| s.holder_identity).unwrap_or_default();
        let to = PODS
            .iter()
            .find(|p| **p != from)
            .ok_or_else(|| BenchError::Setup(format!("the lease is held by {from:?}, not a replica")))?
            .to_string();
        let pid = replica_pid(&from, &self.run_id)?;
        self.seq += 1;
        let killed = Instant::now();
        signal.send(pid)?;
        set_seq(&self.probes, self.seq).await?;
        wait_stamp(&self.probes, &format!("{to}/{}", self.seq), limit).await?;
        Ok(PodFailover { from, to, seconds: killed.elapsed().as_secs_f64() })
    }

    async fn start_pod(&self, name: &str, lease: LeaseTimings) -> Result<(), BenchError> {
        let spec = ReplicaSpec { server: None, namespace: NAMESPACE.to_string(), identity: None, lease };
        let spec = serde_json::to_string(&spec).map_err(|e| BenchError::Setup(e.to_string()))?;
        let field = |path: &str| serde_json::json!({"fieldRef": {"fieldPath": path}});
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "serviceAccountName": "replica",
                "containers": [{
                    "name": CONTAINER,
                    "image": IMAGE,
                    "args": ["failover-replica", "--spec", spec],
                    "env": [
                        {"name": "POD_NAME", "valueFrom": field("metadata.name")},
                        {"name": "POD_NAMESPACE", "valueFrom": field("metadata.namespace")},
                        {"name": "OPKIT_LOG", "value": "info"},
                        {"name": RUN_ENV, "value": self.run_id},
                    ],
                }],
            },
        }))
        .map_err(|e| BenchError::Setup(format!("the replica pod: {e}")))?;
        let pods: Api<Pod> = Api::namespaced(self.client(), NAMESPACE);
        pods.create(&PostParams::default(), &pod).await.map_err(|e| BenchError::Setup(format!("pod {name}: {e}")))?;
        Ok(())
    }

    /// Waits until replica `pod` printed that its cache synced, up to `limit`.
    async fn wait_synced(&self, pod: &str, limit: Duration) -> Result<(), BenchError> {
        let pods: Api<Pod> = Api::namespaced(self.client(), NAMESPACE);
        let params = LogParams { container: Some(CONTAINER.into()), ..LogParams::default() };
        let started = Instant::now();
        loop {
            let log = pods.logs(pod, &params).await.unwrap_or_default();
            if log.contains(r#"{"synced":true}"#) {
                return Ok(());
            }
            if started.elapsed() > limit {
                return Err(BenchError::Setup(format!("{pod} never said its cache synced within {limit:?}: {log}")));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The environment variable holding [`PodReplicas`]'s run ID.
const RUN_ENV: &str = "OPKIT_FAILOVER_RUN";

/// The process of replica pod `pod` of run `run_id`: the one whose environment names the
/// pod and the run, and whose command line runs the replica (the innermost, when the
/// runtime wraps it).
fn replica_pid(pod: &str, run_id: &str) -> Result<u32, BenchError> {
    let marker = format!("POD_NAME={pod}");
    let run = format!("{RUN_ENV}={run_id}");
    let mut found: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let dir = entry.path();
        let (Ok(environ), Ok(cmdline)) = (std::fs::read(dir.join("environ")), std::fs::read(dir.join("cmdline")))
        else {
            continue;
        };
        let has = |hay: &[u8], needle: &[u8]| hay.split(|b| *b == 0).any(|part| part == needle);
        if has(&environ, marker.as_bytes()) && has(&environ, run.as_bytes()) && has(&cmdline, b"failover-replica") {
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
            let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok());
            found.push((pid, ppid.unwrap_or(0)));
        }
    }
    let innermost = found.iter().find(|(pid, _)| !found.iter().any(|(_, parent)| parent == pid));
    innermost.map(|(pid, _)| *pid).ok_or_else(|| BenchError::Setup(format!("no process of pod {pod} found in /proc")))
}

fn setup<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> BenchError {
    move |e| BenchError::Setup(format!("{what}: {e}"))
}
