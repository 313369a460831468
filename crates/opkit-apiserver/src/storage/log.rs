//! Watch subscriptions over the event log, and the group-commit loop that makes writes
//! durable and then publishes them.
//!
//! A subscription is a cursor into the store's log, woken when the durable revision
//! moves. It holds at most one small batch of events ([`BATCH_EVENTS`], [`BATCH_BYTES`]),
//! so a watcher whose client stops reading pins no history beyond the log's own window;
//! when it resumes after the window has moved past its cursor it gets
//! [`StorageError::Expired`] and the client relists, as with kube's watch cache.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;

use super::{Backend, Event, ResourceId, Revision, Shared, State, StorageError, Store};

/// The most events a subscription takes from the log at a time.
const BATCH_EVENTS: usize = 128;
/// The most bytes of objects a subscription takes from the log at a time (at least one
/// event, however large).
const BATCH_BYTES: usize = 1024 * 1024;
/// The most log entries one read examines under the store lock (other resources' events
/// are skipped, but not for longer than this).
const SCAN_ENTRIES: usize = 4096;

/// A live stream of one resource's events, starting after a revision.
pub struct WatchSubscription {
    store: Store,
    resource: ResourceId,
    /// The revision of the last event returned (the start revision before the first).
    last: Revision,
    /// Every durable event up to this revision has been read from the log.
    read_to: Revision,
    /// Events read from the log and not yet returned.
    batch: VecDeque<Arc<Event>>,
    durable: watch::Receiver<Revision>,
}

/// What one read of the log found.
enum LogRead {
    /// Events, or at least progress past other resources' events.
    Progress { events: Vec<Arc<Event>>, read_to: Revision },
    /// Nothing durable after the cursor yet.
    UpToDate,
    /// The store refuses writes after a backend failure: no further events will come.
    Failed,
}

impl WatchSubscription {
    pub(super) fn new(store: Store, resource: ResourceId, start: Revision, durable: watch::Receiver<Revision>) -> Self {
        WatchSubscription { store, resource, last: start, read_to: start, batch: VecDeque::new(), durable }
    }

    /// The next event, in revision order. Returns `Err(Expired)` if this subscriber fell so
    /// far behind that the log no longer holds what it missed, and `Ok(None)` when no
    /// further events will come (the store failed).
    pub async fn next(&mut self) -> Result<Option<Arc<Event>>, StorageError> {
        loop {
            if let Some(e) = self.batch.pop_front() {
                self.last = e.rev;
                return Ok(Some(e));
            }
            let read = read_log(&self.store.shared.state.lock(), &self.resource, self.last, self.read_to)?;
            match read {
                LogRead::Progress { events, read_to } => {
                    self.batch = events.into();
                    self.read_to = read_to;
                }
                LogRead::Failed => return Ok(None),
                LogRead::UpToDate => {
                    let read_to = self.read_to;
                    if self.durable.wait_for(|d| *d > read_to).await.is_err() {
                        return Ok(None);
                    }
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

/// Reads `resource`'s durable events after `read_to` from the log, a bounded batch at a
/// time; `last` is the subscriber's last event, named when it has fallen out of the window.
fn read_log(st: &State, resource: &ResourceId, last: Revision, read_to: Revision) -> Result<LogRead, StorageError> {
    if st.failed.is_some() {
        return Ok(LogRead::Failed);
    }
    if read_to < st.compacted {
        return Err(StorageError::Expired { requested: last, oldest: st.compacted + 1 });
    }
    let first = st.log.partition_point(|e| e.rev <= read_to);
    let (mut events, mut bytes, mut reached) = (Vec::new(), 0, read_to);
    for e in st.log.range(first..).take(SCAN_ENTRIES).take_while(|e| e.rev <= st.durable) {
        if &e.resource == resource {
            if !events.is_empty() && (events.len() >= BATCH_EVENTS || bytes + e.size() > BATCH_BYTES) {
                break;
            }
            bytes += e.size();
            events.push(e.clone());
        }
        reached = e.rev;
    }
    Ok(if reached == read_to { LogRead::UpToDate } else { LogRead::Progress { events, read_to: reached } })
}

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
