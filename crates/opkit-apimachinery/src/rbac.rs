//! Aggregated ClusterRoles: the rules of a ClusterRole with an `aggregationRule` are the
//! rules of every other ClusterRole its selectors match, in name order, each rule once
//! (kube's clusterrole-aggregation controller).

use k8s_openapi::api::rbac::v1::{AggregationRule, ClusterRole, PolicyRule};

use crate::selector::LabelSelector;

/// The rules `rule` aggregates from `roles` for the ClusterRole called `name` (which never
/// aggregates itself). A selector that does not parse selects nothing.
pub fn aggregated_rules(name: &str, rule: &AggregationRule, roles: &[ClusterRole]) -> Vec<PolicyRule> {
    let selectors: Vec<LabelSelector> = rule
        .cluster_role_selectors
        .iter()
        .flatten()
        .map(|s| LabelSelector::from_k8s(Some(s)).unwrap_or_else(|_| LabelSelector::nothing()))
        .collect();
    let mut selected: Vec<&ClusterRole> = roles
        .iter()
        .filter(|r| r.metadata.name.as_deref() != Some(name))
        .filter(|r| selectors.iter().any(|s| s.matches_labels(r.metadata.labels.as_ref())))
        .collect();
    selected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut rules: Vec<PolicyRule> = Vec::new();
    for rule in selected.into_iter().flat_map(|r| r.rules.iter().flatten()) {
        if !rules.contains(rule) {
            rules.push(rule.clone());
        }
    }
    rules
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector as K8sSelector, ObjectMeta};

    use super::*;

    fn role(name: &str, label: Option<&str>, verbs: &[&str]) -> ClusterRole {
        ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: label.map(|l| BTreeMap::from([(l.to_string(), "true".to_string())])),
                ..Default::default()
            },
            rules: Some(vec![PolicyRule {
                api_groups: Some(vec!["".into()]),
                resources: Some(vec!["pods".into()]),
                verbs: verbs.iter().map(|v| v.to_string()).collect(),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn aggregates_matching_roles_once_in_name_order() {
        let rule = AggregationRule {
            cluster_role_selectors: Some(vec![K8sSelector {
                match_labels: Some(BTreeMap::from([("agg".to_string(), "true".to_string())])),
                ..Default::default()
            }]),
        };
        let roles = [
            role("b", Some("agg"), &["list"]),
            role("a", Some("agg"), &["get"]),
            role("c", None, &["delete"]),
            role("d", Some("agg"), &["get"]),
        ];
        let rules = aggregated_rules("view", &rule, &roles);
        let verbs: Vec<&str> = rules.iter().map(|r| r.verbs[0].as_str()).collect();
        assert_eq!(verbs, ["get", "list"]);
    }
}
