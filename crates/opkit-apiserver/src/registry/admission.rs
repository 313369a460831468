//! The admission interface the registry calls around validation, as kube's generic store
//! is handed `createValidation`/`updateValidation` and the admission chain: the registry
//! builds each request's [`Attributes`] and asks the [`Admission`] it was given, without
//! knowing which plugins, policies or webhooks answer (they live above the registry, in
//! the crate-private `admission` module, with their caches).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use super::view::StoreView;
use super::{Registry, Target, WriteOptions};
use crate::error::ApiResult;

/// The operation a request performs, as admission sees it (`AdmissionRequest.operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    /// A create (also a server-side apply that creates).
    Create,
    /// An update or patch, of the object or of a subresource.
    Update,
    /// A delete.
    Delete,
    /// A connect (`pods/exec`, `pods/attach`, `pods/portforward`, proxies).
    #[allow(dead_code)]
    Connect,
}

impl Operation {
    /// The name admission webhooks and policies use: `CREATE`, `UPDATE`, `DELETE`, `CONNECT`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// What one request asks, as every admission plugin sees it (kube's `admission.Attributes`).
pub(crate) struct Attributes<'a> {
    /// The resource, requested version and namespace.
    pub target: &'a Target,
    /// The operation.
    pub operation: Operation,
    /// The object's name (may be empty on create with `generateName`).
    pub name: &'a str,
    /// The subresource written (`status`, `scale`, ...), None for the object itself.
    pub subresource: Option<&'a str>,
    /// The object before the write (updates and deletes), at the requested version.
    pub old: Option<&'a Value>,
    /// The write's options: who asks, dry run, field manager.
    pub opts: &'a WriteOptions,
}

/// What an admission phase has to say about an admitted request.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Verdict {
    /// Warnings for the client (`Warning` headers).
    pub warnings: Vec<String>,
    /// Annotations for the request's audit event (`<plugin or webhook>/<key>` → value).
    pub audit_annotations: BTreeMap<String, String>,
    /// Whether the object was changed (the mutating phase only).
    pub mutated: bool,
}

impl Verdict {
    /// Adds what `other` says to this verdict.
    pub(crate) fn merge(&mut self, other: Verdict) {
        self.warnings.extend(other.warnings);
        self.audit_annotations.extend(other.audit_annotations);
        self.mutated |= other.mutated;
    }
}

/// The answer of a check that only admits or refuses.
pub(crate) type RefusalFuture<'a> = Pin<Box<dyn Future<Output = ApiResult<()>> + Send + 'a>>;

/// The answer of an admission phase, once its plugins have run.
pub(crate) type VerdictFuture<'a> = Pin<Box<dyn Future<Output = ApiResult<Verdict>> + Send + 'a>>;

/// The admission chain the registry runs (kube's `admission.Interface`, mutating and
/// validating). `registry` is the registry the request writes to: plugins read other
/// objects through its [`Registry::view`], and the few that write (ResourceQuota's usage)
/// write through it as any client would.
pub(crate) trait Admission: Send + Sync {
    /// The mutating phase: may change `obj` (the object being created or updated, at the
    /// requested version). Sets [`Verdict::mutated`] when it did.
    fn mutate<'a>(&'a self, registry: &'a Registry, attrs: &'a Attributes<'a>, obj: &'a mut Value)
    -> VerdictFuture<'a>;

    /// The validating phase: `obj` is the object as it will be stored (for a delete, the
    /// object being deleted); it is not changed.
    fn validate<'a>(&'a self, registry: &'a Registry, attrs: &'a Attributes<'a>, obj: &'a Value) -> VerdictFuture<'a>;

    /// Admission of a create before the new object is built (kube's NamespaceLifecycle,
    /// the first plugin of its chain): may refuse content in `target`'s namespace.
    /// `name` is the name the request asks for, empty for a generated one.
    fn admit_create<'a>(&'a self, view: StoreView<'a>, target: &'a Target, name: &'a str) -> RefusalFuture<'a>;

    /// Records the audit annotations of an admitted step in the request's audit event.
    fn record(&self, verdict: &Verdict);
}
