//! Admission control after a kind's own defaults and rules, in kube-apiserver's plugin
//! order: the mutating phase (built-in mutating plugins, then mutating admission
//! webhooks), then — after schema and kind validation in `registry/validate.rs` — the
//! validating phase (built-in validating plugins such as Pod Security, then
//! ValidatingAdmissionPolicies, then validating admission webhooks, then ResourceQuota,
//! which kube runs last).
//!
//! - `builtin`: the admission plugins compiled into kube-apiserver that operators meet
//!   (ServiceAccount, DefaultTolerationSeconds, LimitRanger, Pod Security, ResourceQuota);
//! - `policy`: ValidatingAdmissionPolicy and its bindings, evaluated with CEL;
//! - `webhook`: MutatingWebhookConfiguration and ValidatingWebhookConfiguration,
//!   matched and called over HTTPS (`crate::webhook_client`).
//!
//! The registry calls [`Registry::admission_mutate`] and [`Registry::admission_validate`]
//! with the request's [`Attributes`]; each phase answers with a [`Verdict`] (warnings for
//! the client, audit annotations for the audit log) or an [`ApiError`] that rejects the
//! request.

pub(crate) mod builtin;
pub(crate) mod policy;
pub(crate) mod webhook;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ApiResult;
use crate::registry::{Registry, Target, WriteOptions};

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

impl Registry {
    /// The mutating phase: may change `obj` (the object being created or updated, at the
    /// requested version). Sets [`Verdict::mutated`] when it did.
    pub(crate) async fn admission_mutate(&self, attrs: &Attributes<'_>, obj: &mut Value) -> ApiResult<Verdict> {
        let mut verdict = builtin::mutate(self, attrs, obj).await?;
        verdict.merge(webhook::mutate(self, attrs, obj).await?);
        Ok(verdict)
    }

    /// The validating phase: `obj` is the object as it will be stored (for a delete, the
    /// object being deleted); it is not changed.
    pub(crate) async fn admission_validate(&self, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<Verdict> {
        let mut verdict = builtin::validate(self, attrs, obj).await?;
        verdict.merge(policy::validate(self, attrs, obj).await?);
        verdict.merge(webhook::validate(self, attrs, obj).await?);
        verdict.merge(builtin::validate_quota(self, attrs, obj).await?);
        Ok(verdict)
    }
}
