//! scheduling.k8s.io PriorityClasses and kube's Priority admission plugin: the classes
//! `system-node-critical` and `system-cluster-critical` exist from the start; a
//! `system-` name is reserved for them and other classes stay at or below 1,000,000,000;
//! the value is immutable and only one class may be the global default. A new pod gets
//! `priority` and `preemptionPolicy` from the class it names (Forbidden when there is no
//! such class), or from the global default class, or 0.

use serde_json::{Value, json};

use super::Strategy;
use super::defaulting::{default, obj_mut};
use crate::auth::user::UserInfo;
use crate::error::{ApiError, ApiResult};
use crate::registry::view::StoreView;
use crate::registry::{Registry, WriteOptions, parse_stored};
use crate::schema::FieldError;
use crate::storage::ResourceId;
use crate::table::{self, Printer};

/// The strategy of scheduling.k8s.io/v1 PriorityClasses.
pub(super) struct PriorityClasses;

/// The highest value a class that is not a system class may have.
const HIGHEST_USER_DEFINABLE: i64 = 1_000_000_000;

/// kube's system classes: (name, value, description).
const SYSTEM_CLASSES: &[(&str, i64, &str)] = &[
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

impl Strategy for PriorityClasses {
    fn default(&self, obj: &mut Value, _creating: bool) {
        if let Some(o) = obj.as_object_mut() {
            default(o, "preemptionPolicy", json!("PreemptLowerPriority"));
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let value = obj["value"].as_i64().unwrap_or(0);
        let mut errs = Vec::new();
        if name.starts_with("system-") {
            let known = SYSTEM_CLASSES.iter().find(|(n, _, _)| *n == name);
            let problem = match known {
                None => Some(format!("{name:?} is not a known system priority class")),
                Some((_, v, _)) if *v != value => Some(format!("value of {name} PriorityClass must be {v}")),
                Some(_) if obj["globalDefault"] == true => {
                    Some(format!("globalDefault of {name} PriorityClass must be false"))
                }
                Some(_) => None,
            };
            if let Some(problem) = problem {
                let detail = format!(
                    "priority class names with 'system-' prefix are reserved for system use only. error: {problem}"
                );
                errs.push(FieldError::forbidden("metadata.name", &detail));
            }
        } else if value > HIGHEST_USER_DEFINABLE {
            let detail = format!("maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE}");
            errs.push(FieldError::forbidden("value", &detail));
        }
        if !matches!(obj["preemptionPolicy"].as_str(), Some("PreemptLowerPriority" | "Never")) {
            let supported = ["Never".to_string(), "PreemptLowerPriority".to_string()];
            errs.push(FieldError::not_supported("preemptionPolicy", &obj["preemptionPolicy"], &supported));
        }
        errs
    }

    /// The value and preemption policy are immutable; only one class may be the default
    /// (kube's Priority admission answers Forbidden).
    fn admit(&self, view: &StoreView<'_>, obj: &mut Value, old: Option<&Value>, _user: &UserInfo) -> ApiResult<()> {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        if let Some(old) = old {
            for field in ["value", "preemptionPolicy"] {
                if obj[field] != old[field] {
                    let err = FieldError::invalid(field, &obj[field], "field is immutable");
                    return Err(ApiError::invalid("scheduling.k8s.io", "PriorityClass", &name, &[err]));
                }
            }
        }
        if obj["globalDefault"] == true
            && let Some(other) =
                classes(view).into_iter().find(|c| c["globalDefault"] == true && c["metadata"]["name"] != name.as_str())
        {
            let other = other["metadata"]["name"].as_str().unwrap_or_default();
            return Err(forbidden(
                CLASSES,
                &name,
                &format!("PriorityClass {other} is already marked as default. Only one default can exist"),
            ));
        }
        Ok(())
    }

    fn table(&self) -> Option<Printer> {
        Some(table::policy::priorityclasses())
    }
}

/// kube's admission Forbidden: `<resource> "<name>" is forbidden: <why>`.
fn forbidden((group, resource): (&str, &str), name: &str, why: &str) -> ApiError {
    ApiError::forbidden(group, resource, name, format!("{resource} {name:?} is forbidden: {why}"))
}

const PODS: (&str, &str) = ("", "pods");
const CLASSES: (&str, &str) = ("scheduling.k8s.io", "priorityclasses");

fn classes(view: &StoreView<'_>) -> Vec<Value> {
    let stored = view.values(&ResourceId::new("scheduling.k8s.io", "priorityclasses"));
    stored.into_iter().filter_map(|(_, bytes)| parse_stored(&bytes).ok()).collect()
}

/// kube's Priority admission of a new pod: resolves `spec.priorityClassName` (or the
/// global default class) into `spec.priority` and `spec.preemptionPolicy`.
pub(super) fn admit_pod(view: &StoreView<'_>, pod: &mut Value) -> ApiResult<()> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let classes = classes(view);
    let class_name = pod["spec"]["priorityClassName"].as_str().unwrap_or_default().to_string();
    let (class_name, priority, policy) = if class_name.is_empty() {
        let default =
            classes.iter().filter(|c| c["globalDefault"] == true).min_by_key(|c| c["value"].as_i64().unwrap_or(0));
        match default {
            Some(c) => (c["metadata"]["name"].clone(), c["value"].as_i64().unwrap_or(0), c["preemptionPolicy"].clone()),
            None => (Value::Null, 0, json!("PreemptLowerPriority")),
        }
    } else {
        let Some(c) = classes.iter().find(|c| c["metadata"]["name"] == class_name.as_str()) else {
            return Err(forbidden(PODS, &name, &format!("no PriorityClass with name {class_name} was found")));
        };
        (json!(class_name), c["value"].as_i64().unwrap_or(0), c["preemptionPolicy"].clone())
    };
    let spec = obj_mut(pod, "spec");
    if let Some(given) = spec.get("priority").and_then(Value::as_i64)
        && given != priority
    {
        let why = format!(
            "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
        );
        return Err(forbidden(PODS, &name, &why));
    }
    if let (Some(given), Some(computed)) = (spec.get("preemptionPolicy").and_then(Value::as_str), policy.as_str())
        && given != computed
    {
        let why = format!(
            "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {computed} from the given PriorityClass name"
        );
        return Err(forbidden(PODS, &name, &why));
    }
    if !class_name.is_null() {
        spec.insert("priorityClassName".into(), class_name);
    }
    spec.insert("priority".into(), json!(priority));
    if !policy.is_null() {
        spec.insert("preemptionPolicy".into(), policy);
    }
    Ok(())
}

/// Creates kube's system PriorityClasses when missing.
pub(crate) async fn bootstrap(registry: &Registry) -> ApiResult<()> {
    let Some(info) = registry.catalog().snapshot().lookup("scheduling.k8s.io", "v1", "priorityclasses") else {
        return Ok(());
    };
    let target = registry.target(info, "v1".into(), None);
    let opts = WriteOptions { field_manager: "kube-apiserver".into(), ..Default::default() };
    for (name, value, description) in SYSTEM_CLASSES {
        let body = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "description": description});
        registry.create_if_missing(&target, body, &opts).await?;
    }
    Ok(())
}
