//! What a reconciler is given and returns: [`Request`], [`Context`], [`Action`] and
//! [`ReconcileError`], and the [`Reconciler`] trait.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject};
use kube::discovery::Scope;
use kube::{Api, Client};

use crate::cache::Cache;
use crate::events::Recorder;
use crate::object::Object;

/// Which object to reconcile: namespace (for namespaced kinds) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Request {
    /// The namespace, `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

impl Request {
    /// A request for `name` in `namespace`.
    #[must_use]
    pub fn new(name: impl Into<String>, namespace: Option<&str>) -> Request {
        Request { name: name.into(), namespace: namespace.map(String::from) }
    }
    /// The request for an object.
    #[must_use]
    pub fn from_object<K: kube::Resource>(obj: &K) -> Request {
        let m = obj.meta();
        Request { name: m.name.clone().unwrap_or_default(), namespace: m.namespace.clone() }
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// What to do after a successful reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Done: wait for the next event.
    Done,
    /// Reconcile again, with the rate limiter's backoff (controller-runtime's `Requeue: true`).
    Requeue,
    /// Reconcile again after this delay (`RequeueAfter`).
    RequeueAfter(Duration),
}

impl Action {
    /// Done until the next event.
    #[must_use]
    pub fn done() -> Action {
        Action::Done
    }
    /// Requeue with backoff.
    #[must_use]
    pub fn requeue() -> Action {
        Action::Requeue
    }
    /// Requeue after `d`.
    #[must_use]
    pub fn requeue_after(d: Duration) -> Action {
        Action::RequeueAfter(d)
    }
}

/// A failed reconcile. Converting any error with `?` gives a retryable error (requeued
/// with per-item exponential backoff); [`ReconcileError::terminal`] gives one that is
/// not retried.
pub struct ReconcileError {
    terminal: bool,
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl ReconcileError {
    /// A retryable error.
    #[must_use]
    pub fn retry(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        ReconcileError { terminal: false, source: e.into() }
    }
    /// An error that retrying cannot fix: counted, logged, not requeued.
    #[must_use]
    pub fn terminal(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        ReconcileError { terminal: true, source: e.into() }
    }
    /// Whether it is terminal.
    pub fn is_terminal(&self) -> bool {
        self.terminal
    }
    /// The underlying error.
    pub fn source(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.source
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ReconcileError {
    fn from(e: E) -> Self {
        ReconcileError::retry(e)
    }
}

impl fmt::Debug for ReconcileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReconcileError {{ terminal: {}, source: {:?} }}", self.terminal, self.source)
    }
}

/// The error's concise text (a Kubernetes `Status` as its message, without kube's Debug
/// dump), prefixed with `terminal error: ` for a terminal one.
impl fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = crate::error_text::concise(&*self.source);
        if self.terminal { write!(f, "terminal error: {text}") } else { f.write_str(&text) }
    }
}

/// The result of a reconcile.
pub type ReconcileResult = Result<Action, ReconcileError>;

/// Everything one reconcile gets: the request, the object as the cache has it (`None`
/// when it was deleted), a client, the shared cache, an event recorder and the
/// operator's own state `S` (kube-rs's context data; `()` unless the controller was
/// given one with [`Controller::with_state`](crate::Controller::with_state)).
///
/// The reconcile future runs inside a `reconcile` tracing span with the fields
/// `controller`, `namespace`, `name` and `reconcileID` (a random UUID per reconcile),
/// as controller-runtime's per-reconcile logger.
pub struct Context<K, S = ()> {
    /// The object's namespace and name.
    pub request: Request,
    /// The object from the cache; `None` if it no longer exists.
    pub object: Option<Arc<K>>,
    /// A client.
    pub client: Client,
    /// The manager's shared cache, for cached reads of any kind.
    pub cache: Cache,
    /// Records Events as this controller (controller-runtime's
    /// `mgr.GetEventRecorderFor(name)`), reporting as the controller's name.
    pub recorder: Arc<Recorder>,
    /// The operator's state given to [`Controller::with_state`](crate::Controller::with_state).
    pub state: Arc<S>,
    /// The run-time resource, for controllers of `DynamicObject`s.
    pub(crate) dynamic: Option<Arc<DynamicResource>>,
}

/// The resource a `DynamicObject` controller reconciles.
#[derive(Debug, Clone)]
pub(crate) struct DynamicResource {
    pub(crate) resource: ApiResource,
    pub(crate) scope: Scope,
}

impl<S> Context<DynamicObject, S> {
    /// An `Api` for the reconciled resource (a controller from
    /// [`Controller::new_dynamic`](crate::Controller::new_dynamic)), in the request's
    /// namespace when it is namespaced.
    pub fn dynamic_api(&self) -> Api<DynamicObject> {
        let dynamic = self.dynamic.as_ref().expect("the runtime gives DynamicObject controllers their resource");
        match (&dynamic.scope, self.request.namespace.as_deref()) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &dynamic.resource),
            (scope, _) => Api::dynamic(self.client.clone(), &dynamic.resource, scope),
        }
    }

    /// The reconciled resource.
    pub fn resource(&self) -> Option<&ApiResource> {
        self.dynamic.as_ref().map(|d| &d.resource)
    }
}

impl<K: Object, S> Context<K, S> {
    /// An `Api` for the reconciled kind in the request's namespace.
    pub fn api(&self) -> Api<K> {
        K::api(self.client.clone(), self.request.namespace.as_deref())
    }
    /// An `Api` for another kind in the request's namespace.
    pub fn api_for<T: Object>(&self) -> Api<T> {
        T::api(self.client.clone(), self.request.namespace.as_deref())
    }
}

/// Moves an object's current state toward its desired state.
///
/// Implemented for any `Fn(Context<K, S>) -> impl Future<Output = ReconcileResult>`.
pub trait Reconciler<K, S = ()>: Send + Sync + 'static {
    /// Reconciles one object.
    fn reconcile(&self, ctx: Context<K, S>) -> impl Future<Output = ReconcileResult> + Send;
}

impl<K, S, F, Fut> Reconciler<K, S> for F
where
    K: Send + Sync + 'static,
    S: Send + Sync + 'static,
    F: Fn(Context<K, S>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ReconcileResult> + Send,
{
    fn reconcile(&self, ctx: Context<K, S>) -> impl Future<Output = ReconcileResult> + Send {
        self(ctx)
    }
}
