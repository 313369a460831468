//! kube's validation of a PodSpec (`ValidatePodSpec`), shared by pods and every pod
//! template (Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs, …):
//! containers and their names, images, ports and environment variable names, volumes
//! and the mounts that refer to them, and the restart policy.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::registry::meta::validate_label;
use crate::schema::FieldError;

/// The container lists of a PodSpec, in the order kube validates them.
const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// Every error of the PodSpec at `path` (e.g. `spec` or `spec.template.spec`).
pub(super) fn validate_pod_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    validate_pod_spec_with_claims(spec, path, &[])
}

/// [`validate_pod_spec`] for a template whose pods also get a volume per name in
/// `claims` (a StatefulSet's `volumeClaimTemplates`), which its mounts may name.
pub(super) fn validate_pod_spec_with_claims(spec: &Value, path: &str, claims: &[&str]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if spec["containers"].as_array().is_none_or(Vec::is_empty) {
        errs.push(FieldError::required(&format!("{path}.containers"), ""));
    }
    let mut volumes = validate_volumes(&mut errs, spec, path);
    volumes.extend(claims.iter().map(|c| c.to_string()));
    let mut names = HashSet::new();
    for list in CONTAINER_LISTS {
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            let at = format!("{path}.{list}[{i}]");
            validate_container(&mut errs, c, &at, &mut names, &volumes);
        }
    }
    if let Some(policy) = spec["restartPolicy"].as_str()
        && !["Always", "OnFailure", "Never"].contains(&policy)
    {
        let supported = ["Always", "OnFailure", "Never"].map(String::from);
        errs.push(FieldError::not_supported(&format!("{path}.restartPolicy"), &json!(policy), &supported));
    }
    errs
}

/// Volume names: RFC 1123 labels, unique. Returns the names.
fn validate_volumes(errs: &mut Vec<FieldError>, spec: &Value, path: &str) -> HashSet<String> {
    let mut names = HashSet::new();
    for (i, v) in spec["volumes"].as_array().into_iter().flatten().enumerate() {
        let field = format!("{path}.volumes[{i}].name");
        match v["name"].as_str().filter(|n| !n.is_empty()) {
            None => errs.push(FieldError::required(&field, "")),
            Some(name) => {
                errs.extend(validate_label(&field, name));
                if !names.insert(name.to_string()) {
                    errs.push(FieldError::duplicate(&field, &json!(name)));
                }
            }
        }
    }
    names
}

/// One container: its name (an RFC 1123 label, unique across all container lists), image,
/// ports, env names and volume mounts.
fn validate_container(
    errs: &mut Vec<FieldError>,
    c: &Value,
    at: &str,
    names: &mut HashSet<String>,
    volumes: &HashSet<String>,
) {
    let field = format!("{at}.name");
    match c["name"].as_str().filter(|n| !n.is_empty()) {
        None => errs.push(FieldError::required(&field, "")),
        Some(name) => {
            errs.extend(validate_label(&field, name));
            if !names.insert(name.to_string()) {
                errs.push(FieldError::duplicate(&field, &json!(name)));
            }
        }
    }
    if c["image"].as_str().is_none_or(str::is_empty) {
        errs.push(FieldError::required(&format!("{at}.image"), ""));
    }
    validate_ports(errs, c, at);
    for (i, e) in c["env"].as_array().into_iter().flatten().enumerate() {
        let field = format!("{at}.env[{i}].name");
        match e["name"].as_str().filter(|n| !n.is_empty()) {
            None => errs.push(FieldError::required(&field, "")),
            Some(name) if !is_env_var_name(name) => errs.push(FieldError::invalid_str(
                &field,
                name,
                "a valid environment variable name must consist only of printable ASCII characters other than '='",
            )),
            Some(_) => {}
        }
    }
    for (i, m) in c["volumeMounts"].as_array().into_iter().flatten().enumerate() {
        let field = format!("{at}.volumeMounts[{i}].name");
        match m["name"].as_str().filter(|n| !n.is_empty()) {
            None => errs.push(FieldError::required(&field, "")),
            Some(name) if !volumes.contains(name) => errs.push(FieldError::not_found(&field, &json!(name))),
            Some(_) => {}
        }
        if m["mountPath"].as_str().is_none_or(str::is_empty) {
            errs.push(FieldError::required(&format!("{at}.volumeMounts[{i}].mountPath"), ""));
        }
    }
}

/// Container ports: numbers in 1–65535, supported protocols, IANA service names, unique names.
fn validate_ports(errs: &mut Vec<FieldError>, c: &Value, at: &str) {
    let mut names = HashSet::new();
    for (i, p) in c["ports"].as_array().into_iter().flatten().enumerate() {
        let port_at = format!("{at}.ports[{i}]");
        match p["containerPort"].as_i64() {
            None => errs.push(FieldError::required(&format!("{port_at}.containerPort"), "")),
            Some(n) if !(1..=65535).contains(&n) => errs.push(FieldError::invalid(
                &format!("{port_at}.containerPort"),
                &json!(n),
                "must be between 1 and 65535, inclusive",
            )),
            Some(_) => {}
        }
        if let Some(n) = p["hostPort"].as_i64()
            && n != 0
            && !(1..=65535).contains(&n)
        {
            errs.push(FieldError::invalid(
                &format!("{port_at}.hostPort"),
                &json!(n),
                "must be between 1 and 65535, inclusive",
            ));
        }
        if let Some(proto) = p["protocol"].as_str()
            && !["TCP", "UDP", "SCTP"].contains(&proto)
        {
            let supported = ["SCTP", "TCP", "UDP"].map(String::from);
            errs.push(FieldError::not_supported(&format!("{port_at}.protocol"), &json!(proto), &supported));
        }
        if let Some(name) = p["name"].as_str().filter(|n| !n.is_empty()) {
            let field = format!("{port_at}.name");
            if let Some(problem) = iana_service_name_problem(name) {
                errs.push(FieldError::invalid_str(&field, name, problem));
            } else if !names.insert(name.to_string()) {
                errs.push(FieldError::duplicate(&field, &json!(name)));
            }
        }
    }
}

/// kube's `IsValidPortName`: at most 15 characters, lowercase letters, digits and '-',
/// at least one letter, no leading, trailing or double '-'.
fn iana_service_name_problem(name: &str) -> Option<&'static str> {
    if name.len() > 15 {
        return Some("must be no more than 15 characters");
    }
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
        return Some("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if name.contains("--") {
        return Some("must not contain consecutive hyphens");
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        return Some("must contain at least one letter (a-z)");
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Some("must not begin or end with a hyphen");
    }
    None
}

/// kube 1.33's relaxed environment variable names: printable ASCII other than '='.
fn is_env_var_name(name: &str) -> bool {
    name.bytes().all(|b| (b' '..=b'~').contains(&b) && b != b'=')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(spec: Value) -> Vec<String> {
        validate_pod_spec(&spec, "spec").into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect()
    }

    #[test]
    fn a_valid_spec_has_no_errors() {
        let spec = json!({
            "containers": [{"name": "app", "image": "x", "ports": [{"name": "http", "containerPort": 80}],
                            "env": [{"name": "my.var-1", "value": "v"}],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "restartPolicy": "Never",
        });
        assert!(fields(spec).is_empty());
    }

    #[test]
    fn mounts_may_name_a_statefulsets_claim_templates() {
        let spec = json!({"containers": [{"name": "app", "image": "x", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}]});
        assert_eq!(validate_pod_spec(&spec, "spec.template.spec").len(), 1, "no such volume");
        assert!(validate_pod_spec_with_claims(&spec, "spec.template.spec", &["data"]).is_empty());
    }

    #[test]
    fn each_rule_reports_its_field() {
        let spec = json!({
            "containers": [{"name": "app", "image": "x",
                            "ports": [{"containerPort": 0}, {"name": "HTTP", "containerPort": 80, "protocol": "ICMP"}],
                            "env": [{"name": "A=B"}],
                            "volumeMounts": [{"name": "missing", "mountPath": "/m"}]}],
            "volumes": [{"name": "v"}, {"name": "v"}],
            "restartPolicy": "Sometimes",
        });
        let errs = fields(spec);
        for expected in [
            "spec.containers[0].ports[0].containerPort: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.containers[0].ports[1].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            "spec.containers[0].ports[1].name: Invalid value: \"HTTP\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
            "spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='",
            "spec.containers[0].volumeMounts[0].name: Not found: \"missing\"",
            "spec.volumes[1].name: Duplicate value: \"v\"",
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
        ] {
            assert!(errs.iter().any(|e| e == expected), "missing {expected:?} in {errs:#?}");
        }
    }
}
