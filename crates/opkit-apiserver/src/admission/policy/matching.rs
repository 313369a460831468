//! Which requests a policy or binding applies to (kube's `matching.Matcher`): resource
//! rules with `matchPolicy`, exclusions, and the namespace and object selectors.

use serde_json::Value;

use super::model::{MatchResources, Rule};
use crate::admission::Operation;

/// The parts of a request that matching reads.
pub(crate) struct Request<'a> {
    /// The operation.
    pub operation: Operation,
    /// The resource's group.
    pub group: &'a str,
    /// The requested version.
    pub version: &'a str,
    /// The resource.
    pub resource: &'a str,
    /// The subresource written, if any.
    pub subresource: Option<&'a str>,
    /// The object's name.
    pub name: &'a str,
    /// Whether the resource is namespaced.
    pub namespaced: bool,
    /// The other versions the same resource is served at (for `matchPolicy: Equivalent`).
    pub other_versions: Vec<&'a str>,
    /// The labels of the object (for a delete, of the object deleted).
    pub object_labels: Option<&'a serde_json::Map<String, Value>>,
    /// The labels of the request's namespace (of the object itself for a Namespace);
    /// None for a cluster-scoped request.
    pub namespace_labels: Option<Option<&'a serde_json::Map<String, Value>>>,
}

fn listed(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == "*" || v == value)
}

/// Whether a `resources` entry names the resource and subresource.
fn names_resource(entry: &str, resource: &str, subresource: Option<&str>) -> bool {
    if entry == "*/*" {
        return true;
    }
    let (res, sub) = match entry.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (entry, None),
    };
    let res_ok = res == "*" || res == resource;
    let sub_ok = match (sub, subresource) {
        (None, None) => true,
        (Some("*"), Some(_)) => true,
        (Some(s), Some(want)) => s == want,
        _ => false,
    };
    res_ok && sub_ok
}

fn rule_matches(rule: &Rule, req: &Request<'_>, version: &str) -> bool {
    listed(&rule.operations, req.operation.as_str())
        && listed(&rule.api_groups, req.group)
        && listed(&rule.api_versions, version)
        && rule.resources.iter().any(|r| names_resource(r, req.resource, req.subresource))
        && (rule.resource_names.is_empty() || rule.resource_names.iter().any(|n| n == req.name))
        && match rule.scope.as_str() {
            "Cluster" => !req.namespaced,
            "Namespaced" => req.namespaced,
            _ => true,
        }
}

/// The version a rule list matches the request at: its own, or with
/// `matchPolicy: Equivalent` another version of the same resource.
fn rules_match<'a>(rules: &[Rule], exact: bool, req: &Request<'a>) -> Option<&'a str> {
    if rules.iter().any(|r| rule_matches(r, req, req.version)) {
        return Some(req.version);
    }
    if exact {
        return None;
    }
    req.other_versions.iter().copied().find(|v| rules.iter().any(|r| rule_matches(r, req, v)))
}

/// Whether `m` applies to the request; with resource rules, at which version
/// (`request.resource` / `request.kind` name that version). Without resource rules (a
/// binding's `matchResources` may have none) only the selectors narrow.
pub(crate) fn matches<'a>(m: &MatchResources, req: &Request<'a>) -> Option<&'a str> {
    if let Some(ns_labels) = req.namespace_labels
        && !m.namespace_selector.matches(ns_labels)
    {
        return None;
    }
    if !m.object_selector.matches(req.object_labels) {
        return None;
    }
    if rules_match(&m.exclude_resource_rules, m.exact, req).is_some() {
        return None;
    }
    if m.resource_rules.is_empty() {
        return Some(req.version);
    }
    rules_match(&m.resource_rules, m.exact, req)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_entries_match_as_kube_does() {
        assert!(names_resource("*/*", "pods", Some("status")));
        assert!(names_resource("*", "pods", None));
        assert!(!names_resource("*", "pods", Some("status")));
        assert!(names_resource("pods/*", "pods", Some("status")));
        assert!(!names_resource("pods/*", "pods", None));
        assert!(names_resource("*/status", "deployments", Some("status")));
        assert!(!names_resource("deployments", "deployments", Some("scale")));
    }
}
