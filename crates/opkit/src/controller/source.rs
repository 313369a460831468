//! Event sources of a controller (controller-runtime's `source.Kind` and
//! `source.Channel`): informers whose changes pass the controller's predicates and are
//! mapped to requests, and streams of requests from outside the cluster.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::api::ApiResource;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::queue::WorkQueue;
use crate::cache::{Informer, InformerEvent};
use crate::object::Kind;
use crate::predicate::{Event, Predicate};
use crate::reconcile::Request;

/// Maps a changed object to the requests to reconcile.
pub(super) type MapFn<S> = Arc<dyn Fn(&S) -> Vec<Request> + Send + Sync>;

/// The controller-wide predicates (`with_event_filter`); every one must pass.
pub(super) type Filters = Arc<[Arc<dyn Predicate>]>;

/// The cache behind a source, to wait for its initial list.
pub(super) trait SourceCache: Send + Sync {
    /// Whether the initial list finished.
    fn is_synced(&self) -> bool;
    /// The API server's 403 or 400 when it keeps refusing the initial list ([`Informer::refusal`]).
    fn refusal(&self) -> Option<String>;
    /// The kind cached, for logs.
    fn kind(&self) -> String;
    /// Why the cache is over its budget of objects ([`Informer::over_budget`]).
    fn over_budget(&self) -> Option<String>;
    /// The kind's group, version and resource, to check that the API server serves it.
    fn resource(&self) -> ApiResource;
}

impl<S: Kind> SourceCache for Informer<S> {
    fn is_synced(&self) -> bool {
        Informer::is_synced(self)
    }
    fn refusal(&self) -> Option<String> {
        Informer::refusal(self)
    }
    fn kind(&self) -> String {
        Informer::kind(self)
    }
    fn over_budget(&self) -> Option<String> {
        Informer::over_budget(self)
    }
    fn resource(&self) -> ApiResource {
        ApiResource::erase::<S>(self.dyntype())
    }
}

/// Something that turns changes into requests on a controller's queue.
pub(super) trait Source: Send + 'static {
    /// The cache the source reads, if any: workers wait for it to sync.
    fn cache(&self) -> Option<Arc<dyn SourceCache>>;
    /// Starts feeding `queue` until `shutdown`.
    fn start(self: Box<Self>, queue: Arc<WorkQueue<Request>>, filters: Filters, shutdown: CancellationToken);
}

/// Changes of the cached `S`s: the controller's filters and the source's own predicate
/// (if any) must all pass, then `map` gives the requests.
pub(super) struct InformerSource<S: Kind> {
    pub(super) informer: Arc<Informer<S>>,
    pub(super) map: MapFn<S>,
    pub(super) predicate: Option<Arc<dyn Predicate>>,
}

impl<S: Kind> InformerSource<S> {
    fn enqueue(&self, queue: &WorkQueue<Request>, obj: &S) {
        for r in (self.map)(obj) {
            queue.add(r);
        }
    }

    fn passes(&self, filters: &Filters, event: &Event<'_>) -> bool {
        self.predicate.as_ref().is_none_or(|p| p.filter(event)) && filters.iter().all(|f| f.filter(event))
    }
}

impl<S: Kind> Source for InformerSource<S> {
    fn cache(&self) -> Option<Arc<dyn SourceCache>> {
        Some(self.informer.clone())
    }

    fn start(self: Box<Self>, queue: Arc<WorkQueue<Request>>, filters: Filters, shutdown: CancellationToken) {
        tokio::spawn(async move {
            let mut sub = self.informer.subscribe();
            loop {
                for obj in std::mem::take(&mut sub.initial) {
                    if self.passes(&filters, &Event::Create(obj.meta())) {
                        self.enqueue(&queue, &obj);
                    }
                }
                let ev = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    ev = sub.events.recv() => ev,
                };
                match ev {
                    Ok(InformerEvent::Apply { old: None, new }) => {
                        if self.passes(&filters, &Event::Create(new.meta())) {
                            self.enqueue(&queue, &new);
                        }
                    }
                    Ok(InformerEvent::Apply { old: Some(old), new }) => {
                        if self.passes(&filters, &Event::Update { old: old.meta(), new: new.meta() }) {
                            self.enqueue(&queue, &new);
                            self.enqueue(&queue, &old);
                        }
                    }
                    Ok(InformerEvent::Delete(obj)) => {
                        if self.passes(&filters, &Event::Delete(obj.meta())) {
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

/// Requests from outside the cluster (controller-runtime's `source.Channel`): each item
/// is enqueued as it arrives. Predicates do not apply (there is no object to look at).
pub(super) struct StreamSource {
    pub(super) stream: Pin<Box<dyn Stream<Item = Request> + Send>>,
}

impl Source for StreamSource {
    fn cache(&self) -> Option<Arc<dyn SourceCache>> {
        None
    }

    fn start(mut self: Box<Self>, queue: Arc<WorkQueue<Request>>, _filters: Filters, shutdown: CancellationToken) {
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    next = self.stream.next() => next,
                };
                match next {
                    Some(req) => queue.add(req),
                    None => return,
                }
            }
        });
    }
}
