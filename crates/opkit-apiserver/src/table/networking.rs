//! Table printers for networking: ingresses, ingress classes and network policies
//! (networking.k8s.io) and endpoint slices (discovery.k8s.io).

use serde_json::Value;

use super::util::{
    age, age_col, arr, at, col, format_label_selector, lb_ingress, list_with_more, name, name_col, s, st,
};
use super::{Printer, RowFn};

/// The printer of networking.k8s.io/ingresses.
pub(crate) fn ingresses() -> Printer {
    Printer::of((
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
    ))
}

/// The printer of networking.k8s.io/ingressclasses.
pub(crate) fn ingressclasses() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col("Controller", "string", "Controller that is responsible for handling this class"),
            col("Parameters", "string", "A reference to a resource with additional parameters"),
            age_col(),
        ],
        ingress_class_row,
    ))
}

/// The printer of networking.k8s.io/networkpolicies.
pub(crate) fn networkpolicies() -> Printer {
    Printer::of((
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
    ))
}

/// The printer of discovery.k8s.io/endpointslices.
pub(crate) fn endpointslices() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col("AddressType", "string", "addressType specifies the type of address carried by this EndpointSlice."),
            col("Ports", "string", "ports specifies the list of network ports exposed by each endpoint in this slice."),
            col("Endpoints", "string", "endpoints is a list of unique endpoints in this slice."),
            age_col(),
        ],
        endpoint_slice_row,
    ))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
