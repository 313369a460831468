//! The diff kuttl prints when an assert fails (`PrettyDiff`): the expected and the
//! actual object as YAML (`sigs.k8s.io/yaml`'s layout, through `opkit-helm`'s emitter),
//! server-managed metadata removed, fields of the actual object that the assert does
//! not mention and that span ten lines or more elided, as a unified diff with three
//! lines of context headed by each object's `Kind:namespace/name`.

use serde_json::{Map, Value};

/// How many lines an unmentioned field may span before it is elided.
const MAX_LINES: usize = 10;

/// `Kind:namespace/name`, as kuttl names objects in its log.
pub(crate) fn resource_id(object: &Value) -> String {
    let meta = &object["metadata"];
    format!(
        "{}:{}/{}",
        object["kind"].as_str().unwrap_or_default(),
        meta["namespace"].as_str().unwrap_or_default(),
        meta["name"].as_str().unwrap_or_default()
    )
}

/// The unified diff from `expected` to `actual`.
pub(crate) fn pretty_diff(expected: &Value, actual: &Value) -> String {
    let mut pruned = actual.clone();
    if let (Value::Object(e), Value::Object(a)) = (expected, &mut pruned) {
        prune(e, a);
    }
    let from = to_yaml(&clean(expected));
    let to = to_yaml(&clean(&pruned));
    similar::TextDiff::from_lines(&from, &to)
        .unified_diff()
        .context_radius(3)
        .header(&resource_id(expected), &resource_id(actual))
        .to_string()
}

/// Elides the fields of `actual` that `expected` does not mention and that are long.
fn prune(expected: &Map<String, Value>, actual: &mut Map<String, Value>) {
    for (key, value) in actual.iter_mut() {
        match expected.get(key) {
            Some(Value::Object(e)) => {
                if let Value::Object(a) = value {
                    prune(e, a);
                }
            }
            Some(_) => {}
            None => {
                let mut one = Map::new();
                one.insert(key.clone(), value.clone());
                if to_yaml(&Value::Object(one)).matches('\n').count() >= MAX_LINES {
                    *value = Value::String(format!("[... elided field over {MAX_LINES} lines long ...]"));
                }
            }
        }
    }
}

/// The object without what the server manages (`cleanObjectForMarshalling`).
fn clean(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["resourceVersion", "creationTimestamp", "selfLink", "uid", "generation"] {
            meta.remove(field);
        }
        let empty = match meta.get_mut("annotations").and_then(Value::as_object_mut) {
            Some(annotations) => {
                annotations.remove("deployment.kubernetes.io/revision");
                annotations.is_empty()
            }
            None => false,
        };
        if empty {
            meta.remove("annotations");
        }
    }
    object
}

fn to_yaml(value: &Value) -> String {
    opkit_helm::yaml::to_yaml(&opkit_helm::value::Value::from_json(value))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_diff_is_kuttls_unified_diff_with_long_fields_elided() {
        let expected = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns"}, "status": {"readyReplicas": 2}});
        let labels: serde_json::Map<String, Value> = (0..12).map(|i| (format!("l{i}"), json!("v"))).collect();
        let actual = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
            "spec": {"template": {"metadata": {"labels": labels}}},
            "status": {"replicas": 2}});
        let diff = pretty_diff(&expected, &actual);
        assert_eq!(
            diff,
            "--- Deployment:ns/web\n+++ Deployment:ns/web\n@@ -3,5 +3,6 @@\n metadata:\n   name: web\n   namespace: ns\n+spec: '[... elided field over 10 lines long ...]'\n status:\n-  readyReplicas: 2\n+  replicas: 2\n"
        );
    }
}
