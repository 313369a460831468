//! The shard coordinator: a runnable on every replica that contends for the ring's
//! coordinator Lease and, while it holds it, keeps every sharded object labelled with a
//! live shard. It watches the shard Leases and the metadata of every sharded kind, plans
//! the moves (assign, drain, reassign, follow the owner) and applies each as a merge
//! patch of the object's labels with its resourceVersion as precondition, so that a
//! plan made on a stale view fails with a 409 instead of undoing a shard's ack.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{self, BoxStream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::ring::Ring;
use super::{ShardedResource, ShardingConfig};
use crate::leader::LeaderElector;
use crate::manager::{Runnable, RunnableError};
use crate::metrics::Metrics;

/// How many label patches are in flight at once.
const CONCURRENT_PATCHES: usize = 16;

type MetaStore = Store<PartialObjectMeta<DynamicObject>>;
/// An object: the index of its kind, its namespace and name.
type MoveKey = (usize, Option<String>, String);

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

/// One planned change of an object's labels.
#[derive(Debug, Clone, PartialEq)]
struct Move {
    kind: usize,
    namespace: Option<String>,
    name: String,
    resource_version: String,
    /// Label → new value (`None`: remove).
    labels: BTreeMap<String, Option<String>>,
    /// For the metric and the log: assigned, drained, undrained, reassigned, repaired,
    /// followed.
    how: &'static str,
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

    /// Plans and applies moves whenever a watched Lease or object changes, and every retry
    /// period (a lease expires without an event). Runs until dropped.
    async fn coordinate(&self) {
        let (leases, lease_events) = self.watch_leases();
        let mut stores = Vec::new();
        let mut events: Vec<BoxStream<'static, ()>> = vec![lease_events];
        for kind in self.cfg.kinds() {
            let (store, kind_events) = self.watch_kind(&kind.resource);
            stores.push(store);
            events.push(kind_events);
        }
        // The watches run on their own task, so that the stores stay current while moves
        // are applied (a stale view of the shard Leases would take live shards for dead).
        let changed = Arc::new(Notify::new());
        let notify = changed.clone();
        let _watches = AbortOnDropHandle::new(tokio::spawn(stream::select_all(events).for_each(move |()| {
            notify.notify_one();
            futures::future::ready(())
        })));
        let _ = leases.wait_until_ready().await;
        for s in &stores {
            let _ = s.wait_until_ready().await;
        }
        let mut patched: HashMap<MoveKey, String> = HashMap::new();
        loop {
            let moves = self.plan(&leases, &stores, &mut patched);
            patched.extend(self.apply(moves).await);
            tokio::select! {
                () = changed.notified() => {}
                () = tokio::time::sleep(self.cfg.retry_period) => {}
            }
        }
    }

    fn watch_leases(&self) -> (Store<Lease>, BoxStream<'static, ()>) {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.cfg.namespace);
        let (reader, writer) = reflector::store();
        let events = watcher(api, watcher::Config::default()).default_backoff().reflect(writer).map(|_| ()).boxed();
        (reader, events)
    }

    fn watch_kind(&self, resource: &ApiResource) -> (MetaStore, BoxStream<'static, ()>) {
        let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(self.client.clone(), resource);
        let writer = reflector::store::Writer::new(resource.clone());
        let reader = writer.as_reader();
        let what = resource.kind.clone();
        let events = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .map(move |e| {
                if let Err(e) = e {
                    tracing::debug!(kind = %what, error = %e, "the shard coordinator's watch failed; retrying");
                }
            })
            .boxed();
        (reader, events)
    }

    /// The live shards: Leases `<ring>-shard-<id>` held and not expired.
    fn live_shards(&self, leases: &Store<Lease>) -> Vec<String> {
        let prefix = self.cfg.shard_lease_name("");
        let now = jiff::Timestamp::now();
        let mut live: Vec<String> = leases
            .state()
            .iter()
            .filter_map(|lease| {
                let id = lease.metadata.name.as_deref()?.strip_prefix(&prefix)?;
                let spec = lease.spec.as_ref()?;
                spec.holder_identity.as_deref().filter(|h| !h.is_empty())?;
                let renewed = spec.renew_time.as_ref()?.0;
                let valid = Duration::from_secs(u64::try_from(spec.lease_duration_seconds?).unwrap_or(0));
                (renewed.checked_add(valid).ok()? > now).then(|| id.to_string())
            })
            .collect();
        live.sort();
        live
    }

    fn plan(&self, leases: &Store<Lease>, stores: &[MetaStore], patched: &mut HashMap<MoveKey, String>) -> Vec<Move> {
        let live = self.live_shards(leases);
        self.metrics.set_live_shards(&self.cfg.ring, live.len());
        let ring = Ring::new(live.iter().map(String::as_str));
        let known: Vec<String> = leases
            .state()
            .iter()
            .filter_map(|l| {
                l.metadata.name.as_deref()?.strip_prefix(&self.cfg.shard_lease_name("")).map(str::to_string)
            })
            .collect();
        let mut moves = Vec::new();
        let kinds = self.cfg.kinds();
        for (i, kind) in kinds.iter().enumerate() {
            for obj in stores[i].state() {
                let planned = if kind.follows_owner {
                    self.follow_owner(&obj, kinds, stores)
                } else {
                    self.place(&obj, &ring, &known)
                };
                let Some((labels, how)) = planned else { continue };
                let meta = &obj.metadata;
                let (namespace, name) = (meta.namespace.clone(), meta.name.clone().unwrap_or_default());
                let resource_version = meta.resource_version.clone().unwrap_or_default();
                let key = (i, namespace.clone(), name.clone());
                // Already patched from this very version: wait for the watch to show it.
                match patched.get(&key) {
                    Some(rv) if *rv == resource_version => continue,
                    Some(_) => {
                        patched.remove(&key);
                    }
                    None => {}
                }
                moves.push(Move { kind: i, namespace, name, resource_version, labels, how });
            }
        }
        moves
    }

    /// Where a sharded object belongs, and the label change that takes it there.
    fn place(
        &self,
        obj: &PartialObjectMeta<DynamicObject>,
        ring: &Ring,
        known: &[String],
    ) -> Option<(BTreeMap<String, Option<String>>, &'static str)> {
        let meta = &obj.metadata;
        let key = format!("{}/{}", meta.namespace.as_deref().unwrap_or(""), meta.name.as_deref().unwrap_or(""));
        let desired = ring.shard_for(&key)?;
        let labels = meta.labels.clone().unwrap_or_default();
        let (shard, drain) = (self.cfg.shard_label(), self.cfg.drain_label());
        let draining = labels.contains_key(&drain);
        let assign = |how| Some(([(shard.clone(), Some(desired.to_string())), (drain.clone(), None)].into(), how));
        match labels.get(&shard).map(String::as_str) {
            None | Some("") => assign("assigned"),
            Some(current) if current == desired => draining.then(|| ([(drain.clone(), None)].into(), "undrained")),
            Some(current) if !ring.contains(current) => {
                if known.iter().any(|k| k == current) {
                    assign("reassigned")
                } else {
                    tracing::warn!(ring = %self.cfg.ring, object = %key, shard = current,
                        "an object names a shard that never existed (was its label overwritten?); reassigning it");
                    assign("repaired")
                }
            }
            Some(_) if !draining => Some(([(drain.clone(), Some("true".to_string()))].into(), "drained")),
            Some(_) => None,
        }
    }

    /// The shard of `obj`'s controller owner, when it has one and `obj` is elsewhere.
    fn follow_owner(
        &self,
        obj: &PartialObjectMeta<DynamicObject>,
        kinds: &[ShardedResource],
        stores: &[MetaStore],
    ) -> Option<(BTreeMap<String, Option<String>>, &'static str)> {
        let meta = &obj.metadata;
        let owner = meta.owner_references.as_ref()?.iter().find(|o| o.controller == Some(true))?;
        let group = owner.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let (i, kind) = kinds
            .iter()
            .enumerate()
            .find(|(_, k)| !k.follows_owner && k.resource.kind == owner.kind && k.resource.group == group)?;
        let mut owner_ref = ObjectRef::new_with(&owner.name, kind.resource.clone());
        if let Some(ns) = &meta.namespace {
            owner_ref = owner_ref.within(ns);
        }
        let owner_meta = stores[i].get(&owner_ref)?;
        let shard = self.cfg.shard_label();
        let owners = owner_meta.metadata.labels.as_ref()?.get(&shard)?;
        let current = meta.labels.as_ref().and_then(|l| l.get(&shard));
        (current != Some(owners)).then(|| ([(shard, Some(owners.clone()))].into(), "followed"))
    }

    /// Applies `moves`; returns the applied ones, with the resourceVersion each was
    /// planned from.
    async fn apply(&self, moves: Vec<Move>) -> Vec<(MoveKey, String)> {
        let kinds = self.cfg.kinds();
        stream::iter(moves)
            .map(|m| async move {
                let resource = &kinds[m.kind].resource;
                let api: Api<DynamicObject> = match &m.namespace {
                    Some(ns) => Api::namespaced_with(self.client.clone(), ns, resource),
                    None => Api::all_with(self.client.clone(), resource),
                };
                let labels: serde_json::Map<String, Value> =
                    m.labels.iter().map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String))).collect();
                let patch = json!({"metadata": {"resourceVersion": m.resource_version, "labels": labels}});
                match api.patch(&m.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    Ok(_) => {
                        self.metrics.sharding_moved(&self.cfg.ring, m.how);
                        Some(((m.kind, m.namespace, m.name), m.resource_version))
                    }
                    // Changed since it was seen (a shard's ack, a user): planned again.
                    Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => None,
                    Err(e) => {
                        tracing::warn!(ring = %self.cfg.ring, object = %m.name, error = %e, "moving an object between shards failed");
                        None
                    }
                }
            })
            .buffer_unordered(CONCURRENT_PATCHES)
            .filter_map(futures::future::ready)
            .collect()
            .await
    }
}

/// `<shard id>_<random uuid>`: unique per process, so that two replicas given the same
/// shard ID never both believe they hold one lease.
pub(crate) fn unique_identity(shard_id: &str) -> String {
    format!("{shard_id}_{}", uuid::Builder::from_random_bytes(rand::random()).into_uuid())
}
