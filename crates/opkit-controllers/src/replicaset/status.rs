//! A ReplicaSet's status from the pods it owns: replicas, fullyLabeledReplicas,
//! readyReplicas, availableReplicas (Ready for `minReadySeconds`), observedGeneration and
//! the ReplicaFailure condition, set when creating or deleting pods failed.

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::manage::ManageError;
use crate::common::pods::{is_available, is_ready};

/// The status `rs` should report, given its active `owned` pods and the outcome of the
/// last attempt to add or remove pods.
pub(super) fn calculate(rs: &ReplicaSet, owned: &[Pod], err: Option<&ManageError>, now: Timestamp) -> ReplicaSetStatus {
    let spec = rs.spec.as_ref();
    let template_labels =
        spec.and_then(|s| s.template.as_ref()).and_then(|t| t.metadata.as_ref()).and_then(|m| m.labels.clone());
    let min_ready = spec.and_then(|s| s.min_ready_seconds).unwrap_or(0);
    let fully_labeled = owned
        .iter()
        .filter(|p| {
            template_labels.as_ref().is_none_or(|want| {
                let have = p.metadata.labels.as_ref();
                want.iter().all(|(k, v)| have.and_then(|h| h.get(k)) == Some(v))
            })
        })
        .count();
    let ready = owned.iter().filter(|p| is_ready(p)).count();
    let available = owned.iter().filter(|p| is_available(p, min_ready, now)).count();
    let old = rs.status.clone().unwrap_or_default();
    let mut conditions = old.conditions.clone().unwrap_or_default();
    let has_failure = conditions.iter().any(|c| c.type_ == "ReplicaFailure");
    match err {
        Some(e) if !has_failure => conditions.push(ReplicaSetCondition {
            type_: "ReplicaFailure".into(),
            status: "True".into(),
            reason: Some(e.reason().into()),
            message: Some(e.to_string()),
            last_transition_time: Some(Time(now)),
        }),
        None if has_failure => conditions.retain(|c| c.type_ != "ReplicaFailure"),
        _ => {}
    }
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    // `replicas` is always written; the other counts are `omitempty` in kube's type, so a
    // zero is left out.
    let counted = |n: usize| (n != 0).then(|| count(n));
    ReplicaSetStatus {
        replicas: count(owned.len()),
        fully_labeled_replicas: counted(fully_labeled),
        ready_replicas: counted(ready),
        available_replicas: counted(available),
        observed_generation: rs.metadata.generation.or(old.observed_generation),
        conditions: (!conditions.is_empty()).then_some(conditions),
        terminating_replicas: old.terminating_replicas,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSetSpec;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn labels(kv: &[(&str, &str)]) -> Option<std::collections::BTreeMap<String, String>> {
        Some(kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    fn pod(l: &[(&str, &str)], ready_at: Option<i64>) -> Pod {
        Pod {
            metadata: ObjectMeta { labels: labels(l), ..ObjectMeta::default() },
            spec: None,
            status: Some(PodStatus {
                conditions: ready_at.map(|t| {
                    vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(Time(Timestamp::from_second(t).unwrap())),
                        ..PodCondition::default()
                    }]
                }),
                ..PodStatus::default()
            }),
        }
    }

    #[test]
    fn counts_and_failure_condition() {
        let rs = ReplicaSet {
            metadata: ObjectMeta { generation: Some(4), ..ObjectMeta::default() },
            spec: Some(ReplicaSetSpec {
                min_ready_seconds: Some(10),
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: labels(&[("app", "web"), ("tier", "fe")]),
                        ..ObjectMeta::default()
                    }),
                    spec: None,
                }),
                ..ReplicaSetSpec::default()
            }),
            status: None,
        };
        let owned = vec![
            pod(&[("app", "web"), ("tier", "fe")], Some(100)),
            pod(&[("app", "web")], Some(195)),
            pod(&[("app", "web"), ("tier", "fe")], None),
        ];
        let now = Timestamp::from_second(200).unwrap();
        let s = calculate(&rs, &owned, Some(&ManageError::Create("quota".into())), now);
        assert_eq!(s.replicas, 3);
        assert_eq!(s.fully_labeled_replicas, Some(2));
        assert_eq!(s.ready_replicas, Some(2));
        assert_eq!(s.available_replicas, Some(1));
        assert_eq!(s.observed_generation, Some(4));
        let conds = s.conditions.clone().unwrap();
        assert_eq!(conds[0].reason.as_deref(), Some("FailedCreate"));
        let rs = ReplicaSet { status: Some(s), ..rs };
        assert_eq!(calculate(&rs, &owned, None, now).conditions, None);
    }
}
