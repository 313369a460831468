//! Running a built controller: wait for its caches to sync, start its sources, then
//! workers that take requests from the queue, reconcile them inside a tracing span
//! (catching panics) and requeue according to the result.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::runtime::reflector::ObjectRef;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::handle::ControllerHandle;
use super::queue::WorkQueue;
use super::ratelimit::RateLimiter;
use super::source::{Filters, Source, SourceCache};
use crate::cache::Informer;
use crate::events::Recorder;
use crate::manager::{Manager, Runnable, RunnableError, panic_message};
use crate::metrics::ControllerMetrics;
use crate::object::Kind;
use crate::read_your_writes::{ReadYourWrites, WriteLog, WriteTracker, recording_client};
use crate::reconcile::{Action, Context, DynamicResource, Reconciler, Request};

/// A controller as registered with the manager: everything the builder collected.
pub(super) struct Built<K: Kind, R, S> {
    pub(super) mgr: Manager,
    pub(super) informer: Arc<Informer<K>>,
    pub(super) dynamic: Option<Arc<DynamicResource>>,
    pub(super) name: String,
    pub(super) reconciler: R,
    pub(super) state: Arc<S>,
    pub(super) sources: Vec<Box<dyn Source>>,
    pub(super) filters: Filters,
    pub(super) concurrency: usize,
    pub(super) limiter: RateLimiter<Request>,
    pub(super) needs_leader: bool,
    pub(super) cache_sync_timeout: Duration,
    pub(super) handle: ControllerHandle,
    /// The controller's own client (`None`: the manager's).
    pub(super) client: Option<kube::Client>,
    /// Whether (and how) reconciles wait for the cache to show their earlier writes.
    pub(super) read_your_writes: Option<ReadYourWrites>,
}

impl<K: Kind, S: Send + Sync + 'static, R: Reconciler<K, S>> Runnable for Built<K, R, S> {
    fn name(&self) -> String {
        format!("controller/{}", self.name)
    }
    fn needs_leader_election(&self) -> bool {
        self.needs_leader
    }
    fn start(self: Box<Self>, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), RunnableError>> {
        Box::pin(run(*self, shutdown))
    }
}

/// Waits until every source's cache has synced. `Ok(false)`: shut down meanwhile. A cache
/// the API server keeps refusing (a 403, or a 400 for its selectors) fails the controller
/// at once, with the kind and the server's message, instead of at the timeout.
async fn wait_for_sync(
    mgr: &Manager,
    caches: Vec<Arc<dyn SourceCache>>,
    timeout: Duration,
    shutdown: &CancellationToken,
) -> Result<bool, RunnableError> {
    let refused = || caches.iter().find_map(|c| c.refusal().map(|message| (c.kind(), message)));
    let over_budget = || caches.iter().find_map(|c| c.over_budget());
    let settled = || refused().is_some() || over_budget().is_some() || caches.iter().all(|c| c.is_synced());
    tokio::select! {
        _ = shutdown.cancelled() => Ok(false),
        settled = mgr.cache().wait_until(timeout, settled) => {
            if let Some(message) = over_budget() {
                return Err(RunnableError(message));
            }
            if let Some((kind, message)) = refused() {
                return Err(RunnableError(format!(
                    "the cache of {kind} cannot sync: {message}"
                )));
            }
            if settled {
                return Ok(true);
            }
            let pending: Vec<String> = caches.iter().filter(|c| !c.is_synced()).map(|c| c.kind()).collect();
            Err(RunnableError(format!("timed out after {timeout:?} waiting for caches to sync: {pending:?}")))
        }
    }
}

async fn run<K: Kind, S: Send + Sync + 'static, R: Reconciler<K, S>>(
    c: Built<K, R, S>,
    shutdown: CancellationToken,
) -> Result<(), RunnableError> {
    tracing::info!(controller = %c.name, "Starting Controller");
    let caches: Vec<Arc<dyn SourceCache>> = c.sources.iter().filter_map(|s| s.cache()).collect();
    if !wait_for_sync(&c.mgr, caches.clone(), c.cache_sync_timeout, &shutdown).await? {
        tracing::info!(controller = %c.name, "Stopping controller before its caches synced");
        return Ok(());
    }
    let metrics = c.mgr.metrics().controller(&c.name);
    metrics.set_max_concurrent(c.concurrency as i64);
    metrics.set_active_workers(0);
    let queue = WorkQueue::new(c.limiter, Some(metrics.clone()));
    for s in c.sources {
        s.start(queue.clone(), c.filters.clone(), shutdown.clone());
    }
    c.handle.attach(queue.clone());
    let mut client = c.client.unwrap_or_else(|| c.mgr.client());
    let writes = c.read_your_writes.map(|config| {
        client = recording_client(client.clone());
        WriteTracker::new(c.mgr.cache().clone(), config, metrics.clone())
    });
    let recorder = Arc::new(Recorder::for_controller(client.clone(), c.name.clone()));
    let shared = Arc::new(Shared {
        client,
        reconciler: c.reconciler,
        state: c.state,
        recorder,
        informer: c.informer,
        dynamic: c.dynamic,
        mgr: c.mgr,
        name: c.name,
        metrics,
        writes,
        handed_over: parking_lot::Mutex::default(),
        active: AtomicI64::new(0),
        _k: std::marker::PhantomData,
    });
    tracing::info!(controller = %shared.name, worker_count = c.concurrency, "Starting workers");
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..c.concurrency {
        let (queue, shared) = (queue.clone(), shared.clone());
        workers.spawn(async move {
            while let Some(req) = queue.get().await {
                shared.process(&queue, req).await;
            }
        });
    }
    let over_budget = || caches.iter().find_map(|c| c.over_budget());
    let failure = tokio::select! {
        _ = shutdown.cancelled() => None,
        _ = wait_for_budget_error(&shared.mgr, &over_budget) => over_budget(),
    };
    tracing::info!(controller = %shared.name, "Stopping: waiting for in-flight reconciles to finish");
    // Stop handing out work; in-flight reconciles finish (the manager bounds the wait).
    queue.shutdown();
    while workers.join_next().await.is_some() {}
    tracing::info!(controller = %shared.name, "All workers finished");
    match failure {
        Some(message) => Err(RunnableError(message)),
        None => Ok(()),
    }
}

/// Returns once a cache the controller uses is over its budget of objects.
async fn wait_for_budget_error(mgr: &Manager, over_budget: &impl Fn() -> Option<String>) {
    while !mgr.cache().wait_until(Duration::from_secs(3600), || over_budget().is_some()).await {}
}

struct Shared<K: Kind, R, S> {
    client: kube::Client,
    reconciler: R,
    state: Arc<S>,
    recorder: Arc<Recorder>,
    informer: Arc<Informer<K>>,
    dynamic: Option<Arc<DynamicResource>>,
    mgr: Manager,
    name: String,
    metrics: ControllerMetrics,
    /// The writes of earlier reconciles the cache has not shown yet (read-your-own-writes).
    writes: Option<WriteTracker>,
    /// Objects this shard handed over after a drain, until their leaving the cache has
    /// been seen (sharding).
    handed_over: parking_lot::Mutex<std::collections::HashSet<Request>>,
    active: AtomicI64,
    _k: std::marker::PhantomData<fn() -> K>,
}

/// A random, uuid-formatted id for one reconcile (controller-runtime's `reconcileID`).
fn reconcile_id() -> uuid::Uuid {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid()
}

impl<K: Kind, S: Send + Sync + 'static, R: Reconciler<K, S>> Shared<K, R, S> {
    /// With sharding, when the coordinator asks this shard to let go of the object (its
    /// drain label): no reconcile of it runs now (the queue hands a request to one worker
    /// at a time), so this acknowledges by removing its shard and drain labels, and the
    /// object is not reconciled here again. True when it was drained.
    async fn let_go_of_drained(&self, req: &Request, meta: &kube::core::ObjectMeta) -> bool {
        let Some(sharding) = &self.mgr.options().sharding else { return false };
        if !sharding.drains(meta) {
            return false;
        }
        let resource = kube::api::ApiResource::erase::<K>(self.informer.dyntype());
        let api: kube::Api<kube::api::DynamicObject> = match &meta.namespace {
            Some(ns) => kube::Api::namespaced_with(self.client.clone(), ns, &resource),
            None => kube::Api::all_with(self.client.clone(), &resource),
        };
        let patch = serde_json::json!({"metadata": {
            "resourceVersion": meta.resource_version,
            "labels": {sharding.shard_label(): null, sharding.drain_label(): null},
        }});
        let name = meta.name.clone().unwrap_or_default();
        let params = kube::api::PatchParams::default();
        match api.patch(&name, &params, &kube::api::Patch::Merge(&patch)).await {
            Ok(_) => {
                self.handed_over.lock().insert(req.clone());
                tracing::debug!(controller = %self.name, object = %name, "drained: handed back to the shard coordinator");
            }
            // Changed meanwhile: its next event brings the drain (or its undoing) again.
            Err(e) => {
                tracing::debug!(controller = %self.name, object = %name, error = %e, "acknowledging a drain failed")
            }
        }
        true
    }

    async fn process(&self, queue: &WorkQueue<Request>, req: Request) {
        if let Some(writes) = &self.writes
            && !writes.caught_up(&req).await
        {
            queue.add_rate_limited(req.clone());
            queue.done(&req);
            return;
        }
        let mut key = ObjectRef::<K>::new_with(&req.name, self.informer.dyntype().clone());
        if let Some(ns) = &req.namespace {
            key = key.within(ns);
        }
        let object = self.informer.get(&key);
        let drained = match &object {
            Some(obj) => self.let_go_of_drained(&req, obj.meta()).await,
            // The object left this shard's cache because this shard handed it over: its
            // new shard reconciles it now, so this one does not.
            None => self.handed_over.lock().remove(&req),
        };
        if drained {
            queue.forget(&req);
            queue.done(&req);
            return;
        }
        let span = tracing::info_span!(
            "reconcile",
            controller = %self.name,
            namespace = req.namespace.as_deref().unwrap_or(""),
            name = %req.name,
            reconcileID = %reconcile_id(),
        );
        let ctx = Context {
            request: req.clone(),
            object,
            client: self.client.clone(),
            cache: self.mgr.cache().clone(),
            recorder: self.recorder.clone(),
            state: self.state.clone(),
            dynamic: self.dynamic.clone(),
        };
        self.metrics.set_active_workers(self.active.fetch_add(1, Ordering::SeqCst) + 1);
        let started = Instant::now();
        let log = WriteLog::default();
        let reconcile = AssertUnwindSafe(self.reconciler.reconcile(ctx).instrument(span.clone())).catch_unwind();
        let outcome = log.scope(reconcile).await;
        let took = started.elapsed();
        if let Some(writes) = &self.writes {
            writes.record(&req, log.take());
        }
        self.metrics.set_active_workers(self.active.fetch_sub(1, Ordering::SeqCst) - 1);
        let _entered = span.enter();
        match outcome {
            Ok(Ok(Action::Done)) => {
                queue.forget(&req);
                self.metrics.reconcile_done("success", took);
            }
            Ok(Ok(Action::Requeue)) => {
                queue.add_rate_limited(req.clone());
                self.metrics.reconcile_done("requeue", took);
            }
            Ok(Ok(Action::RequeueAfter(d))) => {
                queue.forget(&req);
                queue.add_after(req.clone(), d);
                self.metrics.reconcile_done("requeue_after", took);
            }
            // Failures are logged as controller-runtime's "Reconciler error": at ERROR, with
            // the error's concise text, the object (and the span's controller and
            // reconcileID) and when it is retried.
            Ok(Err(e)) if e.is_terminal() => {
                queue.forget(&req);
                tracing::error!(object = %req, error = %e, "Reconciler error (terminal: not retried)");
                self.metrics.terminal_error();
                self.metrics.reconcile_error();
                self.metrics.reconcile_done("error", took);
            }
            Ok(Err(e)) => {
                let backoff = queue.add_rate_limited(req.clone());
                tracing::error!(object = %req, error = %e, requeue_after = ?backoff, "Reconciler error");
                self.metrics.reconcile_error();
                self.metrics.reconcile_done("error", took);
            }
            Err(panic) => {
                let msg = panic_message(&*panic);
                let backoff = queue.add_rate_limited(req.clone());
                tracing::error!(object = %req, error = %format!("panic: {msg} [recovered]"), requeue_after = ?backoff, "Reconciler error");
                self.metrics.reconcile_panic();
                self.metrics.reconcile_error();
                self.metrics.reconcile_done("error", took);
            }
        }
        queue.done(&req);
    }
}
