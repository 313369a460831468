//! Validation of `pods/ephemeralcontainers` updates, as kube's
//! `ValidatePodEphemeralContainersUpdate` and `validateEphemeralContainers`: existing
//! ephemeral containers can be neither changed nor removed, names are unique across all
//! containers of the pod, a target names a regular or init container, and the fields an
//! ephemeral container cannot have (ports, probes, resources, lifecycle) are refused.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::schema::FieldError;

/// The path of the list in the pod.
const PATH: &str = "spec.ephemeralContainers";

/// kube's message for fields outside `allowedEphemeralContainerFields`.
const NOT_FOR_EPHEMERAL: &str = "cannot be set for an Ephemeral Container";

/// The container fields kube does not allow on an ephemeral container.
const FORBIDDEN_FIELDS: [&str; 8] = [
    "ports",
    "resources",
    "resizePolicy",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "restartPolicy",
];

/// Whether a field holds a value Go would not treat as its zero value (kubectl sends
/// `resources: {}` on every container it builds).
fn is_set(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Object(m) => m.values().any(is_set),
        Value::Array(a) => !a.is_empty(),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

/// The names of the containers of `list` in the pod spec.
fn names<'a>(spec: &'a Value, list: &str) -> impl Iterator<Item = &'a str> {
    spec[list].as_array().into_iter().flatten().filter_map(|c| c["name"].as_str())
}

/// The errors of the new ephemeral containers of `new`, and of changes to those of `old`.
pub(super) fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &new["spec"];
    let empty = Vec::new();
    let ephemeral = match &spec["ephemeralContainers"] {
        Value::Null => &empty,
        Value::Array(list) => list,
        other => {
            errs.push(FieldError::invalid(PATH, other, "must be a list of ephemeral containers"));
            return errs;
        }
    };
    let others: BTreeSet<&str> = names(spec, "containers").chain(names(spec, "initContainers")).collect();
    let mut all = others.clone();
    for (i, c) in ephemeral.iter().enumerate() {
        let at = format!("{PATH}[{i}]");
        match c["name"].as_str().filter(|n| !n.is_empty()) {
            None => errs.push(FieldError::required(&format!("{at}.name"), "")),
            Some(name) if !all.insert(name) => errs.push(FieldError::duplicate(&format!("{at}.name"), &c["name"])),
            Some(_) => {}
        }
        if c["image"].as_str().is_none_or(str::is_empty) {
            errs.push(FieldError::required(&format!("{at}.image"), ""));
        }
        if let Some(target) = c["targetContainerName"].as_str().filter(|t| !t.is_empty())
            && !others.contains(target)
        {
            errs.push(FieldError::not_found(&format!("{at}.targetContainerName"), &c["targetContainerName"]));
        }
        for field in FORBIDDEN_FIELDS {
            if is_set(&c[field]) {
                errs.push(FieldError::forbidden(&format!("{at}.{field}"), NOT_FOR_EPHEMERAL));
            }
        }
        for (j, mount) in c["volumeMounts"].as_array().into_iter().flatten().enumerate() {
            for field in ["subPath", "subPathExpr"] {
                if is_set(&mount[field]) {
                    errs.push(FieldError::forbidden(&format!("{at}.volumeMounts[{j}].{field}"), NOT_FOR_EPHEMERAL));
                }
            }
        }
    }
    for existing in old["spec"]["ephemeralContainers"].as_array().into_iter().flatten() {
        let name = existing["name"].as_str().unwrap_or_default();
        match ephemeral.iter().find(|c| c["name"].as_str() == Some(name)) {
            None => errs.push(FieldError::forbidden(
                PATH,
                &format!("existing ephemeral containers {name:?} may not be removed"),
            )),
            Some(now) if now != existing => errs.push(FieldError::forbidden(
                PATH,
                &format!("existing ephemeral containers {name:?} may not be changed"),
            )),
            Some(_) => {}
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ephemeral: Value) -> Value {
        json!({"spec": {"containers": [{"name": "app", "image": "nginx"}], "ephemeralContainers": ephemeral}})
    }

    #[test]
    fn new_debug_container_passes_and_kubectls_empty_resources_are_unset() {
        let new = pod(json!([{"name": "debugger", "image": "busybox", "targetContainerName": "app", "resources": {}}]));
        assert_eq!(validate_update(&new, &pod(Value::Null)), Vec::new());
    }

    #[test]
    fn refusals_name_kubes_fields() {
        let new = pod(json!([{"name": "app", "image": "busybox", "targetContainerName": "nope",
            "ports": [{"containerPort": 80}], "resources": {"limits": {"cpu": "1"}}}]));
        let fields: Vec<(String, &str)> =
            validate_update(&new, &pod(Value::Null)).into_iter().map(|e| (e.field, e.reason.as_str())).collect();
        assert_eq!(
            fields,
            [
                ("spec.ephemeralContainers[0].name".to_string(), "FieldValueDuplicate"),
                ("spec.ephemeralContainers[0].targetContainerName".to_string(), "FieldValueNotFound"),
                ("spec.ephemeralContainers[0].ports".to_string(), "FieldValueForbidden"),
                ("spec.ephemeralContainers[0].resources".to_string(), "FieldValueForbidden"),
            ]
        );
    }

    #[test]
    fn existing_ones_cannot_change_or_go() {
        let old = pod(json!([{"name": "d1", "image": "busybox"}, {"name": "d2", "image": "busybox"}]));
        let new = pod(json!([{"name": "d1", "image": "alpine"}]));
        let messages: Vec<String> = validate_update(&new, &old).into_iter().map(|e| e.to_message()).collect();
        assert_eq!(
            messages,
            [
                "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"d1\" may not be changed",
                "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"d2\" may not be removed",
            ]
        );
    }
}
