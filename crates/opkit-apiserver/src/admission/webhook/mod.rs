//! Mutating and validating admission webhooks, as kube-apiserver's
//! `MutatingAdmissionWebhook` and `ValidatingAdmissionWebhook` plugins call them.
//!
//! - `config`: the webhooks of the stored configurations, compiled once per change;
//! - `matching`: rules, `matchPolicy`, selectors and `matchConditions`;
//! - `review`: the AdmissionReview sent and the checks of the answer;
//! - `dispatch`: calling one webhook (dryRun, timeout, `failurePolicy`, denial);
//! - `mutating`: the mutating webhooks in order, their patches and reinvocation;
//! - `validating`: the validating webhooks, called in parallel.

mod config;
mod dispatch;
mod matching;
mod mutating;
mod review;
mod validating;

use std::sync::Arc;

use serde_json::{Map, Value};

use super::{Attributes, Operation, Verdict};
use crate::error::ApiResult;
use crate::registry::parse_stored;
use crate::registry::view::StoreView;
use crate::storage::ResourceId;
use crate::webhook_client::WebhookClients;
use config::{Hook, Phase, WebhookCache};

/// The admission webhooks: their compiled configurations and the clients they are
/// called with.
pub(crate) struct Webhooks {
    /// The clients of webhook endpoints, kept so connections are reused.
    clients: Arc<WebhookClients>,
    /// The webhooks of the stored configurations, compiled once per change.
    cache: WebhookCache,
}

/// What calling a webhook needs: reads of the store (Services, Endpoints, pods,
/// namespaces) and the kept clients.
#[derive(Clone, Copy)]
pub(crate) struct Caller<'a> {
    /// The registry's read-only view.
    pub view: StoreView<'a>,
    /// The webhook clients.
    pub clients: &'a WebhookClients,
}

impl Webhooks {
    /// No webhook compiled yet, calling through `clients`.
    pub(crate) fn new(clients: Arc<WebhookClients>) -> Webhooks {
        Webhooks { clients, cache: WebhookCache::default() }
    }

    /// Calls the matching mutating webhooks in order; `obj` takes their patches.
    pub(crate) async fn mutate(
        &self,
        view: StoreView<'_>,
        attrs: &Attributes<'_>,
        obj: &mut Value,
    ) -> ApiResult<Verdict> {
        if matching::is_exempt(attrs) {
            return Ok(Verdict::default());
        }
        let hooks = self.cache.hooks(view, Phase::Mutating);
        if hooks.is_empty() {
            return Ok(Verdict::default());
        }
        mutating::run(Caller { view, clients: &self.clients }, &hooks, attrs, obj).await
    }

    /// Calls the matching validating webhooks, in parallel. For a delete, `obj` is the
    /// object being deleted (sent as `oldObject`).
    pub(crate) async fn validate(
        &self,
        view: StoreView<'_>,
        attrs: &Attributes<'_>,
        obj: &Value,
    ) -> ApiResult<Verdict> {
        if matching::is_exempt(attrs) {
            return Ok(Verdict::default());
        }
        let hooks = self.cache.hooks(view, Phase::Validating);
        if hooks.is_empty() {
            return Ok(Verdict::default());
        }
        let object = (attrs.operation != Operation::Delete).then_some(obj);
        validating::run(Caller { view, clients: &self.clients }, &hooks, attrs, object).await
    }
}

/// The labels `namespaceSelector`s are matched against, when one of `hooks` has a
/// selector: a Namespace object's own (new, else old), else the stored namespace's.
async fn namespace_labels(
    view: StoreView<'_>,
    hooks: &[Hook],
    attrs: &Attributes<'_>,
    object: Option<&Value>,
) -> Option<Map<String, Value>> {
    if !hooks.iter().any(|h| h.namespace_selector.as_ref().is_ok_and(|s| !s.is_empty())) {
        return None;
    }
    let info = &attrs.target.info;
    if info.group.is_empty() && info.resource == "namespaces" {
        let own = object.filter(|o| !o.is_null()).or(attrs.old);
        return own.and_then(|o| o["metadata"]["labels"].as_object().cloned());
    }
    let namespace = attrs.target.namespace.as_deref().filter(|ns| info.namespaced && !ns.is_empty())?;
    let key = (String::new(), namespace.to_string());
    let entry = view.get(&ResourceId::new("", "namespaces"), &key).await.ok()??;
    parse_stored(&entry.value).ok()?["metadata"]["labels"].as_object().cloned()
}
