//! Read-your-own-writes: a reconcile never runs on a cache older than the writes the
//! previous reconcile of the same object made (KEP-5647's staleness guard, on by default
//! for every controller).
//!
//! How it works:
//! - The controller's client records each successful write a reconcile makes (in the
//!   reconcile's own task, through `ctx.client`): the object, and the resourceVersion
//!   its response carries, or, for a delete, a tombstone (the object's uid).
//! - Before the next reconcile of the same request, the worker checks each recorded write
//!   against the cache of its resource: the informer has applied an event at or past that
//!   resourceVersion (or holds the object at it), or no longer holds the deleted object.
//! - If the cache is behind, the worker waits for it, up to [`ReadYourWrites::wait`], then
//!   requeues the request with the rate limiter's backoff (the reconcile does not run).
//!   A write the cache still has not seen after [`ReadYourWrites::expire_after`] is
//!   dropped with a warning (and counted), so a cache that never catches up delays a
//!   request, never stops it.
//!
//! What is guaranteed: a reconcile of request R reads, from the informers of the kinds R's
//! earlier reconciles wrote, a state at least as new as those writes, unless a write
//! expired. What is not: writes to kinds the cache does not watch (nothing to wait for),
//! writes made by other requests, controllers or processes, writes from tasks the
//! reconciler spawns, collection deletes, and resourceVersions that are not numbers
//! (they fail open, as kube's does).
//!
//! Metrics (label `controller`): `opkit_read_your_writes_waits_total`,
//! `opkit_read_your_writes_wait_seconds`, `opkit_read_your_writes_stale_requeues_total`,
//! `opkit_read_your_writes_expired_total`.

mod recording;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::cache::{Cache, Expectation, WrittenObject};
use crate::metrics::ControllerMetrics;
use crate::reconcile::Request;

pub(crate) use recording::{WriteLog, recording_client};

/// How a controller waits for its own writes (see the module's text). On by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadYourWrites {
    /// How long a reconcile waits for the cache to catch up before the request is
    /// requeued instead (default 1 s).
    pub wait: Duration,
    /// How long a write may stay unseen before it is no longer waited for (default 30 s).
    pub expire_after: Duration,
}

impl Default for ReadYourWrites {
    fn default() -> Self {
        ReadYourWrites { wait: Duration::from_secs(1), expire_after: Duration::from_secs(30) }
    }
}

/// A recorded write not yet seen by the cache.
struct Pending {
    expectation: Expectation,
    since: Instant,
}

/// The writes of one controller's reconciles that its cache has not shown yet, by request.
pub(crate) struct WriteTracker {
    cache: Cache,
    config: ReadYourWrites,
    metrics: ControllerMetrics,
    pending: Mutex<HashMap<Request, Vec<Pending>>>,
}

impl WriteTracker {
    /// A tracker checking writes against `cache`.
    pub(crate) fn new(cache: Cache, config: ReadYourWrites, metrics: ControllerMetrics) -> WriteTracker {
        WriteTracker { cache, config, metrics, pending: Mutex::new(HashMap::new()) }
    }

    /// Notes the writes a reconcile of `request` made (in order: a later write of an object
    /// replaces an earlier one).
    pub(crate) fn record(&self, request: &Request, writes: Vec<WrittenObject>) {
        if writes.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut pending = self.pending.lock();
        for written in writes {
            let expectations = self.cache.expectations(&written);
            if expectations.is_empty() {
                continue;
            }
            let list = pending.entry(request.clone()).or_default();
            list.retain(|p| !same_object(&p.expectation.written, &written));
            list.extend(expectations.into_iter().map(|expectation| Pending { expectation, since: now }));
        }
    }

    /// Whether `request` may be reconciled now: its earlier writes are all in the cache
    /// (waiting up to the configured bound for them). `false`: requeue it.
    pub(crate) async fn caught_up(&self, request: &Request) -> bool {
        let Some(mut pending) = self.pending.lock().remove(request) else { return true };
        pending.retain(|p| {
            let expired = p.since.elapsed() >= self.config.expire_after;
            if expired && !p.expectation.is_met() {
                tracing::warn!(
                    object = %request,
                    written = ?p.expectation.written,
                    after = ?self.config.expire_after,
                    "the cache never showed this controller's write; reconciling without it"
                );
                self.metrics.read_your_writes_expired();
            }
            !expired && !p.expectation.is_met()
        });
        if pending.is_empty() {
            return true;
        }
        self.metrics.read_your_writes_wait();
        let started = Instant::now();
        let met =
            self.cache.wait_for_progress(self.config.wait, || pending.iter().all(|p| p.expectation.is_met())).await;
        self.metrics.read_your_writes_waited(started.elapsed());
        if met {
            return true;
        }
        tracing::debug!(object = %request, waited = ?self.config.wait, "the cache is older than this controller's writes; requeueing");
        self.metrics.read_your_writes_stale_requeue();
        pending.retain(|p| !p.expectation.is_met());
        let mut all = self.pending.lock();
        let list = all.entry(request.clone()).or_default();
        // Anything recorded meanwhile is newer: keep it over what was waited for.
        pending.retain(|p| !list.iter().any(|n| same_object(&n.expectation.written, &p.expectation.written)));
        list.extend(pending);
        false
    }
}

fn same_object(a: &WrittenObject, b: &WrittenObject) -> bool {
    a.group == b.group && a.resource == b.resource && a.namespace == b.namespace && a.name == b.name
}
