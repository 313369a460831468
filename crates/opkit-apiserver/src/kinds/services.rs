//! Services: defaults (type, cluster IP allocation, IP families, port protocols and
//! target ports), node port allocation and the Service Table printer.

use std::collections::BTreeSet;
use std::ops::RangeInclusive;

use rand::Rng;
use serde_json::{Value, json};

use super::Strategy;
use super::defaulting::{default, obj_mut};
use crate::registry::meta::validate_dns1035_label;
use crate::registry::{Registry, parse_stored};
use crate::schema::FieldError;
use crate::storage::ResourceId;
use crate::table::{self, Printer};

/// kube-apiserver's default `--service-node-port-range`.
const NODE_PORT_RANGE: RangeInclusive<i64> = 30000..=32767;

/// The strategy of core/v1 services.
pub(super) struct Services;

impl Strategy for Services {
    /// kube's registry of this kind answers a DELETE with the deleted object.
    fn returns_deleted_object(&self) -> bool {
        true
    }

    /// Service names become DNS names of their own: kube's `NameIsDNS1035Label`.
    fn validate_name(&self, name: &str) -> Option<FieldError> {
        validate_dns1035_label("metadata.name", name)
    }

    fn default(&self, obj: &mut Value, creating: bool) {
        let uid = obj["metadata"]["uid"].as_str().unwrap_or_default().to_string();
        let spec = obj_mut(obj, "spec");
        default(spec, "type", json!("ClusterIP"));
        default(spec, "sessionAffinity", json!("None"));
        default(spec, "internalTrafficPolicy", json!("Cluster"));
        let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
        let external = spec.get("type").and_then(Value::as_str) == Some("ExternalName");
        if creating
            && !headless
            && !external
            && spec.get("clusterIP").is_none_or(|v| v.as_str().is_none_or(str::is_empty))
        {
            let ip = cluster_ip(&uid);
            spec.insert("clusterIP".into(), json!(ip));
            spec.insert("clusterIPs".into(), json!([ip]));
        }
        if !external {
            default(spec, "ipFamilies", json!(["IPv4"]));
            default(spec, "ipFamilyPolicy", json!("SingleStack"));
        }
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                default(p, "protocol", json!("TCP"));
                if let Some(port) = p.get("port").cloned() {
                    default(p, "targetPort", port);
                }
            }
        }
    }

    /// Gives every port of a NodePort (or LoadBalancer) Service a node port: the one the
    /// client asked for if no other Service holds it, else the old object's for the same
    /// port, else a free one of [`NODE_PORT_RANGE`].
    fn allocate(&self, registry: &Registry, obj: &mut Value, old: Option<&Value>) -> Vec<FieldError> {
        if !needs_node_ports(obj) {
            return Vec::new();
        }
        let taken = node_ports_of_others(registry, obj);
        let old_ports = old.filter(|o| needs_node_ports(o)).map(|o| o["spec"]["ports"].clone()).unwrap_or(Value::Null);
        let mut errs = Vec::new();
        let mut own = BTreeSet::new();
        let Some(ports) = obj["spec"]["ports"].as_array_mut() else { return errs };
        // Ports the client chose first, so that a free pick never takes one of them.
        for (i, p) in ports.iter().enumerate() {
            let Some(n) = p["nodePort"].as_i64().filter(|n| *n != 0) else { continue };
            let field = format!("spec.ports[{i}].nodePort");
            if !NODE_PORT_RANGE.contains(&n) {
                let detail = format!(
                    "provided port is not in the valid range. The range of valid ports is {}-{}",
                    NODE_PORT_RANGE.start(),
                    NODE_PORT_RANGE.end()
                );
                errs.push(FieldError::invalid(&field, &json!(n), &detail));
            } else if taken.contains(&n) {
                errs.push(FieldError::invalid(&field, &json!(n), "provided port is already allocated"));
            } else if !own.insert(n) {
                errs.push(FieldError::duplicate(&field, &json!(n)));
            }
        }
        for p in ports.iter_mut().filter(|p| p["nodePort"].as_i64().is_none_or(|n| n == 0)) {
            let kept = same_port(&old_ports, p)
                .and_then(|o| o["nodePort"].as_i64())
                .filter(|n| NODE_PORT_RANGE.contains(n) && !taken.contains(n) && !own.contains(n));
            let Some(n) = kept.or_else(|| free_node_port(&taken, &own)) else {
                errs.push(FieldError::invalid("spec.ports", &Value::Null, "range is full"));
                break;
            };
            own.insert(n);
            p["nodePort"] = json!(n);
        }
        errs
    }

    fn table(&self) -> Option<Printer> {
        Some(table::core::services())
    }
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

/// The node ports held by every Service other than `svc`.
fn node_ports_of_others(registry: &Registry, svc: &Value) -> BTreeSet<i64> {
    let me = (
        svc["metadata"]["namespace"].as_str().unwrap_or_default().to_string(),
        svc["metadata"]["name"].as_str().unwrap_or_default().to_string(),
    );
    registry
        .store()
        .values(&ResourceId::new("", "services"))
        .into_iter()
        .filter(|(key, _)| *key != me)
        .filter_map(|(_, bytes)| parse_stored(&bytes).ok())
        .flat_map(|other| {
            let ports = other["spec"]["ports"].as_array().cloned().unwrap_or_default();
            ports.into_iter().filter_map(|p| p["nodePort"].as_i64().filter(|n| *n != 0))
        })
        .collect()
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

/// A cluster IP in 10.96.0.0/16 derived from the Service's uid (collisions are harmless:
/// nothing routes to these addresses).
fn cluster_ip(uid: &str) -> String {
    let h = uid.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    format!("10.96.{}.{}", (h >> 8) % 256, (h % 254) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ip_and_target_port_defaults() {
        let mut s = json!({"metadata": {"uid": "x"}, "spec": {"ports": [{"port": 80}]}});
        Services.default(&mut s, true);
        assert!(s["spec"]["clusterIP"].as_str().is_some_and(|ip| ip.starts_with("10.96.")));
        assert_eq!(s["spec"]["ports"][0]["targetPort"], 80);
    }
}
