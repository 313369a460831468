//! The revisioned object store: every object of every resource, one global revision per
//! write (like etcd's), a bounded event log for watches, and durability gating.
//!
//! # Design
//! All objects live in memory as serialized JSON ([`Bytes`]), indexed per resource by
//! `(namespace, name)`. Each write takes the store lock, runs a caller-supplied closure
//! against the current entry (so read-modify-write and optimistic concurrency are atomic),
//! assigns the next revision, and appends an [`Event`] to the log.
//!
//! A write becomes *visible* (to watches and reads) only once it is durable: with a
//! [`Backend`] the events go to a group-commit thread that persists them in batches and
//! then publishes them. Writers and readers wait for the durable revision to cover what
//! they saw. So nothing that a client observed can be lost by a crash, and revisions never
//! repeat after a restart. The in-memory store is durable at once.
//!
//! When the backend cannot persist (a full disk), the commit thread rolls memory back to
//! the durable state, refuses new writes at once ([`StorageError::NoSpace`] or
//! [`StorageError::Backend`]) while reads go on, and retries the failed batch with a
//! bounded back-off; once it commits, the batch is applied again and writes resume
//! (see `log::commit_loop`). [`Store::health`] reports the failure to `/readyz`.
//!
//! A durable backend also keeps a bounded window of recent events, which refills the watch
//! log at start: a watch from a resourceVersion inside the window resumes across a
//! restart.
//!
//! Lists at an older revision (continue tokens, `resourceVersionMatch=Exact`) are served
//! from memory by rolling back the log; revisions older than the log window answer
//! [`StorageError::Expired`], which the API layer turns into 410 Gone.
//!
//! # Lists never hold the lock while they read
//! Each resource's objects are a persistent ordered map ([`imbl::OrdMap`]): cloning it is
//! O(1) and shares every node, and a later write copies only the nodes on its path. A
//! list takes, under the lock, that clone plus the log's events newer than the revision
//! it reads at (the rollback overlay, usually none), and releases the lock; merging,
//! filtering and paging happen on the snapshot, on a blocking thread when the resource is
//! large ([`run_off_async_workers`]), so neither writers nor the async runtime wait for
//! a long list. Label selectors match on labels read from each stored value at most once
//! and kept with its entry (`labels.rs`), not on the parsed object.
//!
//! Watches read the same log through a cursor (`log.rs`): a watcher holds a bounded batch
//! of events, and one that falls out of the log window ends with [`StorageError::Expired`]
//! (410 to the client, which relists), as kube's watch cache ends watchers that fall
//! behind. The log is the only history, capped in events and in bytes.

mod backend;
pub(crate) mod encryption;
mod labels;
mod log;
mod sqlite;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::watch;

pub(crate) use backend::{Backend, LoadedObject, LoadedState, UnreadableObject};
pub use encryption::EncryptionConfigError;
pub(crate) use encryption::{EncryptingBackend, EncryptionConfig};
use labels::LabelCache;
pub(crate) use labels::ObjectLabels;
pub(crate) use log::WatchSubscription;
pub use sqlite::HistoryWindow;
pub(crate) use sqlite::SqliteBackend;

/// A global revision: the resourceVersion of every object and list.
pub(crate) type Revision = u64;

/// Errors of the storage layer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StorageError {
    /// The requested revision has been compacted out of the event log.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// The revision asked for.
        requested: Revision,
        /// The oldest revision still served.
        oldest: Revision,
    },
    /// The requested revision is newer than anything written.
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLarge {
        /// The revision asked for.
        requested: Revision,
        /// The current revision.
        current: Revision,
    },
    /// The durable backend failed; the store refuses writes until it persists again.
    #[error("storage backend failure: {0}")]
    Backend(String),
    /// The backend's disk is full; the store refuses writes until space returns. The
    /// message is etcd's, which kube-apiserver passes on to clients.
    #[error("etcdserver: mvcc: database space exceeded")]
    NoSpace,
    /// A stored object could not be decrypted or decoded (kube-apiserver's
    /// "unable to transform key" error); the rest of the store is served.
    #[error("unable to transform key \"{key}\": {reason}")]
    Unreadable {
        /// The object's storage key as kube names it, e.g. `/registry/secrets/default/db`.
        key: String,
        /// Why it could not be read.
        reason: String,
    },
    /// A value larger than [`MAX_VALUE_BYTES`] (etcd's default `--max-request-bytes`).
    #[error("etcdserver: request is too large: the object is {size} bytes, the limit is {limit}")]
    ValueTooLarge {
        /// The serialized object's size.
        size: usize,
        /// [`MAX_VALUE_BYTES`].
        limit: usize,
    },
}

/// The largest object the store keeps: 1.5 MiB, etcd's default `--max-request-bytes`,
/// which bounds every object kube-apiserver stores.
pub(crate) const MAX_VALUE_BYTES: usize = 1536 * 1024;

/// The key of one object inside a resource: namespace ("" for cluster-scoped) and name.
pub(crate) type ObjectName = (String, String);

/// One stored object.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The revision of the write that produced this value.
    pub rev: Revision,
    /// The object as JSON, with `metadata.resourceVersion` already set to `rev`.
    pub value: Bytes,
    /// Its labels, read from `value` when a list first asks.
    labels: LabelCache,
}

impl Entry {
    /// The entry for `value`, written at revision `rev`.
    pub fn new(rev: Revision, value: Bytes) -> Entry {
        Entry { rev, value, labels: LabelCache::default() }
    }

    fn item(&self) -> ListItem<'_> {
        ListItem { value: &self.value, labels: &self.labels }
    }
}

/// An object a list visits: its stored JSON and its labels.
#[derive(Clone, Copy)]
pub struct ListItem<'a> {
    value: &'a Bytes,
    labels: &'a LabelCache,
}

impl<'a> ListItem<'a> {
    /// The object as stored.
    pub fn value(&self) -> &'a Bytes {
        self.value
    }
    /// Its `metadata.labels`; `None` when the stored bytes are not a JSON object. Read
    /// once per stored value and kept with the entry (values rolled back from the log
    /// are read on the spot).
    pub fn labels(&self) -> Option<&'a ObjectLabels> {
        self.labels.get(self.value)
    }
}

/// The filter a list applies to each object it visits.
pub(crate) type ListFilter<'f> = dyn FnMut(ListItem<'_>) -> bool + Send + 'f;

/// What kind of change an [`Event`] records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was removed.
    Deleted,
}

/// One committed write.
#[derive(Clone, Debug)]
pub struct Event {
    /// The revision of the write.
    pub rev: Revision,
    /// The resource the object belongs to (see [`ResourceId`]).
    pub resource: ResourceId,
    /// Namespace and name.
    pub key: ObjectName,
    /// The change.
    pub kind: EventKind,
    /// The object after the write; for a deletion, its final state.
    pub value: Bytes,
    /// The object before the write, if it existed.
    pub prev: Option<Bytes>,
    /// The revision of `prev` (0 when there was none).
    pub prev_rev: Revision,
}

impl Event {
    /// The bytes of objects the event holds.
    fn size(&self) -> usize {
        self.value.len() + self.prev.as_ref().map_or(0, Bytes::len)
    }
}

/// Identifies where a resource's objects are kept: `group/resource` (core group is empty),
/// the same for every version of the resource.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceId(Arc<str>);

impl ResourceId {
    /// The storage id of `resource` in `group`.
    pub fn new(group: &str, resource: &str) -> Self {
        ResourceId(Arc::from(format!("{group}/{resource}")))
    }
    /// The `group/resource` string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a write closure decides.
#[derive(Debug)]
pub enum Write {
    /// Store this value (create or replace).
    Put(Bytes),
    /// Remove the object; the bytes are its final state, sent to watchers.
    Delete(Bytes),
    /// Change nothing (a no-op update keeps the old resourceVersion).
    Unchanged,
}

/// The outcome of a committed write.
#[derive(Debug, Clone)]
pub struct WriteResult {
    /// The revision the write got, or the entry's unchanged revision.
    pub rev: Revision,
    /// The stored (or final) value.
    pub value: Bytes,
}

/// Which page of a list to read.
#[derive(Debug, Default, Clone)]
pub struct ListRange {
    /// Only this namespace (None: all).
    pub namespace: Option<String>,
    /// Read at exactly this revision (continue tokens, `resourceVersionMatch=Exact`).
    pub at: Option<Revision>,
    /// Start strictly after this key.
    pub after: Option<ObjectName>,
    /// Stop after this many matching items.
    pub limit: Option<usize>,
}

/// One page of a list.
#[derive(Debug)]
pub struct ListPage {
    /// Matching objects, in key order.
    pub items: Vec<Bytes>,
    /// The revision the page was read at.
    pub rev: Revision,
    /// The last key returned, when more items may follow.
    pub next: Option<ObjectName>,
    /// How many objects follow (before filtering), when a limit cut the page.
    pub remaining: Option<u64>,
}

/// Tunables of the object store: how much watch history it keeps.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// How many events the watch log keeps before compacting the oldest.
    pub log_capacity: usize,
    /// How many bytes of objects (after and before each write) the watch log keeps
    /// before compacting the oldest events: the window of history a watch can resume
    /// from is bounded in memory as well as in events; older resourceVersions get 410.
    pub log_bytes: usize,
    /// How much of that history a durable backend keeps across restarts.
    pub persisted_history: HistoryWindow,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            log_capacity: 100_000,
            log_bytes: 256 * 1024 * 1024,
            persisted_history: HistoryWindow::default(),
        }
    }
}

/// One resource's objects: a persistent map, so a list can keep a snapshot for O(1).
type ResourceMap = imbl::OrdMap<ObjectName, Entry>;

/// How many objects a resource may hold before a list of it is filtered on a blocking
/// thread rather than on an async worker (below this the hand-off costs more than it
/// saves).
const INLINE_LIST_OBJECTS: usize = 512;

pub(crate) struct State {
    rev: Revision,
    durable: Revision,
    resources: HashMap<ResourceId, ResourceMap>,
    log: VecDeque<Arc<Event>>,
    /// Events with `rev <= compacted` are no longer in the log.
    compacted: Revision,
    capacity: usize,
    /// The most bytes of event values the log keeps, and how many it holds.
    capacity_bytes: usize,
    log_bytes: usize,
    /// Why the backend cannot persist (writes are refused meanwhile), if it cannot.
    failed: Option<StorageError>,
    /// Objects the backend holds but could not be read at start, with why: reading one
    /// answers [`StorageError::Unreadable`]; writing the name replaces it.
    unreadable: HashMap<(ResourceId, ObjectName), String>,
    /// The revision of the last write to each resource (for caches derived from one
    /// resource's objects, such as the RBAC authorizer's index).
    last_write: HashMap<ResourceId, Revision>,
}

struct Shared {
    state: Mutex<State>,
    /// The durable revision; watch subscriptions wait on it for new events.
    durable_tx: watch::Sender<Revision>,
    commit_tx: Option<std::sync::mpsc::Sender<Arc<Event>>>,
}

/// The object store. Cheap to clone; all clones share one state.
#[derive(Clone)]
pub struct Store {
    shared: Arc<Shared>,
}

impl Store {
    /// An empty in-memory store.
    pub fn in_memory(opts: StoreOptions) -> Store {
        Store::build(LoadedState::default(), None, opts)
    }

    /// A store over a durable backend: loads its contents and starts the commit thread.
    pub fn open(backend: Box<dyn Backend>, opts: StoreOptions) -> Result<Store, StorageError> {
        let mut loaded = backend.load()?;
        loaded.objects.retain(readable);
        // A corrupt event is quarantined as a corrupt row is: never streamed. The history
        // must stay gap-free, so it resumes only after the last such event (watches from
        // before it get 410 and relist).
        if let Some(last_corrupt) = loaded.history.iter().rposition(|e| !readable_event(e)) {
            loaded.history.drain(..=last_corrupt);
        }
        if let Some(first) = loaded.history.first()
            && (first.rev == 0 || loaded.history.last().map(|e| e.rev) != Some(loaded.rev))
        {
            // A window that does not reach the newest revision cannot be resumed from.
            tracing::warn!(first = first.rev, revision = loaded.rev, "persisted watch history is not current; ignored");
            loaded.history.clear();
        }
        let (tx, rx) = std::sync::mpsc::channel::<Arc<Event>>();
        let store = Store::build(loaded, Some(tx), opts);
        let weak = Arc::downgrade(&store.shared);
        std::thread::Builder::new()
            .name("opkit-storage-commit".into())
            .spawn(move || log::commit_loop(backend, rx, weak))
            .map_err(|e| StorageError::Backend(e.to_string()))?;
        Ok(store)
    }

    fn build(loaded: LoadedState, commit_tx: Option<std::sync::mpsc::Sender<Arc<Event>>>, opts: StoreOptions) -> Store {
        let mut resources: HashMap<ResourceId, ResourceMap> = HashMap::new();
        for o in loaded.objects {
            resources
                .entry(ResourceId(Arc::from(o.resource.as_str())))
                .or_default()
                .insert((o.namespace, o.name), Entry::new(o.rev, o.value));
        }
        let unreadable = loaded
            .unreadable
            .into_iter()
            .map(|u| ((ResourceId(Arc::from(u.resource.as_str())), (u.namespace, u.name)), u.reason))
            .collect();
        let (durable_tx, _) = watch::channel(loaded.rev);
        let store = Store {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    rev: loaded.rev,
                    durable: loaded.rev,
                    resources,
                    log: VecDeque::new(),
                    compacted: loaded.rev,
                    capacity: opts.log_capacity.max(16),
                    capacity_bytes: opts.log_bytes,
                    log_bytes: 0,
                    failed: None,
                    unreadable,
                    last_write: HashMap::new(),
                }),
                durable_tx,
                commit_tx,
            }),
        };
        // The persisted window of history (oldest first, ending at `loaded.rev`) refills
        // the watch log, so watches from inside it resume across a restart.
        if let Some(first) = loaded.history.first() {
            let mut st = store.shared.state.lock();
            st.compacted = first.rev.saturating_sub(1);
            for e in loaded.history {
                st.push_log(Arc::new(e));
            }
        }
        store
    }

    /// The newest revision that is durable and visible.
    pub fn revision(&self) -> Revision {
        self.shared.state.lock().durable
    }

    /// Why the backend cannot persist, while it cannot (for `/readyz`).
    pub fn health(&self) -> Result<(), StorageError> {
        match &self.shared.state.lock().failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Reads one object, as of the newest durable revision.
    pub async fn get(&self, resource: &ResourceId, key: &ObjectName) -> Result<Option<Entry>, StorageError> {
        let (entry, rev) = {
            let st = self.shared.state.lock();
            if let Some(reason) = st.unreadable.get(&(resource.clone(), key.clone())) {
                return Err(StorageError::Unreadable { key: storage_key(resource, key), reason: reason.clone() });
            }
            let e = st.resources.get(resource).and_then(|m| m.get(key)).cloned();
            (e, st.rev)
        };
        self.wait_durable(rev).await?;
        Ok(entry)
    }

    /// Reads a page of a resource's objects, keeping those for which `keep` is true.
    ///
    /// The lock is held only to take a snapshot (see the module documentation); `keep`
    /// runs without it, off the async workers when the resource is large.
    pub async fn list(
        &self,
        resource: &ResourceId,
        range: &ListRange,
        keep: &mut ListFilter<'_>,
    ) -> Result<ListPage, StorageError> {
        let (snapshot, rev) = {
            let st = self.shared.state.lock();
            (st.list_snapshot(resource, range.at)?, st.rev)
        };
        let page = if snapshot.objects.len() < INLINE_LIST_OBJECTS {
            snapshot.page(range, keep)
        } else {
            run_off_async_workers(|| snapshot.page(range, keep))
        };
        // Released before waiting: while a snapshot lives, writes copy the nodes it shares.
        drop(snapshot);
        self.wait_durable(rev.max(page.rev)).await?;
        Ok(page)
    }

    /// Atomically reads the object at `key`, lets `decide` compute the write, and commits
    /// it. Returns `Ok(Err(e))` when `decide` refused. Waits until the write is durable.
    pub async fn write<E>(
        &self,
        resource: &ResourceId,
        key: &ObjectName,
        decide: impl FnOnce(Option<&Entry>, Revision) -> Result<Write, E>,
    ) -> Result<Result<WriteResult, E>, StorageError> {
        let result = {
            let mut st = self.shared.state.lock();
            if let Some(f) = &st.failed {
                // Refused at once and not applied: nothing here can be made durable.
                return Err(f.clone());
            }
            let current = st.resources.get(resource).and_then(|m| m.get(key));
            let next = st.rev + 1;
            let decision = match decide(current, next) {
                Ok(d) => d,
                Err(e) => return Ok(Err(e)),
            };
            let prev = current.map(|e| e.value.clone());
            let prev_rev = current.map_or(0, |e| e.rev);
            let (kind, value) = match decision {
                Write::Unchanged => {
                    let Some(cur) = current else {
                        return Ok(Ok(WriteResult { rev: st.rev, value: Bytes::new() }));
                    };
                    let r = WriteResult { rev: cur.rev, value: cur.value.clone() };
                    drop(st);
                    return Ok(Ok(r));
                }
                Write::Put(v) => {
                    if v.len() > MAX_VALUE_BYTES {
                        return Err(StorageError::ValueTooLarge { size: v.len(), limit: MAX_VALUE_BYTES });
                    }
                    let kind = if prev.is_some() { EventKind::Modified } else { EventKind::Added };
                    st.resources.entry(resource.clone()).or_default().insert(key.clone(), Entry::new(next, v.clone()));
                    (kind, v)
                }
                Write::Delete(v) => {
                    if let Some(m) = st.resources.get_mut(resource) {
                        m.remove(key);
                    }
                    (EventKind::Deleted, v)
                }
            };
            st.rev = next;
            st.last_write.insert(resource.clone(), next);
            if !st.unreadable.is_empty() {
                st.unreadable.remove(&(resource.clone(), key.clone()));
            }
            let event = Arc::new(Event {
                rev: next,
                resource: resource.clone(),
                key: key.clone(),
                kind,
                value: value.clone(),
                prev,
                prev_rev,
            });
            st.push_log(event.clone());
            match &self.shared.commit_tx {
                Some(tx) => {
                    if tx.send(event).is_err() {
                        let stopped = StorageError::Backend("commit thread stopped".into());
                        st.failed = Some(stopped.clone());
                        return Err(stopped);
                    }
                }
                None => {
                    st.durable = next;
                    self.shared.durable_tx.send_replace(next);
                }
            }
            WriteResult { rev: next, value }
        };
        self.wait_durable(result.rev).await?;
        Ok(Ok(result))
    }

    /// Starts a watch on `resource` for events after `from`: the subscription reads the
    /// event log from there on, as events become durable.
    pub fn watch(&self, resource: &ResourceId, from: Revision) -> Result<WatchSubscription, StorageError> {
        let st = self.shared.state.lock();
        if from < st.compacted {
            return Err(StorageError::Expired { requested: from, oldest: st.compacted + 1 });
        }
        if from > st.durable {
            return Err(StorageError::TooLarge { requested: from, current: st.durable });
        }
        let durable = self.shared.durable_tx.subscribe();
        Ok(WatchSubscription::new(self.clone(), resource.clone(), from, durable))
    }

    /// Waits until `rev` is durable (at once for the in-memory store). Fails when the
    /// backend could not persist it: the commit thread then publishes `Revision::MAX` to
    /// wake every waiter, and the state's durable revision says who made it.
    async fn wait_durable(&self, rev: Revision) -> Result<(), StorageError> {
        let mut rx = self.shared.durable_tx.subscribe();
        let published = *rx.borrow();
        if published >= rev && published != Revision::MAX {
            return Ok(());
        }
        // Drop the channel's read guard before taking the state lock: the commit thread
        // publishes while holding the state lock, so holding both here would deadlock.
        let reached = rx.wait_for(|d| *d >= rev).await.is_ok();
        let st = self.shared.state.lock();
        if reached && st.durable >= rev {
            return Ok(());
        }
        Err(st.failed.clone().unwrap_or_else(|| StorageError::Backend("store closed".into())))
    }

    /// The revision of the last write to `resource` since the store was opened (0 if
    /// none): a cache of `resource`'s objects is current while this is unchanged.
    pub fn last_write(&self, resource: &ResourceId) -> Revision {
        self.shared.state.lock().last_write.get(resource).copied().unwrap_or(0)
    }

    /// [`Self::last_write`] of several resources, read together under one lock.
    pub fn last_writes<const N: usize>(&self, resources: &[ResourceId; N]) -> [Revision; N] {
        let st = self.shared.state.lock();
        resources.each_ref().map(|r| st.last_write.get(r).copied().unwrap_or(0))
    }

    /// Number of objects stored for `resource` (all namespaces).
    pub fn count(&self, resource: &ResourceId) -> usize {
        self.shared.state.lock().resources.get(resource).map_or(0, |m| m.len())
    }

    /// Every object of `resource` as written so far (durable or not), in key order.
    pub fn values(&self, resource: &ResourceId) -> Vec<(ObjectName, Bytes)> {
        let objects = self.objects(resource);
        objects.iter().map(|(k, e)| (k.clone(), e.value.clone())).collect()
    }

    /// The namespaces/names of every object of `resource` in `namespace` (None: all).
    pub fn keys(&self, resource: &ResourceId, namespace: Option<&str>) -> Vec<ObjectName> {
        let objects = self.objects(resource);
        match namespace {
            None => objects.keys().cloned().collect(),
            Some(ns) => ns_range(&objects, ns).map(|(k, _)| k.clone()).collect(),
        }
    }

    /// A snapshot of `resource`'s objects as written so far, taken under the lock in O(1).
    fn objects(&self, resource: &ResourceId) -> ResourceMap {
        self.shared.state.lock().resources.get(resource).cloned().unwrap_or_default()
    }
}

/// Runs CPU-heavy work (a long list's filtering, parsing) where it does not hold up the
/// async runtime: on a multi-threaded runtime the worker hands its other tasks to the
/// rest and becomes a blocking thread for the duration (`block_in_place`), so a small
/// request such as a Lease renewal is still served while many long lists run. On a
/// current-thread runtime, or outside one, `work` runs in place.
pub(crate) fn run_off_async_workers<R>(work: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// Whether a loaded object is one the server can serve: a JSON object it can parse.
/// One corrupt row (written by an older server, or damaged on disk) must not stop the
/// server or make its resource unservable: it is reported and quarantined (left in the
/// backend, not loaded; a later write of the same name replaces it).
fn readable(o: &LoadedObject) -> bool {
    match serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&o.value) {
        Ok(_) => true,
        Err(e) => {
            tracing::error!(
                resource = %o.resource,
                namespace = %o.namespace,
                name = %o.name,
                error = %e,
                "stored object cannot be read; quarantined (not served)"
            );
            false
        }
    }
}

/// Whether a persisted event is one watches can be served: its objects (after and, if
/// any, before the write) are JSON objects. One that is not is reported and dropped.
fn readable_event(e: &Event) -> bool {
    let object = |b: &Bytes| serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(b).err();
    match object(&e.value).or_else(|| e.prev.as_ref().and_then(object)) {
        None => true,
        Some(error) => {
            tracing::error!(
                resource = e.resource.as_str(),
                namespace = %e.key.0,
                name = %e.key.1,
                revision = e.rev,
                %error,
                "stored watch event cannot be read; quarantined (not streamed)"
            );
            false
        }
    }
}

/// Where an object is kept, named as kube-apiserver names its etcd keys
/// (`/registry/secrets/default/token`, `/registry/apps/deployments/default/web`): used
/// in errors about the object and as the additional data of AES-GCM.
fn storage_key(resource: &ResourceId, key: &ObjectName) -> String {
    let resource = resource.as_str().trim_start_matches('/');
    if key.0.is_empty() {
        format!("/registry/{resource}/{}", key.1)
    } else {
        format!("/registry/{resource}/{}/{}", key.0, key.1)
    }
}

fn ns_range<'a>(m: &'a ResourceMap, ns: &str) -> impl Iterator<Item = (&'a ObjectName, &'a Entry)> + 'a {
    let ns_owned = ns.to_string();
    m.range((Bound::Included((ns.to_string(), String::new())), Bound::Unbounded))
        .take_while(move |(k, _)| k.0 == ns_owned)
}

impl State {
    /// Undoes `pending` (writes not yet durable, oldest first) in memory, so reads serve
    /// the durable state while the backend cannot persist.
    fn roll_back(&mut self, pending: &[Arc<Event>]) {
        for e in pending.iter().rev() {
            let map = self.resources.entry(e.resource.clone()).or_default();
            match &e.prev {
                Some(prev) => {
                    map.insert(e.key.clone(), Entry::new(e.prev_rev, prev.clone()));
                }
                None => {
                    map.remove(&e.key);
                }
            }
        }
        self.rev = self.durable;
    }

    /// Applies `batch` (oldest first) again after [`Self::roll_back`], once it is durable.
    fn reapply(&mut self, batch: &[Arc<Event>]) {
        for e in batch {
            let map = self.resources.entry(e.resource.clone()).or_default();
            match e.kind {
                EventKind::Added | EventKind::Modified => {
                    map.insert(e.key.clone(), Entry::new(e.rev, e.value.clone()));
                }
                EventKind::Deleted => {
                    map.remove(&e.key);
                }
            }
            self.rev = self.rev.max(e.rev);
        }
    }

    fn push_log(&mut self, e: Arc<Event>) {
        self.log_bytes += e.size();
        self.log.push_back(e);
        // The newest event always stays, so a watch at the current revision can resume.
        while self.log.len() > self.capacity || (self.log_bytes > self.capacity_bytes && self.log.len() > 1) {
            if let Some(old) = self.log.pop_front() {
                self.log_bytes -= old.size();
                self.compacted = old.rev;
            }
        }
    }

    /// What a list at `at` (None: now) reads, taken in O(1) plus the log's events newer
    /// than `at` for the resource (the rollback overlay).
    fn list_snapshot(&self, resource: &ResourceId, at: Option<Revision>) -> Result<ListSnapshot, StorageError> {
        let objects = self.resources.get(resource).cloned().unwrap_or_default();
        let at = at.unwrap_or(self.rev);
        if at > self.rev {
            return Err(StorageError::TooLarge { requested: at, current: self.rev });
        }
        if at < self.rev && at < self.compacted {
            return Err(StorageError::Expired { requested: at, oldest: self.compacted + 1 });
        }
        let newer = self.log.partition_point(|e| e.rev <= at);
        let rolled_back = self.log.range(newer..).filter(|e| &e.resource == resource).cloned().collect();
        Ok(ListSnapshot { objects, at, rolled_back })
    }
}

/// A consistent view of one resource for a list, read without the store lock.
struct ListSnapshot {
    /// The resource's objects at the newest revision.
    objects: ResourceMap,
    /// The revision the list reads at.
    at: Revision,
    /// The resource's events newer than `at`, oldest first: what to roll back.
    rolled_back: Vec<Arc<Event>>,
}

impl ListSnapshot {
    fn page(&self, range: &ListRange, keep: &mut ListFilter<'_>) -> ListPage {
        let map = &self.objects;
        // Roll back writes newer than `at`: the oldest such event per key holds its value
        // at `at` (None: the object did not exist then).
        let mut overlay: BTreeMap<&ObjectName, Option<(&Bytes, LabelCache)>> = BTreeMap::new();
        for e in self.rolled_back.iter().rev() {
            overlay.insert(&e.key, e.prev.as_ref().map(|p| (p, LabelCache::default())));
        }
        let start = match &range.after {
            Some(k) => Bound::Excluded(k.clone()),
            None => match &range.namespace {
                Some(ns) => Bound::Included((ns.clone(), String::new())),
                None => Bound::Unbounded,
            },
        };
        let in_ns = |k: &ObjectName| range.namespace.as_ref().is_none_or(|ns| &k.0 == ns);
        let mut live = map.range((start.clone(), Bound::Unbounded)).peekable();
        let mut over = overlay.range::<ObjectName, _>((start.as_ref(), Bound::Unbounded)).peekable();
        let mut items = Vec::new();
        let mut last: Option<&ObjectName> = None;
        let limit = range.limit.unwrap_or(usize::MAX);
        let mut more = false;
        loop {
            // Merge the two sorted sequences; the overlay wins on equal keys.
            let next: Option<(&ObjectName, Option<ListItem<'_>>)> = match (live.peek(), over.peek()) {
                (None, None) => None,
                (Some((lk, _)), Some((ok, _))) if lk < *ok => live.next().map(|(k, e)| (k, Some(e.item()))),
                (Some((lk, _)), Some((ok, _))) if lk == *ok => {
                    live.next();
                    over.next().map(|(k, v)| (*k, overlay_item(v)))
                }
                (Some(_), None) => live.next().map(|(k, e)| (k, Some(e.item()))),
                _ => over.next().map(|(k, v)| (*k, overlay_item(v))),
            };
            let Some((k, v)) = next else { break };
            if !in_ns(k) {
                if range.namespace.is_some() && range.namespace.as_deref() < Some(k.0.as_str()) {
                    break;
                }
                continue;
            }
            let Some(item) = v else { continue };
            if items.len() >= limit {
                more = true;
                break;
            }
            if keep(item) {
                items.push(item.value.clone());
                last = Some(k);
            }
        }
        let remaining = more.then(|| {
            let count = last.map_or(0, |a| {
                map.range::<_, ObjectName>((Bound::Excluded(a), Bound::Unbounded))
                    .take_while(|(k, _)| range.namespace.as_ref().is_none_or(|ns| &k.0 <= ns))
                    .filter(|(k, _)| in_ns(k))
                    .count()
            });
            count as u64
        });
        ListPage { items, rev: self.at, next: if more { last.cloned() } else { None }, remaining }
    }
}

fn overlay_item<'a>(v: &'a Option<(&'a Bytes, LabelCache)>) -> Option<ListItem<'a>> {
    v.as_ref().map(|(value, labels)| ListItem { value, labels })
}

#[cfg(test)]
mod tests;
