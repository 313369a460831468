//! Admission control, in kube-apiserver's plugin order: NamespaceLifecycle before a new
//! object is built, then, after a kind's own defaults and rules, the mutating phase (built-in mutating plugins, then mutating admission
//! webhooks), then — after schema and kind validation in `registry/validate.rs` — the
//! validating phase (built-in validating plugins such as Pod Security, then
//! ValidatingAdmissionPolicies, then validating admission webhooks, then ResourceQuota,
//! which kube runs last).
//!
//! - `builtin`: the admission plugins compiled into kube-apiserver that operators meet
//!   (NamespaceLifecycle, LimitRanger, Pod Security, ResourceQuota);
//! - `policy`: ValidatingAdmissionPolicy and its bindings, evaluated with CEL;
//! - `webhook`: MutatingWebhookConfiguration and ValidatingWebhookConfiguration,
//!   matched and called over HTTPS (`crate::webhook_client`).
//!
//! The registry is handed the chain as a trait object ([`AdmissionChain`] implements
//! `registry/admission.rs`'s [`Admission`]) and calls it with the request's
//! [`Attributes`]; each phase answers with a [`Verdict`] (warnings for the client, audit
//! annotations for the audit log, which the chain records with `crate::audit`) or an
//! `ApiError` that rejects the request. The chain owns what its plugins keep between
//! requests: the compiled webhooks and policies, and the webhook clients.

pub(crate) mod builtin;
pub(crate) mod policy;
pub(crate) mod webhook;

use std::sync::Arc;

use serde_json::Value;

pub(crate) use crate::registry::admission::{Admission, Attributes, Operation, RefusalFuture, Verdict, VerdictFuture};
use crate::registry::view::StoreView;
use crate::registry::{Registry, Target};
use crate::webhook_client::WebhookClients;

/// kube-apiserver's admission chain: the built-in plugins, ValidatingAdmissionPolicies and
/// admission webhooks, with their caches.
pub(crate) struct AdmissionChain {
    /// The admission webhooks of the stored configurations, and their clients.
    webhooks: webhook::Webhooks,
    /// The compiled ValidatingAdmissionPolicies and their bindings.
    policies: policy::PolicyCache,
}

impl AdmissionChain {
    /// A chain calling webhooks through `clients` (shared with CRD conversion, so
    /// connections are reused).
    pub(crate) fn new(clients: Arc<WebhookClients>) -> AdmissionChain {
        AdmissionChain { webhooks: webhook::Webhooks::new(clients), policies: policy::PolicyCache::default() }
    }
}

impl Admission for AdmissionChain {
    fn mutate<'a>(
        &'a self,
        registry: &'a Registry,
        attrs: &'a Attributes<'a>,
        obj: &'a mut Value,
    ) -> VerdictFuture<'a> {
        Box::pin(async move {
            let mut verdict = builtin::mutate(registry.view(), attrs, obj).await?;
            verdict.merge(self.webhooks.mutate(registry.view(), attrs, obj).await?);
            Ok(verdict)
        })
    }

    fn validate<'a>(&'a self, registry: &'a Registry, attrs: &'a Attributes<'a>, obj: &'a Value) -> VerdictFuture<'a> {
        Box::pin(async move {
            let mut verdict = builtin::validate(registry.view(), attrs, obj).await?;
            verdict.merge(policy::validate(&self.policies, registry, attrs, obj).await?);
            verdict.merge(self.webhooks.validate(registry.view(), attrs, obj).await?);
            verdict.merge(builtin::validate_quota(registry, attrs, obj).await?);
            Ok(verdict)
        })
    }

    fn admit_create<'a>(&'a self, view: StoreView<'a>, target: &'a Target, name: &'a str) -> RefusalFuture<'a> {
        Box::pin(builtin::namespace_lifecycle::check_open(view, target, name))
    }

    fn record(&self, verdict: &Verdict) {
        crate::audit::annotate(&verdict.audit_annotations);
    }
}
