//! The scheduler's filters (kube-scheduler's NodeUnschedulable, TaintToleration,
//! NodeAffinity and NodeResourcesFit plugins, in that order), least-allocated scoring, and
//! the "0/3 nodes are available: …" message of a pod that fits nowhere.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};

use super::resources::Resources;
use crate::common::scheduling::{matches_node_selection, tolerates, tolerates_node};

/// Why a node cannot take a pod (kube-scheduler's reason strings).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Reason {
    /// The node is cordoned.
    Unschedulable,
    /// A NoSchedule/NoExecute taint the pod does not tolerate.
    Taint,
    /// nodeSelector or required node affinity does not match.
    Affinity,
    /// The node lacks a resource (`cpu`, `memory`, `pods`, …).
    Insufficient(String),
}

impl Reason {
    /// The reason as kube-scheduler words it.
    pub(crate) fn message(&self) -> String {
        match self {
            Reason::Unschedulable => "node(s) were unschedulable".into(),
            Reason::Taint => "node(s) had untolerated taint(s)".into(),
            Reason::Affinity => "node(s) didn't match Pod's node affinity/selector".into(),
            Reason::Insufficient(r) if r == "pods" => "Too many pods".into(),
            Reason::Insufficient(r) => format!("Insufficient {r}"),
        }
    }
}

fn pod_tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or_default()
}

/// What is already placed on a node.
#[derive(Debug, Clone, Default)]
pub(crate) struct Usage {
    /// Summed requests of its pods.
    pub requested: Resources,
    /// Summed scoring requests (cpu, memory) of its pods.
    pub score: (i128, i128),
    /// How many pods it runs.
    pub pods: i128,
}

/// Checks whether `pod` (requesting `req`) fits `node`, which already holds `usage`.
/// Returns the reasons it does not (empty: it fits).
pub(crate) fn filter(pod: &Pod, req: &Resources, node: &Node, usage: &Usage) -> Vec<Reason> {
    let spec = node.spec.clone().unwrap_or_default();
    if spec.unschedulable == Some(true) {
        let cordon =
            Taint { key: "node.kubernetes.io/unschedulable".into(), effect: "NoSchedule".into(), ..Default::default() };
        if !pod_tolerations(pod).iter().any(|t| tolerates(t, &cordon)) {
            return vec![Reason::Unschedulable];
        }
    }
    if !tolerates_node(pod_tolerations(pod), node) {
        return vec![Reason::Taint];
    }
    if !pod.spec.as_ref().is_none_or(|s| matches_node_selection(s, node)) {
        return vec![Reason::Affinity];
    }
    let alloc = super::resources::allocatable(node);
    let mut reasons = Vec::new();
    if let Some(max) = alloc.get("pods")
        && usage.pods * 1000 + 1000 > *max
    {
        reasons.push(Reason::Insufficient("pods".into()));
    }
    for (name, amount) in req {
        if *amount <= 0 {
            continue;
        }
        let have = alloc.get(name).copied().unwrap_or(0);
        let used = usage.requested.get(name).copied().unwrap_or(0);
        if used + amount > have {
            reasons.push(Reason::Insufficient(name.clone()));
        }
    }
    reasons
}

/// The least-allocated score (0–100) of placing a pod needing `extra` (cpu, memory) on
/// `node` holding `usage`.
pub(crate) fn score(node: &Node, usage: &Usage, extra: (i128, i128)) -> i128 {
    let alloc = super::resources::allocatable(node);
    let part = |cap: Option<&i128>, used: i128| match cap {
        Some(c) if *c > 0 && used <= *c => (c - used) * 100 / c,
        _ => 0,
    };
    (part(alloc.get("cpu"), usage.score.0 + extra.0) + part(alloc.get("memory"), usage.score.1 + extra.1)) / 2
}

/// kube-scheduler's message for a pod no node can take, e.g. `0/3 nodes are available:
/// 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are
/// available: 3 Preemption is not helpful for scheduling.`
pub(crate) fn unschedulable_message(total: usize, per_node: &[Vec<Reason>]) -> String {
    if total == 0 {
        return "no nodes available to schedule pods".into();
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let (mut victims, mut hopeless) = (0, 0);
    for reasons in per_node {
        for r in reasons {
            *counts.entry(r.message()).or_insert(0) += 1;
        }
        if !reasons.is_empty() && reasons.iter().all(|r| matches!(r, Reason::Insufficient(_))) {
            victims += 1;
        } else {
            hopeless += 1;
        }
    }
    // Sorted as strings, counts included, as kube-scheduler's FitError does.
    let mut reasons: Vec<String> = counts.iter().map(|(m, n)| format!("{n} {m}")).collect();
    reasons.sort();
    let mut preemption: Vec<String> = Vec::new();
    if victims > 0 {
        preemption.push(format!("{victims} No preemption victims found for incoming pod"));
    }
    if hopeless > 0 {
        preemption.push(format!("{hopeless} Preemption is not helpful for scheduling"));
    }
    preemption.sort();
    format!(
        "0/{total} nodes are available: {}. preemption: 0/{total} nodes are available: {}.",
        reasons.join(", "),
        preemption.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(v: serde_json::Value) -> Node {
        serde_json::from_value(v).expect("test node")
    }
    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).expect("test pod")
    }
    fn big_node() -> Node {
        node(json!({"metadata": {"name": "n1", "labels": {"disk": "ssd", "zone": "a"}},
            "status": {"allocatable": {"cpu": "2", "memory": "1Gi", "pods": "2"}}}))
    }

    #[test]
    fn taints_cordons_and_affinity() {
        let taint = Taint {
            key: "dedicated".into(),
            value: Some("gpu".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let mut n = big_node();
        n.spec = Some(k8s_openapi::api::core::v1::NodeSpec { taints: Some(vec![taint]), ..Default::default() });
        let p = pod(json!({"spec": {"containers": []}}));
        assert_eq!(filter(&p, &Resources::new(), &n, &Usage::default()), vec![Reason::Taint]);
        n.spec = Some(k8s_openapi::api::core::v1::NodeSpec { unschedulable: Some(true), ..Default::default() });
        assert_eq!(filter(&p, &Resources::new(), &n, &Usage::default()), vec![Reason::Unschedulable]);
        let picky = pod(json!({"spec": {"containers": [], "nodeSelector": {"disk": "hdd"}}}));
        assert_eq!(filter(&picky, &Resources::new(), &big_node(), &Usage::default()), vec![Reason::Affinity]);
    }

    #[test]
    fn resources_fit() {
        let n = big_node();
        let p = pod(json!({"spec": {"containers": []}}));
        let req: Resources = [("cpu".to_string(), 1500i128)].into();
        assert!(filter(&p, &req, &n, &Usage::default()).is_empty());
        let used = Usage { requested: [("cpu".to_string(), 1000i128)].into(), pods: 2, ..Default::default() };
        assert_eq!(
            filter(&p, &req, &n, &used),
            vec![Reason::Insufficient("pods".into()), Reason::Insufficient("cpu".into())]
        );
        assert!(score(&n, &Usage::default(), (0, 0)) > score(&n, &used, (0, 0)) || used.score == (0, 0));
    }

    #[test]
    fn message_like_kube() {
        let m = unschedulable_message(
            3,
            &[vec![Reason::Affinity], vec![Reason::Affinity], vec![Reason::Insufficient("cpu".into())]],
        );
        assert_eq!(
            m,
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector. \
             preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, \
             2 Preemption is not helpful for scheduling."
        );
        assert_eq!(unschedulable_message(0, &[]), "no nodes available to schedule pods");
        let m = unschedulable_message(3, &[vec![Reason::Affinity], vec![Reason::Affinity], vec![Reason::Taint]]);
        assert!(m.starts_with("0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't"), "{m}");
    }
}
