//! The shard coordinator: a runnable on every replica that contends for the ring's
//! coordinator Lease and, while it holds it, keeps every sharded object labelled with a
//! live shard. It replans the objects its view reports changed (all of them after a
//! relist or when the live shards change, and every retry period for expired leases),
//! and applies each move as a merge patch of the object's labels with its
//! resourceVersion as precondition, so that a plan made on a stale view fails with a 409
//! instead of undoing a shard's ack.

use std::collections::HashMap;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::reflector::Store;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::ShardingConfig;
use super::plan::{Move, Planner};
use super::ring::Ring;
use super::view::{ObjectKey, View};
use crate::leader::LeaderElector;
use crate::manager::{Runnable, RunnableError};
use crate::metrics::Metrics;

/// How many label patches are in flight at once.
const CONCURRENT_PATCHES: usize = 16;

/// The coordinator of one ring.
pub(crate) struct Coordinator {
    client: kube::Client,
    cfg: ShardingConfig,
    metrics: Metrics,
}

impl Coordinator {
    pub(crate) fn new(client: kube::Client, cfg: ShardingConfig, metrics: Metrics) -> Coordinator {
        Coordinator { client, cfg, metrics }
    }
}

impl Runnable for Coordinator {
    fn name(&self) -> String {
        format!("shard coordinator of ring {}", self.cfg.ring)
    }

    fn needs_leader_election(&self) -> bool {
        false
    }

    fn start(self: Box<Self>, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), RunnableError>> {
        Box::pin(self.run(shutdown))
    }
}

impl Coordinator {
    async fn run(self, shutdown: CancellationToken) -> Result<(), RunnableError> {
        let identity = unique_identity(&self.cfg.shard_id);
        let lease = self.cfg.lease_config(self.cfg.coordinator_lease_name(), identity);
        let stop = CancellationToken::new();
        let (mut leading, elector) = LeaderElector::new(self.client.clone(), lease, None).start(stop.clone());
        let elected = tokio::select! {
            _ = shutdown.cancelled() => None,
            r = leading.wait_for(|l| *l) => Some(r.is_ok()),
        };
        let lost = match elected {
            None => false,
            Some(false) => true,
            Some(true) => {
                tracing::info!(ring = %self.cfg.ring, "coordinating the shards");
                if self.cfg.guard_label {
                    super::guard::install(&self.client, &self.cfg).await;
                }
                tokio::select! {
                    _ = shutdown.cancelled() => false,
                    _ = leading.wait_for(|l| !*l) => true,
                    () = self.coordinate() => false,
                }
            }
        };
        stop.cancel();
        let _ = elector.await;
        if lost {
            Err(RunnableError(format!("the coordinator of ring {} lost its lease", self.cfg.ring)))
        } else {
            Ok(())
        }
    }

    /// Plans and applies moves whenever the view reports a change, and every retry
    /// period (a lease expires without an event). Runs until dropped.
    async fn coordinate(&self) {
        let view = View::start(&self.client, &self.cfg);
        view.ready().await;
        // The resourceVersion each object was last patched from: until the view shows a
        // newer one, replanning it would repeat the patch.
        let mut patched: HashMap<ObjectKey, String> = HashMap::new();
        let mut shards_seen: Option<(Vec<String>, Vec<String>)> = None;
        loop {
            let (live, known) = self.shards(&view.leases);
            self.metrics.set_live_shards(&self.cfg.ring, live.len());
            let ring = Ring::new(live.iter().map(String::as_str));
            let mut changes = view.take_changes();
            if shards_seen.as_ref() != Some(&(live.clone(), known.clone())) {
                changes.all = true;
                shards_seen = Some((live, known.clone()));
            }
            let planner = Planner { cfg: &self.cfg, view: &view, ring: &ring, known: &known };
            let moves = plan_changes(&planner, &view, changes, &mut patched);
            let failed = self.apply(moves, &mut patched).await;
            view.retry(failed);
            tokio::select! {
                () = view.changed.notified() => {}
                () = tokio::time::sleep(self.cfg.retry_period) => {}
            }
        }
    }

    /// The live shards (Leases `<ring>-shard-<id>` held and not expired) and every shard
    /// that has a Lease, each sorted.
    fn shards(&self, leases: &Store<Lease>) -> (Vec<String>, Vec<String>) {
        let prefix = self.cfg.shard_lease_name("");
        let now = jiff::Timestamp::now();
        let (mut live, mut known) = (Vec::new(), Vec::new());
        for lease in leases.state() {
            let Some(id) = lease.metadata.name.as_deref().and_then(|n| n.strip_prefix(&prefix)) else { continue };
            known.push(id.to_string());
            let valid_until = lease.spec.as_ref().and_then(|spec| {
                spec.holder_identity.as_deref().filter(|h| !h.is_empty())?;
                let valid = Duration::from_secs(u64::try_from(spec.lease_duration_seconds?).unwrap_or(0));
                spec.renew_time.as_ref()?.0.checked_add(valid).ok()
            });
            if valid_until.is_some_and(|t| t > now) {
                live.push(id.to_string());
            }
        }
        live.sort();
        known.sort();
        (live, known)
    }

    /// Applies `moves`, recording in `patched` those applied; returns the objects whose
    /// move failed for a reason no watch event will report (to retry).
    async fn apply(&self, moves: Vec<Move>, patched: &mut HashMap<ObjectKey, String>) -> Vec<ObjectKey> {
        let kinds = self.cfg.kinds();
        let results: Vec<(Move, bool)> = stream::iter(moves)
            .map(|m| async move {
                let (kind, namespace, name) = &m.key;
                let resource = &kinds[*kind].resource;
                let api: Api<DynamicObject> = match namespace {
                    Some(ns) => Api::namespaced_with(self.client.clone(), ns, resource),
                    None => Api::all_with(self.client.clone(), resource),
                };
                let labels: serde_json::Map<String, Value> =
                    m.labels.iter().map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String))).collect();
                let patch = json!({"metadata": {"resourceVersion": m.resource_version, "labels": labels}});
                let retry = match api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    Ok(_) => {
                        self.metrics.sharding_moved(&self.cfg.ring, m.how);
                        false
                    }
                    // Changed since it was seen (a shard's ack, a user), or gone: the
                    // watch reports it, and it is planned again.
                    Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => false,
                    Err(e) => {
                        tracing::warn!(ring = %self.cfg.ring, object = %name, error = %e, "moving an object between shards failed");
                        true
                    }
                };
                (m, retry)
            })
            .buffer_unordered(CONCURRENT_PATCHES)
            .collect()
            .await;
        let mut failed = Vec::new();
        for (m, retry) in results {
            if retry {
                failed.push(m.key);
            } else {
                patched.insert(m.key, m.resource_version);
            }
        }
        failed
    }
}

/// The moves the changed objects need (every object's when `changes.all`), with the
/// followers of each changed owner; skips an object already patched from the version the
/// view still shows.
fn plan_changes(
    planner: &Planner<'_>,
    view: &View,
    changes: super::view::Changes,
    patched: &mut HashMap<ObjectKey, String>,
) -> Vec<Move> {
    let keys: Vec<ObjectKey> = if changes.all {
        view.all_keys()
    } else {
        let mut keys: Vec<ObjectKey> = changes.objects.iter().cloned().collect();
        for key in &changes.objects {
            keys.extend(view.followers_of(key));
        }
        keys.sort();
        keys.dedup();
        keys
    };
    let mut moves = Vec::new();
    for key in keys {
        let Some(m) = planner.plan(&key) else {
            // In place (the view shows the patch, or it was not needed) or gone.
            patched.remove(&key);
            continue;
        };
        if patched.get(&key) == Some(&m.resource_version) {
            continue;
        }
        patched.remove(&key);
        moves.push(m);
    }
    moves
}

/// `<shard id>_<random uuid>`: unique per process, so that two replicas given the same
/// shard ID never both believe they hold one lease.
pub(crate) fn unique_identity(shard_id: &str) -> String {
    format!("{shard_id}_{}", uuid::Builder::from_random_bytes(rand::random()).into_uuid())
}
