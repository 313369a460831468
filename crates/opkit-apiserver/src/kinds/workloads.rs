//! apps/v1 workload controllers (deployments, replica sets, stateful sets, daemon sets):
//! rollout defaults, selector and template validation, and their Table printers; and
//! core/v1 replication controllers' printer and field labels.

use serde_json::{Value, json};

use super::Strategy;
use super::defaulting::{default, obj_mut};
use super::pod_spec::validate_pod_spec_with_claims;
use super::pods::{default_template, required};
use crate::registry::meta::validate_label;
use crate::schema::{FieldError, FieldErrorReason};
use crate::selector::{FieldLabels, scalar_at_or};
use crate::table::{self, Printer};

/// The strategy of apps/v1 deployments.
pub(super) struct Deployments;
/// The strategy of apps/v1 replica sets.
pub(super) struct ReplicaSets;
/// The strategy of apps/v1 stateful sets.
pub(super) struct StatefulSets;
/// The strategy of apps/v1 daemon sets.
pub(super) struct DaemonSets;
/// The strategy of core/v1 replication controllers.
pub(super) struct ReplicationControllers;

impl Strategy for ReplicationControllers {
    fn field_labels(&self) -> FieldLabels {
        FieldLabels {
            names: Some(&["metadata.name", "metadata.namespace", "status.replicas"]),
            value: |obj, field| (field == "status.replicas").then(|| scalar_at_or(obj, field, "0")),
            unsupported: None,
        }
    }

    fn table(&self) -> Option<Printer> {
        Some(table::workloads::replicationcontrollers())
    }
}

impl Strategy for Deployments {
    fn default(&self, obj: &mut Value, _creating: bool) {
        let spec = obj_mut(obj, "spec");
        default(spec, "replicas", json!(1));
        default(spec, "revisionHistoryLimit", json!(10));
        default(spec, "progressDeadlineSeconds", json!(600));
        default(spec, "strategy", json!({}));
        let strategy = obj_mut(&mut obj["spec"], "strategy");
        default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type") == Some(&json!("RollingUpdate")) {
            default(strategy, "rollingUpdate", json!({}));
            let ru = obj_mut(&mut obj["spec"]["strategy"], "rollingUpdate");
            default(ru, "maxUnavailable", json!("25%"));
            default(ru, "maxSurge", json!("25%"));
        }
        default_template(&mut obj["spec"]);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_controller(obj);
        // kube's ValidateDeploymentStrategy: a Recreate deployment has no rolling update
        // (an apply that switches to Recreate keeps the defaulted one and is refused).
        let strategy = &obj["spec"]["strategy"];
        if strategy["type"] == "Recreate" && !strategy["rollingUpdate"].is_null() {
            errs.push(FieldError::forbidden(
                "spec.strategy.rollingUpdate",
                "may not be specified when strategy `type` is 'Recreate'",
            ));
        }
        errs
    }

    fn table(&self) -> Option<Printer> {
        Some(table::workloads::deployments())
    }
}

impl Strategy for ReplicaSets {
    fn default(&self, obj: &mut Value, _creating: bool) {
        default(obj_mut(obj, "spec"), "replicas", json!(1));
        default_template(&mut obj["spec"]);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_controller(obj)
    }

    fn table(&self) -> Option<Printer> {
        Some(table::workloads::replicasets())
    }
}

impl Strategy for StatefulSets {
    /// A StatefulSet's name is its pods' hostname prefix: kube 1.33's
    /// `ValidateStatefulSetName` asks for a DNS label.
    fn validate_name(&self, name: &str) -> Option<FieldError> {
        validate_label("metadata.name", name)
    }

    fn default(&self, obj: &mut Value, _creating: bool) {
        let spec = obj_mut(obj, "spec");
        default(spec, "replicas", json!(1));
        default(spec, "podManagementPolicy", json!("OrderedReady"));
        default(spec, "revisionHistoryLimit", json!(10));
        default(spec, "updateStrategy", json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}));
        default(spec, "persistentVolumeClaimRetentionPolicy", json!({"whenDeleted": "Retain", "whenScaled": "Retain"}));
        default_template(&mut obj["spec"]);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_controller(obj)
    }

    fn table(&self) -> Option<Printer> {
        Some(table::workloads::statefulsets())
    }
}

impl Strategy for DaemonSets {
    fn default(&self, obj: &mut Value, _creating: bool) {
        let spec = obj_mut(obj, "spec");
        default(spec, "revisionHistoryLimit", json!(10));
        default(
            spec,
            "updateStrategy",
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
        );
        default_template(&mut obj["spec"]);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_controller(obj)
    }

    fn table(&self) -> Option<Printer> {
        Some(table::workloads::daemonsets())
    }
}

/// The rules shared by the apps/v1 controllers: a non-empty selector matching the
/// template's labels, valid containers, and non-negative replicas.
fn validate_controller(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sel = &obj["spec"]["selector"];
    if !sel.is_object() {
        errs.push(required("spec.selector"));
    } else if let Ok(s) = crate::selector::LabelSelector::from_label_selector_json(sel) {
        if s.is_empty() {
            errs.push(FieldError {
                field: "spec.selector".into(),
                reason: FieldErrorReason::Invalid,
                message: "Invalid value: \"null\": empty selector is invalid for deployment".into(),
            });
        } else if !s.matches(obj["spec"]["template"]["metadata"]["labels"].as_object()) {
            errs.push(FieldError {
                field: "spec.template.metadata.labels".into(),
                reason: FieldErrorReason::Invalid,
                message: format!(
                    "Invalid value: {}: `selector` does not match template `labels`",
                    obj["spec"]["template"]["metadata"]["labels"]
                ),
            });
        }
    }
    // A StatefulSet's pods also get a volume per claim template, which mounts may name.
    let claims: Vec<&str> = obj["spec"]["volumeClaimTemplates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["metadata"]["name"].as_str())
        .collect();
    errs.extend(validate_pod_spec_with_claims(&obj["spec"]["template"]["spec"], "spec.template.spec", &claims));
    if let Some(r) = obj["spec"]["replicas"].as_i64()
        && r < 0
    {
        errs.push(FieldError {
            field: "spec.replicas".into(),
            reason: FieldErrorReason::Invalid,
            message: format!("Invalid value: {r}: must be greater than or equal to 0"),
        });
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_defaults() {
        let mut d = json!({"metadata": {"name": "web"}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}}}});
        Deployments.default(&mut d, true);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        assert_eq!(d["spec"]["replicas"], 1);
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            (c["imagePullPolicy"].as_str(), c["ports"][0]["protocol"].as_str()),
            (Some("IfNotPresent"), Some("TCP"))
        );
    }

    #[test]
    fn a_recreate_deployment_has_no_rolling_update() {
        let spec = |strategy: Value| {
            json!({"metadata": {"name": "web"}, "spec": {"strategy": strategy, "selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
        };
        let messages = |d: &Value| Deployments.validate(d).iter().map(FieldError::to_message).collect::<Vec<_>>();
        let mut recreate = spec(json!({"type": "Recreate"}));
        Deployments.default(&mut recreate, true);
        assert_eq!(messages(&recreate), Vec::<String>::new());
        assert_eq!(
            messages(&spec(json!({"type": "Recreate", "rollingUpdate": {"maxSurge": "25%"}}))),
            ["spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"]
        );
    }

    /// KUDO's zookeeper renders `cpu: {{ .Params.CPUS }}` as a YAML number (`0.3`);
    /// kube stores every container quantity canonically, so kuttl asserts `"300m"`.
    #[test]
    fn container_quantities_are_stored_canonically() {
        let mut s = json!({"metadata": {"name": "zk"}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "zk:3", "resources": {"requests": {"cpu": 0.3, "memory": "256Mi"}, "limits": {"cpu": "0.25", "memory": "2048Mi", "nvidia.com/gpu": 1}}}]}}}});
        StatefulSets.default(&mut s, true);
        let r = &s["spec"]["template"]["spec"]["containers"][0]["resources"];
        assert_eq!(r["requests"], json!({"cpu": "300m", "memory": "256Mi"}));
        assert_eq!(r["limits"], json!({"cpu": "250m", "memory": "2Gi", "nvidia.com/gpu": "1"}));
    }
}
