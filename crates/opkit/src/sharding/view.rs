//! The coordinator's view of the cluster: the shard Leases, and for every sharded object
//! only what placing it needs (its resourceVersion, the ring's two labels and its
//! controller owner), kept by watches on their own task. The coordinator holds every
//! sharded object, so this map is most of its memory: a few hundred bytes an object,
//! where a reflector store of the objects' metadata holds kilobytes. Each watch event
//! also marks what it changed, so that the coordinator replans only those objects (and
//! the followers of a changed owner) instead of every object after every event.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::stream::{self, BoxStream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DynamicObject};
use kube::core::{ObjectMeta, PartialObjectMeta};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::task::AbortOnDropHandle;

use super::{ShardedResource, ShardingConfig};

/// An object: the index of its kind, its namespace and name.
pub(super) type ObjectKey = (usize, Option<String>, String);

/// What the coordinator keeps of one object.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Placed {
    /// Its resourceVersion: the precondition of the coordinator's patches.
    pub resource_version: String,
    /// The shard label's value.
    pub shard: Option<String>,
    /// It carries the drain label.
    pub draining: bool,
    /// Its controller owner, when that is of a kind sharded by key.
    pub owner: Option<ObjectKey>,
}

/// What changed since the coordinator last planned.
#[derive(Debug, Default)]
pub(super) struct Changes {
    /// Replan every object: a watch (re)listed.
    pub all: bool,
    /// The objects that changed.
    pub objects: HashSet<ObjectKey>,
}

/// The objects, and the followers of each owner (the objects of `follows_owner` kinds
/// whose controller owner it is), so that an owner's move replans its followers.
#[derive(Default)]
struct Objects {
    placed: HashMap<ObjectKey, Placed>,
    followers: HashMap<ObjectKey, HashSet<ObjectKey>>,
}

impl Objects {
    fn insert(&mut self, key: ObjectKey, placed: Placed) {
        let owner = placed.owner.clone();
        if let Some(old) = self.placed.insert(key.clone(), placed) {
            self.unfollow(&key, old.owner.as_ref());
        }
        if let Some(owner) = owner {
            self.followers.entry(owner).or_default().insert(key);
        }
    }

    fn remove(&mut self, key: &ObjectKey) {
        if let Some(old) = self.placed.remove(key) {
            self.unfollow(key, old.owner.as_ref());
        }
    }

    fn unfollow(&mut self, key: &ObjectKey, owner: Option<&ObjectKey>) {
        if let Some(owner) = owner
            && let Some(f) = self.followers.get_mut(owner)
        {
            f.remove(key);
            if f.is_empty() {
                self.followers.remove(owner);
            }
        }
    }
}

/// The watched state, shared with the watch task.
pub(super) struct View {
    pub leases: Store<Lease>,
    objects: Arc<Mutex<Objects>>,
    changes: Arc<Mutex<Changes>>,
    /// Kinds whose watch has listed once.
    listed: Arc<AtomicUsize>,
    kinds: usize,
    /// Notified after every watch event.
    pub changed: Arc<Notify>,
    _watches: AbortOnDropHandle<()>,
}

impl View {
    /// Starts the watches of the shard Leases in `cfg.namespace` and of every kind.
    pub(super) fn start(client: &kube::Client, cfg: &ShardingConfig) -> View {
        let objects = Arc::new(Mutex::new(Objects::default()));
        let changes = Arc::new(Mutex::new(Changes { all: true, objects: HashSet::new() }));
        let listed = Arc::new(AtomicUsize::new(0));
        let (leases, lease_events) = watch_leases(client, &cfg.namespace);
        let mut events = vec![lease_events];
        let kinds: Arc<[ShardedResource]> = cfg.kinds().into();
        for kind in 0..kinds.len() {
            let tracker = KindTracker {
                kind,
                kinds: kinds.clone(),
                labels: [cfg.shard_label(), cfg.drain_label()],
                objects: objects.clone(),
                changes: changes.clone(),
                listed: listed.clone(),
                listing: None,
                listed_once: false,
            };
            events.push(watch_kind(client, tracker));
        }
        let changed = Arc::new(Notify::new());
        let notify = changed.clone();
        // The watches run on their own task, so that the view stays current while moves
        // are applied (a stale view of the shard Leases would take live shards for dead).
        let watches = tokio::spawn(stream::select_all(events).for_each(move |()| {
            notify.notify_one();
            futures::future::ready(())
        }));
        let kinds = kinds.len();
        View { leases, objects, changes, listed, kinds, changed, _watches: AbortOnDropHandle::new(watches) }
    }

    /// Waits until every watch has listed once.
    pub(super) async fn ready(&self) {
        let _ = self.leases.wait_until_ready().await;
        while self.listed.load(Ordering::SeqCst) < self.kinds {
            tokio::select! {
                () = self.changed.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
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
        self.objects.lock().followers.get(owner).map(|f| f.iter().cloned().collect()).unwrap_or_default()
    }

    /// Every object's key.
    pub(super) fn all_keys(&self) -> Vec<ObjectKey> {
        self.objects.lock().placed.keys().cloned().collect()
    }

    /// What the view holds of an object, if it exists.
    pub(super) fn get(&self, key: &ObjectKey) -> Option<Placed> {
        self.objects.lock().placed.get(key).cloned()
    }
}

/// Applies one kind's watch events to the view, and marks each object changed.
struct KindTracker {
    kind: usize,
    kinds: Arc<[ShardedResource]>,
    /// The shard and drain labels.
    labels: [String; 2],
    objects: Arc<Mutex<Objects>>,
    changes: Arc<Mutex<Changes>>,
    listed: Arc<AtomicUsize>,
    /// The objects a (re)list in progress has returned.
    listing: Option<HashSet<ObjectKey>>,
    listed_once: bool,
}

impl KindTracker {
    fn apply(&mut self, event: watcher::Event<PartialObjectMeta<DynamicObject>>) {
        match event {
            watcher::Event::Apply(obj) => {
                let key = self.insert(&obj.metadata);
                self.changes.lock().objects.insert(key);
            }
            watcher::Event::Delete(obj) => {
                let key = key_of(self.kind, &obj.metadata);
                self.objects.lock().remove(&key);
                self.changes.lock().objects.insert(key);
            }
            watcher::Event::Init => self.listing = Some(HashSet::new()),
            watcher::Event::InitApply(obj) => {
                let key = self.insert(&obj.metadata);
                self.listing.get_or_insert_default().insert(key);
            }
            watcher::Event::InitDone => {
                // What the list did not return was deleted meanwhile.
                let listed = self.listing.take().unwrap_or_default();
                let mut objects = self.objects.lock();
                let gone: Vec<ObjectKey> =
                    objects.placed.keys().filter(|k| k.0 == self.kind && !listed.contains(k)).cloned().collect();
                for key in &gone {
                    objects.remove(key);
                }
                self.changes.lock().all = true;
                if !std::mem::replace(&mut self.listed_once, true) {
                    self.listed.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    }

    fn insert(&self, meta: &ObjectMeta) -> ObjectKey {
        let key = key_of(self.kind, meta);
        let labels = meta.labels.as_ref();
        let placed = Placed {
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            shard: labels.and_then(|l| l.get(&self.labels[0])).cloned(),
            draining: labels.is_some_and(|l| l.contains_key(&self.labels[1])),
            owner: if self.kinds[self.kind].follows_owner { owner_key(&self.kinds, meta) } else { None },
        };
        self.objects.lock().insert(key.clone(), placed);
        key
    }
}

fn key_of(kind: usize, meta: &ObjectMeta) -> ObjectKey {
    (kind, meta.namespace.clone(), meta.name.clone().unwrap_or_default())
}

/// The key of `meta`'s controller owner, when its kind is sharded by key.
fn owner_key(kinds: &[ShardedResource], meta: &ObjectMeta) -> Option<ObjectKey> {
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

fn watch_kind(client: &kube::Client, mut tracker: KindTracker) -> BoxStream<'static, ()> {
    let resource = tracker.kinds[tracker.kind].resource.clone();
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), &resource);
    watcher(api, watcher::Config::default())
        .default_backoff()
        .map(move |e| match e {
            Ok(event) => tracker.apply(event),
            Err(e) => {
                tracing::debug!(kind = %resource.kind, error = %e, "the shard coordinator's watch failed; retrying");
            }
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::ApiResource;

    fn tracker() -> KindTracker {
        let cm = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let kinds: Arc<[ShardedResource]> =
            vec![ShardedResource { resource: cm, hashed: true, follows_owner: true }].into();
        KindTracker {
            kind: 0,
            kinds,
            labels: ["shard.opkit.dev/r".into(), "drain.shard.opkit.dev/r".into()],
            objects: Arc::default(),
            changes: Arc::default(),
            listed: Arc::default(),
            listing: None,
            listed_once: false,
        }
    }

    fn object(name: &str, rv: &str, shard: Option<&str>, owner: Option<&str>) -> PartialObjectMeta<DynamicObject> {
        let owner_references = owner.map(|o| {
            vec![OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: o.into(),
                uid: "u".into(),
                controller: Some(true),
                ..OwnerReference::default()
            }]
        });
        let labels = shard.map(|s| [("shard.opkit.dev/r".to_string(), s.to_string())].into());
        let metadata = ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(rv.into()),
            labels,
            owner_references,
            ..ObjectMeta::default()
        };
        PartialObjectMeta { types: None, metadata, _phantom: std::marker::PhantomData }
    }

    #[test]
    fn keeps_what_placement_reads_indexes_followers_and_forgets_what_a_relist_lost() {
        let mut t = tracker();
        let key = |n: &str| (0, Some("ns".to_string()), n.to_string());
        t.apply(watcher::Event::Init);
        t.apply(watcher::Event::InitApply(object("boss", "1", Some("s1"), None)));
        t.apply(watcher::Event::InitApply(object("child", "2", None, Some("boss"))));
        t.apply(watcher::Event::InitDone);
        assert_eq!(t.listed.load(Ordering::SeqCst), 1);
        let objects = t.objects.lock();
        let boss = &objects.placed[&key("boss")];
        assert_eq!((boss.resource_version.as_str(), boss.shard.as_deref(), boss.draining), ("1", Some("s1"), false));
        assert_eq!(objects.placed[&key("child")].owner, Some(key("boss")));
        assert_eq!(objects.followers[&key("boss")], [key("child")].into());
        drop(objects);
        // The child changes owner, then a relist no longer returns it.
        t.apply(watcher::Event::Apply(object("child", "3", None, Some("other"))));
        assert!(!t.objects.lock().followers.contains_key(&key("boss")));
        assert!(t.changes.lock().objects.contains(&key("child")));
        t.apply(watcher::Event::Init);
        t.apply(watcher::Event::InitApply(object("boss", "1", Some("s1"), None)));
        t.apply(watcher::Event::InitDone);
        let objects = t.objects.lock();
        assert!(!objects.placed.contains_key(&key("child")) && objects.followers.is_empty());
        assert_eq!(t.listed.load(Ordering::SeqCst), 1, "counted once");
    }
}
