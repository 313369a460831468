//! The shared informer cache: one watch per object type and manager scope, however many
//! controllers use it, feeding a kube reflector store (for cached reads) and a broadcast
//! of changes (for controllers' event sources). Cached objects have their managedFields
//! stripped to save memory; read them from the API when needed. Secondary indexes
//! ([`Cache::add_index`], [`Cache::by_index`]) find objects by a computed value.
//! `observed` tells whether the cache has seen a write (read-your-own-writes).

mod index;
mod informer;
mod lookup;
mod observed;
mod scope;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::core::Selector;
use kube::discovery::Scope;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::object::{Kind, Object};

use informer::WatchFn;
pub use informer::{Informer, InformerEvent, Subscription};
use observed::ObservesWrites;
pub(crate) use observed::{Expectation, WriteOutcome, WrittenObject};
pub use scope::{ByKind, CacheScope};

trait ErasedInformer: Send + Sync {
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
    fn start(self: Arc<Self>, shutdown: CancellationToken);
    fn is_synced(&self) -> bool;
    fn kind(&self) -> String;
}

impl<K: Kind> ErasedInformer for Informer<K> {
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
    fn start(self: Arc<Self>, shutdown: CancellationToken) {
        Informer::start(&self, shutdown)
    }
    fn is_synced(&self) -> bool {
        Informer::is_synced(self)
    }
    fn kind(&self) -> String {
        Informer::kind(self)
    }
}

/// Which informer: the Rust type, and for `DynamicObject` the resource's
/// `apiVersion/plural` (empty for typed kinds, whose type says it all).
type InformerKey = (TypeId, String);

/// The informers of one resource, by API group and plural.
type InformersByResource = HashMap<(String, String), Vec<Arc<dyn ObservesWrites>>>;

struct CacheInner {
    client: Client,
    /// Read when an informer is created; sharding adds label requirements to it before.
    scope: Mutex<CacheScope>,
    informers: Mutex<HashMap<InformerKey, Arc<dyn ErasedInformer>>>,
    /// The same informers by API group and resource (plural), to check writes against.
    by_resource: Mutex<InformersByResource>,
    running: Mutex<Option<CancellationToken>>,
    /// Notified when an informer syncs or reports a refusal.
    changed: tokio::sync::Notify,
    /// Notified after every change an informer applies.
    progress: tokio::sync::Notify,
}

/// The cache shared by a manager's controllers. Cheap to clone.
#[derive(Clone)]
pub struct Cache {
    inner: Arc<CacheInner>,
}

impl Cache {
    /// A cache over `client`, limited to `scope`.
    #[must_use]
    pub fn new(client: Client, scope: CacheScope) -> Cache {
        Cache {
            inner: Arc::new(CacheInner {
                client,
                scope: Mutex::new(scope),
                informers: Mutex::new(HashMap::new()),
                by_resource: Mutex::new(HashMap::new()),
                running: Mutex::new(None),
                changed: tokio::sync::Notify::new(),
                progress: tokio::sync::Notify::new(),
            }),
        }
    }

    /// The informer for `K`, created (and started, if the cache runs) on first use.
    pub fn informer<K: Object>(&self) -> Arc<Informer<K>> {
        self.informer_for::<K>(String::new(), || {
            let watch: WatchFn<K> = Box::new(|client, ns, cfg| watcher::watcher(K::api(client, ns), cfg).boxed());
            ((), K::namespaced(), watch)
        })
    }

    /// The metadata-only informer for `K`: it watches and caches only each object's
    /// metadata (kube's `metadata_watcher`, controller-runtime's `PartialObjectMetadata`
    /// watches), for controllers that need no more of a kind than its names, labels and
    /// owners (see [`Controller::owns_metadata`](crate::Controller::owns_metadata)).
    /// It is the informer of `PartialObjectMeta<K>`: kube's `Api<PartialObjectMeta<K>>`
    /// lists and watches with the metadata-only `Accept` header.
    pub fn metadata_informer<K: Object>(&self) -> Arc<Informer<PartialObjectMeta<K>>> {
        self.informer::<PartialObjectMeta<K>>()
    }

    /// The informer for objects of the resource `resource` (with `scope`), cached as
    /// `DynamicObject`s: for kinds known only at run time (controller-runtime's
    /// unstructured cache). One informer per resource, however many users.
    pub fn dynamic_informer(&self, resource: &ApiResource, scope: Scope) -> Arc<Informer<DynamicObject>> {
        let key = format!("{}/{}", resource.api_version, resource.plural);
        self.informer_for::<DynamicObject>(key, || {
            let namespaced = matches!(scope, Scope::Namespaced);
            let ar = resource.clone();
            let watch: WatchFn<DynamicObject> = Box::new(move |client, ns, cfg| {
                let api = match ns {
                    Some(ns) if namespaced => Api::namespaced_with(client, ns, &ar),
                    _ => Api::dynamic(client, &ar, &scope),
                };
                watcher::watcher(api, cfg).boxed()
            });
            (resource.clone(), namespaced, watch)
        })
    }

    fn informer_for<K: Kind>(
        &self,
        key: String,
        make: impl FnOnce() -> (K::DynamicType, bool, WatchFn<K>),
    ) -> Arc<Informer<K>> {
        let key = (TypeId::of::<K>(), key);
        let mut map = self.inner.informers.lock();
        if let Some(i) = map.get(&key)
            && let Ok(typed) = i.clone().as_any().downcast::<Informer<K>>()
        {
            return typed;
        }
        let (dyntype, namespaced, watch) = make();
        let resource = ApiResource::erase::<K>(&dyntype);
        let settings = self.inner.scope.lock().settings_of(&resource.group, &resource.plural);
        let informer = Arc::new(Informer::<K>::new(
            self.inner.client.clone(),
            &settings,
            self.clone(),
            (dyntype, namespaced, watch),
        ));
        map.insert(key, informer.clone());
        self.inner.by_resource.lock().entry((resource.group, resource.plural)).or_default().push(informer.clone());
        if let Some(token) = self.inner.running.lock().clone() {
            Informer::start(&informer, token);
        }
        informer
    }

    /// Adds `requirement` to the label selector of `resource`'s informers, unless one
    /// exists already (then it is too late, and this returns false). Sharding calls it
    /// as controllers register their kinds.
    pub(crate) fn require_label(&self, resource: &ApiResource, requirement: &str) -> bool {
        // The lock `informer_for` holds while it creates one, so none is created meanwhile.
        let _creating = self.inner.informers.lock();
        if self.inner.by_resource.lock().contains_key(&(resource.group.clone(), resource.plural.clone())) {
            return false;
        }
        let mut scope = self.inner.scope.lock();
        *scope = std::mem::take(&mut *scope).requiring_label(resource, requirement);
        true
    }

    /// A cached object, if the cache holds it.
    pub fn get<K: Object>(&self, name: &str, namespace: Option<&str>) -> Option<Arc<K>> {
        let mut r = ObjectRef::<K>::new(name);
        if let Some(ns) = namespace.filter(|_| K::namespaced()) {
            r = r.within(ns);
        }
        self.informer::<K>().get(&r)
    }

    /// Every cached object of `K`.
    pub fn list<K: Object>(&self) -> Vec<Arc<K>> {
        self.informer::<K>().list()
    }

    /// The cached `K`s in `namespace`, read through the built-in namespace index
    /// (controller-runtime's `List(ctx, list, InNamespace(ns))` from its cache). For
    /// cluster-scoped kinds use [`Cache::list`].
    pub fn list_in<K: Object>(&self, namespace: &str) -> Vec<Arc<K>> {
        self.informer::<K>().list_in(namespace)
    }

    /// The cached `K`s in `namespace` (`None`: every namespace) whose labels match
    /// `selector` (controller-runtime's `MatchingLabelsSelector`). A selector that
    /// requires a label value (`key=value`, `key in (...)`) is answered from the label
    /// index; others scan the namespace.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::Pod;
    /// # use kube::core::{Expression, Selector};
    /// # fn f(cache: &opkit::Cache) {
    /// let selector: Selector = [("app", "memcached")].into_iter().collect();
    /// let pods = cache.list_matching::<Pod>(Some("default"), &selector);
    /// # }
    /// ```
    pub fn list_matching<K: Object>(&self, namespace: Option<&str>, selector: &Selector) -> Vec<Arc<K>> {
        self.informer::<K>().list_matching(namespace, selector)
    }

    /// Adds a secondary index `name` over the cached `K`s (see [`Informer::add_index`]):
    /// `f` gives an object's index values. Returns false if the index already exists.
    pub fn add_index<K: Object>(&self, name: &str, f: impl Fn(&K) -> Vec<String> + Send + Sync + 'static) -> bool {
        self.informer::<K>().add_index(name, f)
    }

    /// The cached `K`s whose index `name` has `value`; `None` if there is no such index.
    pub fn by_index<K: Object>(&self, name: &str, value: &str) -> Option<Vec<Arc<K>>> {
        self.informer::<K>().by_index(name, value)
    }

    /// True once every informer has finished its initial list.
    pub fn is_synced(&self) -> bool {
        let informers: Vec<_> = self.inner.informers.lock().values().cloned().collect();
        self.inner.running.lock().is_some() && informers.iter().all(|i| i.is_synced())
    }

    /// The kinds whose informers have not synced yet.
    pub fn unsynced(&self) -> Vec<String> {
        self.inner.informers.lock().values().filter(|i| !i.is_synced()).map(|i| i.kind()).collect()
    }

    /// Waits until [`Cache::is_synced`], up to `timeout`. Returns whether it synced.
    pub async fn wait_for_sync(&self, timeout: Duration) -> bool {
        self.wait_until(timeout, || self.is_synced()).await
    }

    /// Waits until `cond` holds, re-checking whenever an informer of this cache syncs,
    /// up to `timeout`. Returns whether it held.
    pub async fn wait_until(&self, timeout: Duration, cond: impl Fn() -> bool) -> bool {
        wait_on(&self.inner.changed, timeout, cond).await
    }

    /// Waits until `cond` holds, re-checking after every change an informer of this cache
    /// applies, up to `timeout`. Returns whether it held.
    pub(crate) async fn wait_for_progress(&self, timeout: Duration, cond: impl Fn() -> bool) -> bool {
        wait_on(&self.inner.progress, timeout, cond).await
    }

    /// What each informer of `written`'s resource must reflect of it before it is read
    /// again; none if this cache holds no such object and never will (no informer for its
    /// resource, or outside their scope).
    pub(crate) fn expectations(&self, written: &WrittenObject) -> Vec<Expectation> {
        let key = (written.group.clone(), written.resource.clone());
        let informers = self.inner.by_resource.lock().get(&key).cloned().unwrap_or_default();
        informers.into_iter().filter_map(|i| Expectation::new(i, written.clone())).collect()
    }

    /// Starts every informer (and any created later) until `shutdown`.
    pub fn start(&self, shutdown: CancellationToken) {
        *self.inner.running.lock() = Some(shutdown.clone());
        let informers: Vec<_> = self.inner.informers.lock().values().cloned().collect();
        for i in informers {
            i.start(shutdown.clone());
        }
        self.inner.changed.notify_waiters();
    }

    pub(crate) fn notify_changed(&self) {
        self.inner.changed.notify_waiters();
    }

    pub(crate) fn notify_progress(&self) {
        self.inner.progress.notify_waiters();
    }
}

/// Waits until `cond` holds, re-checking whenever `notify` is notified, up to `timeout`.
async fn wait_on(notify: &tokio::sync::Notify, timeout: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let notified = notify.notified();
        if cond() {
            return true;
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return cond();
        }
    }
}
