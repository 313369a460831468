//! kube-apiserver's API Priority and Fairness configuration
//! (`apiserver/pkg/apis/flowcontrol/bootstrap`): the mandatory `exempt` and `catch-all`
//! PriorityLevelConfigurations and FlowSchemas and the suggested ones (system, node-high,
//! leader-election, workload-high, workload-low, global-default and their schemas),
//! created at start-up when missing, with the `apf.kubernetes.io/autoupdate-spec`
//! annotation. An object whose annotation is `"true"` gets the current spec back at
//! start-up, as kube's configuration ensurer does; a mandatory object deleted while the
//! server runs comes back at the next start.

use serde_json::{Value, json};

use crate::error::ApiResult;
use crate::registry::{Registry, Subresource, WriteOptions};

const AUTO_UPDATE: &str = "apf.kubernetes.io/autoupdate-spec";
const MASTERS: &str = "system:masters";
const AUTHENTICATED: &str = "system:authenticated";
const UNAUTHENTICATED: &str = "system:unauthenticated";
const NODES: &str = "system:nodes";
const CONTROLLER_MANAGER: &str = "system:kube-controller-manager";
const SCHEDULER: &str = "system:kube-scheduler";

fn group(name: &str) -> Value {
    json!({"kind": "Group", "group": {"name": name}})
}

fn user(name: &str) -> Value {
    json!({"kind": "User", "user": {"name": name}})
}

fn kube_system_account(name: &str) -> Value {
    json!({"kind": "ServiceAccount", "serviceAccount": {"name": name, "namespace": "kube-system"}})
}

fn resource_rule(verbs: &[&str], groups: &[&str], resources: &[&str], namespaces: &[&str], cluster: bool) -> Value {
    let mut rule = json!({"verbs": verbs, "apiGroups": groups, "resources": resources, "namespaces": namespaces});
    if cluster {
        rule["clusterScope"] = json!(true);
    }
    rule
}

/// Every verb on every resource, cluster-wide and in every namespace, and on every URL.
fn everything(subjects: Vec<Value>) -> Value {
    json!({
        "subjects": subjects,
        "resourceRules": [resource_rule(&["*"], &["*"], &["*"], &["*"], true)],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
    })
}

fn flow_schema(name: &str, level: &str, precedence: i64, method: Option<&str>, rule: Value) -> Value {
    let mut spec =
        json!({"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": precedence, "rules": [rule]});
    if let Some(method) = method {
        spec["distinguisherMethod"] = json!({"type": method});
    }
    json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": name, "annotations": {AUTO_UPDATE: "true"}}, "spec": spec})
}

fn priority_level(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name, "annotations": {AUTO_UPDATE: "true"}}, "spec": spec})
}

/// A Limited level that queues: nominal shares, lendable percent, queues, hand size and
/// queue length limit.
fn queued(name: &str, shares: i64, lendable: i64, queues: i64, hand: i64, length: i64) -> Value {
    priority_level(
        name,
        json!({"type": "Limited", "limited": {"nominalConcurrencyShares": shares, "lendablePercent": lendable,
            "limitResponse": {"type": "Queue", "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": length}}}}),
    )
}

/// The mandatory PriorityLevelConfiguration of that name, as kube fixes it.
pub(super) fn mandatory_priority_level(name: &str) -> Option<Value> {
    match name {
        "exempt" => Some(priority_level(
            "exempt",
            json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}),
        )),
        "catch-all" => Some(priority_level(
            "catch-all",
            json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "lendablePercent": 0,
                "limitResponse": {"type": "Reject"}}}),
        )),
        _ => None,
    }
}

/// The mandatory FlowSchema of that name, as kube fixes it.
pub(super) fn mandatory_flow_schema(name: &str) -> Option<Value> {
    match name {
        "exempt" => Some(flow_schema("exempt", "exempt", 1, None, everything(vec![group(MASTERS)]))),
        "catch-all" => Some(flow_schema(
            "catch-all",
            "catch-all",
            10000,
            Some("ByUser"),
            everything(vec![group(UNAUTHENTICATED), group(AUTHENTICATED)]),
        )),
        _ => None,
    }
}

fn suggested_priority_levels() -> Vec<Value> {
    vec![
        queued("system", 30, 33, 64, 6, 50),
        queued("node-high", 40, 25, 64, 6, 50),
        queued("leader-election", 10, 0, 16, 4, 50),
        queued("workload-high", 40, 50, 128, 6, 50),
        queued("workload-low", 100, 90, 128, 6, 50),
        queued("global-default", 20, 50, 128, 6, 50),
    ]
}

fn leases_rule() -> Value {
    resource_rule(&["get", "create", "update"], &["coordination.k8s.io"], &["leases"], &["*"], false)
}

fn suggested_flow_schemas() -> Vec<Value> {
    let all_system_accounts = || kube_system_account("*");
    let everyone = || vec![group(UNAUTHENTICATED), group(AUTHENTICATED)];
    vec![
        flow_schema(
            "probes",
            "exempt",
            2,
            None,
            json!({"subjects": everyone(),
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]}),
        ),
        flow_schema(
            "system-leader-election",
            "leader-election",
            100,
            Some("ByUser"),
            json!({"subjects": [user(CONTROLLER_MANAGER), user(SCHEDULER), all_system_accounts()],
                "resourceRules": [leases_rule()]}),
        ),
        flow_schema(
            "endpoint-controller",
            "workload-high",
            150,
            Some("ByUser"),
            json!({"subjects": [user(CONTROLLER_MANAGER), kube_system_account("endpoint-controller"),
                    kube_system_account("endpointslicemirroring-controller")],
                "resourceRules": [resource_rule(&["get", "create", "update"], &[""], &["endpoints"], &["*"], false)]}),
        ),
        flow_schema(
            "workload-leader-election",
            "leader-election",
            200,
            Some("ByUser"),
            json!({"subjects": [all_system_accounts()], "resourceRules": [
                resource_rule(&["get", "create", "update"], &[""], &["endpoints", "configmaps"], &["*"], false),
                leases_rule()]}),
        ),
        flow_schema(
            "system-node-high",
            "node-high",
            400,
            Some("ByUser"),
            json!({"subjects": [group(NODES)], "resourceRules": [
                resource_rule(&["*"], &[""], &["nodes", "nodes/status"], &["*"], true),
                resource_rule(&["*"], &["coordination.k8s.io"], &["leases"], &["*"], false)]}),
        ),
        flow_schema("system-nodes", "system", 500, Some("ByUser"), everything(vec![group(NODES)])),
        flow_schema(
            "kube-controller-manager",
            "workload-high",
            800,
            Some("ByNamespace"),
            everything(vec![user(CONTROLLER_MANAGER)]),
        ),
        flow_schema("kube-scheduler", "workload-high", 800, Some("ByNamespace"), everything(vec![user(SCHEDULER)])),
        flow_schema(
            "kube-system-service-accounts",
            "workload-high",
            900,
            Some("ByNamespace"),
            everything(vec![all_system_accounts()]),
        ),
        flow_schema(
            "service-accounts",
            "workload-low",
            9000,
            Some("ByUser"),
            everything(vec![group("system:serviceaccounts")]),
        ),
        flow_schema("global-default", "global-default", 9900, Some("ByUser"), everything(everyone())),
    ]
}

/// The whole configuration: priority levels first, then the schemas that name them.
fn configuration() -> Vec<(&'static str, Value)> {
    let levels =
        ["exempt", "catch-all"].into_iter().filter_map(mandatory_priority_level).chain(suggested_priority_levels());
    let schemas = ["exempt", "catch-all"].into_iter().filter_map(mandatory_flow_schema).chain(suggested_flow_schemas());
    levels.map(|l| ("prioritylevelconfigurations", l)).chain(schemas.map(|s| ("flowschemas", s))).collect()
}

/// Creates each object of kube's configuration that is missing, and brings back the
/// spec of each one still marked for automatic update.
pub(crate) async fn bootstrap(registry: &Registry) -> ApiResult<()> {
    let catalog = registry.catalog.snapshot();
    let opts =
        WriteOptions { field_manager: "api-priority-and-fairness-config-producer-v1".into(), ..Default::default() };
    for (resource, object) in configuration() {
        let Some(info) = catalog.lookup("flowcontrol.apiserver.k8s.io", "v1", resource) else { continue };
        let target = registry.target(info, "v1".into(), None);
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let stored = match registry.get(&target, &name).await {
            Ok(stored) => stored,
            Err(e) if e.code == 404 => {
                registry.create_if_missing(&target, object, &opts).await?;
                continue;
            }
            Err(e) => return Err(e),
        };
        let auto_update = stored["metadata"]["annotations"][AUTO_UPDATE] == "true";
        if auto_update && stored["spec"] != object["spec"] {
            let mut updated = stored.clone();
            updated["spec"] = object["spec"].clone();
            match registry.update(&target, &name, updated, Subresource::Main, &opts).await {
                Ok(_) => {}
                Err(e) if e.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kube's defaulting changes none of its own objects; nor may ours.
    #[test]
    fn the_configuration_is_valid_and_already_defaulted() {
        use crate::kinds::Strategy;
        for (resource, object) in configuration() {
            let mut defaulted = object.clone();
            let strategy: &dyn Strategy = if resource == "flowschemas" {
                &super::super::FlowSchemas
            } else {
                &super::super::PriorityLevelConfigurations
            };
            strategy.default(&mut defaulted, true);
            assert_eq!(defaulted, object, "{resource} {}", object["metadata"]["name"]);
            assert!(strategy.validate(&object).is_empty(), "{:?}", strategy.validate(&object));
        }
    }
}
