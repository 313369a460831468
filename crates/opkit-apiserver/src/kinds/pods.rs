//! Pods: create-time status and defaults, container validation, graceful deletion
//! confirmed by the kubelet, and the pod Table printer.

use serde_json::{Value, json};

use super::defaulting::default;
use super::{KubeletSubresource, Strategy, keep_stored_status};
use crate::auth::user::UserInfo;
use crate::error::{ApiError, ApiResult};
use crate::registry::view::StoreView;
use crate::schema::{FieldError, FieldErrorReason};
use crate::selector::{FieldLabels, scalar_at, scalar_at_or};
use crate::table::{self, Printer};

/// The strategy of core/v1 pods.
pub(super) struct Pods;

/// The subresource through which ephemeral containers are added.
const EPHEMERAL_CONTAINERS: &str = "ephemeralcontainers";

impl Strategy for Pods {
    fn has_eviction(&self) -> bool {
        true
    }

    /// kube's pod connect subresources (its `pods/proxy` aside), served by the kubelet.
    fn kubelet_subresources(&self) -> &'static [KubeletSubresource] {
        const CONNECT: &[&str] = &["create", "get"];
        &[
            KubeletSubresource { name: "attach", kind: "PodAttachOptions", verbs: CONNECT },
            KubeletSubresource { name: "exec", kind: "PodExecOptions", verbs: CONNECT },
            KubeletSubresource { name: "log", kind: "Pod", verbs: &["get"] },
            KubeletSubresource { name: "portforward", kind: "PodPortForwardOptions", verbs: CONNECT },
        ]
    }

    fn update_subresources(&self) -> &'static [&'static str] {
        &[EPHEMERAL_CONTAINERS]
    }

    /// kube's `podEphemeralContainersStrategy`: only `spec.ephemeralContainers` (and
    /// the request's managed fields) change.
    fn prepare_for_subresource_update(&self, _sub: &str, body: &Value, old: &Value) -> Value {
        let mut n = old.clone();
        match (n["spec"].as_object_mut(), &body["spec"]["ephemeralContainers"]) {
            (Some(spec), Value::Null) => {
                spec.remove("ephemeralContainers");
            }
            (Some(spec), list) => {
                spec.insert("ephemeralContainers".into(), list.clone());
            }
            (None, _) => {}
        }
        if let (Some(mf), Some(m)) = (body["metadata"]["managedFields"].as_array(), n["metadata"].as_object_mut()) {
            m.insert("managedFields".into(), Value::Array(mf.clone()));
        }
        n
    }

    fn validate_subresource_update(&self, _sub: &str, new: &Value, old: &Value) -> Vec<FieldError> {
        super::ephemeral_containers::validate_update(new, old)
    }

    /// kube's Priority admission, for new pods; a new pod cannot have ephemeral
    /// containers (they are added through the subresource).
    fn admit(&self, view: &StoreView<'_>, obj: &mut Value, old: Option<&Value>, _user: &UserInfo) -> ApiResult<()> {
        if old.is_some() {
            return Ok(());
        }
        if obj["spec"]["ephemeralContainers"].as_array().is_some_and(|l| !l.is_empty()) {
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            let err = FieldError::forbidden("spec.ephemeralContainers", "cannot be set on create");
            return Err(ApiError::invalid("", "Pod", name, &[err]));
        }
        super::priorityclasses::admit_pod(view, obj)
    }

    /// The generic rule (the stored status is kept), and the stored ephemeral
    /// containers: only the `ephemeralcontainers` subresource changes them.
    fn prepare_for_update(&self, new: &mut Value, old: &Value, has_status: bool) {
        if has_status {
            keep_stored_status(new, old);
        }
        let stored = &old["spec"]["ephemeralContainers"];
        if let Some(spec) = new["spec"].as_object_mut() {
            match stored {
                Value::Null => spec.remove("ephemeralContainers"),
                list => spec.insert("ephemeralContainers".into(), list.clone()),
            };
        }
    }

    /// kube's registry of this kind answers a DELETE with the deleted object.
    fn returns_deleted_object(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, obj: &mut Value, _has_status: bool) {
        obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
        if obj["spec"]["restartPolicy"].is_null() {
            obj["spec"]["restartPolicy"] = json!("Always");
        }
        if obj["spec"]["serviceAccountName"].is_null() {
            obj["spec"]["serviceAccountName"] = json!("default");
        }
        if obj["spec"]["terminationGracePeriodSeconds"].is_null() {
            obj["spec"]["terminationGracePeriodSeconds"] = json!(30);
        }
        add_default_tolerations(&mut obj["spec"]);
    }

    fn default(&self, obj: &mut Value, _creating: bool) {
        default_pod_spec(&mut obj["spec"]);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        super::pod_spec::validate_pod_spec(&obj["spec"], "spec")
    }

    /// Only pods bound to a node terminate gracefully (their kubelet confirms with a
    /// 0-second delete).
    fn grace_period(&self, obj: &Value, options: &Value) -> Option<i64> {
        if obj["spec"]["nodeName"].as_str().is_none_or(str::is_empty) {
            return None;
        }
        let phase = obj["status"]["phase"].as_str().unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            return None;
        }
        let grace = options["gracePeriodSeconds"]
            .as_i64()
            .or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(30);
        if grace <= 0 {
            return None;
        }
        if obj["metadata"]["deletionTimestamp"].is_string() {
            let current = obj["metadata"]["deletionGracePeriodSeconds"].as_i64().unwrap_or(grace);
            return Some(current.min(grace));
        }
        Some(grace)
    }

    /// A terminating pod goes away when its kubelet confirms (a delete with grace 0).
    fn holds_removal(&self, obj: &Value) -> bool {
        obj["metadata"]["deletionGracePeriodSeconds"].as_i64().unwrap_or(0) != 0
    }

    fn field_labels(&self) -> FieldLabels {
        POD_FIELD_LABELS
    }

    fn table(&self) -> Option<Printer> {
        Some(table::pods::pods())
    }
}

/// The taints the DefaultTolerationSeconds admission plugin makes every pod tolerate for
/// [`DEFAULT_TOLERATION_SECONDS`]: a node that stops being ready or reachable.
const DEFAULT_TOLERATED_TAINTS: [&str; 2] = ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"];

/// kube-apiserver's `--default-not-ready-toleration-seconds` and
/// `--default-unreachable-toleration-seconds`.
const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// Adds the DefaultTolerationSeconds admission plugin's tolerations to a new pod's spec:
/// `NoExecute` for each of [`DEFAULT_TOLERATED_TAINTS`], unless a toleration already
/// covers that key and effect (an empty key or effect matches all).
fn add_default_tolerations(spec: &mut Value) {
    let Some(s) = spec.as_object_mut() else { return };
    let tolerations = s.entry("tolerations").or_insert_with(|| json!([]));
    if tolerations.is_null() {
        *tolerations = json!([]);
    }
    let Some(list) = tolerations.as_array_mut() else { return };
    for key in DEFAULT_TOLERATED_TAINTS {
        let covered = list.iter().any(|t| {
            let k = t["key"].as_str().unwrap_or_default();
            let effect = t["effect"].as_str().unwrap_or_default();
            (k.is_empty() || k == key) && (effect.is_empty() || effect == "NoExecute")
        });
        if !covered {
            list.push(json!({
                "key": key,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
            }));
        }
    }
}

/// Defaults of a pod spec, also applied to the pod templates of workloads.
pub(super) fn default_pod_spec(spec: &mut Value) {
    let Some(s) = spec.as_object_mut() else { return };
    default(s, "restartPolicy", json!("Always"));
    default(s, "dnsPolicy", json!("ClusterFirst"));
    default(s, "schedulerName", json!("default-scheduler"));
    default(s, "terminationGracePeriodSeconds", json!(30));
    default(s, "securityContext", json!({}));
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        let Some(containers) = s.get_mut(list).and_then(Value::as_array_mut) else { continue };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
            let tag = image.rsplit('/').next().and_then(|last| last.split_once(':')).map(|(_, t)| t);
            let pull =
                if image.contains('@') || tag.is_some_and(|t| t != "latest") { "IfNotPresent" } else { "Always" };
            default(c, "imagePullPolicy", json!(pull));
            default(c, "terminationMessagePath", json!("/dev/termination-log"));
            default(c, "terminationMessagePolicy", json!("File"));
            if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                    default(p, "protocol", json!("TCP"));
                }
            }
            canonical_resources(c.get_mut("resources"));
        }
    }
}

/// A container's `requests` and `limits` as kube stores them: each quantity in its
/// canonical form, a JSON number read as one (`cpu: 0.3` and `cpu: "0.3"` are `"300m"`),
/// as `resource.Quantity` decodes and encodes them.
fn canonical_resources(resources: Option<&mut Value>) {
    let Some(resources) = resources else { return };
    for list in ["requests", "limits"] {
        let Some(values) = resources.get_mut(list).and_then(Value::as_object_mut) else { continue };
        for value in values.values_mut() {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => continue,
            };
            if let Some(canonical) = opkit_apimachinery::quantity::canonical(&text) {
                *value = Value::String(canonical);
            }
        }
    }
}

/// Defaults of the pod template at `spec.template.spec`, when there is one.
pub(super) fn default_template(spec: &mut Value) {
    if spec["template"]["spec"].is_object() {
        default_pod_spec(&mut spec["template"]["spec"]);
    }
}

/// A `Required value` error at `field`.
pub(super) fn required(field: &str) -> FieldError {
    FieldError { field: field.into(), reason: FieldErrorReason::Required, message: "Required value".into() }
}

/// The field labels of pods (kube's `PodToSelectableFields` and field-label conversion).
const POD_FIELD_LABELS: FieldLabels = FieldLabels {
    names: Some(&[
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
        "spec.host",
    ]),
    value: pod_field_value,
    unsupported: None,
};

/// A pod's value of a field label (`spec.host` is `spec.nodeName`, `status.podIP` the
/// first of `status.podIPs`, `status.podIPs` itself never matches a value).
fn pod_field_value(obj: &Value, field: &str) -> Option<String> {
    Some(match field {
        "spec.nodeName" | "spec.host" => scalar_at(obj, "spec.nodeName"),
        "spec.restartPolicy"
        | "spec.schedulerName"
        | "spec.serviceAccountName"
        | "status.phase"
        | "status.nominatedNodeName" => scalar_at(obj, field),
        "spec.hostNetwork" => scalar_at_or(obj, "spec.hostNetwork", "false"),
        "status.podIP" => obj["status"]["podIPs"]
            .get(0)
            .map(|ip| scalar_at(ip, "ip"))
            .unwrap_or_else(|| scalar_at(obj, "status.podIP")),
        "status.podIPs" => String::new(),
        _ => return None,
    })
}
