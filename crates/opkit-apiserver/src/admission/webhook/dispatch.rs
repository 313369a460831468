//! Calling one webhook that matched, as kube's dispatchers do: its matchConditions over
//! the review it would receive, the dryRun check against `sideEffects`, the call with
//! its timeout, the checks of its answer, `failurePolicy` on a failed call, and a
//! denial turned into the client's error. Every call is logged with its latency and
//! outcome.

use std::time::Instant;

use serde_json::{Map, Value};

use super::Caller;
use super::config::Hook;
use super::matching::{conditions_match, matching_version, namespace_selector_matches, object_selector_matches};
use super::review::{Response, parse_response, rejection, request, review, review_version};
use crate::admission::Attributes;
use crate::error::{ApiError, ApiResult};

/// What calling a webhook came to, when it did not reject the request.
pub(crate) enum Called {
    /// The webhook does not apply to this request.
    NotMatched,
    /// The webhook answered `allowed: true` (the answer is at `version`).
    Allowed {
        /// The webhook's answer.
        response: Box<Response>,
        /// The version of the resource the webhook was sent.
        version: String,
    },
    /// The call failed and the webhook's `failurePolicy` is Ignore.
    FailedOpen,
}

/// Why the server could not get a usable answer (kube's `ErrCallingWebhook`).
struct CallFailure(String);

/// Calls `hook` for the request when it applies. `object` is the object being written
/// (None for a delete), `old` the stored one; `namespace_labels` are the labels of the
/// request's namespace (or of the Namespace object written). An `Err` rejects the
/// request: a denial, a failed call under `failurePolicy: Fail`, a dry run the webhook
/// cannot take.
pub(crate) async fn call_hook(
    caller: Caller<'_>,
    hook: &Hook,
    attrs: &Attributes<'_>,
    object: Option<&Value>,
    namespace_labels: Option<&Map<String, Value>>,
    mutating: bool,
) -> ApiResult<Called> {
    let old = attrs.old;
    if !namespace_selector_matches(hook, attrs, namespace_labels)? || !object_selector_matches(hook, object, old)? {
        return Ok(Called::NotMatched);
    }
    let Some(version) = matching_version(hook, attrs) else { return Ok(Called::NotMatched) };
    let uid = uuid::Uuid::new_v4().to_string();
    let request = request(attrs, &version, object, old, &uid);
    if !conditions_match(hook, attrs, &request)? {
        return Ok(Called::NotMatched);
    }
    if attrs.opts.dry_run {
        match hook.side_effects.as_deref() {
            Some("None" | "NoneOnDryRun") => {}
            Some(_) => {
                return Err(ApiError::bad_request(format!(
                    "admission webhook {:?} does not support dry run",
                    hook.name
                )));
            }
            None => return failed(hook, CallFailure("Webhook SideEffects is nil".into())),
        }
    }
    let review_version = match review_version(hook) {
        Ok(v) => v,
        Err(e) => return failed(hook, CallFailure(e)),
    };
    let started = Instant::now();
    let answer = caller.clients.call(&caller.view, &hook.client, &review(review_version, request), hook.timeout).await;
    let latency = started.elapsed();
    let answer = match answer {
        Ok(answer) => answer,
        Err(e) => {
            if e.is_timeout() {
                tracing::warn!(webhook = %hook.name, ?latency, timeout = ?hook.timeout, "admission webhook timed out");
            }
            return failed(hook, CallFailure(format!("failed to call webhook: {e}")));
        }
    };
    let response = match parse_response(review_version, &uid, mutating, &answer) {
        Ok(r) => r,
        Err(e) => return failed(hook, CallFailure(format!("received invalid webhook response: {e}"))),
    };
    tracing::debug!(
        webhook = %hook.name,
        configuration = %hook.configuration,
        operation = attrs.operation.as_str(),
        resource = %attrs.target.info.resource,
        allowed = response.allowed,
        patched = response.patch.is_some(),
        ?latency,
        "admission webhook called"
    );
    if !response.allowed {
        return Err(rejection(&hook.name, &response.status));
    }
    Ok(Called::Allowed { response: Box::new(response), version })
}

/// A failed call: skipped under `failurePolicy: Ignore`, else kube's 500.
fn failed(hook: &Hook, why: CallFailure) -> ApiResult<Called> {
    let message = format!("failed calling webhook {:?}: {}", hook.name, why.0);
    if hook.fail_open {
        tracing::warn!(webhook = %hook.name, error = %message, "Failed calling webhook, failing open");
        return Ok(Called::FailedOpen);
    }
    tracing::warn!(webhook = %hook.name, error = %message, "Failed calling webhook, failing closed");
    Err(ApiError::internal(message))
}
