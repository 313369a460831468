//! A bounded background event sink shared by the scheduler and the kubelets: events are
//! written by a few tasks at a time, so they never crowd out pod writes, and new ones are
//! dropped while too many wait (as client-go's event broadcaster drops on a full queue).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::ObjectReference;
use opkit::events::{EventType, Recorder};
use tokio::sync::Semaphore;

/// Writes events in the background with bounded concurrency and backlog.
#[derive(Clone)]
pub struct EventSink {
    pending: Arc<AtomicUsize>,
    writers: Arc<Semaphore>,
    max_pending: usize,
}

impl EventSink {
    /// A sink writing at most `writers` events at once and holding at most `max_pending`.
    pub fn new(writers: usize, max_pending: usize) -> EventSink {
        EventSink {
            pending: Arc::new(AtomicUsize::new(0)),
            writers: Arc::new(Semaphore::new(writers.max(1))),
            max_pending,
        }
    }

    /// How many events wait or are being written.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Queues an event; returns false when it was dropped.
    pub fn publish(
        &self,
        recorder: &Recorder,
        regarding: ObjectReference,
        type_: EventType,
        reason: &'static str,
        action: &'static str,
        note: String,
    ) -> bool {
        if self.pending.fetch_add(1, Ordering::SeqCst) >= self.max_pending {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        let (recorder, sink) = (recorder.clone(), self.clone());
        tokio::spawn(async move {
            if let Ok(_permit) = sink.writers.acquire().await {
                recorder.publish(&regarding, type_, reason, action, &note).await;
            }
            sink.pending.fetch_sub(1, Ordering::SeqCst);
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn drops_beyond_the_backlog() {
        // A client that points nowhere: writes fail, but only after the permit is taken.
        let cfg = kube::Config::new("http://127.0.0.1:9".parse().unwrap_or_default());
        let Ok(client) = kube::Client::try_from(cfg) else { return };
        let rec = Recorder::new(client, "kubelet", "n");
        let sink = EventSink::new(1, 2);
        let r = ObjectReference { kind: Some("Pod".into()), name: Some("p".into()), ..Default::default() };
        assert!(sink.publish(&rec, r.clone(), EventType::Normal, "Started", "Started", "a".into()));
        assert!(sink.publish(&rec, r.clone(), EventType::Normal, "Started", "Started", "b".into()));
        assert!(!sink.publish(&rec, r, EventType::Normal, "Started", "Started", "c".into()));
        assert!(sink.pending() <= 2);
    }
}
