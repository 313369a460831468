//! The controller builder (`For` / `Owns` / `Watches`, event filters, concurrency, rate
//! limiting) and the event sources that feed its work queue.

pub mod queue;
pub mod ratelimit;
mod worker;

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::cache::{Informer, InformerEvent};
use crate::manager::{Manager, Runnable, RunnableError};
use crate::object::Object;
use crate::predicate::{Event, Predicate};
use crate::reconcile::{Reconciler, Request};
use queue::WorkQueue;
use ratelimit::RateLimiter;

type MapFn<S> = Arc<dyn Fn(&S) -> Vec<Request> + Send + Sync>;

/// Something that turns changes into requests on a controller's queue.
trait Source: Send + 'static {
    fn start(
        self: Box<Self>,
        queue: Arc<WorkQueue<Request>>,
        filter: Option<Arc<dyn Predicate>>,
        shutdown: CancellationToken,
    );
}

struct InformerSource<S: Object> {
    informer: Arc<Informer<S>>,
    map: MapFn<S>,
}

impl<S: Object> InformerSource<S> {
    fn enqueue(&self, queue: &WorkQueue<Request>, obj: &S) {
        for r in (self.map)(obj) {
            queue.add(r);
        }
    }
}

impl<S: Object> Source for InformerSource<S> {
    fn start(
        self: Box<Self>,
        queue: Arc<WorkQueue<Request>>,
        filter: Option<Arc<dyn Predicate>>,
        shutdown: CancellationToken,
    ) {
        tokio::spawn(async move {
            let pass = |e: &Event<'_>| filter.as_ref().is_none_or(|f| f.filter(e));
            let mut sub = self.informer.subscribe();
            loop {
                for obj in std::mem::take(&mut sub.initial) {
                    if pass(&Event::Create(obj.meta())) {
                        self.enqueue(&queue, &obj);
                    }
                }
                let ev = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    ev = sub.events.recv() => ev,
                };
                match ev {
                    Ok(InformerEvent::Apply { old: None, new }) => {
                        if pass(&Event::Create(new.meta())) {
                            self.enqueue(&queue, &new);
                        }
                    }
                    Ok(InformerEvent::Apply { old: Some(old), new }) => {
                        if pass(&Event::Update { old: old.meta(), new: new.meta() }) {
                            self.enqueue(&queue, &new);
                            self.enqueue(&queue, &old);
                        }
                    }
                    Ok(InformerEvent::Delete(obj)) => {
                        if pass(&Event::Delete(obj.meta())) {
                            self.enqueue(&queue, &obj);
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        // Missed events: resubscribe and treat everything cached as new.
                        sub = self.informer.subscribe();
                    }
                    Err(RecvError::Closed) => return,
                }
            }
        });
    }
}

/// The requests for the controlling owners of kind `K` of an object.
fn owners_of<K: Object, C: Object>(child: &C) -> Vec<Request> {
    let kind = K::kind(&());
    let group = K::group(&());
    let ns = if K::namespaced() { child.meta().namespace.as_deref() } else { None };
    child
        .meta()
        .owner_references
        .iter()
        .flatten()
        .filter(|o| o.controller == Some(true) && o.kind == kind)
        .filter(|o| o.api_version.split_once('/').map_or("", |(g, _)| g) == group)
        .map(|o| Request::new(o.name.clone(), ns))
        .collect()
}

/// Builds a controller for kind `K` with reconciler `R` and registers it with a manager.
///
/// ```no_run
/// # use std::time::Duration;
/// # use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
/// # use opkit::{Action, Context, Controller, Manager, ReconcileResult, predicate::GenerationChanged};
/// # async fn reconcile(ctx: Context<Deployment>) -> ReconcileResult { Ok(Action::requeue_after(Duration::from_secs(60))) }
/// # fn setup(mgr: &Manager) {
/// Controller::new(mgr, reconcile)
///     .owns::<ReplicaSet>()
///     .with_event_filter(GenerationChanged)
///     .max_concurrent_reconciles(2)
///     .build();
/// # }
/// ```
pub struct Controller<K: Object, R: Reconciler<K>> {
    mgr: Manager,
    name: String,
    reconciler: R,
    sources: Vec<Box<dyn Source>>,
    filter: Option<Arc<dyn Predicate>>,
    concurrency: usize,
    limiter: RateLimiter<Request>,
    needs_leader: bool,
    _kind: std::marker::PhantomData<fn() -> K>,
}

impl<K: Object, R: Reconciler<K>> Controller<K, R> {
    /// A controller reconciling `K` (controller-runtime's `For`), named after the kind.
    pub fn new(mgr: &Manager, reconciler: R) -> Self {
        let informer = mgr.cache().informer::<K>();
        let primary: Box<dyn Source> =
            Box::new(InformerSource::<K> { informer, map: Arc::new(|o: &K| vec![Request::from_object(o)]) });
        Controller {
            mgr: mgr.clone(),
            name: K::kind(&()).to_lowercase(),
            reconciler,
            sources: vec![primary],
            filter: None,
            concurrency: 1,
            limiter: RateLimiter::default(),
            needs_leader: true,
            _kind: std::marker::PhantomData,
        }
    }

    /// Names the controller (metrics labels, logs).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Reconciles the controlling owner (of kind `K`) when a `C` changes.
    pub fn owns<C: Object>(mut self) -> Self {
        let informer = self.mgr.cache().informer::<C>();
        self.sources.push(Box::new(InformerSource::<C> { informer, map: Arc::new(owners_of::<K, C>) }));
        self
    }

    /// Reconciles the requests `map` returns when a `W` changes
    /// (`EnqueueRequestsFromMapFunc`).
    pub fn watches<W: Object>(mut self, map: impl Fn(&W) -> Vec<Request> + Send + Sync + 'static) -> Self {
        let informer = self.mgr.cache().informer::<W>();
        self.sources.push(Box::new(InformerSource::<W> { informer, map: Arc::new(map) }));
        self
    }

    /// Filters the events of every source.
    pub fn with_event_filter(mut self, p: impl Predicate) -> Self {
        self.filter = Some(Arc::new(p));
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

    /// Runs on every replica, not only the leader.
    pub fn without_leader_election(mut self) -> Self {
        self.needs_leader = false;
        self
    }

    /// Registers the controller with its manager; it starts when the manager runs.
    pub fn build(self) {
        let mgr = self.mgr.clone();
        mgr.add(self);
    }
}

impl<K: Object, R: Reconciler<K>> Runnable for Controller<K, R> {
    fn name(&self) -> String {
        format!("controller/{}", self.name)
    }
    fn needs_leader_election(&self) -> bool {
        self.needs_leader
    }
    fn start(self: Box<Self>, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), RunnableError>> {
        Box::pin(worker::run(*self, shutdown))
    }
}
