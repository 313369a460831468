//! Resource quota usage (kube's `pkg/quota/v1/evaluator/core` and the generic object
//! count evaluator): what one object charges against a ResourceQuota's `hard` names, and
//! which quotas (by `scopes`) it counts for. The API server's ResourceQuota admission and
//! the quota controller both count with it.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::quantity::{format_milli, parse_milli};

/// Usage by quota resource name (`pods`, `requests.cpu`, `count/deployments.apps`), in
/// milli-units (a count of 1 is 1000).
pub type Usage = BTreeMap<String, i128>;

/// One object, counted.
const ONE: i128 = 1000;

/// The core resources kube also counts under their bare name (`configmaps`).
const LEGACY_COUNTS: [&str; 7] =
    ["pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps", "persistentvolumeclaims"];

/// A pod that has finished (Succeeded or Failed) no longer counts.
fn pod_is_terminal(pod: &Value) -> bool {
    matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
}

/// The quota name counting objects of a resource: `count/pods`, `count/deployments.apps`.
pub fn count_name(group: &str, resource: &str) -> String {
    if group.is_empty() { format!("count/{resource}") } else { format!("count/{resource}.{group}") }
}

/// What `obj` (of `group`/`resource`) charges.
pub fn usage(group: &str, resource: &str, obj: &Value) -> Usage {
    let mut usage = Usage::new();
    if group.is_empty() && resource == "pods" && pod_is_terminal(obj) {
        return usage;
    }
    usage.insert(count_name(group, resource), ONE);
    if group.is_empty() && LEGACY_COUNTS.contains(&resource) {
        usage.insert(resource.to_string(), ONE);
    }
    match (group, resource) {
        ("", "pods") => pod_usage(obj, &mut usage),
        ("", "services") => {
            let kind = obj["spec"]["type"].as_str().unwrap_or("ClusterIP");
            if kind == "LoadBalancer" {
                usage.insert("services.loadbalancers".into(), ONE);
            }
            if kind == "LoadBalancer" || kind == "NodePort" {
                let ports = obj["spec"]["ports"].as_array().map_or(0, Vec::len);
                usage.insert("services.nodeports".into(), i128::try_from(ports).unwrap_or(0) * ONE);
            }
        }
        ("", "persistentvolumeclaims") => {
            let storage = obj["spec"]["resources"]["requests"]["storage"].as_str().and_then(parse_milli).unwrap_or(0);
            usage.insert("requests.storage".into(), storage);
            if let Some(class) = obj["spec"]["storageClassName"].as_str().filter(|c| !c.is_empty()) {
                let prefix = format!("{class}.storageclass.storage.k8s.io/");
                usage.insert(format!("{prefix}requests.storage"), storage);
                usage.insert(format!("{prefix}persistentvolumeclaims"), ONE);
            }
        }
        _ => {}
    }
    usage
}

/// A pod's compute: the sum over its containers, at least its largest init container's,
/// as `requests.<name>` (and the bare `cpu`, `memory`, `ephemeral-storage`) and
/// `limits.<name>`.
fn pod_usage(pod: &Value, usage: &mut Usage) {
    for part in ["requests", "limits"] {
        for (name, amount) in pod_resources(pod, part) {
            if part == "requests" && matches!(name.as_str(), "cpu" | "memory" | "ephemeral-storage") {
                usage.insert(name.clone(), amount);
            }
            usage.insert(format!("{part}.{name}"), amount);
        }
    }
}

/// A pod's `requests` or `limits` (kube's `PodRequests` without overhead).
pub fn pod_resources(pod: &Value, part: &str) -> BTreeMap<String, i128> {
    let mut sum: BTreeMap<String, i128> = BTreeMap::new();
    let list = |c: &Value| -> Vec<(String, i128)> {
        c["resources"][part]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), parse_milli(v.as_str()?)?)))
            .collect()
    };
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        for (k, v) in list(c) {
            *sum.entry(k).or_default() += v;
        }
    }
    for c in pod["spec"]["initContainers"].as_array().into_iter().flatten() {
        for (k, v) in list(c) {
            let e = sum.entry(k).or_default();
            *e = (*e).max(v);
        }
    }
    sum
}

/// The quota names of compute a pod's containers must each state when a quota limits
/// them (kube's pod evaluator `Constraints`), with the container field that states it.
const CONSTRAINED: [(&str, &str, &str); 6] = [
    ("cpu", "requests", "cpu"),
    ("memory", "requests", "memory"),
    ("requests.cpu", "requests", "cpu"),
    ("requests.memory", "requests", "memory"),
    ("limits.cpu", "limits", "cpu"),
    ("limits.memory", "limits", "memory"),
];

/// kube's pod `Constraints`: for the constrained names in `hard`, the containers that do
/// not state them, as `must specify limits.cpu for: a,b; limits.memory for: a`; None
/// when all do.
pub fn pod_missing_constraints<'a>(pod: &Value, hard: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let hard: Vec<&str> = hard.into_iter().collect();
    let mut missing: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (name, part, field) in CONSTRAINED {
        if !hard.contains(&name) {
            continue;
        }
        for list in ["containers", "initContainers"] {
            for c in pod["spec"][list].as_array().into_iter().flatten() {
                if c["resources"][part][field].is_null() {
                    missing.entry(name).or_default().push(c["name"].as_str().unwrap_or_default().to_string());
                }
            }
        }
    }
    if missing.is_empty() {
        return None;
    }
    let parts: Vec<String> = missing
        .into_iter()
        .map(|(name, mut containers)| {
            containers.sort();
            containers.dedup();
            format!("{name} for: {}", containers.join(","))
        })
        .collect();
    Some(format!("must specify {}", parts.join("; ")))
}

/// Whether a quota with these `spec.scopes` counts `obj` (kube's `Terminating`,
/// `NotTerminating`, `BestEffort`, `NotBestEffort`; other scopes and scope selectors
/// are not known here, and such a quota counts nothing). Only pods have scopes.
pub fn in_scope(quota: &Value, group: &str, resource: &str, obj: &Value) -> bool {
    let scopes: Vec<&str> =
        quota["spec"]["scopes"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let selected = quota["spec"]["scopeSelector"]["matchExpressions"].as_array().is_some_and(|e| !e.is_empty());
    if scopes.is_empty() && !selected {
        return true;
    }
    if selected || !(group.is_empty() && resource == "pods") {
        return false;
    }
    let terminating = obj["spec"]["activeDeadlineSeconds"].as_i64().is_some();
    let best_effort = ["containers", "initContainers"].iter().all(|l| {
        obj["spec"][*l].as_array().into_iter().flatten().all(|c| {
            c["resources"]["requests"].as_object().is_none_or(|m| m.is_empty())
                && c["resources"]["limits"].as_object().is_none_or(|m| m.is_empty())
        })
    });
    scopes.iter().all(|s| match *s {
        "Terminating" => terminating,
        "NotTerminating" => !terminating,
        "BestEffort" => best_effort,
        "NotBestEffort" => !best_effort,
        _ => false,
    })
}

/// Prints an amount of quota resource `name` as kube prints a quantity: memory and
/// storage with binary suffixes, counts as plain numbers.
pub fn format_amount(name: &str, milli: i128) -> String {
    format_milli(milli, name.contains("memory") || name.contains("storage"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pods_charge_counts_and_compute() {
        let pod = json!({"spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1"}}},
                {"name": "b", "resources": {"requests": {"cpu": "200m"}}},
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "500m"}}}],
        }});
        let u = usage("", "pods", &pod);
        assert_eq!(u["pods"], 1000);
        assert_eq!(u["count/pods"], 1000);
        assert_eq!(u["requests.cpu"], 500);
        assert_eq!(u["cpu"], 500);
        assert_eq!(u["requests.memory"], 64 * 1024 * 1024 * 1000);
        assert_eq!(u["limits.cpu"], 1000);
        assert_eq!(format_amount("requests.memory", u["requests.memory"]), "64Mi");
        assert_eq!(
            pod_missing_constraints(&pod, ["limits.memory", "requests.cpu", "pods"]).as_deref(),
            Some("must specify limits.memory for: a,b,i")
        );
    }

    #[test]
    fn other_kinds_are_counted_by_name() {
        assert_eq!(usage("apps", "deployments", &json!({})), Usage::from([("count/deployments.apps".into(), 1000)]));
        let cm = usage("", "configmaps", &json!({}));
        assert_eq!((cm["configmaps"], cm["count/configmaps"]), (1000, 1000));
        assert!(usage("", "pods", &json!({"status": {"phase": "Succeeded"}})).is_empty());
    }
}
