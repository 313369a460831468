//! Services: defaults (type, cluster IP allocation, IP families, port protocols and
//! target ports) and the Service Table printer.

use serde_json::{Value, json};

use super::Strategy;
use super::defaulting::{default, obj_mut};
use crate::table::{self, Printer};

/// The strategy of core/v1 services.
pub(super) struct Services;

impl Strategy for Services {
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

    fn table(&self) -> Option<Printer> {
        Some(table::core::services())
    }
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
