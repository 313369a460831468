//! Running a controller: start its sources, then workers that take requests from the
//! queue, reconcile them (catching panics) and requeue according to the result.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use futures::FutureExt;
use kube::runtime::reflector::ObjectRef;
use tokio_util::sync::CancellationToken;

use super::Controller;
use super::queue::WorkQueue;
use crate::manager::RunnableError;
use crate::metrics::ControllerMetrics;
use crate::object::Object;
use crate::reconcile::{Action, Context, Reconciler, Request};

pub(super) async fn run<K: Object, R: Reconciler<K>>(
    c: Controller<K, R>,
    shutdown: CancellationToken,
) -> Result<(), RunnableError> {
    let metrics = c.mgr.metrics().controller(&c.name);
    metrics.set_max_concurrent(c.concurrency as i64);
    metrics.set_active_workers(0);
    let queue = WorkQueue::new(c.limiter, Some(metrics.clone()));
    for s in c.sources {
        s.start(queue.clone(), c.filter.clone(), shutdown.clone());
    }
    let shared = Arc::new(Shared {
        reconciler: c.reconciler,
        mgr: c.mgr,
        name: c.name,
        metrics,
        active: AtomicI64::new(0),
        _k: std::marker::PhantomData,
    });
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..c.concurrency {
        let (queue, shared) = (queue.clone(), shared.clone());
        workers.spawn(async move {
            while let Some(req) = queue.get().await {
                shared.process(&queue, req).await;
            }
        });
    }
    shutdown.cancelled().await;
    // Stop handing out work; in-flight reconciles finish (the manager bounds the wait).
    queue.shutdown();
    while workers.join_next().await.is_some() {}
    Ok(())
}

struct Shared<K: Object, R: Reconciler<K>> {
    reconciler: R,
    mgr: crate::manager::Manager,
    name: String,
    metrics: ControllerMetrics,
    active: AtomicI64,
    _k: std::marker::PhantomData<fn() -> K>,
}

impl<K: Object, R: Reconciler<K>> Shared<K, R> {
    async fn process(&self, queue: &WorkQueue<Request>, req: Request) {
        let mut key = ObjectRef::<K>::new(&req.name);
        if let Some(ns) = &req.namespace {
            key = key.within(ns);
        }
        let object = self.mgr.cache().informer::<K>().get(&key);
        let ctx = Context { request: req.clone(), object, client: self.mgr.client(), cache: self.mgr.cache().clone() };
        self.metrics.set_active_workers(self.active.fetch_add(1, Ordering::SeqCst) + 1);
        let started = Instant::now();
        let outcome = AssertUnwindSafe(self.reconciler.reconcile(ctx)).catch_unwind().await;
        let took = started.elapsed();
        self.metrics.set_active_workers(self.active.fetch_sub(1, Ordering::SeqCst) - 1);
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
            Ok(Err(e)) if e.is_terminal() => {
                queue.forget(&req);
                tracing::error!(controller = %self.name, request = %req, error = %e, "reconcile failed terminally; not retrying");
                self.metrics.terminal_error();
                self.metrics.reconcile_error();
                self.metrics.reconcile_done("error", took);
            }
            Ok(Err(e)) => {
                tracing::warn!(controller = %self.name, request = %req, error = %e, "reconcile failed; retrying with backoff");
                queue.add_rate_limited(req.clone());
                self.metrics.reconcile_error();
                self.metrics.reconcile_done("error", took);
            }
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                tracing::error!(controller = %self.name, request = %req, panic = %msg, "reconcile panicked; retrying with backoff");
                queue.add_rate_limited(req.clone());
                self.metrics.reconcile_panic();
                self.metrics.reconcile_error();
                self.metrics.reconcile_done("error", took);
            }
        }
        queue.done(&req);
    }
}
