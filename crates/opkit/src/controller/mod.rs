//! The controller builder (`For` / `Owns` / `Watches`, event filters, concurrency, rate
//! limiting, user state) and a handle to trigger reconciles from outside.

mod handle;
pub mod queue;
pub mod ratelimit;
mod source;
mod worker;

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use kube::api::{ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::discovery::Scope;

use crate::cache::Informer;
use crate::manager::{Manager, WatchedKind};
use crate::object::{Kind, Object};
use crate::predicate::Predicate;
use crate::read_your_writes::ReadYourWrites;
use crate::reconcile::DynamicResource;
use crate::reconcile::{Reconciler, Request};
use ratelimit::RateLimiter;
use source::{InformerSource, MapFn, Source, StreamSource};

pub use handle::ControllerHandle;

/// How long a controller waits for its caches to sync before it fails (and stops the
/// manager), as controller-runtime's default `CacheSyncTimeout`.
pub const DEFAULT_CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// Why [`Controller::build`] refused a controller.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Another controller of this manager has the same name (controller-runtime rejects
    /// duplicate names, which would share metrics and logs). Name one with
    /// [`Controller::named`].
    #[error("a controller named {0:?} is already registered with this manager")]
    DuplicateName(String),
    /// The reconciler takes a `Context<K, S>` with a state type other than `()`, but no
    /// state was given with [`Controller::with_state`].
    #[error("controller {controller:?} needs its state ({state}); set it with with_state")]
    MissingState {
        /// The controller.
        controller: String,
        /// The state type.
        state: &'static str,
    },
    /// The manager is sharded, but this leader-only controller's kind is not: every
    /// shard would reconcile all of its objects at once. Shard the kind
    /// ([`ShardingConfig::shards`](crate::sharding::ShardingConfig::shards)) or run the
    /// controller on every replica ([`Controller::without_leader_election`]).
    #[error(
        "controller {controller:?} reconciles {kind}, which ring {ring:?} does not shard: every shard would reconcile all of them; shard the kind or build it without leader election"
    )]
    NotSharded {
        /// The controller.
        controller: String,
        /// Its kind.
        kind: String,
        /// The ring.
        ring: String,
    },
}

/// The kind a controller reconciles, to find it among owner references.
struct ForKind {
    kind: String,
    group: String,
    namespaced: bool,
}

impl ForKind {
    /// The requests for the controlling owners of this kind of an object.
    fn owners_of<C: Kind>(&self, child: &C) -> Vec<Request> {
        let ns = if self.namespaced { child.meta().namespace.as_deref() } else { None };
        child
            .meta()
            .owner_references
            .iter()
            .flatten()
            .filter(|o| o.controller == Some(true) && o.kind == self.kind)
            .filter(|o| o.api_version.split_once('/').map_or("", |(g, _)| g) == self.group)
            .map(|o| Request::new(o.name.clone(), ns))
            .collect()
    }
}

/// `Arc<()>` as an `Arc<S>` when `S` is `()`: controllers without state need none.
fn unit_state<S: Send + Sync + 'static>() -> Option<Arc<S>> {
    let unit: Arc<dyn Any + Send + Sync> = Arc::new(());
    unit.downcast::<S>().ok()
}

/// Builds a controller for kind `K` with reconciler `R` (and optional state `S`) and
/// registers it with a manager.
///
/// There is exactly one `For` kind per controller: it is the type parameter `K`, so a
/// second `For` (an error in controller-runtime's builder) cannot be written.
///
/// ```no_run
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
/// # use opkit::{Action, Context, Controller, Manager, ReconcileResult, predicate::GenerationChanged};
/// struct Settings { resync: Duration }
/// async fn reconcile(ctx: Context<Deployment, Settings>) -> ReconcileResult {
///     Ok(Action::requeue_after(ctx.state.resync))
/// }
/// # fn setup(mgr: &Manager) -> Result<(), opkit::controller::BuildError> {
/// Controller::new(mgr, reconcile)
///     .with_state(Arc::new(Settings { resync: Duration::from_secs(60) }))
///     .owns::<ReplicaSet>()
///     .with_event_filter(GenerationChanged)
///     .max_concurrent_reconciles(2)
///     .build()?;
/// # Ok(()) }
/// ```
#[must_use = "a controller does nothing until `build` registers it with the manager"]
pub struct Controller<K: Kind, R, S = ()> {
    mgr: Manager,
    informer: Arc<Informer<K>>,
    for_kind: Arc<ForKind>,
    dynamic: Option<Arc<DynamicResource>>,
    name: String,
    reconciler: R,
    state: Option<Arc<S>>,
    sources: Vec<Box<dyn Source>>,
    filters: Vec<Arc<dyn Predicate>>,
    concurrency: usize,
    limiter: RateLimiter<Request>,
    needs_leader: bool,
    cache_sync_timeout: Duration,
    handle: ControllerHandle,
    client: Option<kube::Client>,
    read_your_writes: Option<ReadYourWrites>,
}

impl<K: Object, S: Send + Sync + 'static, R: Reconciler<K, S>> Controller<K, R, S> {
    /// A controller reconciling `K` (controller-runtime's `For`), named after the kind
    /// (lowercase).
    pub fn new(mgr: &Manager, reconciler: R) -> Self {
        let for_kind = ForKind { kind: K::kind(&()).into(), group: K::group(&()).into(), namespaced: K::namespaced() };
        mgr.shard_controller_kind(&ApiResource::erase::<K>(&()), true);
        Controller::for_informer(mgr, mgr.cache().informer::<K>(), for_kind, None, reconciler)
    }
}

impl<S: Send + Sync + 'static, R: Reconciler<DynamicObject, S>> Controller<DynamicObject, R, S> {
    /// A controller reconciling the objects of `resource` (with `scope`) as
    /// `DynamicObject`s, for kinds known only at run time (controller-runtime's
    /// unstructured `For`). Named after the kind (lowercase); `ctx.dynamic_api()` gives
    /// an `Api` for the reconciled object.
    pub fn new_dynamic(mgr: &Manager, resource: ApiResource, scope: Scope, reconciler: R) -> Self {
        mgr.shard_controller_kind(&resource, true);
        let informer = mgr.cache().dynamic_informer(&resource, scope.clone());
        let for_kind = ForKind {
            kind: resource.kind.clone(),
            group: resource.group.clone(),
            namespaced: matches!(scope, Scope::Namespaced),
        };
        let dynamic = Arc::new(DynamicResource { resource, scope });
        Controller::for_informer(mgr, informer, for_kind, Some(dynamic), reconciler)
    }
}

impl<K: Kind, S: Send + Sync + 'static, R: Reconciler<K, S>> Controller<K, R, S> {
    fn for_informer(
        mgr: &Manager,
        informer: Arc<Informer<K>>,
        for_kind: ForKind,
        dynamic: Option<Arc<DynamicResource>>,
        reconciler: R,
    ) -> Self {
        let handle = ControllerHandle::new(informer.clone());
        let primary: Box<dyn Source> = Box::new(InformerSource::<K> {
            informer: informer.clone(),
            map: Arc::new(|o: &K| vec![Request::from_object(o)]),
            predicate: None,
        });
        Controller {
            mgr: mgr.clone(),
            informer,
            name: for_kind.kind.to_lowercase(),
            for_kind: Arc::new(for_kind),
            dynamic,
            reconciler,
            state: unit_state::<S>(),
            sources: vec![primary],
            filters: Vec::new(),
            concurrency: 1,
            limiter: RateLimiter::default(),
            needs_leader: true,
            cache_sync_timeout: DEFAULT_CACHE_SYNC_TIMEOUT,
            handle,
            client: None,
            read_your_writes: Some(ReadYourWrites::default()),
        }
    }

    /// Reconciles (`ctx.client`) and records events with `client` instead of the
    /// manager's; the cache still reads with the manager's. This is how
    /// kube-controller-manager gives each controller its own credentials
    /// (`--use-service-account-credentials`) over one set of shared informers, so each
    /// controller's writes are authorized against its own role.
    pub fn client(mut self, client: kube::Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Names the controller (metrics labels, logs, the event recorder). Names are unique
    /// per manager.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The operator's own state, handed to every reconcile as `ctx.state` (kube-rs's
    /// context data). Required when the reconciler takes `Context<K, S>` with `S` other
    /// than `()`.
    pub fn with_state(mut self, state: Arc<S>) -> Self {
        self.state = Some(state);
        self
    }

    /// Reconciles the controlling owner (of kind `K`) when a `C` changes
    /// (controller-runtime's `Owns`).
    pub fn owns<C: Object>(self) -> Self {
        self.mgr.shard_controller_kind(&ApiResource::erase::<C>(&()), false);
        let for_kind = self.for_kind.clone();
        self.add_informer_source::<C>(Arc::new(move |c: &C| for_kind.owners_of(c)), None)
    }

    /// As [`Controller::owns`], with a predicate for this source only
    /// (`Owns(obj, builder.WithPredicates(p))`), applied in addition to the controller's
    /// event filters.
    pub fn owns_with<C: Object>(self, predicate: impl Predicate) -> Self {
        self.mgr.shard_controller_kind(&ApiResource::erase::<C>(&()), false);
        let for_kind = self.for_kind.clone();
        self.add_informer_source::<C>(Arc::new(move |c: &C| for_kind.owners_of(c)), Some(Arc::new(predicate)))
    }

    /// As [`Controller::owns`], caching only the metadata of the `C`s (controller-runtime's
    /// `Owns(obj, builder.OnlyMetadata)`): enough to map a child to its owner, at a
    /// fraction of the memory. Read them with
    /// [`Cache::metadata_informer`](crate::Cache::metadata_informer); a reconcile that
    /// needs a child's spec reads it from the API.
    pub fn owns_metadata<C: Object>(self) -> Self {
        self.owns::<PartialObjectMeta<C>>()
    }

    /// Reconciles the requests `map` returns when a `W` changes
    /// (`Watches` with `EnqueueRequestsFromMapFunc`).
    pub fn watches<W: Object>(self, map: impl Fn(&W) -> Vec<Request> + Send + Sync + 'static) -> Self {
        self.add_informer_source::<W>(Arc::new(map), None)
    }

    /// As [`Controller::watches`], with a predicate for this source only, applied in
    /// addition to the controller's event filters.
    pub fn watches_with<W: Object>(
        self,
        map: impl Fn(&W) -> Vec<Request> + Send + Sync + 'static,
        predicate: impl Predicate,
    ) -> Self {
        self.add_informer_source::<W>(Arc::new(map), Some(Arc::new(predicate)))
    }

    /// Reconciles the controlling owner when an object of the run-time resource
    /// `resource` changes (`Owns` for a `DynamicObject` child).
    pub fn owns_dynamic(self, resource: &ApiResource, scope: Scope) -> Self {
        self.mgr.shard_controller_kind(resource, false);
        let informer = self.mgr.cache().dynamic_informer(resource, scope);
        let for_kind = self.for_kind.clone();
        self.add_source(informer, Arc::new(move |c: &DynamicObject| for_kind.owners_of(c)), None)
    }

    /// Reconciles the requests `map` returns when an object of the run-time resource
    /// `resource` changes (`Watches` for a `DynamicObject`).
    pub fn watches_dynamic(
        self,
        resource: &ApiResource,
        scope: Scope,
        map: impl Fn(&DynamicObject) -> Vec<Request> + Send + Sync + 'static,
    ) -> Self {
        let informer = self.mgr.cache().dynamic_informer(resource, scope);
        self.add_source(informer, Arc::new(map), None)
    }

    fn add_informer_source<W: Object>(self, map: MapFn<W>, predicate: Option<Arc<dyn Predicate>>) -> Self {
        let informer = self.mgr.cache().informer::<W>();
        self.add_source(informer, map, predicate)
    }

    fn add_source<W: Kind>(
        mut self,
        informer: Arc<Informer<W>>,
        map: MapFn<W>,
        predicate: Option<Arc<dyn Predicate>>,
    ) -> Self {
        self.sources.push(Box::new(InformerSource::<W> { informer, map, predicate }));
        self
    }

    /// Reconciles every request received on `rx` (controller-runtime's `source.Channel`),
    /// for triggers from outside the cluster. Event filters do not apply to these.
    pub fn watches_channel(self, mut rx: tokio::sync::mpsc::Receiver<Request>) -> Self {
        self.watches_stream(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)))
    }

    /// Reconciles every request the stream yields, until it ends. Event filters do not
    /// apply to these.
    pub fn watches_stream(mut self, stream: impl Stream<Item = Request> + Send + 'static) -> Self {
        self.sources.push(Box::new(StreamSource { stream: Box::pin(stream) }));
        self
    }

    /// Adds an event filter for every informer source (`WithEventFilter`). Filters add
    /// up: an event must pass all of them (and the source's own predicate, if any).
    pub fn with_event_filter(mut self, p: impl Predicate) -> Self {
        self.filters.push(Arc::new(p));
        self
    }

    /// How many objects may be reconciled at once (default 1). One object is never
    /// reconciled twice at the same time.
    pub fn max_concurrent_reconciles(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// The retry backoff (default: per item, 5 ms doubling to 1000 s).
    pub fn rate_limiter(mut self, limiter: RateLimiter<Request>) -> Self {
        self.limiter = limiter;
        self
    }

    /// How long to wait for the caches to sync before failing (default
    /// [`DEFAULT_CACHE_SYNC_TIMEOUT`]).
    pub fn cache_sync_timeout(mut self, timeout: Duration) -> Self {
        self.cache_sync_timeout = timeout;
        self
    }

    /// How this controller waits for the cache to show its own writes before reconciling
    /// an object again (on by default with [`ReadYourWrites::default`]; see
    /// [`crate::read_your_writes`]).
    pub fn read_your_writes(mut self, config: ReadYourWrites) -> Self {
        self.read_your_writes = Some(config);
        self
    }

    /// Reconciles from the cache as it is, without waiting for it to show the
    /// controller's own earlier writes (controller-runtime's behaviour).
    pub fn without_read_your_writes(mut self) -> Self {
        self.read_your_writes = None;
        self
    }

    /// Runs on every replica, not only the leader.
    pub fn without_leader_election(mut self) -> Self {
        self.needs_leader = false;
        self
    }

    /// A handle to enqueue requests from outside, e.g. every object of `K` when
    /// something they all depend on changed ([`ControllerHandle::reconcile_all`]).
    #[must_use]
    pub fn handle(&self) -> ControllerHandle {
        self.handle.clone()
    }

    /// Registers the controller with its manager; it starts when the manager runs (once
    /// leading, unless [`Controller::without_leader_election`]).
    ///
    /// Its workers start only after the informers of every source (`For`, `Owns`,
    /// `Watches`) have synced, so no reconcile sees a partially filled cache
    /// (controller-runtime's `WaitForSync` before starting workers).
    pub fn build(self) -> Result<(), BuildError> {
        let Some(state) = self.state else {
            return Err(BuildError::MissingState { controller: self.name, state: std::any::type_name::<S>() });
        };
        if let Some(sharding) = &self.mgr.options().sharding
            && self.needs_leader
            && let Some(resource) = self.sources.iter().find_map(|s| s.cache()).map(|c| c.resource())
            && !self.mgr.shards_kind(&resource)
        {
            let ring = sharding.ring.clone();
            return Err(BuildError::NotSharded { controller: self.name, kind: resource.kind, ring });
        }
        if !self.mgr.claim_controller_name(&self.name) {
            return Err(BuildError::DuplicateName(self.name));
        }
        let watched = self.sources.iter().filter_map(|s| s.cache()).enumerate().map(|(i, cache)| WatchedKind {
            controller: self.name.clone(),
            resource: cache.resource(),
            // The first source is the `For` informer.
            reconciled: i == 0,
        });
        self.mgr.add_watched_kinds(watched.collect::<Vec<_>>());
        let mgr = self.mgr.clone();
        mgr.add(worker::Built {
            mgr: self.mgr,
            informer: self.informer,
            dynamic: self.dynamic,
            name: self.name,
            reconciler: self.reconciler,
            state,
            sources: self.sources,
            filters: self.filters.into(),
            concurrency: self.concurrency,
            limiter: self.limiter,
            needs_leader: self.needs_leader,
            cache_sync_timeout: self.cache_sync_timeout,
            handle: self.handle,
            client: self.client,
            read_your_writes: self.read_your_writes,
        });
        Ok(())
    }
}
