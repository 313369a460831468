//! HorizontalPodAutoscalers: stored at autoscaling/v2 and also served at autoscaling/v1,
//! converted as kube's `pkg/apis/autoscaling/v1/conversion.go` does. v1 has only a CPU
//! utilization target; everything v2 has beyond it travels in v1 objects as kube's
//! round-trip annotations, so a v2 → v1 → v2 round trip loses nothing.

use serde_json::{Map, Value, json};

use super::defaulting::default;
use super::{Strategy, keep_stored_status, stored_with_new_status};
use crate::schema::FieldError;
use crate::table::{self, Printer};

/// The strategy of autoscaling horizontalpodautoscalers (v2 stored, v1 converted).
pub(super) struct HorizontalPodAutoscalers;

/// kube's `MetricSpecsAnnotation`: the v2 metrics a v1 object cannot hold.
const METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// kube's `MetricStatusesAnnotation`: every v2 current metric.
const CURRENT_METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// kube's `HorizontalPodAutoscalerConditionsAnnotation`: the v2 status conditions.
const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// kube's `BehaviorSpecsAnnotation`: the v2 `spec.behavior`.
const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";

/// The annotations that carry v2-only fields through v1, in the order they are checked.
const ROUND_TRIP_ANNOTATIONS: [&str; 4] =
    [METRICS_ANNOTATION, CURRENT_METRICS_ANNOTATION, CONDITIONS_ANNOTATION, BEHAVIOR_ANNOTATION];

/// kube's `DefaultCPUUtilization`: the target of an autoscaler that names no metric.
const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// The version the objects are stored at.
const STORAGE_VERSION: &str = "v2";

/// A v2 metric: CPU at an average utilization of `percent`.
fn cpu_utilization_metric(percent: &Value) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": percent}}})
}

/// The CPU average utilization a v2 metric spec targets, if it is a CPU utilization metric.
fn cpu_target(metric: &Value) -> Option<&Value> {
    (metric["type"] == "Resource" && metric["resource"]["name"] == "cpu")
        .then(|| &metric["resource"]["target"]["averageUtilization"])
        .filter(|v| v.is_number())
}

/// Removes `key` from `obj` and returns it when it is a non-empty array or a non-null value.
fn take(obj: &mut Value, key: &str) -> Option<Value> {
    let v = obj.as_object_mut()?.remove(key)?;
    match &v {
        Value::Null => None,
        Value::Array(a) if a.is_empty() => None,
        _ => Some(v),
    }
}

/// The object's annotations, created when missing.
fn annotations_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let meta = obj.as_object_mut()?.entry("metadata").or_insert_with(|| json!({})).as_object_mut()?;
    let a = meta.entry("annotations").or_insert_with(|| json!({}));
    if !a.is_object() {
        *a = json!({});
    }
    a.as_object_mut()
}

/// Removes the round-trip annotations (and an annotation map left empty); returns them
/// parsed, as (annotation, value) for those that are valid JSON.
fn take_round_trip_annotations(obj: &mut Value) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else { return out };
    let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) else { return out };
    for key in ROUND_TRIP_ANNOTATIONS {
        if let Some(Value::String(text)) = annotations.remove(key)
            && let Ok(v) = serde_json::from_str::<Value>(&text)
        {
            out.insert(key.to_string(), v);
        }
    }
    if annotations.is_empty() {
        meta.remove("annotations");
    }
    out
}

/// kube's conversion of a stored autoscaling/v2 object to autoscaling/v1.
fn v2_to_v1(obj: &mut Value) {
    let mut keep: Vec<(&str, Value)> = Vec::new();
    if obj["spec"].is_object() {
        let spec = &mut obj["spec"];
        let metrics = take(spec, "metrics").and_then(|m| m.as_array().cloned()).unwrap_or_default();
        let cpu = metrics.iter().find_map(cpu_target).cloned();
        let others: Vec<Value> = metrics.into_iter().filter(|m| cpu_target(m).is_none()).collect();
        if let Some(cpu) = cpu {
            spec["targetCPUUtilizationPercentage"] = cpu;
        }
        if !others.is_empty() {
            keep.push((METRICS_ANNOTATION, Value::Array(others)));
        }
        if let Some(behavior) = take(spec, "behavior") {
            keep.push((BEHAVIOR_ANNOTATION, behavior));
        }
    }
    if obj["status"].is_object() {
        let status = &mut obj["status"];
        if let Some(current) = take(status, "currentMetrics") {
            let cpu = current.as_array().into_iter().flatten().find_map(|m| {
                (m["type"] == "Resource" && m["resource"]["name"] == "cpu")
                    .then(|| m["resource"]["current"]["averageUtilization"].clone())
                    .filter(Value::is_number)
            });
            if let Some(cpu) = cpu {
                status["currentCPUUtilizationPercentage"] = cpu;
            }
            keep.push((CURRENT_METRICS_ANNOTATION, current));
        }
        if let Some(conditions) = take(status, "conditions") {
            keep.push((CONDITIONS_ANNOTATION, conditions));
        }
    }
    if keep.is_empty() {
        return;
    }
    let Some(annotations) = annotations_mut(obj) else { return };
    for (key, value) in keep {
        annotations.insert(key.to_string(), Value::String(value.to_string()));
    }
}

/// kube's conversion of an autoscaling/v1 object to the stored autoscaling/v2.
fn v1_to_v2(obj: &mut Value) {
    let mut saved = take_round_trip_annotations(obj);
    if obj["spec"].is_object() {
        let spec = &mut obj["spec"];
        let mut metrics: Vec<Value> = Vec::new();
        if let Some(cpu) = take(spec, "targetCPUUtilizationPercentage") {
            metrics.push(cpu_utilization_metric(&cpu));
        }
        if let Some(Value::Array(others)) = saved.remove(METRICS_ANNOTATION) {
            metrics.extend(others);
        }
        if metrics.is_empty() {
            metrics.push(cpu_utilization_metric(&json!(DEFAULT_CPU_UTILIZATION)));
        }
        spec["metrics"] = Value::Array(metrics);
        if let Some(behavior) = saved.remove(BEHAVIOR_ANNOTATION).filter(Value::is_object) {
            spec["behavior"] = behavior;
        }
    }
    if let Some(status) = obj.get_mut("status").filter(|s| s.is_object()) {
        let cpu = take(status, "currentCPUUtilizationPercentage");
        match (saved.remove(CURRENT_METRICS_ANNOTATION).filter(Value::is_array), cpu) {
            // The annotation holds every current metric, CPU included, with more detail.
            (Some(current), _) => status["currentMetrics"] = current,
            (None, Some(cpu)) => {
                status["currentMetrics"] =
                    json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": cpu}}}]);
            }
            (None, None) => {}
        }
        if let Some(conditions) = saved.remove(CONDITIONS_ANNOTATION).filter(Value::is_array) {
            status["conditions"] = conditions;
        }
    }
    obj["apiVersion"] = json!(format!("autoscaling/{STORAGE_VERSION}"));
}

/// The round-trip annotations that carry status (not spec) fields.
const STATUS_ANNOTATIONS: [&str; 2] = [CURRENT_METRICS_ANNOTATION, CONDITIONS_ANNOTATION];

/// Sets the status annotations of `to` to those of `from` (absent ones removed): in the
/// v1 form they are part of the status, so they follow the status subresource's rules.
fn copy_status_annotations(to: &mut Value, from: &Value) {
    let from = &from["metadata"]["annotations"];
    if STATUS_ANNOTATIONS.iter().all(|k| from[*k].is_null() && to["metadata"]["annotations"][*k].is_null()) {
        return;
    }
    let Some(annotations) = annotations_mut(to) else { return };
    for key in STATUS_ANNOTATIONS {
        match &from[key] {
            Value::Null => annotations.remove(key),
            v => annotations.insert(key.to_string(), v.clone()),
        };
    }
    if annotations.is_empty()
        && let Some(meta) = to["metadata"].as_object_mut()
    {
        meta.remove("annotations");
    }
}

impl Strategy for HorizontalPodAutoscalers {
    /// The generic rule (the stored status is kept), with the status the v1 form keeps
    /// in annotations kept too.
    fn prepare_for_update(&self, new: &mut Value, old: &Value, has_status: bool) {
        if has_status {
            keep_stored_status(new, old);
            copy_status_annotations(new, old);
        }
    }

    /// The generic rule (the new status on the stored object), with the status the v1
    /// form keeps in annotations taken from the request too.
    fn prepare_for_status_update(&self, body: &Value, old: &Value) -> Value {
        let mut n = stored_with_new_status(body, old);
        copy_status_annotations(&mut n, body);
        n
    }

    fn converts_storage(&self, version: &str) -> bool {
        version != STORAGE_VERSION
    }

    fn convert_to_storage(&self, obj: &mut Value, version: &str) {
        if version == STORAGE_VERSION {
            // v2 round-trips without annotations: drop any a client copied from v1.
            take_round_trip_annotations(obj);
        } else {
            v1_to_v2(obj);
        }
    }

    fn convert_from_storage(&self, obj: &mut Value, version: &str) {
        if version != STORAGE_VERSION {
            v2_to_v1(obj);
        }
    }

    /// kube's `SetDefaults_HorizontalPodAutoscaler` of both versions: one replica at
    /// least; a v2 autoscaler with no metric targets 80% CPU utilization (v1's default
    /// is applied by the conversion, which sees the annotated metrics too).
    fn default(&self, obj: &mut Value, _creating: bool) {
        let v2 = obj["apiVersion"] == format!("autoscaling/{STORAGE_VERSION}");
        let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else { return };
        default(spec, "minReplicas", json!(1));
        if v2 && spec.get("metrics").is_none_or(|m| m.as_array().is_none_or(Vec::is_empty)) {
            spec.insert("metrics".into(), json!([cpu_utilization_metric(&json!(DEFAULT_CPU_UTILIZATION))]));
        }
    }

    /// A v1 object's round-trip annotations must hold the JSON kube writes there.
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        if obj["apiVersion"] == format!("autoscaling/{STORAGE_VERSION}") {
            return Vec::new();
        }
        let annotations = &obj["metadata"]["annotations"];
        ROUND_TRIP_ANNOTATIONS
            .iter()
            .filter_map(|key| {
                let text = annotations[*key].as_str()?;
                let parsed = serde_json::from_str::<Value>(text).ok();
                let well_formed =
                    parsed.is_some_and(|v| if *key == BEHAVIOR_ANNOTATION { v.is_object() } else { v.is_array() });
                (!well_formed).then(|| {
                    FieldError::invalid_str(
                        &format!("metadata.annotations[{key}]"),
                        text,
                        "must be the JSON kube-apiserver writes for this annotation",
                    )
                })
            })
            .collect()
    }

    fn table(&self) -> Option<Printer> {
        Some(table::autoscaling::horizontalpodautoscalers())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2_object() -> Value {
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "annotations": {"team": "a"}},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                "minReplicas": 2, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}},
            "status": {"currentReplicas": 2, "desiredReplicas": 3,
                "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40, "averageValue": "40m"}}}],
                "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale"}]}})
    }

    #[test]
    fn v2_to_v1_to_v2_loses_nothing() {
        let stored = v2_object();
        let mut v1 = stored.clone();
        v2_to_v1(&mut v1);
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 70);
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 40);
        assert!(v1["spec"]["metrics"].is_null() && v1["status"]["conditions"].is_null());
        let annotations = &v1["metadata"]["annotations"];
        for key in ROUND_TRIP_ANNOTATIONS {
            assert!(annotations[key].is_string(), "{key} kept");
        }
        v1_to_v2(&mut v1);
        // The CPU target comes back first; the other metrics follow.
        let mut expected = stored;
        let metrics = expected["spec"]["metrics"].as_array_mut().expect("metrics");
        metrics.swap(0, 1);
        assert_eq!(v1, expected);
    }

    #[test]
    fn a_malformed_round_trip_annotation_is_invalid_at_v1_only() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "metadata": {"annotations": {METRICS_ANNOTATION: "{"}}});
        let errs = HorizontalPodAutoscalers.validate(&v1);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "metadata.annotations[autoscaling.alpha.kubernetes.io/metrics]");
        let mut v2 = v1.clone();
        v2["apiVersion"] = json!("autoscaling/v2");
        assert!(HorizontalPodAutoscalers.validate(&v2).is_empty());
    }

    #[test]
    fn v1_without_target_gets_kubes_default_cpu_target() {
        let mut v1 = json!({"apiVersion": "autoscaling/v1", "spec": {"maxReplicas": 3}});
        v1_to_v2(&mut v1);
        assert_eq!(v1["spec"]["metrics"], json!([cpu_utilization_metric(&json!(80))]));
        assert!(v1["metadata"].is_null());
    }
}
