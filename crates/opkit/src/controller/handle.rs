//! [`ControllerHandle`]: enqueues requests on a running controller from outside its
//! event sources, e.g. to reconcile every object of its kind.

use std::sync::{Arc, OnceLock};

use super::queue::WorkQueue;
use crate::cache::Informer;
use crate::object::Kind;
use crate::reconcile::Request;

type ListFn = Box<dyn Fn() -> Vec<Request> + Send + Sync>;

struct Inner {
    /// The controller's queue, set once its workers start.
    queue: OnceLock<Arc<WorkQueue<Request>>>,
    /// The requests for every cached object of the controller's kind.
    list: ListFn,
}

/// Enqueues reconciles on a controller. Cheap to clone; obtained from
/// [`Controller::handle`](super::Controller::handle) before `build`.
///
/// Until the controller's workers start (after its caches synced) nothing is enqueued:
/// the initial list reconciles every object anyway.
#[derive(Clone)]
pub struct ControllerHandle {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ControllerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerHandle").field("running", &self.is_running()).finish()
    }
}

impl ControllerHandle {
    pub(super) fn new<K: Kind>(informer: Arc<Informer<K>>) -> Self {
        let list: ListFn = Box::new(move || informer.list().iter().map(|o| Request::from_object(&**o)).collect());
        ControllerHandle { inner: Arc::new(Inner { queue: OnceLock::new(), list }) }
    }

    pub(super) fn attach(&self, queue: Arc<WorkQueue<Request>>) {
        let _ = self.inner.queue.set(queue);
    }

    /// Whether the controller's workers run (requests are accepted).
    pub fn is_running(&self) -> bool {
        self.inner.queue.get().is_some()
    }

    /// Enqueues one request; false if the controller does not run yet.
    pub fn reconcile(&self, request: Request) -> bool {
        match self.inner.queue.get() {
            Some(q) => {
                q.add(request);
                true
            }
            None => false,
        }
    }

    /// Enqueues every cached object of the controller's kind (e.g. after a shared
    /// configuration changed); returns how many were enqueued (0 if the controller does
    /// not run yet).
    pub fn reconcile_all(&self) -> usize {
        let Some(q) = self.inner.queue.get() else { return 0 };
        let requests = (self.inner.list)();
        let n = requests.len();
        for r in requests {
            q.add(r);
        }
        n
    }
}
