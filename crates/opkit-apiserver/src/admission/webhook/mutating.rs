//! The mutating webhooks, called one after the other (each sees the object as the
//! previous one left it), their JSONPatches applied, and `reinvocationPolicy: IfNeeded`:
//! a webhook that asked for it is called once more when a webhook after it changed the
//! object, as kube's mutating dispatcher reinvokes.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::config::Hook;
use super::dispatch::{Called, call_hook};
use super::review::{at_version, from_version};
use super::{Caller, namespace_labels};
use crate::admission::{Attributes, Operation, Verdict};
use crate::error::{ApiError, ApiResult};

/// Calls `hooks` in order, then reinvokes those that need it; `obj` takes the patches.
pub(super) async fn run(
    caller: Caller<'_>,
    hooks: &[Hook],
    attrs: &Attributes<'_>,
    obj: &mut Value,
) -> ApiResult<Verdict> {
    let deleting = attrs.operation == Operation::Delete;
    let labels = namespace_labels(caller.view, hooks, attrs, (!deleting).then_some(&*obj)).await;
    let mut verdict = Verdict::default();
    // IfNeeded webhooks called since the object last changed, and those to call again.
    let mut called_since_change = BTreeSet::new();
    let mut reinvoke = BTreeSet::new();
    for round in 0..2 {
        if round == 1 && reinvoke.is_empty() {
            break;
        }
        for (index, hook) in hooks.iter().enumerate() {
            if round == 1 && !reinvoke.contains(&index) {
                continue;
            }
            let object = (!deleting).then_some(&*obj);
            let (response, version) = match call_hook(caller, hook, attrs, object, labels.as_ref(), true).await? {
                Called::NotMatched => continue,
                Called::FailedOpen => {
                    verdict.audit_annotations.insert(
                        format!("failed-open.mutation.webhook.admission.k8s.io/round_{round}_index_{index}"),
                        hook.name.clone(),
                    );
                    continue;
                }
                Called::Allowed { response, version } => (*response, version),
            };
            verdict.warnings.extend(response.warnings);
            for (key, value) in response.audit_annotations {
                verdict.audit_annotations.insert(format!("{}/{key}", hook.name), value);
            }
            let changed = match response.patch.filter(|_| !deleting) {
                Some(patch) => apply(attrs, obj, &patch, &version)?,
                None => false,
            };
            verdict.audit_annotations.insert(
                format!("mutation.webhook.admission.k8s.io/round_{round}_index_{index}"),
                json!({"configuration": hook.configuration, "webhook": hook.name, "mutated": changed}).to_string(),
            );
            if changed {
                verdict.mutated = true;
                reinvoke.append(&mut called_since_change);
            }
            if hook.reinvoke_if_needed {
                called_since_change.insert(index);
            }
        }
    }
    Ok(verdict)
}

/// Applies a webhook's JSONPatch (against the object at the webhook's `version`) to
/// `obj`; returns whether it changed the object.
fn apply(attrs: &Attributes<'_>, obj: &mut Value, patch: &Value, version: &str) -> ApiResult<bool> {
    let sent = at_version(attrs, obj, version);
    let mut patched = crate::patch::json_patch(&sent, patch).map_err(|e| ApiError::internal(e.to_string()))?;
    if patched == sent {
        return Ok(false);
    }
    from_version(attrs, &mut patched, version);
    *obj = patched;
    Ok(true)
}
