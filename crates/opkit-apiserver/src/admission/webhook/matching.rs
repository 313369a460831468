//! Whether a webhook is called for a request, as kube's `ShouldCallHook` decides:
//! `namespaceSelector`, `objectSelector`, `rules` (at the request's version, or with
//! `matchPolicy: Equivalent` at another version of the same resource) and
//! `matchConditions` (CEL over the AdmissionRequest the webhook would receive).

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use kube_cel::cel::Value as CelValue;
use serde_json::{Map, Value};

use super::config::Hook;
use crate::admission::Attributes;
use crate::error::{ApiError, ApiResult};
use crate::schema::cel_depth::on_stack_for;

/// The resources kube never sends to admission webhooks (its
/// `IsExemptAdmissionConfigurationResource`): the admission configuration itself.
const EXEMPT: [(&str, &str); 5] = [
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
    ("admissionregistration.k8s.io", "mutatingadmissionpolicies"),
];

/// Whether the request's resource is exempt from webhooks.
pub(crate) fn is_exempt(attrs: &Attributes<'_>) -> bool {
    let info = &attrs.target.info;
    EXEMPT.iter().any(|(g, r)| info.group == *g && info.resource == *r)
}

/// Whether `rule` matches an operation on `group/version/resource[/sub]`.
fn rule_matches(rule: &RuleWithOperations, attrs: &Attributes<'_>, version: &str) -> bool {
    let info = &attrs.target.info;
    let any_or = |list: &Option<Vec<String>>, value: &str| {
        list.as_ref().is_some_and(|l| l.iter().any(|v| v == "*" || v == value))
    };
    if !any_or(&rule.operations, attrs.operation.as_str())
        || !any_or(&rule.api_groups, &info.group)
        || !any_or(&rule.api_versions, version)
    {
        return false;
    }
    let sub = attrs.subresource.unwrap_or_default();
    let resource_matches = rule.resources.iter().flatten().any(|r| {
        let (res, rsub) = r.split_once('/').unwrap_or((r, ""));
        (res == "*" || res == info.resource) && (rsub == "*" || rsub == sub)
    });
    let scope_matches = match rule.scope.as_deref() {
        Some("Namespaced") => info.namespaced,
        Some("Cluster") => !info.namespaced,
        _ => true,
    };
    resource_matches && scope_matches
}

/// The version of the request's resource at which `hook`'s rules match it: the
/// requested version, else (matchPolicy Equivalent) another served version of the same
/// resource, earlier rules first. None when the webhook does not apply.
pub(crate) fn matching_version(hook: &Hook, attrs: &Attributes<'_>) -> Option<String> {
    let requested = &attrs.target.version;
    if hook.rules.iter().any(|r| rule_matches(r, attrs, requested)) {
        return Some(requested.clone());
    }
    if hook.exact {
        return None;
    }
    let versions = &attrs.target.info.versions;
    hook.rules.iter().find_map(|rule| {
        versions
            .iter()
            .filter(|v| v.served && v.name != *requested)
            .find(|v| rule_matches(rule, attrs, &v.name))
            .map(|v| v.name.clone())
    })
}

/// The labels of an object, if it has any.
fn labels(obj: Option<&Value>) -> Option<&Map<String, Value>> {
    obj.and_then(|o| o["metadata"]["labels"].as_object())
}

/// Whether `hook`'s `objectSelector` matches the new or the old object (kube's
/// `MatchObjectSelector`; an empty selector matches everything).
pub(crate) fn object_selector_matches(hook: &Hook, object: Option<&Value>, old: Option<&Value>) -> ApiResult<bool> {
    let selector = hook.object_selector.as_ref().map_err(|e| ApiError::internal(e.clone()))?;
    if selector.is_empty() {
        return Ok(true);
    }
    let matches = |o: Option<&Value>| o.is_some_and(|o| !o.is_null()) && selector.matches(labels(o));
    Ok(matches(object) || matches(old))
}

/// Whether `hook`'s `namespaceSelector` matches the labels of the request's namespace
/// (`namespace_labels`: the stored namespace's, or a Namespace object's own). Requests
/// for other cluster-scoped objects always match.
pub(crate) fn namespace_selector_matches(
    hook: &Hook,
    attrs: &Attributes<'_>,
    namespace_labels: Option<&Map<String, Value>>,
) -> ApiResult<bool> {
    let selector = hook.namespace_selector.as_ref().map_err(|e| ApiError::internal(e.clone()))?;
    if selector.is_empty() {
        return Ok(true);
    }
    let info = &attrs.target.info;
    let is_namespace = info.group.is_empty() && info.resource == "namespaces";
    if !info.namespaced && !is_namespace {
        return Ok(true);
    }
    Ok(selector.matches(namespace_labels))
}

/// Evaluates `hook`'s `matchConditions` against `request` (the AdmissionRequest the
/// webhook would receive): false when one is false; an error (as kube's 403) when none
/// is false and one fails, unless the webhook fails open, which skips it.
pub(crate) fn conditions_match(hook: &Hook, attrs: &Attributes<'_>, request: &Value) -> ApiResult<bool> {
    if hook.conditions.is_empty() {
        return Ok(true);
    }
    let vars = [("object", &request["object"]), ("oldObject", &request["oldObject"]), ("request", request)];
    let context = crate::admission::policy::activation::context(&vars);
    let mut errors = Vec::new();
    for condition in &hook.conditions {
        let outcome = match &condition.program {
            Err(e) => Err(e.clone()),
            Ok((program, depth)) => match on_stack_for(*depth, || program.execute(&context)) {
                Ok(CelValue::Bool(b)) => Ok(b),
                Ok(other) => Err(format!("expected a boolean, got {:?}", other.type_of())),
                Err(e) => Err(e.to_string()),
            },
        };
        match outcome {
            Ok(false) => return Ok(false),
            Ok(true) => {}
            Err(e) => errors.push(format!("failed evaluating match condition {:?}: {e}", condition.name)),
        }
    }
    if errors.is_empty() {
        return Ok(true);
    }
    if hook.fail_open {
        return Ok(false);
    }
    tracing::warn!(webhook = %hook.name, errors = ?errors, "Failed evaluating match conditions, failing closed");
    let info = &attrs.target.info;
    let message = if errors.len() == 1 { errors.remove(0) } else { format!("[{}]", errors.join(", ")) };
    Err(ApiError::forbidden_object(&info.group, &info.resource, attrs.name, &message))
}
