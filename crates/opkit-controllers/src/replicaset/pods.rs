//! The pods a ReplicaSet creates and deletes: building a pod from the template, and the
//! order in which surplus pods are deleted (kube's `ActivePodsWithRanks`).

use std::cmp::Ordering;
use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::common::pods::{is_active, is_ready, ready_since};

/// The annotation whose integer value makes a pod cheaper (lower) or dearer to delete.
pub(crate) const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The prefix for pods' `generateName`: the owner's name and a dash.
pub(crate) fn generate_name_prefix(owner: &str) -> String {
    // Names are limited to 253 characters; generateName adds 5.
    let mut prefix = format!("{owner}-");
    if prefix.len() > 248 {
        prefix.truncate(248);
    }
    prefix
}

/// A pod built from `template` (labels, annotations, finalizers, spec), owned by `owner`.
pub(crate) fn pod_from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    prefix: &str,
    owner: OwnerReference,
) -> Pod {
    let tmeta = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(prefix.to_string()),
            namespace: Some(namespace.to_string()),
            labels: tmeta.labels,
            annotations: tmeta.annotations,
            finalizers: tmeta.finalizers,
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

fn phase_rank(pod: &Pod) -> u8 {
    match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Pending") | None => 0,
        Some("Unknown") => 1,
        Some("Running") => 2,
        _ => 3,
    }
}

fn deletion_cost(pod: &Pod) -> i64 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST))
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or(0)
}

fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
        .unwrap_or(0)
}

fn node_of(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("")
}

/// Compares two pods for deletion: `Less` means `a` is deleted first. Unscheduled before
/// scheduled, Pending before Unknown before Running, not Ready before Ready, lower
/// deletion cost first, pods on crowded nodes (higher `rank`) first, more recently Ready
/// first, more restarts first, newer before older.
pub(crate) fn deletion_order(a: &Pod, rank_a: usize, b: &Pod, rank_b: usize) -> Ordering {
    let (na, nb) = (node_of(a).is_empty(), node_of(b).is_empty());
    if na != nb {
        return if na { Ordering::Less } else { Ordering::Greater };
    }
    let by_phase = phase_rank(a).cmp(&phase_rank(b));
    if by_phase != Ordering::Equal {
        return by_phase;
    }
    let (ra, rb) = (is_ready(a), is_ready(b));
    if ra != rb {
        return if ra { Ordering::Greater } else { Ordering::Less };
    }
    let by_cost = deletion_cost(a).cmp(&deletion_cost(b));
    if by_cost != Ordering::Equal {
        return by_cost;
    }
    if rank_a != rank_b {
        return rank_b.cmp(&rank_a);
    }
    if ra && rb {
        let (ta, tb) = (ready_since(a).flatten(), ready_since(b).flatten());
        if ta != tb {
            // More recently ready (later time) first; unknown times count as newest.
            return match (ta, tb) {
                (None, _) => Ordering::Less,
                (_, None) => Ordering::Greater,
                (Some(x), Some(y)) => y.cmp(&x),
            };
        }
    }
    let by_restarts = max_restarts(b).cmp(&max_restarts(a));
    if by_restarts != Ordering::Equal {
        return by_restarts;
    }
    let (ca, cb) =
        (a.metadata.creation_timestamp.as_ref().map(|t| t.0), b.metadata.creation_timestamp.as_ref().map(|t| t.0));
    match (ca, cb) {
        (None, None) => Ordering::Equal,
        (None, _) => Ordering::Less,
        (_, None) => Ordering::Greater,
        (Some(x), Some(y)) => y.cmp(&x),
    }
}

/// Picks the `count` pods to delete first from `pods`, ranking pods higher the more of
/// `related` pods share their node.
pub(crate) fn pods_to_delete<'a>(pods: &[&'a Pod], related: &[&Pod], count: usize) -> Vec<&'a Pod> {
    let mut per_node: HashMap<&str, usize> = HashMap::new();
    for p in related {
        if is_active(p) {
            *per_node.entry(node_of(p)).or_default() += 1;
        }
    }
    let mut ranked: Vec<(&Pod, usize)> =
        pods.iter().map(|p| (*p, per_node.get(node_of(p)).copied().unwrap_or(0))).collect();
    ranked.sort_by(|(a, ra), (b, rb)| deletion_order(a, *ra, b, *rb));
    ranked.into_iter().take(count).map(|(p, _)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn pod(name: &str, node: &str, phase: &str, ready_at: Option<i64>, created: i64) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                creation_timestamp: Some(Time(Timestamp::from_second(created).unwrap())),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec { node_name: (!node.is_empty()).then(|| node.to_string()), ..PodSpec::default() }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
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
    fn deletes_unscheduled_then_not_ready_then_newer() {
        let ready_old = pod("ready-old", "n1", "Running", Some(100), 10);
        let ready_new = pod("ready-new", "n2", "Running", Some(100), 20);
        let unscheduled = pod("unscheduled", "", "Pending", None, 5);
        let not_ready = pod("not-ready", "n3", "Running", None, 1);
        let pods = vec![&ready_old, &ready_new, &unscheduled, &not_ready];
        let names: Vec<_> =
            pods_to_delete(&pods, &[], 4).iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect();
        assert_eq!(names, ["unscheduled", "not-ready", "ready-new", "ready-old"]);
        assert_eq!(pods_to_delete(&pods, &[], 1).len(), 1);
    }

    #[test]
    fn crowded_nodes_and_deletion_cost() {
        let a = pod("a", "n1", "Running", Some(100), 10);
        let b = pod("b", "n1", "Running", Some(100), 10);
        let c = pod("c", "n2", "Running", Some(100), 30);
        let pods = vec![&c, &a, &b];
        let first = pods_to_delete(&pods, &pods, 1);
        assert_ne!(first[0].metadata.name.as_deref(), Some("c"));
        let mut cheap = c.clone();
        cheap.metadata.annotations = Some([(POD_DELETION_COST.to_string(), "-5".to_string())].into());
        let pods = vec![&a, &b, &cheap];
        assert_eq!(pods_to_delete(&pods, &pods, 1)[0].metadata.name.as_deref(), Some("c"));
    }
}
