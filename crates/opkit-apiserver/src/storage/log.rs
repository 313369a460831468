//! Watch subscriptions over the event log, and the group-commit loop that makes writes
//! durable and then publishes them.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};

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

/// Persists batches of events and then publishes them; runs on its own thread.
pub(super) fn commit_loop(backend: Box<dyn Backend>, rx: std::sync::mpsc::Receiver<Arc<Event>>, shared: Weak<Shared>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
            if batch.len() >= 4096 {
                break;
            }
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let outcome = backend.persist(&batch);
        let mut st = shared.state.lock();
        match outcome {
            Ok(()) => {
                let last = batch.last().map_or(st.durable, |e| e.rev);
                st.durable = last;
                for e in batch {
                    let _ = shared.events.send(e);
                }
                shared.durable_tx.send_replace(last);
            }
            Err(e) => {
                tracing::error!(error = %e, "storage backend failed; refusing further writes");
                st.failed = Some(e.to_string());
                // Wake every waiter so it can observe the failure.
                shared.durable_tx.send_replace(Revision::MAX);
                return;
            }
        }
    }
}
