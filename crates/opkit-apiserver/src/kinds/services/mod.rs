//! Services: defaults (type, cluster IP allocation, IP families, port protocols, target
//! ports, external traffic policy), the allocators in [`allocation`] and the Service Table
//! printer.

mod allocation;

use serde_json::{Value, json};

use super::Strategy;
use super::defaulting::{default, obj_mut};
use crate::registry::meta::validate_dns1035_label;
use crate::registry::view::StoreView;
use crate::schema::FieldError;
use crate::selector::{FieldLabels, scalar_at};
use crate::table::{self, Printer};

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

    fn default(&self, obj: &mut Value, _creating: bool) {
        let spec = obj_mut(obj, "spec");
        default(spec, "type", json!("ClusterIP"));
        default(spec, "sessionAffinity", json!("None"));
        default(spec, "internalTrafficPolicy", json!("Cluster"));
        let external = spec.get("type").and_then(Value::as_str) == Some("ExternalName");
        if matches!(spec.get("type").and_then(Value::as_str), Some("NodePort" | "LoadBalancer")) {
            default(spec, "externalTrafficPolicy", json!("Cluster"));
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

    /// kube's Service allocators: a client-chosen cluster IP must be in the Service
    /// range and free; node ports and the health check node port are allocated (see
    /// [`allocation`]).
    fn allocates(&self) -> bool {
        true
    }

    fn allocate(&self, view: &StoreView<'_>, obj: &mut Value, old: Option<&Value>) -> Vec<FieldError> {
        allocation::allocate(view, obj, old)
    }

    fn field_labels(&self) -> FieldLabels {
        SERVICE_FIELD_LABELS
    }

    fn table(&self) -> Option<Printer> {
        Some(table::core::services())
    }
}

/// The field labels of services.
const SERVICE_FIELD_LABELS: FieldLabels = FieldLabels {
    names: Some(&["metadata.namespace", "metadata.name", "spec.clusterIP", "spec.type"]),
    value: |obj, field| matches!(field, "spec.clusterIP" | "spec.type").then(|| scalar_at(obj, field)),
    unsupported: None,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_port_and_traffic_policy_defaults() {
        let mut s = json!({"metadata": {"uid": "x"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}});
        Services.default(&mut s, true);
        assert_eq!(s["spec"]["ports"][0]["targetPort"], 80);
        assert_eq!(s["spec"]["externalTrafficPolicy"], "Cluster");
    }
}
