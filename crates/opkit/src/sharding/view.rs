//! The coordinator's view of the cluster: the shard Leases, and a compact copy of the
//! metadata of every sharded object (only its name, resourceVersion, the ring's two
//! labels and its controller owner), kept by watches on their own task. Each watch event
//! marks what it changed, so that the coordinator replans only those objects (and the
//! followers of a changed owner) instead of every object after every event.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::stream::{self, BoxStream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::{ObjectMeta, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::task::AbortOnDropHandle;

use super::{ShardedResource, ShardingConfig};

/// The compact metadata of the objects of one sharded kind.
pub(super) type MetaStore = Store<PartialObjectMeta<DynamicObject>>;

/// An object: the index of its kind, its namespace and name.
pub(super) type ObjectKey = (usize, Option<String>, String);

/// What changed since the coordinator last planned.
#[derive(Debug, Default)]
pub(super) struct Changes {
    /// Replan every object: a watch (re)listed, so deletes may have been missed.
    pub all: bool,
    /// The objects that changed.
    pub objects: HashSet<ObjectKey>,
}

/// The objects of `follows_owner` kinds by their controller owner, so that an owner's
/// move replans its followers.
#[derive(Default)]
struct Followers {
    by_owner: HashMap<ObjectKey, HashSet<ObjectKey>>,
    owner_of: HashMap<ObjectKey, ObjectKey>,
}

impl Followers {
    /// Records `key` under `owner` (and under no other owner).
    fn set(&mut self, key: &ObjectKey, owner: Option<ObjectKey>) {
        if let Some(old) = self.owner_of.remove(key)
            && let Some(f) = self.by_owner.get_mut(&old)
        {
            f.remove(key);
            if f.is_empty() {
                self.by_owner.remove(&old);
            }
        }
        if let Some(owner) = owner {
            self.by_owner.entry(owner.clone()).or_default().insert(key.clone());
            self.owner_of.insert(key.clone(), owner);
        }
    }
}

/// The watched state, shared with the watch task.
pub(super) struct View {
    pub leases: Store<Lease>,
    pub stores: Vec<MetaStore>,
    changes: Arc<Mutex<Changes>>,
    followers: Arc<Mutex<Followers>>,
    /// Notified after every watch event.
    pub changed: Arc<Notify>,
    _watches: AbortOnDropHandle<()>,
}

impl View {
    /// Starts the watches of the shard Leases in `cfg.namespace` and of every kind.
    pub(super) fn start(client: &kube::Client, cfg: &ShardingConfig) -> View {
        let changes = Arc::new(Mutex::new(Changes { all: true, objects: HashSet::new() }));
        let followers = Arc::new(Mutex::new(Followers::default()));
        let (leases, lease_events) = watch_leases(client, &cfg.namespace);
        let mut events = vec![lease_events];
        let mut stores = Vec::new();
        let kinds: Arc<[ShardedResource]> = cfg.kinds().into();
        for i in 0..kinds.len() {
            let marks = Marks { kind: i, kinds: kinds.clone(), changes: changes.clone(), followers: followers.clone() };
            let (store, kind_events) = watch_kind(client, cfg, marks);
            stores.push(store);
            events.push(kind_events);
        }
        let changed = Arc::new(Notify::new());
        let notify = changed.clone();
        // The watches run on their own task, so that the stores stay current while moves
        // are applied (a stale view of the shard Leases would take live shards for dead).
        let watches = tokio::spawn(stream::select_all(events).for_each(move |()| {
            notify.notify_one();
            futures::future::ready(())
        }));
        View { leases, stores, changes, followers, changed, _watches: AbortOnDropHandle::new(watches) }
    }

    /// Waits until every watch has listed once.
    pub(super) async fn ready(&self) {
        let _ = self.leases.wait_until_ready().await;
        for s in &self.stores {
            let _ = s.wait_until_ready().await;
        }
    }

    /// Takes the changes since the last call.
    pub(super) fn take_changes(&self) -> Changes {
        std::mem::take(&mut *self.changes.lock())
    }

    /// Marks `objects` changed again (a move that failed, to retry).
    pub(super) fn retry(&self, objects: impl IntoIterator<Item = ObjectKey>) {
        self.changes.lock().objects.extend(objects);
    }

    /// The objects following `owner`.
    pub(super) fn followers_of(&self, owner: &ObjectKey) -> Vec<ObjectKey> {
        self.followers.lock().by_owner.get(owner).map(|f| f.iter().cloned().collect()).unwrap_or_default()
    }

    /// Every object's key.
    pub(super) fn all_keys(&self) -> Vec<ObjectKey> {
        let mut keys = Vec::new();
        for (i, store) in self.stores.iter().enumerate() {
            keys.extend(store.state().iter().map(|o| key_of(i, &o.metadata)));
        }
        keys
    }

    /// The compact metadata of an object, if it exists.
    pub(super) fn get(
        &self,
        kinds: &[ShardedResource],
        key: &ObjectKey,
    ) -> Option<Arc<PartialObjectMeta<DynamicObject>>> {
        let (i, namespace, name) = key;
        let mut r = ObjectRef::new_with(name, kinds.get(*i)?.resource.clone());
        if let Some(ns) = namespace {
            r = r.within(ns);
        }
        self.stores.get(*i)?.get(&r)
    }
}

/// Marks each event's object as changed, and keeps the followers index of one kind.
struct Marks {
    kind: usize,
    kinds: Arc<[ShardedResource]>,
    changes: Arc<Mutex<Changes>>,
    followers: Arc<Mutex<Followers>>,
}

impl Marks {
    fn mark(&self, event: &watcher::Event<PartialObjectMeta<DynamicObject>>) {
        match event {
            watcher::Event::Apply(obj) | watcher::Event::InitApply(obj) => {
                let key = key_of(self.kind, &obj.metadata);
                self.index_owner(&key, owner_key(&self.kinds, &obj.metadata));
                self.changes.lock().objects.insert(key);
            }
            watcher::Event::Delete(obj) => {
                let key = key_of(self.kind, &obj.metadata);
                self.index_owner(&key, None);
                self.changes.lock().objects.insert(key);
            }
            watcher::Event::Init => {}
            watcher::Event::InitDone => self.changes.lock().all = true,
        }
    }

    fn index_owner(&self, key: &ObjectKey, owner: Option<ObjectKey>) {
        if self.kinds[self.kind].follows_owner {
            self.followers.lock().set(key, owner);
        }
    }
}

fn key_of(kind: usize, meta: &ObjectMeta) -> ObjectKey {
    (kind, meta.namespace.clone(), meta.name.clone().unwrap_or_default())
}

/// The key of `meta`'s controller owner, when its kind is sharded by key.
pub(super) fn owner_key(kinds: &[ShardedResource], meta: &ObjectMeta) -> Option<ObjectKey> {
    let owner = meta.owner_references.as_ref()?.iter().find(|o| o.controller == Some(true))?;
    let group = owner.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let i = kinds.iter().position(|k| k.hashed && k.resource.kind == owner.kind && k.resource.group == group)?;
    Some((i, meta.namespace.clone(), owner.name.clone()))
}

fn watch_leases(client: &kube::Client, namespace: &str) -> (Store<Lease>, BoxStream<'static, ()>) {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let (reader, writer) = reflector::store();
    let events = watcher(api, watcher::Config::default()).default_backoff().reflect(writer).map(|_| ()).boxed();
    (reader, events)
}

fn watch_kind(client: &kube::Client, cfg: &ShardingConfig, marks: Marks) -> (MetaStore, BoxStream<'static, ()>) {
    let resource: &ApiResource = &marks.kinds[marks.kind].resource;
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), resource);
    let writer = reflector::store::Writer::new(resource.clone());
    let reader = writer.as_reader();
    let what = resource.kind.clone();
    let keep = [cfg.shard_label(), cfg.drain_label()];
    let events = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(move |obj| compact(&mut obj.metadata, &keep))
        .reflect(writer)
        .map(move |e| match e {
            Ok(event) => marks.mark(&event),
            Err(e) => tracing::debug!(kind = %what, error = %e, "the shard coordinator's watch failed; retrying"),
        })
        .boxed();
    (reader, events)
}

/// Keeps of `meta` only what placing the object needs: its name and namespace, its
/// resourceVersion (the patches' precondition), the `keep` labels and its controller
/// owner. The coordinator holds every sharded object, so this is most of its memory.
fn compact(meta: &mut ObjectMeta, keep: &[String; 2]) {
    let owner = meta.owner_references.take().and_then(|o| o.into_iter().find(|o| o.controller == Some(true)));
    let labels = meta.labels.take().map(|mut l| {
        l.retain(|k, _| keep.contains(k));
        l
    });
    *meta = ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        resource_version: meta.resource_version.take(),
        labels: labels.filter(|l| !l.is_empty()),
        owner_references: owner.map(|o| vec![o]),
        ..ObjectMeta::default()
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, OwnerReference};

    #[test]
    fn compact_keeps_only_what_placement_reads() {
        let owner = |name: &str, controller| OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: name.into(),
            uid: "u".into(),
            controller: Some(controller),
            ..OwnerReference::default()
        };
        let mut meta = ObjectMeta {
            name: Some("a".into()),
            namespace: Some("ns".into()),
            resource_version: Some("7".into()),
            uid: Some("uid".into()),
            labels: Some([("app".into(), "x".into()), ("shard.opkit.dev/r".into(), "s1".into())].into()),
            annotations: Some([("big".into(), "y".repeat(1000))].into()),
            managed_fields: Some(vec![ManagedFieldsEntry::default()]),
            owner_references: Some(vec![owner("other", false), owner("boss", true)]),
            ..ObjectMeta::default()
        };
        compact(&mut meta, &["shard.opkit.dev/r".into(), "drain.shard.opkit.dev/r".into()]);
        assert_eq!(meta.labels, Some([("shard.opkit.dev/r".to_string(), "s1".to_string())].into()));
        assert_eq!(meta.owner_references.as_ref().map(|o| o[0].name.as_str()), Some("boss"));
        assert_eq!((meta.name.as_deref(), meta.resource_version.as_deref()), (Some("a"), Some("7")));
        assert!(meta.annotations.is_none() && meta.managed_fields.is_none() && meta.uid.is_none());
    }
}
