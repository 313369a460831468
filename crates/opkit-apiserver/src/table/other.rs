//! Table printers for non-core, non-workload groups: networking (ingresses,
//! ingressclasses, networkpolicies), discovery (endpointslices), coordination
//! (leases), RBAC bindings, autoscaling (HPAs), policy (PDBs), scheduling,
//! storage classes and admission webhook configurations.

use serde_json::Value;

use super::RowFn;
use super::util::{
    Col, age, age_col, arr, at, col, format_label_selector, i, int, lb_ingress, list_with_more, name, name_col, obj, s,
    st, wide,
};

/// The printer for one of these resources, if this module has one.
pub(crate) fn printer(group: &str, resource: &str) -> Option<(Vec<Col>, RowFn)> {
    let binding_cols = |kind: &str| {
        vec![
            name_col(),
            col(
                "Role",
                "string",
                &format!(
                    "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. This field is immutable. ({kind})"
                ),
            ),
            age_col(),
            wide("Users", "string", &format!("Users in the {kind}")),
            wide("Groups", "string", &format!("Groups in the {kind}")),
            wide("ServiceAccounts", "string", &format!("ServiceAccounts in the {kind}")),
        ]
    };
    let webhooks = || {
        vec![
            name_col(),
            col("Webhooks", "integer", "Webhooks indicates the number of webhooks registered in this configuration"),
            age_col(),
        ]
    };
    Some(match (group, resource) {
        ("networking.k8s.io", "ingresses") => (
            vec![
                name_col(),
                col(
                    "Class",
                    "string",
                    "The name of the IngressClass resource that should be used for additional configuration",
                ),
                col("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule"),
                col("Address", "string", "Address is a list containing ingress points for the load-balancer"),
                col("Ports", "string", "Ports of TLS configurations that open"),
                age_col(),
            ],
            ingress_row as RowFn,
        ),
        ("networking.k8s.io", "ingressclasses") => (
            vec![
                name_col(),
                col("Controller", "string", "Controller that is responsible for handling this class"),
                col("Parameters", "string", "A reference to a resource with additional parameters"),
                age_col(),
            ],
            ingress_class_row,
        ),
        ("networking.k8s.io", "networkpolicies") => (
            vec![
                name_col(),
                col("Pod-Selector", "string", "Selects the pods to which this NetworkPolicy object applies."),
                age_col(),
            ],
            |o, now| {
                vec![
                    name(o),
                    st(format_label_selector(Some(at(o, "spec.podSelector").unwrap_or(&Value::Null)))),
                    age(o, now),
                ]
            },
        ),
        ("discovery.k8s.io", "endpointslices") => (
            vec![
                name_col(),
                col(
                    "AddressType",
                    "string",
                    "addressType specifies the type of address carried by this EndpointSlice.",
                ),
                col(
                    "Ports",
                    "string",
                    "ports specifies the list of network ports exposed by each endpoint in this slice.",
                ),
                col("Endpoints", "string", "endpoints is a list of unique endpoints in this slice."),
                age_col(),
            ],
            endpoint_slice_row,
        ),
        ("coordination.k8s.io", "leases") => (
            vec![
                name_col(),
                col("Holder", "string", "holderIdentity contains the identity of the holder of a current lease."),
                age_col(),
            ],
            |o, now| vec![name(o), st(s(o, "spec.holderIdentity")), age(o, now)],
        ),
        ("rbac.authorization.k8s.io", "rolebindings") => (binding_cols("roleBinding"), binding_row),
        ("rbac.authorization.k8s.io", "clusterrolebindings") => (binding_cols("clusterRoleBinding"), binding_row),
        ("autoscaling", "horizontalpodautoscalers") => (
            vec![
                name_col(),
                col(
                    "Reference",
                    "string",
                    "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.",
                ),
                col(
                    "Targets",
                    "string",
                    "metrics contains the specifications for which to use to calculate the desired replica count.",
                ),
                col(
                    "MinPods",
                    "string",
                    "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
                ),
                col(
                    "MaxPods",
                    "string",
                    "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.",
                ),
                col(
                    "Replicas",
                    "string",
                    "currentReplicas is current number of replicas of pods managed by this autoscaler.",
                ),
                age_col(),
            ],
            hpa_row,
        ),
        ("policy", "poddisruptionbudgets") => (
            vec![
                name_col(),
                col("Min Available", "string", "The minimum number of pods that must be available."),
                col("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
                col("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
                age_col(),
            ],
            |o, now| {
                let iors = |p: &str| match at(o, p) {
                    Some(Value::String(v)) => v.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    _ => "N/A".into(),
                };
                vec![
                    name(o),
                    st(iors("spec.minAvailable")),
                    st(iors("spec.maxUnavailable")),
                    i(int(o, "status.disruptionsAllowed", 0)),
                    age(o, now),
                ]
            },
        ),
        ("scheduling.k8s.io", "priorityclasses") => (
            vec![
                name_col(),
                col("Value", "integer", "value represents the integer value of this priority class."),
                col(
                    "Global-Default",
                    "boolean",
                    "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class.",
                ),
                age_col(),
                col(
                    "PreemptionPolicy",
                    "string",
                    "preemptionPolicy is the Policy for preempting pods with lower priority.",
                ),
            ],
            |o, now| {
                let gd = at(o, "globalDefault").and_then(Value::as_bool).unwrap_or(false);
                vec![name(o), i(int(o, "value", 0)), Value::Bool(gd), age(o, now), st(s(o, "preemptionPolicy"))]
            },
        ),
        ("storage.k8s.io", "storageclasses") => (
            vec![
                name_col(),
                col("Provisioner", "string", "provisioner indicates the type of the provisioner."),
                col(
                    "ReclaimPolicy",
                    "string",
                    "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class.",
                ),
                col(
                    "VolumeBindingMode",
                    "string",
                    "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.",
                ),
                col(
                    "AllowVolumeExpansion",
                    "string",
                    "allowVolumeExpansion shows whether the storage class allow volume expand.",
                ),
                age_col(),
            ],
            storage_class_row,
        ),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations" | "validatingwebhookconfigurations") => {
            (webhooks(), |o, now| vec![name(o), i(arr(o, "webhooks").len() as i64), age(o, now)])
        }
        _ => return None,
    })
}

fn ingress_row(o: &Value, now: i64) -> Vec<Value> {
    let class = at(o, "spec.ingressClassName").and_then(Value::as_str).unwrap_or("<none>");
    let rules = arr(o, "spec.rules");
    let mut hosts: Vec<String> = Vec::new();
    let mut more = false;
    for r in rules {
        if hosts.len() == 3 {
            more = true;
        }
        if !more && !s(r, "host").is_empty() {
            hosts.push(s(r, "host").into());
        }
    }
    let hosts = if hosts.is_empty() {
        "*".to_string()
    } else if more {
        format!("{} + {} more...", hosts.join(","), rules.len() - 3)
    } else {
        hosts.join(",")
    };
    let ports = if arr(o, "spec.tls").is_empty() { "80" } else { "80, 443" };
    vec![name(o), st(class), st(hosts), st(lb_ingress(at(o, "status.loadBalancer"))), st(ports), age(o, now)]
}

fn ingress_class_row(o: &Value, now: i64) -> Vec<Value> {
    let params = match at(o, "spec.parameters") {
        Some(p) if p.is_object() => {
            let mut out = s(p, "kind").to_string();
            if let Some(g) = at(p, "apiGroup").and_then(Value::as_str) {
                out = format!("{out}.{g}");
            }
            format!("{out}/{}", s(p, "name"))
        }
        _ => "<none>".into(),
    };
    vec![name(o), st(s(o, "spec.controller")), st(params), age(o, now)]
}

fn endpoint_slice_row(o: &Value, now: i64) -> Vec<Value> {
    let ports = arr(o, "ports");
    let port_list: Vec<String> = ports
        .iter()
        .map(|p| match (at(p, "port").and_then(Value::as_i64), at(p, "name").and_then(Value::as_str)) {
            (Some(n), _) => n.to_string(),
            (None, Some(n)) => n.to_string(),
            _ => "*".into(),
        })
        .collect();
    let addrs: Vec<String> = arr(o, "endpoints")
        .iter()
        .flat_map(|e| arr(e, "addresses").iter().filter_map(|a| a.as_str().map(String::from)))
        .collect();
    vec![
        name(o),
        st(s(o, "addressType")),
        st(list_with_more(&port_list, port_list.len(), 3, "<unset>")),
        st(list_with_more(&addrs, addrs.len(), 3, "<unset>")),
        age(o, now),
    ]
}

fn binding_row(o: &Value, now: i64) -> Vec<Value> {
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for sub in arr(o, "subjects") {
        match s(sub, "kind") {
            "User" => users.push(s(sub, "name").to_string()),
            "Group" => groups.push(s(sub, "name").to_string()),
            "ServiceAccount" => sas.push(format!("{}/{}", s(sub, "namespace"), s(sub, "name"))),
            _ => {}
        }
    }
    vec![
        name(o),
        st(format!("{}/{}", s(o, "roleRef.kind"), s(o, "roleRef.name"))),
        age(o, now),
        st(users.join(", ")),
        st(groups.join(", ")),
        st(sas.join(", ")),
    ]
}

fn storage_class_row(o: &Value, now: i64) -> Vec<Value> {
    let ann = obj(o, "metadata.annotations");
    let is_default =
        ["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"]
            .iter()
            .any(|k| ann.and_then(|a| a.get(*k)).and_then(Value::as_str) == Some("true"));
    let mut n = s(o, "metadata.name").to_string();
    if is_default {
        n.push_str(" (default)");
    }
    let reclaim = at(o, "reclaimPolicy").and_then(Value::as_str).unwrap_or("Delete");
    let binding = at(o, "volumeBindingMode").and_then(Value::as_str).unwrap_or("Immediate");
    let expand = at(o, "allowVolumeExpansion").and_then(Value::as_bool).unwrap_or(false);
    vec![st(n), st(s(o, "provisioner")), st(reclaim), st(binding), Value::Bool(expand), age(o, now)]
}

/// A metric's target/current quantity (`averageValue` or `value`) as printed, or `<unknown>`.
fn qty(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(q)) => q.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "<unknown>".into(),
    }
}

/// kube's `formatHPAMetrics` over autoscaling/v2 JSON (v1 `targetCPUUtilizationPercentage` mapped to a cpu metric).
fn hpa_targets(o: &Value) -> String {
    let mut specs: Vec<Value> = arr(o, "spec.metrics").to_vec();
    let mut statuses: Vec<Value> = arr(o, "status.currentMetrics").to_vec();
    if specs.is_empty()
        && let Some(t) = at(o, "spec.targetCPUUtilizationPercentage").and_then(Value::as_i64)
    {
        specs.push(serde_json::json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": t}}}));
        if let Some(c) = at(o, "status.currentCPUUtilizationPercentage").and_then(Value::as_i64) {
            statuses.push(serde_json::json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": c}}}));
        }
    }
    if specs.is_empty() {
        return "<none>".into();
    }
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(idx, spec)| {
            let status = statuses.get(idx);
            let cur = |src: &str, field: &str| qty(status.and_then(|st| at(st, &format!("{src}.current.{field}"))));
            match s(spec, "type") {
                ty @ ("External" | "Object" | "Pods") => {
                    let src = match ty {
                        "External" => "external",
                        "Object" => "object",
                        _ => "pods",
                    };
                    let avg = at(spec, &format!("{src}.target.averageValue"));
                    if ty == "Pods" || avg.is_some() {
                        let suffix = if ty == "Pods" { "" } else { " (avg)" };
                        format!("{}/{}{suffix}", cur(src, "averageValue"), qty(avg))
                    } else {
                        format!("{}/{}", cur(src, "value"), qty(at(spec, &format!("{src}.target.value"))))
                    }
                }
                ty @ ("Resource" | "ContainerResource") => {
                    let src = if ty == "Resource" { "resource" } else { "containerResource" };
                    let rname = s(spec, &format!("{src}.name"));
                    if let Some(avg) = at(spec, &format!("{src}.target.averageValue")) {
                        format!("{rname}: {}/{}", cur(src, "averageValue"), qty(Some(avg)))
                    } else {
                        let current = status
                            .and_then(|st| at(st, &format!("{src}.current.averageUtilization")))
                            .and_then(Value::as_i64)
                            .map_or("<unknown>".to_string(), |u| format!("{u}%"));
                        let target = at(spec, &format!("{src}.target.averageUtilization"))
                            .and_then(Value::as_i64)
                            .map_or("<auto>".to_string(), |u| format!("{u}%"));
                        format!("{rname}: {current}/{target}")
                    }
                }
                _ => "<unknown type>".into(),
            }
        })
        .collect();
    if list.len() > 2 { format!("{} + {} more...", list[..2].join(", "), list.len() - 2) } else { list.join(", ") }
}

fn hpa_row(o: &Value, now: i64) -> Vec<Value> {
    let min = at(o, "spec.minReplicas").and_then(Value::as_i64).map_or("<unset>".to_string(), |m| m.to_string());
    vec![
        name(o),
        st(format!("{}/{}", s(o, "spec.scaleTargetRef.kind"), s(o, "spec.scaleTargetRef.name"))),
        st(hpa_targets(o)),
        st(min),
        i(int(o, "spec.maxReplicas", 0)),
        i(int(o, "status.currentReplicas", 0)),
        age(o, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hpa_and_bindings() {
        let hpa = json!({"metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]},
            "status": {"currentReplicas": 2, "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 12}}}]}});
        let row = hpa_row(&hpa, 0);
        assert_eq!(
            row[1..6].to_vec(),
            vec![json!("Deployment/web"), json!("cpu: 12%/80%"), json!("<unset>"), json!(5), json!(2)]
        );
        let rb = json!({"metadata": {"name": "rb"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]});
        let row = binding_row(&rb, 0);
        assert_eq!(
            (row[1].clone(), row[3].clone(), row[5].clone()),
            (json!("ClusterRole/view"), json!("alice"), json!("ns/sa"))
        );
    }

    #[test]
    fn ingress_rows() {
        let ing = json!({"metadata": {"name": "i"}, "spec": {"rules": [{"host": "a.com"}, {}], "tls": [{}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "5.5.5.5"}]}}});
        assert_eq!(
            ingress_row(&ing, 0)[1..5].to_vec(),
            vec![json!("<none>"), json!("a.com"), json!("5.5.5.5"), json!("80, 443")]
        );
    }
}
