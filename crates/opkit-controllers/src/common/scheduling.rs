//! Node selection shared by the scheduler and the DaemonSet controller (kube's
//! `component-helpers/scheduling/corev1`): tolerations versus taints, and whether a node
//! satisfies a pod's `nodeSelector` and required node affinity. Requirements are evaluated by
//! `opkit_apimachinery`'s selector operators.

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration};
use opkit_apimachinery::selector::Operator;

/// Whether `tol` tolerates `taint` (`Toleration.ToleratesTaint`).
pub(crate) fn tolerates(tol: &Toleration, taint: &Taint) -> bool {
    if tol.effect.as_deref().is_some_and(|e| !e.is_empty() && e != taint.effect) {
        return false;
    }
    if tol.key.as_deref().is_some_and(|k| !k.is_empty() && k != taint.key) {
        return false;
    }
    match tol.operator.as_deref().unwrap_or("") {
        "" | "Equal" => tol.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        "Exists" => true,
        _ => false,
    }
}

/// The node's taints that keep pods off it (`NoSchedule` and `NoExecute`).
pub(crate) fn scheduling_taints(node: &Node) -> impl Iterator<Item = &Taint> {
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_ref());
    taints.into_iter().flatten().filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
}

/// Whether `tolerations` tolerate every taint that keeps pods off `node`.
pub(crate) fn tolerates_node(tolerations: &[Toleration], node: &Node) -> bool {
    scheduling_taints(node).all(|taint| tolerations.iter().any(|t| tolerates(t, taint)))
}

fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = req.values.as_deref().unwrap_or_default();
    Operator::from_node_selector_operator(&req.operator).is_some_and(|op| op.evaluate(value, values))
}

/// Whether `node` matches one node selector term: every `matchExpressions` requirement on
/// its labels and every `matchFields` requirement (only `metadata.name` is supported). An
/// empty term matches no node.
pub(crate) fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.metadata.labels.as_ref();
    let name = node.metadata.name.as_deref();
    exprs.iter().all(|r| requirement_matches(r, labels.and_then(|l| l.get(&r.key)).map(String::as_str)))
        && fields.iter().all(|r| r.key == "metadata.name" && requirement_matches(r, name))
}

/// Whether `node` satisfies the pod spec's `nodeSelector` and required node affinity (any
/// of its terms).
pub(crate) fn matches_node_selection(spec: &PodSpec, node: &Node) -> bool {
    let labels = node.metadata.labels.as_ref();
    if !spec.node_selector.iter().flatten().all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v)) {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref());
    required.is_none_or(|r| r.node_selector_terms.iter().any(|t| term_matches(t, node)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn node() -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": "n1", "labels": {"disk": "ssd", "zone": "a", "cores": "8"}}}),
        )
        .expect("a valid node")
    }

    fn spec(v: Value) -> PodSpec {
        serde_json::from_value(v).expect("a valid pod spec")
    }

    fn required(terms: Value) -> PodSpec {
        spec(json!({"containers": [], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}))
    }

    #[test]
    fn node_selector_and_required_affinity() {
        let n = node();
        assert!(matches_node_selection(&spec(json!({"containers": [], "nodeSelector": {"disk": "ssd"}})), &n));
        assert!(!matches_node_selection(&spec(json!({"containers": [], "nodeSelector": {"disk": "hdd"}})), &n));
        let expr = |op: &str, vals: Value| {
            required(json!([{"matchExpressions": [{"key": "zone", "operator": op, "values": vals}]}]))
        };
        assert!(matches_node_selection(&expr("In", json!(["a", "b"])), &n));
        assert!(!matches_node_selection(&expr("NotIn", json!(["a"])), &n));
        assert!(matches_node_selection(&expr("Exists", json!([])), &n));
        assert!(!matches_node_selection(&expr("DoesNotExist", json!([])), &n));
        let cores =
            |op: &str| required(json!([{"matchExpressions": [{"key": "cores", "operator": op, "values": ["4"]}]}]));
        assert!(matches_node_selection(&cores("Gt"), &n));
        assert!(!matches_node_selection(&cores("Lt"), &n));
        let field =
            |op: &str| required(json!([{"matchFields": [{"key": "metadata.name", "operator": op, "values": ["n1"]}]}]));
        assert!(matches_node_selection(&field("In"), &n));
        assert!(!matches_node_selection(&field("NotIn"), &n));
        assert!(!matches_node_selection(&required(json!([{}])), &n), "an empty term matches no node");
        assert!(matches_node_selection(
            &required(json!([{}, {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}])),
            &n
        ));
    }

    #[test]
    fn taints_and_tolerations() {
        let taint = Taint {
            key: "dedicated".into(),
            value: Some("gpu".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let t = |v: Value| -> Toleration { serde_json::from_value(v).expect("a valid toleration") };
        assert!(tolerates(&t(json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"})), &taint));
        assert!(tolerates(&t(json!({"key": "dedicated", "operator": "Exists"})), &taint));
        assert!(tolerates(&t(json!({"operator": "Exists"})), &taint));
        assert!(!tolerates(&t(json!({"key": "dedicated", "value": "cpu"})), &taint));
        assert!(!tolerates(&t(json!({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"})), &taint));
        assert!(!tolerates(&t(json!({"key": "dedicated", "operator": "Frob"})), &taint));
        let mut n = node();
        n.spec = Some(k8s_openapi::api::core::v1::NodeSpec { taints: Some(vec![taint]), ..Default::default() });
        assert!(!tolerates_node(&[], &n));
        assert!(tolerates_node(&[t(json!({"key": "dedicated", "operator": "Exists"}))], &n));
        assert!(tolerates_node(&[], &node()));
    }
}
