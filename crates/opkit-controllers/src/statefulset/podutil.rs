//! Helpers the workload controllers (StatefulSet, DaemonSet, Job, CronJob, endpoints) share:
//! pod state (ready, available, terminating), ownership, label selectors, template hashes
//! and API error classification.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use opkit::Cache;

/// Errors of the workload controllers.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The API server refused a request.
    #[error("api request failed: {0}")]
    Api(#[from] kube::Error),
    /// An object could not be (de)serialized.
    #[error("serialization failed: {0}")]
    Json(#[from] serde_json::Error),
    /// An object lacks something the controller needs (name, uid, ...).
    #[error("invalid object: {0}")]
    Invalid(String),
}

/// Whether `meta` has a controller reference whose uid is `uid`.
pub fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references.iter().flatten().any(|o| o.controller == Some(true) && o.uid == uid)
}

/// The cached pods of namespace `ns` controlled by the owner with `uid`.
pub fn owned_pods(cache: &Cache, ns: &str, uid: &str) -> Vec<Arc<Pod>> {
    cache
        .list::<Pod>()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns) && controlled_by(&p.metadata, uid))
        .collect()
}

/// The pod's phase (`""` when unset).
pub fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// Whether the pod has finished (Succeeded or Failed).
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// Whether the pod is being deleted.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// The time the pod's Ready condition became True, if it is True.
pub fn ready_since(pod: &Pod) -> Option<jiff::Timestamp> {
    let conds = pod.status.as_ref()?.conditions.as_ref()?;
    let c = conds.iter().find(|c| c.type_ == "Ready" && c.status == "True")?;
    Some(c.last_transition_time.as_ref().map_or(jiff::Timestamp::UNIX_EPOCH, |t| t.0))
}

/// Whether the pod's Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    ready_since(pod).is_some()
}

/// Whether the pod is Running and Ready (kube's `isRunningAndReady`).
pub fn is_running_and_ready(pod: &Pod) -> bool {
    phase(pod) == "Running" && is_ready(pod)
}

/// Whether the pod has been ready for at least `min_ready_seconds` at `now`.
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: jiff::Timestamp) -> bool {
    if !is_running_and_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    ready_since(pod).is_some_and(|t| t.as_second() + i64::from(min_ready_seconds) <= now.as_second())
}

/// Whether a label selector matches `labels` (matchLabels and matchExpressions). An empty
/// selector matches everything.
pub fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let ml = sel.match_labels.iter().flatten().all(|(k, v)| labels.get(k) == Some(v));
    ml && sel.match_expressions.iter().flatten().all(|e| {
        let vals = e.values.as_deref().unwrap_or_default();
        expression_matches(&e.operator, labels.get(&e.key).map(String::as_str), vals)
    })
}

/// Evaluates one set-based requirement (`In`, `NotIn`, `Exists`, `DoesNotExist`, and the
/// node-affinity `Gt`/`Lt`) against a label's value.
pub fn expression_matches(op: &str, value: Option<&str>, values: &[String]) -> bool {
    match op {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) =
                (value.and_then(|v| v.parse::<i64>().ok()), values.first().and_then(|b| b.parse::<i64>().ok()))
            else {
                return false;
            };
            if op == "Gt" { v > bound } else { v < bound }
        }
        _ => false,
    }
}

/// 32-bit FNV-1a.
pub fn fnv32a(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}

/// Renders a hash like apimachinery's `rand.SafeEncodeString` of its decimal form (no
/// vowels, no confusable characters).
pub fn safe_encode(hash: u32) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    hash.to_string().bytes().map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char).collect()
}

/// Whether an error is a 409 AlreadyExists.
pub fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists")
}

/// Whether an error is a 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn selectors() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        let mut sel = LabelSelector { match_labels: Some(labels.clone()), ..Default::default() };
        assert!(selector_matches(&sel, &labels));
        sel.match_expressions =
            Some(vec![LabelSelectorRequirement { key: "tier".into(), operator: "Exists".into(), values: None }]);
        assert!(!selector_matches(&sel, &labels));
        assert!(selector_matches(&LabelSelector::default(), &BTreeMap::new()));
        assert!(expression_matches("Gt", Some("5"), &["3".into()]));
        assert!(!expression_matches("Lt", Some("5"), &["3".into()]));
        assert!(expression_matches("NotIn", None, &["a".into()]));
    }

    #[test]
    fn hashes_are_stable_and_safe() {
        assert_eq!(fnv32a(b""), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c_292c);
        let s = safe_encode(fnv32a(b"template"));
        assert!(s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
        assert_eq!(s, safe_encode(fnv32a(b"template")));
    }
}
