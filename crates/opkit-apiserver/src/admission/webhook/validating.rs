//! The validating webhooks: every matching one called at once, as kube's validating
//! dispatcher does; the first rejection (in calling order) rejects the request.

use futures::future::join_all;
use serde_json::Value;

use super::config::Hook;
use super::dispatch::{Called, call_hook};
use super::{Caller, namespace_labels};
use crate::admission::{Attributes, Verdict};
use crate::error::ApiResult;

/// Calls `hooks` for the request; `object` is None for a delete.
pub(super) async fn run(
    caller: Caller<'_>,
    hooks: &[Hook],
    attrs: &Attributes<'_>,
    object: Option<&Value>,
) -> ApiResult<Verdict> {
    let labels = namespace_labels(caller.view, hooks, attrs, object).await;
    let calls = hooks.iter().map(|hook| call_hook(caller, hook, attrs, object, labels.as_ref(), false));
    let results = join_all(calls).await;
    let mut verdict = Verdict::default();
    for (index, (hook, result)) in hooks.iter().zip(results).enumerate() {
        match result? {
            Called::NotMatched => {}
            Called::FailedOpen => {
                verdict.audit_annotations.insert(
                    format!("failed-open.validating.webhook.admission.k8s.io/round_0_index_{index}"),
                    hook.name.clone(),
                );
            }
            Called::Allowed { response, .. } => {
                let response = *response;
                verdict.warnings.extend(response.warnings);
                for (key, value) in response.audit_annotations {
                    verdict.audit_annotations.insert(format!("{}/{key}", hook.name), value);
                }
            }
        }
    }
    Ok(verdict)
}
