//! Where a DaemonSet's pods belong: node selection (nodeSelector, required node affinity,
//! taints versus tolerations, including the tolerations kube adds to every daemon pod) and
//! the pod pinned to one node.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSpec, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use crate::common::WorkloadError;
use crate::common::scheduling::{matches_node_selection, tolerates_node};

/// The tolerations the daemonset controller adds to every daemon pod.
pub(crate) fn daemon_tolerations(spec: &PodSpec) -> Vec<Toleration> {
    let t = |key: &str, effect: &str| Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some(effect.into()),
        ..Default::default()
    };
    let mut out = vec![
        t("node.kubernetes.io/not-ready", "NoExecute"),
        t("node.kubernetes.io/unreachable", "NoExecute"),
        t("node.kubernetes.io/disk-pressure", "NoSchedule"),
        t("node.kubernetes.io/memory-pressure", "NoSchedule"),
        t("node.kubernetes.io/pid-pressure", "NoSchedule"),
        t("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if spec.host_network == Some(true) {
        out.push(t("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    out
}

/// Whether the daemon pod of `ds` should run on `node` (kube's `NodeShouldRunDaemonPod`).
pub(crate) fn should_run(ds: &DaemonSet, node: &Node) -> bool {
    let spec = ds.spec.as_ref().and_then(|s| s.template.spec.clone()).unwrap_or_default();
    if spec.node_name.as_deref().is_some_and(|n| !n.is_empty() && n != node.name_any()) {
        return false;
    }
    if !matches_node_selection(&spec, node) {
        return false;
    }
    let mut tolerations = spec.tolerations.clone().unwrap_or_default();
    tolerations.extend(daemon_tolerations(&spec));
    tolerates_node(&tolerations, node)
}

/// The node a daemon pod runs on (spec.nodeName, else its `metadata.name` node affinity).
pub(crate) fn node_of(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_ref().filter(|n| !n.is_empty()) {
        return Some(n.clone());
    }
    let sel =
        spec.affinity.as_ref()?.node_affinity.as_ref()?.required_during_scheduling_ignored_during_execution.as_ref()?;
    sel.node_selector_terms.iter().flat_map(|t| t.match_fields.iter().flatten()).find_map(|r| {
        (r.key == "metadata.name" && r.operator == "In")
            .then(|| r.values.as_ref().and_then(|v| v.first().cloned()))
            .flatten()
    })
}

/// Builds the daemon pod of `ds` for `node`: the template plus the revision labels, the
/// daemon tolerations, a required `metadata.name` node affinity replacing the template's
/// (as kube does) and `spec.nodeName` bound directly.
pub(crate) fn new_pod(ds: &DaemonSet, node: &str, hash: &str) -> Result<Pod, WorkloadError> {
    let owner =
        opkit::owner::controller_reference(ds).ok_or_else(|| WorkloadError::Invalid("DaemonSet has no uid".into()))?;
    let template = ds.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    let mut labels = tmeta.labels.unwrap_or_default();
    labels.insert("controller-revision-hash".into(), hash.into());
    labels.insert("pod-template-generation".into(), ds.metadata.generation.unwrap_or(1).to_string());
    let mut spec = template.spec.unwrap_or_default();
    let mut tolerations = spec.tolerations.take().unwrap_or_default();
    for t in daemon_tolerations(&spec) {
        if !tolerations.iter().any(|x| x.key == t.key && x.effect == t.effect) {
            tolerations.push(t);
        }
    }
    spec.tolerations = Some(tolerations);
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let na = affinity.node_affinity.get_or_insert_with(NodeAffinity::default);
    na.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![node.to_string()]),
            }]),
        }],
    });
    spec.node_name = Some(node.to_string());
    Ok(Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", ds.name_any())),
            namespace: ds.namespace(),
            labels: Some(labels),
            annotations: tmeta.annotations,
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, labels: serde_json::Value, taints: serde_json::Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}}))
            .expect("test object")
    }

    fn ds(template_spec: serde_json::Value) -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"name": "agent", "namespace": "kube-system", "uid": "u", "generation": 2},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": {"metadata": {"labels": {"app": "a"}}, "spec": template_spec}}
        }))
        .expect("test object")
    }

    #[test]
    fn selects_nodes_by_labels_affinity_and_taints() {
        let plain = ds(json!({"containers": [{"name": "c"}]}));
        let n1 = node("n1", json!({"disk": "ssd"}), json!([]));
        let tainted = node("n2", json!({}), json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]));
        let cordoned =
            node("n3", json!({}), json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]));
        assert!(should_run(&plain, &n1));
        assert!(!should_run(&plain, &tainted));
        assert!(should_run(&plain, &cordoned));
        let tolerant = ds(
            json!({"containers": [{"name": "c"}], "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]}),
        );
        assert!(should_run(&tolerant, &tainted));
        let picky = ds(json!({"containers": [{"name": "c"}], "nodeSelector": {"disk": "ssd"}}));
        assert!(should_run(&picky, &n1));
        assert!(!should_run(&picky, &cordoned));
        let aff = ds(
            json!({"containers": [{"name": "c"}], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}]}}}}),
        );
        assert!(!should_run(&aff, &n1));
        assert!(should_run(&aff, &cordoned));
    }

    #[test]
    fn pod_is_pinned_to_its_node() {
        let d = ds(json!({"containers": [{"name": "c"}]}));
        let pod = new_pod(&d, "n7", "abc").expect("test object");
        assert_eq!(node_of(&pod).as_deref(), Some("n7"));
        let labels = pod.metadata.labels.clone().expect("test object");
        assert_eq!(labels["controller-revision-hash"], "abc");
        assert_eq!(labels["pod-template-generation"], "2");
        let mut unbound = pod.clone();
        if let Some(s) = unbound.spec.as_mut() {
            s.node_name = None;
        }
        assert_eq!(node_of(&unbound).as_deref(), Some("n7"));
        assert!(
            pod.spec
                .and_then(|s| s.tolerations)
                .expect("test object")
                .iter()
                .any(|t| t.key.as_deref() == Some("node.kubernetes.io/unschedulable"))
        );
    }
}
