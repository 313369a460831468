//! Failover between two replicas running as plain processes next to a server child:
//! nothing tells the standby that a SIGKILLed leader is gone, so it waits for the lease
//! to expire (client-go's behaviour, and opkit's outside a pod).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use tokio::process::{Child, Command};

use super::replica::{LeaseTimings, ReplicaReady, ReplicaSpec};
use super::{KillSignal, create_probe, expect_holder, set_seq, wait_stamp};
use crate::BenchError;
use crate::child::{Spawned, spawn_child_with_input};
use crate::runtime::cluster::{Cluster, NAMESPACE};
use crate::serve::ServeInfo;

struct Replica {
    child: Child,
}

impl Replica {
    async fn start(exe: &std::path::Path, server: &ServeInfo, identity: &str) -> Result<Replica, BenchError> {
        let spec = ReplicaSpec {
            server: Some(server.clone()),
            namespace: NAMESPACE.to_string(),
            identity: Some(identity.to_string()),
            lease: LeaseTimings::CONTROLLER_RUNTIME,
        };
        let spec = serde_json::to_string(&spec).map_err(|e| BenchError::Setup(e.to_string()))?;
        let mut cmd = Command::new(exe);
        cmd.arg("failover-replica");
        let what = format!("replica {identity}");
        let spawned: Spawned<ReplicaReady> =
            spawn_child_with_input(cmd, &what, Duration::from_secs(60), Some(&spec)).await?;
        if !spawned.ready.synced {
            return Err(BenchError::Setup(format!("{what}: its cache did not sync")));
        }
        Ok(Replica { child: spawned.child })
    }

    fn signal(&self, signal: KillSignal) -> Result<(), BenchError> {
        let pid = self.child.id().ok_or_else(|| BenchError::Setup("the replica already exited".into()))?;
        signal.send(pid)
    }
}

/// One failover on a fresh server: seconds from the kill to the standby's stamp.
pub(super) async fn one_run(exe: &std::path::Path, signal: KillSignal, run: usize) -> Result<f64, BenchError> {
    let cluster = Cluster::start(exe).await?;
    let result = async {
        let client = cluster.client()?;
        let probes: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
        create_probe(&probes).await?;
        let (leader_id, standby_id) = (format!("leader-{run}"), format!("standby-{run}"));
        let leader = Replica::start(exe, &cluster.server.info, &leader_id).await?;
        wait_stamp(&probes, &format!("{leader_id}/0"), Duration::from_secs(60)).await?;
        let standby = Replica::start(exe, &cluster.server.info, &standby_id).await?;
        expect_holder(&client, NAMESPACE, &leader_id).await?;
        let killed = Instant::now();
        leader.signal(signal)?;
        set_seq(&probes, 1).await?;
        wait_stamp(&probes, &format!("{standby_id}/1"), Duration::from_secs(60)).await?;
        let seconds = killed.elapsed().as_secs_f64();
        drop((leader, standby));
        Ok(seconds)
    }
    .await;
    cluster.stop().await;
    result
}
