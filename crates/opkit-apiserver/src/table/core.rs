//! Table printers for core/v1 resources: services, endpoints, namespaces, nodes,
//! configmaps, secrets and serviceaccounts (events: [`super::events`]; volumes:
//! [`super::storage`]).

use serde_json::Value;

use super::util::{
    age, age_col, arr, at, col, format_labels, i, int, lb_ingress, name, name_col, obj, or_none, s, st, wide,
};
use super::{Printer, RowFn};

/// The printer of services.
pub(crate) fn services() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col("Type", "string", "type determines how the Service is exposed. Defaults to ClusterIP."),
            col("Cluster-IP", "string", "clusterIP is the IP address of the service and is usually assigned randomly."),
            col(
                "External-IP",
                "string",
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
            ),
            col("Port(s)", "string", "The list of ports that are exposed by this service."),
            age_col(),
            wide(
                "Selector",
                "string",
                "Route service traffic to pods with label keys and values matching this selector.",
            ),
        ],
        service_row as RowFn,
    ))
}

/// The printer of endpoints.
pub(crate) fn endpoints() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col("Endpoints", "string", "The set of all endpoints is the union of all subsets."),
            age_col(),
        ],
        endpoints_row,
    ))
}

/// The printer of componentstatuses: each component's `Healthy` condition.
pub(crate) fn componentstatuses() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col("Status", "string", "Status of the component conditions"),
            col("Message", "string", "Message of the component conditions"),
            col("Error", "string", "Error of the component conditions"),
        ],
        |o: &Value, _now: i64| {
            let conditions = o["conditions"].as_array().cloned().unwrap_or_default();
            let healthy = conditions.iter().find(|c| c["type"] == "Healthy");
            let status = match healthy.and_then(|c| c["status"].as_str()) {
                Some("True") => "Healthy",
                Some("False") => "Unhealthy",
                _ => "Unknown",
            };
            let text = |key: &str| st(healthy.and_then(|c| c[key].as_str()).unwrap_or_default());
            vec![name(o), st(status), text("message"), text("error")]
        },
    ))
}

/// The printer of namespaces.
pub(crate) fn namespaces() -> Printer {
    Printer::of({
        (vec![name_col(), col("Status", "string", "The status of the namespace"), age_col()], |o, now| {
            vec![name(o), st(s(o, "status.phase")), age(o, now)]
        })
    })
}

/// The printer of nodes.
pub(crate) fn nodes() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col("Status", "string", "The status of the node"),
            col("Roles", "string", "The roles of the node"),
            age_col(),
            col("Version", "string", "Kubelet Version reported by the node."),
            wide("Internal-IP", "string", "List of addresses reachable to the node."),
            wide("External-IP", "string", "List of addresses reachable to the node."),
            wide(
                "OS-Image",
                "string",
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            ),
            wide(
                "Kernel-Version",
                "string",
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            ),
            wide(
                "Container-Runtime",
                "string",
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ],
        node_row,
    ))
}

/// The printer of configmaps.
pub(crate) fn configmaps() -> Printer {
    Printer::of({
        (vec![name_col(), col("Data", "string", "Data contains the configuration data."), age_col()], |o, now| {
            let n = obj(o, "data").map_or(0, |m| m.len()) + obj(o, "binaryData").map_or(0, |m| m.len());
            vec![name(o), i(n as i64), age(o, now)]
        })
    })
}

/// The printer of secrets.
pub(crate) fn secrets() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col("Type", "string", "Used to facilitate programmatic handling of secret data."),
            col("Data", "string", "Data contains the secret data."),
            age_col(),
        ],
        |o, now| {
            let n = obj(o, "data").map_or(0, |m| m.len());
            vec![name(o), st(s(o, "type")), i(n as i64), age(o, now)]
        },
    ))
}

/// The printer of serviceaccounts.
pub(crate) fn serviceaccounts() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col(
                "Secrets",
                "string",
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
            ),
            age_col(),
        ],
        |o, now| vec![name(o), i(arr(o, "secrets").len() as i64), age(o, now)],
    ))
}

fn service_row(o: &Value, now: i64) -> Vec<Value> {
    let ty = s(o, "spec.type");
    let cluster_ip = arr(o, "spec.clusterIPs")
        .first()
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| or_none(s(o, "spec.clusterIP")));
    let ext: Vec<String> = arr(o, "spec.externalIPs").iter().filter_map(|v| v.as_str().map(String::from)).collect();
    let external = match ty {
        "ClusterIP" | "NodePort" | "" if !ext.is_empty() => ext.join(","),
        "ClusterIP" | "NodePort" | "" => "<none>".into(),
        "LoadBalancer" => {
            let lb = lb_ingress(at(o, "status.loadBalancer"));
            let mut all: Vec<String> =
                if lb.is_empty() { Vec::new() } else { lb.split(',').map(String::from).collect() };
            if !ext.is_empty() {
                all.extend(ext);
                all.join(",")
            } else if !lb.is_empty() {
                lb
            } else {
                "<pending>".into()
            }
        }
        "ExternalName" => s(o, "spec.externalName").into(),
        _ => "<unknown>".into(),
    };
    let ports: Vec<String> = arr(o, "spec.ports")
        .iter()
        .map(|p| {
            let proto = Some(s(p, "protocol")).filter(|x| !x.is_empty()).unwrap_or("TCP");
            match int(p, "nodePort", 0) {
                0 => format!("{}/{proto}", int(p, "port", 0)),
                np => format!("{}:{np}/{proto}", int(p, "port", 0)),
            }
        })
        .collect();
    vec![
        name(o),
        st(ty),
        st(cluster_ip),
        st(external),
        st(or_none(&ports.join(","))),
        age(o, now),
        st(format_labels(obj(o, "spec.selector"))),
    ]
}

fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

fn endpoints_row(o: &Value, now: i64) -> Vec<Value> {
    let subsets = arr(o, "subsets");
    let text = if subsets.is_empty() {
        "<none>".to_string()
    } else {
        const MAX: usize = 3;
        let (mut list, mut count, mut more) = (Vec::<String>::new(), 0usize, false);
        for ss in subsets {
            let addrs = arr(ss, "addresses");
            let ports = arr(ss, "ports");
            let port_nums: Vec<Option<i64>> =
                if ports.is_empty() { vec![None] } else { ports.iter().map(|p| Some(int(p, "port", 0))).collect() };
            for port in port_nums {
                count += addrs.len();
                for a in addrs {
                    if list.len() == MAX {
                        more = true;
                        break;
                    }
                    let ip = s(a, "ip");
                    list.push(port.map_or_else(|| ip.to_string(), |p| join_host_port(ip, p)));
                }
            }
        }
        let ret = list.join(",");
        if more { format!("{ret} + {} more...", count - MAX) } else { ret }
    };
    vec![name(o), st(text), age(o, now)]
}

fn node_row(o: &Value, now: i64) -> Vec<Value> {
    let mut status: Vec<String> = Vec::new();
    if let Some(c) = arr(o, "status.conditions").iter().rev().find(|c| s(c, "type") == "Ready") {
        status.push(if s(c, "status") == "True" { "Ready".into() } else { "NotReady".into() });
    }
    if status.is_empty() {
        status.push("Unknown".into());
    }
    if at(o, "spec.unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled".into());
    }
    let mut roles: Vec<String> = obj(o, "metadata.labels")
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            if let Some(r) = k.strip_prefix("node-role.kubernetes.io/") {
                (!r.is_empty()).then(|| r.to_string())
            } else if k == "kubernetes.io/role" {
                v.as_str().filter(|v| !v.is_empty()).map(String::from)
            } else {
                None
            }
        })
        .collect();
    roles.sort();
    roles.dedup();
    let addr = |ty: &str| {
        arr(o, "status.addresses")
            .iter()
            .find(|a| s(a, "type") == ty)
            .map_or("<none>".to_string(), |a| s(a, "address").into())
    };
    let unknown = |p: &str| {
        let v = s(o, p);
        if v.is_empty() { "<unknown>".to_string() } else { v.to_string() }
    };
    vec![
        name(o),
        st(status.join(",")),
        st(or_none(&roles.join(","))),
        age(o, now),
        st(s(o, "status.nodeInfo.kubeletVersion")),
        st(addr("InternalIP")),
        st(addr("ExternalIP")),
        st(unknown("status.nodeInfo.osImage")),
        st(unknown("status.nodeInfo.kernelVersion")),
        st(unknown("status.nodeInfo.containerRuntimeVersion")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn service_rows() {
        let svc = json!({"metadata": {"name": "web"}, "spec": {"type": "NodePort", "clusterIP": "10.0.0.5", "clusterIPs": ["10.0.0.5"],
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}], "selector": {"b": "2", "a": "1"}}});
        let row = service_row(&svc, 0);
        assert_eq!(
            row[1..5].to_vec(),
            vec![json!("NodePort"), json!("10.0.0.5"), json!("<none>"), json!("80:30080/TCP,53/UDP")]
        );
        assert_eq!(row[6], json!("a=1,b=2"));
        let lb = json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "clusterIPs": ["10.0.0.6"]}});
        assert_eq!(service_row(&lb, 0)[3], json!("<pending>"));
        assert_eq!(service_row(&lb, 0)[4], json!("<none>"));
    }

    #[test]
    fn endpoints_and_node_rows() {
        let ep = json!({"metadata": {"name": "e"}, "subsets": [{"addresses": [{"ip": "1.1.1.1"}, {"ip": "1.1.1.2"}, {"ip": "1.1.1.3"}, {"ip": "1.1.1.4"}],
            "ports": [{"port": 80}]}]});
        assert_eq!(endpoints_row(&ep, 0)[1], json!("1.1.1.1:80,1.1.1.2:80,1.1.1.3:80 + 1 more..."));
        let node = json!({"metadata": {"name": "n", "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": true}, "status": {"conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.33.0"}, "addresses": [{"type": "InternalIP", "address": "192.168.1.2"}]}});
        let row = node_row(&node, 0);
        assert_eq!(row[1..3].to_vec(), vec![json!("Ready,SchedulingDisabled"), json!("control-plane")]);
        assert_eq!(
            row[4..8].to_vec(),
            vec![json!("v1.33.0"), json!("192.168.1.2"), json!("<none>"), json!("<unknown>")]
        );
    }
}
