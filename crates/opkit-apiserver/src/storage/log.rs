//! Watch subscriptions over the event log, and the group-commit loop that makes writes
//! durable and then publishes them.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::broadcast;

use super::{Backend, Event, ResourceId, Revision, Shared, StorageError, Store};

/// A live stream of one resource's events, starting after a revision.
pub struct WatchSubscription {
    store: Store,
    resource: ResourceId,
    last: Revision,
    backlog: VecDeque<Arc<Event>>,
    rx: broadcast::Receiver<Arc<Event>>,
}

impl WatchSubscription {
    pub(super) fn new(
        store: Store,
        resource: ResourceId,
        start: Revision,
        backlog: Vec<Arc<Event>>,
        rx: broadcast::Receiver<Arc<Event>>,
    ) -> Self {
        WatchSubscription { store, resource, last: start, backlog: backlog.into(), rx }
    }

    /// The next event, in revision order. Returns `Err(Expired)` if this subscriber fell so
    /// far behind that the log no longer holds what it missed, and `Ok(None)` when the
    /// store is gone.
    pub async fn next(&mut self) -> Result<Option<Arc<Event>>, StorageError> {
        loop {
            if let Some(e) = self.backlog.pop_front() {
                if e.rev > self.last {
                    self.last = e.rev;
                    return Ok(Some(e));
                }
                continue;
            }
            match self.rx.recv().await {
                Ok(e) => {
                    if e.resource == self.resource && e.rev > self.last {
                        self.last = e.rev;
                        return Ok(Some(e));
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(None),
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // Catch up from the log; fails with Expired if it was compacted.
                    let fresh = self.store.watch(&self.resource, self.last)?;
                    self.backlog = fresh.backlog;
                    self.rx = fresh.rx;
                }
            }
        }
    }

    /// The revision of the last event returned (the start revision before the first).
    pub fn last_revision(&self) -> Revision {
        self.last
    }
}

/// The first pause before retrying a batch the backend failed to persist.
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// The longest pause between retries: a disk that has space again is noticed this soon.
const RETRY_MAX: Duration = Duration::from_secs(2);

/// Persists batches of events and then publishes them; runs on its own thread.
///
/// When the backend fails, the thread takes every write not yet durable (the batch and
/// whatever queued behind it), rolls memory back to the durable state, marks the store
/// failed (writes are refused at once, reads go on) and wakes the writers waiting on them
/// with the error. It then retries the same writes with a doubling pause up to
/// [`RETRY_MAX`]; when they persist, it applies them again, publishes them and clears the
/// failure. A writer told of the failure may thus see its write appear later (as after
/// an etcd timeout); no write is acknowledged before it is durable.
pub(super) fn commit_loop(backend: Box<dyn Backend>, rx: std::sync::mpsc::Receiver<Arc<Event>>, shared: Weak<Shared>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
            if batch.len() >= 4096 {
                break;
            }
        }
        let Some(strong) = shared.upgrade() else {
            return;
        };
        let outcome = backend.persist(&batch);
        let mut st = strong.state.lock();
        match outcome {
            Ok(()) => {
                let last = batch.last().map_or(st.durable, |e| e.rev);
                st.durable = last;
                for e in batch {
                    let _ = strong.events.send(e);
                }
                strong.durable_tx.send_replace(last);
            }
            Err(e) => {
                tracing::error!(error = %e, "storage backend failed; refusing writes until it persists again");
                // Writers send under the state lock, so this takes every pending write.
                while let Ok(more) = rx.try_recv() {
                    batch.push(more);
                }
                st.roll_back(&batch);
                st.failed = Some(e);
                strong.durable_tx.send_replace(Revision::MAX);
                drop(st);
                drop(strong);
                if !retry_until_persisted(&*backend, &rx, &shared, batch) {
                    return;
                }
            }
        }
    }
}

/// Retries `pending` until the backend persists it, then applies and publishes it.
/// Returns false when the store is gone.
fn retry_until_persisted(
    backend: &dyn Backend,
    rx: &std::sync::mpsc::Receiver<Arc<Event>>,
    shared: &Weak<Shared>,
    mut pending: Vec<Arc<Event>>,
) -> bool {
    let mut pause = RETRY_FIRST;
    loop {
        // Writes are refused meanwhile, so the channel only ends (the store was dropped)
        // or times out: a back-off that still notices shutdown at once.
        match rx.recv_timeout(pause) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return false,
            // Not expected (writers see the failure under the same lock that drained the
            // queue), but a write that got through is kept with the rest, in order.
            Ok(e) => pending.push(e),
        }
        let Some(strong) = shared.upgrade() else {
            return false;
        };
        match backend.persist(&pending) {
            Ok(()) => {
                let mut st = strong.state.lock();
                st.reapply(&pending);
                let last = st.rev;
                st.durable = last;
                st.failed = None;
                for e in pending {
                    let _ = strong.events.send(e);
                }
                strong.durable_tx.send_replace(last);
                tracing::info!(revision = last, "storage backend persists again; writes resumed");
                return true;
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?pause, "storage backend still failing");
                strong.state.lock().failed = Some(e);
                pause = (pause * 2).min(RETRY_MAX);
            }
        }
    }
}
