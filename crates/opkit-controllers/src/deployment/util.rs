//! Deployment helpers, as kube's `deployment/util`: defaults, maxSurge/maxUnavailable
//! resolution (surge rounds up, unavailable rounds down), the pod-template hash, template
//! comparison ignoring the hash label, the revision and replicas annotations, replica
//! counts over ReplicaSets and deployment conditions.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use crate::common::hash::{fnv32a, safe_encode};

/// The label (and selector key) holding the hash of a ReplicaSet's pod template.
pub(crate) const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// The rollout sequence number of a Deployment and its ReplicaSets.
pub(crate) const REVISION: &str = "deployment.kubernetes.io/revision";
/// The revisions a reused ReplicaSet had before.
pub(crate) const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// The Deployment's desired replicas when the ReplicaSet was last scaled.
pub(crate) const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// The Deployment's replicas plus maxSurge when the ReplicaSet was last scaled.
pub(crate) const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

/// Annotations never copied from a Deployment to its ReplicaSets.
const SKIPPED_ANNOTATIONS: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];

/// A maxSurge or maxUnavailable value that is neither an integer nor a percentage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value for IntOrString: invalid value {0:?}: must be an integer or percentage (e.g '5%')")]
pub(crate) struct IntOrPercentError(pub String);

/// `spec.replicas`, defaulting to 1.
pub(crate) fn replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// Whether the strategy is Recreate (the default is RollingUpdate).
pub(crate) fn is_recreate(d: &Deployment) -> bool {
    d.spec.as_ref().and_then(|s| s.strategy.as_ref()).and_then(|s| s.type_.as_deref()) == Some("Recreate")
}

/// `spec.revisionHistoryLimit`, defaulting to 10.
pub(crate) fn revision_history_limit(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.revision_history_limit).unwrap_or(10)
}

/// `spec.progressDeadlineSeconds`, defaulting to 600; `None` when it is `MaxInt32` (no deadline).
pub(crate) fn progress_deadline(d: &Deployment) -> Option<i32> {
    let v = d.spec.as_ref().and_then(|s| s.progress_deadline_seconds).unwrap_or(600);
    (v != i32::MAX).then_some(v)
}

/// Whether the Deployment is paused.
pub(crate) fn is_paused(d: &Deployment) -> bool {
    d.spec.as_ref().is_some_and(|s| s.paused == Some(true))
}

/// `spec.minReadySeconds`.
pub(crate) fn min_ready_seconds(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0)
}

/// Scales an int-or-percent against `total`: percentages round up or down.
pub(crate) fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Result<i32, IntOrPercentError> {
    match v {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let Some(num) = s.strip_suffix('%').and_then(|n| n.parse::<i64>().ok()) else {
                // kube also accepts a plain integer in a string.
                return s.parse::<i32>().map_err(|_| IntOrPercentError(s.clone()));
            };
            let product = num * i64::from(total);
            let value = if round_up { (product + 99).div_euclid(100) } else { product.div_euclid(100) };
            Ok(i32::try_from(value).unwrap_or(i32::MAX))
        }
    }
}

/// Resolves (maxSurge, maxUnavailable) for a RollingUpdate Deployment, defaulting both to
/// 25%; when both are zero, maxUnavailable becomes 1.
pub(crate) fn fenceposts(d: &Deployment) -> Result<(i32, i32), IntOrPercentError> {
    let desired = replicas(d);
    let ru = d.spec.as_ref().and_then(|s| s.strategy.as_ref()).and_then(|s| s.rolling_update.as_ref());
    let default = IntOrString::String("25%".into());
    let surge = scaled_value(ru.and_then(|r| r.max_surge.as_ref()).unwrap_or(&default), desired, true)?;
    let unavailable = scaled_value(ru.and_then(|r| r.max_unavailable.as_ref()).unwrap_or(&default), desired, false)?;
    if surge == 0 && unavailable == 0 {
        return Ok((0, 1));
    }
    Ok((surge, unavailable))
}

/// The surge allowed above `replicas` (0 for Recreate).
pub(crate) fn max_surge(d: &Deployment) -> i32 {
    if is_recreate(d) {
        return 0;
    }
    fenceposts(d).map(|(s, _)| s).unwrap_or(0)
}

/// How many pods may be unavailable (0 for Recreate or zero replicas; at most `replicas`).
pub(crate) fn max_unavailable(d: &Deployment) -> i32 {
    let desired = replicas(d);
    if is_recreate(d) || desired == 0 {
        return 0;
    }
    fenceposts(d).map(|(_, u)| u.min(desired)).unwrap_or(0)
}

/// The pod-template hash of `template` with `collision_count`: stable for equal templates.
pub(crate) fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut bytes = normalized(template).to_string().into_bytes();
    if let Some(c) = collision_count {
        bytes.extend_from_slice(&c.to_le_bytes());
    }
    safe_encode(fnv32a(&bytes))
}

/// Non-pointer fields whose zero value Go omits, so `false` / `0` equals absent.
const ZERO_IS_ABSENT: &[&str] =
    &["stdin", "stdinOnce", "tty", "hostNetwork", "hostPID", "hostIPC", "readOnly", "hostPort"];

/// Drops nulls, empty strings, objects and arrays, and zero values of non-pointer fields,
/// so a template compares equal however a client spelled its absent fields.
fn prune(v: &mut Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Object(m) => {
            m.retain(|k, x| {
                let zero = matches!(x, Value::Bool(false)) || x.as_i64() == Some(0);
                !(prune(x) || (zero && ZERO_IS_ABSENT.contains(&k.as_str())))
            });
            m.is_empty()
        }
        Value::Array(a) => {
            for x in a.iter_mut() {
                prune(x);
            }
            a.is_empty()
        }
        _ => false,
    }
}

/// A template as JSON without the hash label, pruned of empty values.
fn normalized(template: &PodTemplateSpec) -> Value {
    let mut v = serde_json::to_value(template).expect("a k8s-openapi PodTemplateSpec always serialises");
    if let Some(labels) = v.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    prune(&mut v);
    v
}

/// Whether two templates are equal apart from the pod-template-hash label.
pub(crate) fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    normalized(a) == normalized(b)
}

/// The revision annotation as a number (0 when absent or invalid).
pub(crate) fn revision(meta_annotations: Option<&BTreeMap<String, String>>) -> i64 {
    meta_annotations.and_then(|a| a.get(REVISION)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The highest revision among `rss`.
pub(crate) fn max_revision(rss: &[ReplicaSet]) -> i64 {
    rss.iter().map(|rs| revision(rs.metadata.annotations.as_ref())).max().unwrap_or(0)
}

/// Copies the Deployment's annotations (except the skipped ones) to the ReplicaSet.
pub(crate) fn copy_annotations(d: &Deployment, rs: &mut ReplicaSet) -> bool {
    let mut changed = false;
    let target = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if SKIPPED_ANNOTATIONS.contains(&k.as_str()) || target.get(k) == Some(v) {
            continue;
        }
        target.insert(k.clone(), v.clone());
        changed = true;
    }
    changed
}

/// Sets desired-replicas and max-replicas; returns whether they changed.
pub(crate) fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let a = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
        let v = v.to_string();
        if a.get(k) != Some(&v) {
            a.insert(k.to_string(), v);
            changed = true;
        }
    }
    changed
}

/// Gives `rs` the revision `new_revision` (recording its older one in the history) and the
/// Deployment's annotations; for a new ReplicaSet also the replicas annotations.
pub(crate) fn set_new_rs_annotations(d: &Deployment, rs: &mut ReplicaSet, new_revision: i64, exists: bool) -> bool {
    let mut changed = copy_annotations(d, rs);
    let old = revision(rs.metadata.annotations.as_ref());
    let a = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    if old < new_revision {
        a.insert(REVISION.into(), new_revision.to_string());
        changed = true;
        if old > 0 {
            let history = match a.get(REVISION_HISTORY) {
                Some(h) if !h.is_empty() => format!("{h},{old}"),
                _ => old.to_string(),
            };
            a.insert(REVISION_HISTORY.into(), history);
        }
    }
    if !exists {
        changed |= set_replicas_annotations(rs, replicas(d), replicas(d) + max_surge(d));
    }
    changed
}

/// `spec.replicas` of a ReplicaSet.
pub(crate) fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// How many replicas the new ReplicaSet should have now.
pub(crate) fn new_rs_new_replicas(d: &Deployment, all: &[&ReplicaSet], new_rs: &ReplicaSet) -> i32 {
    let desired = replicas(d);
    if is_recreate(d) {
        return desired;
    }
    let current = spec_replicas(all);
    let max_total = desired + max_surge(d);
    let new_now = rs_replicas(new_rs);
    if current >= max_total {
        return new_now;
    }
    let up = (max_total - current).min(desired - new_now).max(0);
    new_now + up
}

/// Sum of `spec.replicas`.
pub(crate) fn spec_replicas(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|rs| rs_replicas(rs)).sum()
}

/// Sum of `status.replicas`.
pub(crate) fn actual_replicas(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|rs| rs.status.as_ref().map_or(0, |s| s.replicas)).sum()
}

/// Sum of `status.readyReplicas`.
pub(crate) fn ready_replicas(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|rs| rs.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0)).sum()
}

/// Sum of `status.availableReplicas`.
pub(crate) fn available_replicas(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|rs| rs.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0)).sum()
}

/// A ReplicaSet's annotation as an integer.
pub(crate) fn int_annotation(rs: &ReplicaSet, key: &str) -> Option<i32> {
    rs.metadata.annotations.as_ref()?.get(key)?.parse().ok()
}

/// A deployment condition.
pub(crate) fn condition(type_: &str, status: &str, reason: &str, message: String) -> DeploymentCondition {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(now.clone()),
        last_transition_time: Some(now),
    }
}

/// The condition of `type_`, if present.
pub(crate) fn get_condition<'a>(status: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    status.conditions.iter().flatten().find(|c| c.type_ == type_)
}

/// Sets a condition, keeping the transition time when the status is unchanged and doing
/// nothing when status and reason are unchanged.
pub(crate) fn set_condition(status: &mut DeploymentStatus, mut c: DeploymentCondition) {
    if let Some(cur) = get_condition(status, &c.type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    let conds = status.conditions.get_or_insert_with(Vec::new);
    conds.retain(|x| x.type_ != c.type_);
    conds.push(c);
}

/// Removes the condition of `type_`.
pub(crate) fn remove_condition(status: &mut DeploymentStatus, type_: &str) {
    if let Some(conds) = status.conditions.as_mut() {
        conds.retain(|c| c.type_ != type_);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn dep(replicas: i32, surge: IntOrString, unavailable: IntOrString) -> Deployment {
        Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                strategy: Some(DeploymentStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_surge: Some(surge),
                        max_unavailable: Some(unavailable),
                    }),
                }),
                ..DeploymentSpec::default()
            }),
            ..Deployment::default()
        }
    }

    #[test]
    fn surge_rounds_up_unavailable_rounds_down() {
        let s = |v: &str| IntOrString::String(v.into());
        let d = dep(10, s("25%"), s("25%"));
        assert_eq!(fenceposts(&d), Ok((3, 2)));
        let d = dep(3, s("25%"), s("25%"));
        assert_eq!(fenceposts(&d), Ok((1, 0)));
        assert_eq!(max_unavailable(&d), 0);
        let d = dep(3, IntOrString::Int(0), IntOrString::Int(0));
        assert_eq!(fenceposts(&d), Ok((0, 1)));
        let d = dep(3, IntOrString::Int(1), IntOrString::Int(5));
        assert_eq!(max_unavailable(&d), 3);
        assert!(fenceposts(&dep(3, s("x"), s("1%"))).is_err());
        assert_eq!(max_surge(&Deployment::default()), 1);
    }

    #[test]
    fn hash_is_stable_and_ignores_hash_label() {
        let mut t = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_string(), "web".to_string())].into()),
                ..ObjectMeta::default()
            }),
            spec: None,
        };
        let h = template_hash(&t, None);
        assert_eq!(h, template_hash(&t.clone(), None));
        assert_ne!(h, template_hash(&t, Some(1)));
        assert!(h.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
        let plain = t.clone();
        if let Some(l) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            l.insert(POD_TEMPLATE_HASH.into(), h.clone());
        }
        assert!(equal_ignore_hash(&plain, &t));
        let mut with_zeroes: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "i", "stdin": false, "tty": false}], "hostNetwork": false}
        }))
        .unwrap_or_default();
        let plain_spec: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web"}, "creationTimestamp": null},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {}}]}
        }))
        .unwrap_or_default();
        assert!(equal_ignore_hash(&with_zeroes, &plain_spec));
        assert_eq!(template_hash(&with_zeroes, None), template_hash(&plain_spec, None));
        if let Some(spec) = with_zeroes.spec.as_mut() {
            spec.automount_service_account_token = Some(false);
        }
        assert!(!equal_ignore_hash(&with_zeroes, &plain_spec));
        assert_eq!(template_hash(&t, None), h);
    }

    #[test]
    fn revisions_and_annotations() {
        let mut d = Deployment::default();
        d.metadata.annotations =
            Some([("team".to_string(), "a".to_string()), (REVISION.to_string(), "9".to_string())].into());
        let mut rs = ReplicaSet::default();
        rs.metadata.annotations = Some([(REVISION.to_string(), "1".to_string())].into());
        assert!(set_new_rs_annotations(&d, &mut rs, 3, true));
        let a = rs.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(a.get(REVISION).map(String::as_str), Some("3"));
        assert_eq!(a.get(REVISION_HISTORY).map(String::as_str), Some("1"));
        assert_eq!(a.get("team").map(String::as_str), Some("a"));
        assert!(!set_new_rs_annotations(&d, &mut rs, 3, true));
        assert_eq!(max_revision(&[rs]), 3);
    }

    #[test]
    fn conditions_keep_transition_time() {
        let mut st = DeploymentStatus::default();
        let mut c = condition("Progressing", "True", "NewReplicaSetCreated", "x".into());
        c.last_transition_time = None;
        set_condition(&mut st, c);
        set_condition(&mut st, condition("Progressing", "True", "ReplicaSetUpdated", "y".into()));
        let cur = get_condition(&st, "Progressing").cloned().unwrap_or_default();
        assert_eq!(cur.reason.as_deref(), Some("ReplicaSetUpdated"));
        assert_eq!(cur.last_transition_time, None);
        remove_condition(&mut st, "Progressing");
        assert!(get_condition(&st, "Progressing").is_none());
    }
}
