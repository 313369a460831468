//! One informer: kube watchers (one per watched namespace) feeding reflector stores and
//! broadcasting changes, with relist diffs so subscribers never miss a deletion.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::Client;
use kube::core::Selector;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use opkit_apimachinery::selector::LabelSelector;
use parking_lot::{Mutex, RwLock};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::Cache;
use super::index::{IndexFn, Indexes};
use super::lookup::Lookup;
use super::scope::{Effective, TransformFn};
use crate::object::Kind;

/// A change to a cached object.
#[derive(Debug)]
pub enum InformerEvent<K> {
    /// Created (`old` is `None`) or changed.
    Apply {
        /// The previous version, if the cache had one.
        old: Option<Arc<K>>,
        /// The new version.
        new: Arc<K>,
    },
    /// Deleted; the last known version.
    Delete(Arc<K>),
}

impl<K> Clone for InformerEvent<K> {
    fn clone(&self) -> Self {
        match self {
            InformerEvent::Apply { old, new } => InformerEvent::Apply { old: old.clone(), new: new.clone() },
            InformerEvent::Delete(o) => InformerEvent::Delete(o.clone()),
        }
    }
}

/// A subscriber's view: the objects cached when it subscribed, then every later change.
pub struct Subscription<K> {
    /// The cache's content at subscription time (replayed as creations).
    pub initial: Vec<Arc<K>>,
    /// Later changes. On `Lagged`, resubscribe to resynchronise.
    pub events: broadcast::Receiver<InformerEvent<K>>,
}

struct Partition<K: Kind> {
    namespace: Option<String>,
    store: Store<K>,
    writer: Mutex<Option<Writer<K>>>,
    synced: AtomicBool,
    /// The highest resourceVersion this partition's store reflects (from the events it
    /// applied): a write at or below it is in the store. 0 until the first event, and for
    /// resourceVersions that are not numbers.
    seen_rv: AtomicU64,
    /// The API server's refusal of this partition's initial list, once it refused twice in
    /// a row (a 403: the client may not list or watch the kind; a 400: it rejects the
    /// partition's selectors), with what to check; cleared when it syncs.
    refused: Mutex<Option<String>>,
}

impl<K: Kind> Partition<K> {
    /// Records that the store reflects `rv` (a numeric resourceVersion).
    fn seen(&self, rv: Option<u64>) {
        if let Some(rv) = rv {
            self.seen_rv.fetch_max(rv, Ordering::SeqCst);
        }
    }
}

/// An object's resourceVersion as a number (etcd's revision, as kube-apiserver and
/// opkit's API server give it); `None` when it is not one.
pub(super) fn resource_version_of<K: kube::Resource>(obj: &K) -> Option<u64> {
    obj.meta().resource_version.as_deref()?.parse().ok()
}

/// How many refusals in a row, before the first sync, make a refusal that
/// [`Informer::refusal`] reports: more than one, so a RoleBinding applied with the
/// operator can still land.
const REFUSALS_REPORTED_AFTER: u32 = 2;

/// The API server's refusal when `e` is one no retry changes, with what to check: a 403
/// (`deployments.apps is forbidden: User ...`) or a 400 (a selector it cannot parse, or
/// a field it cannot select on).
fn refusal_message(e: &watcher::Error, selectors: &str) -> Option<String> {
    let (watcher::Error::InitialListFailed(e) | watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e)) =
        e
    else {
        return None;
    };
    match e {
        kube::Error::Api(status) if status.code == 403 => {
            Some(format!("{} (is a list/watch rule for it missing from the controller's RBAC?)", status.message))
        }
        kube::Error::Api(status) if status.code == 400 => {
            Some(format!("the API server rejects its list: {} (check the cache's {selectors})", status.message))
        }
        _ => None,
    }
}

/// Starts a watch of a namespace (or of all) with a watcher configuration: kube's
/// `watcher`, or its `metadata_watcher` for metadata-only informers.
pub(super) type WatchFn<K> = Box<
    dyn Fn(Client, Option<&str>, watcher::Config) -> BoxStream<'static, watcher::Result<watcher::Event<K>>>
        + Send
        + Sync,
>;

/// The shared watch and cache of one object type.
pub struct Informer<K: Kind> {
    client: Client,
    /// The run-time type (`()` for typed kinds, the `ApiResource` of a `DynamicObject`).
    dyntype: K::DynamicType,
    watch: WatchFn<K>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    /// What is done to each object before it is cached.
    transform: TransformFn<K>,
    /// The most objects it may hold ([`ByKind::max_objects`](super::ByKind::max_objects)).
    max_objects: Option<usize>,
    /// Set once it held more than `max_objects`: why the controllers using it fail.
    over_budget: Mutex<Option<String>>,
    /// The same selector parsed, to tell whether a written object is in this cache's scope
    /// (`None`: no selector, or one that does not parse, which the watch refuses anyway).
    parsed_selector: Option<LabelSelector>,
    partitions: Vec<Partition<K>>,
    tx: broadcast::Sender<InformerEvent<K>>,
    /// Held while applying an event and broadcasting it, and while subscribing, so a new
    /// subscriber's snapshot and its event stream line up exactly.
    apply_lock: Mutex<()>,
    /// Secondary indexes, updated with the store under `apply_lock`.
    indexes: Indexes<K>,
    /// The built-in namespace and label lookups, built on the first namespaced or
    /// label-selected read and then updated with the store (so a controller that never
    /// reads that way pays no memory for them).
    lookup: RwLock<Option<Lookup<K>>>,
    started: AtomicBool,
    cache: Cache,
}

impl<K: Kind> Informer<K> {
    pub(super) fn new(
        client: Client,
        settings: &Effective,
        cache: Cache,
        (dyntype, namespaced, watch): (K::DynamicType, bool, WatchFn<K>),
    ) -> Self {
        let namespaces: Vec<Option<String>> = if namespaced && !settings.namespaces.is_empty() {
            settings.namespaces.iter().cloned().map(Some).collect()
        } else {
            vec![None]
        };
        let partitions = namespaces
            .into_iter()
            .map(|namespace| {
                let writer = Writer::<K>::new(dyntype.clone());
                Partition {
                    namespace,
                    store: writer.as_reader(),
                    writer: Mutex::new(Some(writer)),
                    synced: AtomicBool::new(false),
                    seen_rv: AtomicU64::new(0),
                    refused: Mutex::new(None),
                }
            })
            .collect();
        // Large enough for a relist burst of a big cache, so subscribers rarely lag (a lagging
        // subscriber resynchronises by replaying the whole cache).
        let (tx, _) = broadcast::channel(16_384);
        Informer {
            client,
            indexes: Indexes::new(dyntype.clone()),
            dyntype,
            watch,
            label_selector: settings.label_selector.clone(),
            field_selector: settings.field_selector.clone(),
            transform: settings.transform_for::<K>(),
            max_objects: settings.max_objects,
            over_budget: Mutex::new(None),
            parsed_selector: settings.label_selector.as_deref().and_then(|s| LabelSelector::parse(s).ok()),
            partitions,
            tx,
            apply_lock: Mutex::new(()),
            lookup: RwLock::new(None),
            started: AtomicBool::new(false),
            cache,
        }
    }

    /// Starts the watches (once) until `shutdown`.
    pub fn start(self: &Arc<Self>, shutdown: CancellationToken) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        for idx in 0..self.partitions.len() {
            let this = self.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move { this.run_partition(idx, shutdown).await });
        }
    }

    /// Watches partition `idx` until `shutdown`, keeping its store, the indexes and the
    /// lookup current and announcing every change.
    async fn run_partition(self: Arc<Self>, idx: usize, shutdown: CancellationToken) {
        let part = &self.partitions[idx];
        let Some(mut writer) = part.writer.lock().take() else { return };
        let mut cfg = watcher::Config::default();
        if let Some(sel) = &self.label_selector {
            cfg = cfg.labels(sel);
        }
        if let Some(sel) = &self.field_selector {
            cfg = cfg.fields(sel);
        }
        let transform = self.transform.clone();
        let watch = (self.watch)(self.client.clone(), part.namespace.as_deref(), cfg);
        let mut stream = std::pin::pin!(watch.default_backoff().modify(move |o: &mut K| transform(o)));
        // Objects as they were before a relist started, to diff against when it finishes.
        let mut before_relist: Option<HashMap<ObjectRef<K>, Arc<K>>> = None;
        let mut refusals_in_a_row = 0;
        loop {
            let event = tokio::select! {
                _ = shutdown.cancelled() => return,
                e = stream.next() => e,
            };
            let Some(event) = event else { return };
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    self.count_refusal(part, &e, &mut refusals_in_a_row);
                    continue;
                }
            };
            // The watcher announces each list attempt with `Init`: only what the list brings
            // ends a run of refusals.
            if !matches!(event, watcher::Event::Init) {
                refusals_in_a_row = 0;
            }
            let guard = self.apply_lock.lock();
            match &event {
                watcher::Event::Apply(obj) => {
                    let old = part.store.get(&self.key_of(obj));
                    writer.apply_watcher_event(&event);
                    let new = part.store.get(&self.key_of(obj)).unwrap_or_else(|| Arc::new(obj.clone()));
                    part.seen(resource_version_of(obj));
                    self.announce_apply(old, new);
                }
                watcher::Event::Delete(obj) => {
                    let old = part.store.get(&self.key_of(obj)).unwrap_or_else(|| Arc::new(obj.clone()));
                    writer.apply_watcher_event(&event);
                    part.seen(resource_version_of(obj));
                    self.announce_delete(old);
                }
                watcher::Event::Init => {
                    before_relist = Some(part.store.state().into_iter().map(|o| (self.key_of(&o), o)).collect());
                    writer.apply_watcher_event(&event);
                }
                watcher::Event::InitApply(_) => writer.apply_watcher_event(&event),
                watcher::Event::InitDone => {
                    writer.apply_watcher_event(&event);
                    self.finish_relist(part, before_relist.take().unwrap_or_default());
                }
            }
            drop(guard);
            self.check_budget();
            self.cache.notify_progress();
        }
    }

    /// Past its budget of objects, records why (once) for the controllers using it.
    fn check_budget(&self) {
        let Some(max) = self.max_objects else { return };
        let held = self.len();
        if held <= max {
            return;
        }
        let mut over = self.over_budget.lock();
        if over.is_none() {
            let message = format!(
                "the cache of {} holds {held} objects, over its budget of {max} (ByKind::max_objects)",
                self.kind()
            );
            tracing::error!(kind = %self.kind(), held, budget = max, "cache over budget");
            *over = Some(message);
            drop(over);
            self.cache.notify_changed();
        }
    }

    /// How many objects it holds.
    pub fn len(&self) -> usize {
        self.partitions.iter().map(|p| p.store.len()).sum()
    }

    /// Whether it holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Why it is over its budget of objects ([`ByKind::max_objects`](super::ByKind::max_objects)):
    /// the kind, how many it holds and the budget. `None` while within it.
    pub fn over_budget(&self) -> Option<String> {
        self.over_budget.lock().clone()
    }

    fn key_of(&self, o: &K) -> ObjectRef<K> {
        ObjectRef::from_obj_with(o, self.dyntype.clone())
    }

    /// The selectors this informer lists with, as a user wrote them, for messages.
    fn selectors(&self) -> String {
        let quoted = |what: &str, s: &Option<String>| s.as_ref().map(|s| format!("{what} selector {s:?}"));
        let parts: Vec<String> = [quoted("label", &self.label_selector), quoted("field", &self.field_selector)]
            .into_iter()
            .flatten()
            .collect();
        if parts.is_empty() { "selectors for this kind".to_string() } else { parts.join(" and ") }
    }

    /// Logs a failed watch; before the first sync, a run of refusals (403s, 400s) becomes
    /// the partition's refusal (what [`Informer::refusal`] reports).
    fn count_refusal(&self, part: &Partition<K>, e: &watcher::Error, refusals_in_a_row: &mut u32) {
        tracing::warn!(kind = %self.kind(), error = %e, "watch failed; retrying");
        match refusal_message(e, &self.selectors()) {
            Some(message) if !part.synced.load(Ordering::SeqCst) => {
                *refusals_in_a_row += 1;
                if *refusals_in_a_row >= REFUSALS_REPORTED_AFTER {
                    *part.refused.lock() = Some(message);
                    self.cache.notify_changed();
                }
            }
            _ => *refusals_in_a_row = 0,
        }
    }

    /// A relist finished: announces what changed and what went since `before`, and marks
    /// the partition synced.
    fn finish_relist(&self, part: &Partition<K>, mut before: HashMap<ObjectRef<K>, Arc<K>>) {
        for new in part.store.state() {
            part.seen(resource_version_of(&*new));
            let old = before.remove(&self.key_of(&new));
            if old.as_ref().is_none_or(|o| o.meta().resource_version != new.meta().resource_version) {
                self.announce_apply(old, new);
            }
        }
        for (_, gone) in before {
            self.announce_delete(gone);
        }
        *part.refused.lock() = None;
        if !part.synced.swap(true, Ordering::SeqCst) {
            self.cache.notify_changed();
        }
    }

    /// Updates the indexes and the lookup for a created or changed object, and sends the event.
    fn announce_apply(&self, old: Option<Arc<K>>, new: Arc<K>) {
        self.indexes.update(old.as_deref(), &new);
        if let Some(lookup) = self.lookup.write().as_mut() {
            lookup.apply(&new);
        }
        let _ = self.tx.send(InformerEvent::Apply { old, new });
    }

    /// Updates the indexes and the lookup for a deleted object, and sends the event.
    fn announce_delete(&self, old: Arc<K>) {
        self.indexes.delete(&old);
        if let Some(lookup) = self.lookup.write().as_mut() {
            lookup.delete(&old);
        }
        let _ = self.tx.send(InformerEvent::Delete(old));
    }

    /// Subscribes: the current content plus every later change, with nothing in between.
    pub fn subscribe(&self) -> Subscription<K> {
        let _guard = self.apply_lock.lock();
        Subscription { initial: self.list(), events: self.tx.subscribe() }
    }

    /// The kind cached, for logs.
    pub fn kind(&self) -> String {
        K::kind(&self.dyntype).to_string()
    }

    /// The run-time type of the cached objects (`()` for typed kinds).
    pub fn dyntype(&self) -> &K::DynamicType {
        &self.dyntype
    }

    /// True once every watch finished its initial list.
    pub fn is_synced(&self) -> bool {
        self.partitions.iter().all(|p| p.synced.load(Ordering::SeqCst))
    }

    /// Why the cache cannot sync, when the API server keeps refusing its initial list with
    /// a 403 or a 400: the server's message (`deployments.apps is forbidden: User
    /// "system:serviceaccount:..." cannot list resource ...`) and what to check. `None`
    /// while it may still sync.
    pub fn refusal(&self) -> Option<String> {
        self.partitions.iter().find_map(|p| p.refused.lock().clone())
    }

    /// The highest resourceVersion the store of `namespace`'s partition reflects (0:
    /// none yet).
    pub(super) fn seen_resource_version(&self, namespace: Option<&str>) -> u64 {
        self.partition_of(namespace).map_or(0, |p| p.seen_rv.load(Ordering::SeqCst))
    }

    /// Whether an object in `namespace` with `labels` is one this informer watches.
    pub(super) fn watches(
        &self,
        namespace: Option<&str>,
        labels: Option<&std::collections::BTreeMap<String, String>>,
    ) -> bool {
        self.partition_of(namespace).is_some() && self.parsed_selector.as_ref().is_none_or(|s| s.matches_labels(labels))
    }

    fn partition_of(&self, namespace: Option<&str>) -> Option<&Partition<K>> {
        self.partitions.iter().find(|p| p.namespace.is_none() || p.namespace.as_deref() == namespace)
    }

    /// The cached object named `name` in `namespace`.
    pub(super) fn get_named(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let mut key = ObjectRef::<K>::new_with(name, self.dyntype.clone());
        if let Some(ns) = namespace {
            key = key.within(ns);
        }
        self.get(&key)
    }

    /// A cached object.
    pub fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        self.partitions
            .iter()
            .filter(|p| p.namespace.is_none() || p.namespace == key.namespace)
            .find_map(|p| p.store.get(key))
    }

    /// Every cached object.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.partitions.iter().flat_map(|p| p.store.state()).collect()
    }

    /// The cached objects in `namespace`, from the built-in namespace index (no scan of
    /// other namespaces).
    pub fn list_in(&self, namespace: &str) -> Vec<Arc<K>> {
        self.with_lookup(|lookup| lookup.in_namespace(namespace))
    }

    /// The cached objects in `namespace` (`None`: all) whose labels match `selector`,
    /// narrowed through the built-in label index when the selector requires a label
    /// value (`key=value` or `key in (...)`).
    pub fn list_matching(&self, namespace: Option<&str>, selector: &Selector) -> Vec<Arc<K>> {
        self.with_lookup(|lookup| lookup.matching(namespace, selector))
    }

    /// Runs `f` on the lookups, building them from the store on first use. Building
    /// holds `apply_lock`, so no event lands between the snapshot and the first update.
    fn with_lookup<T>(&self, f: impl FnOnce(&Lookup<K>) -> T) -> T {
        if let Some(lookup) = self.lookup.read().as_ref() {
            return f(lookup);
        }
        let _guard = self.apply_lock.lock();
        let mut slot = self.lookup.write();
        let lookup = slot.get_or_insert_with(|| {
            let mut lookup = Lookup::default();
            for obj in self.list() {
                lookup.apply(&obj);
            }
            lookup
        });
        f(lookup)
    }

    /// Adds a secondary index called `name`: `f` gives an object's index values, and
    /// [`Informer::by_index`] finds the cached objects with a value without scanning
    /// the cache. Filled from the current content and kept up to date with it. Returns
    /// false (keeping the existing one) if an index of that name already exists.
    pub fn add_index(&self, name: &str, f: impl Fn(&K) -> Vec<String> + Send + Sync + 'static) -> bool {
        let _guard = self.apply_lock.lock();
        let f: IndexFn<K> = Arc::new(f);
        self.indexes.add(name, f, &self.list())
    }

    /// The cached objects whose index `name` has `value` (empty if none); `None` if no
    /// index of that name was added.
    pub fn by_index(&self, name: &str, value: &str) -> Option<Vec<Arc<K>>> {
        self.indexes.get(name, value)
    }
}
