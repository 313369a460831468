//! kube's Service allocators, over the Services in storage: node ports from
//! `--service-node-port-range` (30000-32767) for NodePort and LoadBalancer Services, a
//! `healthCheckNodePort` for LoadBalancer Services with `externalTrafficPolicy: Local`,
//! and the check that a client-chosen cluster IP lies in the Service range
//! (10.96.0.0/12) and is not held by another Service. Each port or address a client asks
//! for must be free; one the object already had is kept on update.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::ops::RangeInclusive;

use opkit_apimachinery::Ipv4Range;
use rand::Rng;
use serde_json::{Value, json};

use crate::registry::parse_stored;
use crate::registry::view::StoreView;
use crate::schema::FieldError;
use crate::storage::ResourceId;

/// kube-apiserver's default `--service-node-port-range`.
const NODE_PORT_RANGE: RangeInclusive<i64> = 30000..=32767;

/// kube-apiserver's default `--service-cluster-ip-range`.
const SERVICE_CIDR: Ipv4Range = match Ipv4Range::new(Ipv4Addr::new(10, 96, 0, 0), 12) {
    Some(range) => range,
    None => panic!("10.96.0.0/12 is a valid range"),
};

/// Every allocation a Service needs; returns the fields whose values cannot be had.
pub(super) fn allocate(view: &StoreView<'_>, obj: &mut Value, old: Option<&Value>) -> Vec<FieldError> {
    let others = other_services(view, obj);
    let mut errs = cluster_ip_errors(&others, obj, old);
    if old.is_none() && errs.is_empty() {
        assign_cluster_ip(&others, obj);
    }
    let taken: BTreeSet<i64> = others.iter().flat_map(node_ports).collect();
    let mut own = BTreeSet::new();
    if needs_node_ports(obj) {
        errs.extend(allocate_node_ports(&taken, &mut own, obj, old));
    }
    if needs_health_check_port(obj) {
        errs.extend(allocate_health_check_port(&taken, &mut own, obj, old));
    } else if let Some(spec) = obj["spec"].as_object_mut() {
        spec.remove("healthCheckNodePort");
    }
    errs
}

/// The Services in storage other than `svc`.
fn other_services(view: &StoreView<'_>, svc: &Value) -> Vec<Value> {
    let me = (
        svc["metadata"]["namespace"].as_str().unwrap_or_default().to_string(),
        svc["metadata"]["name"].as_str().unwrap_or_default().to_string(),
    );
    view.values(&ResourceId::new("", "services"))
        .into_iter()
        .filter(|(key, _)| *key != me)
        .filter_map(|(_, bytes)| parse_stored(&bytes).ok())
        .collect()
}

/// The node ports a Service holds, its health check node port included.
fn node_ports(svc: &Value) -> Vec<i64> {
    let ports = svc["spec"]["ports"].as_array().cloned().unwrap_or_default();
    let mut held: Vec<i64> = ports.iter().filter_map(|p| p["nodePort"].as_i64().filter(|n| *n != 0)).collect();
    held.extend(svc["spec"]["healthCheckNodePort"].as_i64().filter(|n| *n != 0));
    held
}

/// Whether the Service's ports get node ports: type NodePort, or LoadBalancer unless
/// `allocateLoadBalancerNodePorts` is false.
fn needs_node_ports(svc: &Value) -> bool {
    match svc["spec"]["type"].as_str() {
        Some("NodePort") => true,
        Some("LoadBalancer") => svc["spec"]["allocateLoadBalancerNodePorts"].as_bool() != Some(false),
        _ => false,
    }
}

/// Whether the Service needs a health check node port: LoadBalancer with
/// `externalTrafficPolicy: Local`.
fn needs_health_check_port(svc: &Value) -> bool {
    svc["spec"]["type"] == "LoadBalancer" && svc["spec"]["externalTrafficPolicy"] == "Local"
}

/// A requested node port's problem: out of range, held by another Service, or already
/// used by this one.
fn requested_port_error(field: &str, n: i64, taken: &BTreeSet<i64>, own: &mut BTreeSet<i64>) -> Option<FieldError> {
    if !NODE_PORT_RANGE.contains(&n) {
        let detail = format!(
            "provided port is not in the valid range. The range of valid ports is {}-{}",
            NODE_PORT_RANGE.start(),
            NODE_PORT_RANGE.end()
        );
        Some(FieldError::invalid(field, &json!(n), &detail))
    } else if taken.contains(&n) {
        Some(FieldError::invalid(field, &json!(n), "provided port is already allocated"))
    } else if !own.insert(n) {
        Some(FieldError::duplicate(field, &json!(n)))
    } else {
        None
    }
}

/// Gives every port a node port: the one the client asked for if no other Service holds
/// it, else the old object's for the same port, else a free one.
fn allocate_node_ports(
    taken: &BTreeSet<i64>,
    own: &mut BTreeSet<i64>,
    obj: &mut Value,
    old: Option<&Value>,
) -> Vec<FieldError> {
    let old_ports = old.filter(|o| needs_node_ports(o)).map(|o| o["spec"]["ports"].clone()).unwrap_or(Value::Null);
    let mut errs = Vec::new();
    let Some(ports) = obj["spec"]["ports"].as_array_mut() else { return errs };
    // Ports the client chose first, so that a free pick never takes one of them.
    for (i, p) in ports.iter().enumerate() {
        let Some(n) = p["nodePort"].as_i64().filter(|n| *n != 0) else { continue };
        errs.extend(requested_port_error(&format!("spec.ports[{i}].nodePort"), n, taken, own));
    }
    for p in ports.iter_mut().filter(|p| p["nodePort"].as_i64().is_none_or(|n| n == 0)) {
        let kept = same_port(&old_ports, p)
            .and_then(|o| o["nodePort"].as_i64())
            .filter(|n| NODE_PORT_RANGE.contains(n) && !taken.contains(n) && !own.contains(n));
        let Some(n) = kept.or_else(|| free_node_port(taken, own)) else {
            errs.push(FieldError::invalid("spec.ports", &Value::Null, "range is full"));
            break;
        };
        own.insert(n);
        p["nodePort"] = json!(n);
    }
    errs
}

/// Gives the Service a `healthCheckNodePort`: the client's if free, else the old one,
/// else a free one.
fn allocate_health_check_port(
    taken: &BTreeSet<i64>,
    own: &mut BTreeSet<i64>,
    obj: &mut Value,
    old: Option<&Value>,
) -> Vec<FieldError> {
    let field = "spec.healthCheckNodePort";
    if let Some(n) = obj["spec"]["healthCheckNodePort"].as_i64().filter(|n| *n != 0) {
        return requested_port_error(field, n, taken, own).into_iter().collect();
    }
    let kept = old
        .and_then(|o| o["spec"]["healthCheckNodePort"].as_i64())
        .filter(|n| NODE_PORT_RANGE.contains(n) && !taken.contains(n) && !own.contains(n));
    match kept.or_else(|| free_node_port(taken, own)) {
        Some(n) => {
            own.insert(n);
            obj["spec"]["healthCheckNodePort"] = json!(n);
            Vec::new()
        }
        None => vec![FieldError::invalid(field, &Value::Null, "range is full")],
    }
}

/// The entry of `ports` (a Service's `spec.ports`) with `port`'s number and protocol.
fn same_port<'a>(ports: &'a Value, port: &Value) -> Option<&'a Value> {
    ports.as_array()?.iter().find(|o| o["port"] == port["port"] && o["protocol"] == port["protocol"])
}

/// A node port neither `taken` by another Service nor in `own`, starting the search at a
/// random point of the range as kube's allocator picks at random.
fn free_node_port(taken: &BTreeSet<i64>, own: &BTreeSet<i64>) -> Option<i64> {
    let (lo, hi) = (*NODE_PORT_RANGE.start(), *NODE_PORT_RANGE.end());
    let start = rand::rng().random_range(NODE_PORT_RANGE);
    (start..=hi).chain(lo..start).find(|n| !taken.contains(n) && !own.contains(n))
}

/// Gives a new Service without a cluster IP (not headless, not ExternalName) a free one
/// of [`SERVICE_CIDR`], searching from a point derived from its uid.
fn assign_cluster_ip(others: &[Value], obj: &mut Value) {
    let spec = &obj["spec"];
    let chosen = spec["clusterIP"].as_str().is_some_and(|ip| !ip.is_empty());
    if chosen || spec["type"] == "ExternalName" {
        return;
    }
    let held: BTreeSet<u32> = others
        .iter()
        .filter_map(|o| o["spec"]["clusterIP"].as_str()?.parse::<Ipv4Addr>().ok())
        .map(u32::from)
        .collect();
    let (network, size) = (SERVICE_CIDR.network(), SERVICE_CIDR.size() as u32);
    let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
    let start = uid.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))) % size;
    // The network address, the broadcast address and .1 (the `kubernetes` Service's, by
    // kube's convention) are never handed out.
    let free = (0..size)
        .map(|i| u32::from(network) + (start + i) % size)
        .find(|ip| (ip & 0xff) > 1 && *ip != u32::from(network) + size - 1 && !held.contains(ip));
    if let Some(ip) = free {
        let ip = Ipv4Addr::from(ip).to_string();
        obj["spec"]["clusterIP"] = json!(ip);
        obj["spec"]["clusterIPs"] = json!([ip]);
    }
}

/// A cluster IP the client chose on create (or changed to) must be an IPv4 address in
/// [`SERVICE_CIDR`] that no other Service holds (kube's allocator messages).
fn cluster_ip_errors(others: &[Value], obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let Some(ip) = obj["spec"]["clusterIP"].as_str().filter(|ip| !ip.is_empty() && *ip != "None") else {
        return Vec::new();
    };
    if old.is_some_and(|o| o["spec"]["clusterIP"] == obj["spec"]["clusterIP"]) {
        return Vec::new();
    }
    let field = "spec.clusterIPs";
    let value = json!([ip]);
    let Ok(addr) = ip.parse::<Ipv4Addr>() else {
        return vec![FieldError::invalid(
            field,
            &value,
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        )];
    };
    if !SERVICE_CIDR.contains(addr) {
        let detail = format!(
            "failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {SERVICE_CIDR}"
        );
        return vec![FieldError::invalid(field, &value, &detail)];
    }
    if others.iter().any(|o| o["spec"]["clusterIP"] == ip) {
        return vec![FieldError::invalid(
            field,
            &value,
            &format!("failed to allocate IP {ip}: provided IP is already allocated"),
        )];
    }
    Vec::new()
}
