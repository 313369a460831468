//! Pod state as the workload controllers read it (kube's `podutil`): phase, finished,
//! terminating, active, Ready and available (Ready for `minReadySeconds`).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

/// The pod's phase (`""` when unset).
pub(crate) fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// Whether the pod has finished (Succeeded or Failed).
pub(crate) fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// Whether the pod is being deleted.
pub(crate) fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Whether a pod counts toward a controller's replicas: not terminating and not finished
/// (kube's `IsPodActive`).
pub(crate) fn is_active(pod: &Pod) -> bool {
    !is_terminating(pod) && !is_terminal(pod)
}

/// `Some` when the pod's Ready condition is True, holding when it last became so (`None`
/// when the condition has no transition time).
pub(crate) fn ready_since(pod: &Pod) -> Option<Option<Timestamp>> {
    let cond = pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")?;
    (cond.status == "True").then(|| cond.last_transition_time.as_ref().map(|t| t.0))
}

/// Whether the pod's Ready condition is True.
pub(crate) fn is_ready(pod: &Pod) -> bool {
    ready_since(pod).is_some()
}

/// Whether the pod is Running and Ready (kube's `isRunningAndReady`).
pub(crate) fn is_running_and_ready(pod: &Pod) -> bool {
    phase(pod) == "Running" && is_ready(pod)
}

/// Whether the pod has been Ready for at least `min_ready_seconds` at `now` (kube's
/// `IsPodAvailable`: with a positive `min_ready_seconds`, a Ready condition without a
/// transition time does not count).
pub(crate) fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    match ready_since(pod) {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(None) => false,
        Some(Some(since)) => since.as_second().saturating_add(i64::from(min_ready_seconds)) <= now.as_second(),
    }
}

/// Whether the pod is Running and available (kube's `isRunningAndAvailable`, which the
/// StatefulSet controller counts).
pub(crate) fn is_running_and_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    phase(pod) == "Running" && is_available(pod, min_ready_seconds, now)
}

/// Seconds until a Ready pod becomes available, if it is Ready but not yet available.
pub(crate) fn seconds_until_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> Option<i64> {
    let since = ready_since(pod)??;
    let at = since.as_second().saturating_add(i64::from(min_ready_seconds));
    (at > now.as_second()).then(|| at - now.as_second())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(phase: &str, ready_at: Option<&str>, deleting: bool) -> Pod {
        let conditions = match ready_at {
            Some(t) => json!([{"type": "Ready", "status": "True", "lastTransitionTime": t}]),
            None => json!([{"type": "Ready", "status": "False"}]),
        };
        let deletion = deleting.then_some("2026-01-01T00:00:00Z");
        serde_json::from_value(json!({
            "metadata": {"name": "p", "deletionTimestamp": deletion},
            "status": {"phase": phase, "conditions": conditions}
        }))
        .expect("a valid pod")
    }

    fn at(s: &str) -> Timestamp {
        s.parse().expect("a valid timestamp")
    }

    #[test]
    fn availability_honours_min_ready_seconds() {
        let p = pod("Running", Some("2026-01-01T00:01:40Z"), false);
        let now = at("2026-01-01T00:01:45Z");
        assert!(is_available(&p, 0, now));
        assert!(is_available(&p, 5, now));
        assert!(!is_available(&p, 6, now));
        assert_eq!(seconds_until_available(&p, 10, now), Some(5));
        assert!(is_running_and_available(&p, 5, now));
        assert!(!is_running_and_available(&pod("Pending", Some("2026-01-01T00:01:40Z"), false), 0, now));
        assert!(!is_available(&pod("Running", None, false), 0, now));
    }

    #[test]
    fn phases_and_activity() {
        assert!(is_running_and_ready(&pod("Running", Some("2026-01-01T00:00:00Z"), false)));
        assert!(!is_active(&pod("Succeeded", None, false)));
        assert!(is_terminal(&pod("Failed", None, false)));
        let deleting = pod("Running", None, true);
        assert!(is_terminating(&deleting) && !is_active(&deleting));
        assert!(is_active(&Pod::default()));
        assert_eq!(phase(&Pod::default()), "");
    }
}
