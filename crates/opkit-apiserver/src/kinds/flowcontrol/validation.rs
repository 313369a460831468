//! kube's validation of flowcontrol.apiserver.k8s.io/v1 objects
//! (`pkg/apis/flowcontrol/validation`): FlowSchema specs and their rules and subjects,
//! PriorityLevelConfiguration specs with their shuffle-sharding limits, status
//! conditions, and the fixed specs of the mandatory objects.

use serde_json::Value;

use crate::registry::meta::{validate_label, validate_subdomain};
use crate::schema::FieldError;

const VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"];
const MAX_QUEUES: i64 = 10_000_000;
/// The hash bits shuffle sharding can draw a hand from (kube's `shufflesharding.MaxHashBits`).
const MAX_HASH_BITS: f64 = 60.0;

fn supported(values: &[&str]) -> Vec<String> {
    values.iter().map(|s| s.to_string()).collect()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// The errors of a FlowSchema's spec.
pub(super) fn flow_schema_spec(name: &str, spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let precedence = spec["matchingPrecedence"].as_i64().unwrap_or(0);
    let field = "spec.matchingPrecedence";
    if precedence <= 0 {
        errs.push(FieldError::invalid(field, &spec["matchingPrecedence"], "must be a positive value"));
    }
    if precedence > 10000 {
        errs.push(FieldError::invalid(field, &spec["matchingPrecedence"], "must not be greater than 10000"));
    }
    if precedence == 1 && name != "exempt" {
        errs.push(FieldError::invalid(
            field,
            &spec["matchingPrecedence"],
            "only the schema named 'exempt' may have matchingPrecedence 1",
        ));
    }
    let method = &spec["distinguisherMethod"];
    if method.is_object() && !matches!(method["type"].as_str(), Some("ByNamespace" | "ByUser")) {
        errs.push(FieldError::not_supported(
            "spec.distinguisherMethod.type",
            &method["type"],
            &supported(&["ByNamespace", "ByUser"]),
        ));
    }
    match spec["priorityLevelConfiguration"]["name"].as_str() {
        None | Some("") => {
            errs.push(FieldError::required("spec.priorityLevelConfiguration.name", "must reference a priority level"))
        }
        Some(level) => errs.extend(validate_subdomain("spec.priorityLevelConfiguration.name", level)),
    }
    for (i, rule) in items(&spec["rules"]).iter().enumerate() {
        errs.extend(rule_with_subjects(rule, &format!("spec.rules[{i}]")));
    }
    errs
}

fn rule_with_subjects(rule: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let subjects = items(&rule["subjects"]);
    if subjects.is_empty() {
        errs.push(FieldError::required(&format!("{path}.subjects"), "subjects must contain at least one value"));
    }
    for (i, subject) in subjects.iter().enumerate() {
        errs.extend(self::subject(subject, &format!("{path}.subjects[{i}]")));
    }
    let (resources, non_resources) = (items(&rule["resourceRules"]), items(&rule["nonResourceRules"]));
    if resources.is_empty() && non_resources.is_empty() {
        errs.push(FieldError::required(path, "at least one of resourceRules and nonResourceRules has to be non-empty"));
    }
    for (i, r) in resources.iter().enumerate() {
        errs.extend(resource_rule(r, &format!("{path}.resourceRules[{i}]")));
    }
    for (i, r) in non_resources.iter().enumerate() {
        errs.extend(non_resource_rule(r, &format!("{path}.nonResourceRules[{i}]")));
    }
    errs
}

fn subject(subject: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let kinds = [("ServiceAccount", "serviceAccount"), ("User", "user"), ("Group", "group")];
    let Some((kind, own)) = kinds.iter().find(|(k, _)| subject["kind"] == *k) else {
        let all = supported(&["Group", "ServiceAccount", "User"]);
        return vec![FieldError::not_supported(&format!("{path}.kind"), &subject["kind"], &all)];
    };
    let body = &subject[*own];
    if !body.is_object() {
        let detail = format!("{own} is required when subject kind is '{kind}'");
        errs.push(FieldError::required(&format!("{path}.{own}"), &detail));
    } else {
        let name = body["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            errs.push(FieldError::required(&format!("{path}.{own}.name"), ""));
        } else if *kind == "ServiceAccount" && name != "*" {
            errs.extend(validate_subdomain(&format!("{path}.{own}.name"), name));
        }
        if *kind == "ServiceAccount" {
            match body["namespace"].as_str() {
                None | Some("") => errs.push(FieldError::required(
                    &format!("{path}.{own}.namespace"),
                    "must specify namespace for service account",
                )),
                Some(ns) => errs.extend(validate_label(&format!("{path}.{own}.namespace"), ns)),
            }
        }
    }
    for (other_kind, other) in kinds.iter().filter(|(_, f)| f != own) {
        if !subject[*other].is_null() {
            let detail = format!("{other} is forbidden when subject kind is not '{other_kind}'");
            errs.push(FieldError::forbidden(&format!("{path}.{other}"), &detail));
        }
    }
    errs
}

/// Verbs: required, `*` alone, or kube's supported verbs.
fn verbs(rule: &Value, path: &str) -> Option<FieldError> {
    let verbs = strings(&rule["verbs"]);
    let field = format!("{path}.verbs");
    if verbs.is_empty() {
        Some(FieldError::required(&field, "verbs must contain at least one value"))
    } else if verbs.contains(&"*") {
        (verbs.len() > 1)
            .then(|| FieldError::invalid(&field, &rule["verbs"], "if '*' is present, must not specify other verbs"))
    } else if verbs.iter().any(|v| !VERBS.contains(v)) {
        Some(FieldError::not_supported(&field, &rule["verbs"], &supported(VERBS)))
    } else {
        None
    }
}

/// A list that must not be empty and may hold `*` only alone.
fn wildcard_list(rule: &Value, key: &str, path: &str, missing: &str, what: &str) -> Option<FieldError> {
    let values = strings(&rule[key]);
    let field = format!("{path}.{key}");
    if values.is_empty() {
        Some(FieldError::required(&field, missing))
    } else if values.len() > 1 && values.contains(&"*") {
        Some(FieldError::invalid(&field, &rule[key], &format!("if '*' is present, must not specify other {what}")))
    } else {
        None
    }
}

fn resource_rule(rule: &Value, path: &str) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = verbs(rule, path).into_iter().collect();
    let groups = "resource rules must supply at least one api group";
    errs.extend(wildcard_list(rule, "apiGroups", path, groups, "api groups"));
    let resources = "resource rules must supply at least one resource";
    errs.extend(wildcard_list(rule, "resources", path, resources, "resources"));
    let namespaces = strings(&rule["namespaces"]);
    let field = format!("{path}.namespaces");
    if namespaces.is_empty() && rule["clusterScope"] != true {
        let detail = "resource rules that are not cluster scoped must supply at least one namespace";
        errs.push(FieldError::required(&field, detail));
    } else if namespaces.contains(&"*") {
        if namespaces.len() > 1 {
            let detail = "if '*' is present, must not specify other namespaces";
            errs.push(FieldError::invalid(&field, &rule["namespaces"], detail));
        }
    } else {
        for (i, ns) in namespaces.iter().enumerate() {
            if let Some(e) = validate_label(&format!("{field}[{i}]"), ns) {
                let detail = e.message.split_once(": ").map_or(e.message.as_str(), |(_, d)| d);
                let detail = detail.split_once("\": ").map_or(detail, |(_, d)| d);
                let detail = format!("each member of this list must be '*' or a DNS-1123 label; {detail}");
                errs.push(FieldError::invalid_str(&format!("{field}[{i}]"), ns, &detail));
            }
        }
    }
    errs
}

fn non_resource_rule(rule: &Value, path: &str) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = verbs(rule, path).into_iter().collect();
    let missing = "nonResourceURLs must contain at least one value";
    match wildcard_list(rule, "nonResourceURLs", path, missing, "non-resource URLs") {
        Some(e) => errs.push(e),
        None if !strings(&rule["nonResourceURLs"]).contains(&"*") => {
            for (i, url) in strings(&rule["nonResourceURLs"]).iter().enumerate() {
                if let Some(problem) = url_path_problem(url) {
                    errs.push(FieldError::invalid_str(&format!("{path}.nonResourceURLs[{i}]"), url, problem));
                }
            }
        }
        None => {}
    }
    errs
}

/// kube's `ValidateNonResourceURLPath`.
fn url_path_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("must not be empty");
    }
    if path == "/" {
        return None;
    }
    if !path.starts_with('/') {
        Some("must start with slash")
    } else if path.contains(' ') {
        Some("must not contain white-space")
    } else if path.contains("//") {
        Some("must not contain double slash")
    } else {
        let wildcards = path.matches('*').count();
        (wildcards > 1 || (wildcards == 1 && !path.ends_with("/*"))).then_some("wildcard can only do suffix matching")
    }
}

/// The errors of a PriorityLevelConfiguration's spec.
pub(super) fn priority_level_spec(name: &str, spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let kind = spec["type"].as_str().unwrap_or_default();
    if (name == "exempt") != (kind == "Exempt") {
        errs.push(FieldError::invalid(
            "spec.type",
            &spec["type"],
            "type must be 'Exempt' if and only if name is 'exempt'",
        ));
    }
    match kind {
        "Exempt" => {
            if !spec["limited"].is_null() {
                errs.push(FieldError::forbidden("spec.limited", "must be nil if the type is not Limited"));
            }
            errs.extend(shares(&spec["exempt"], "spec.exempt"));
        }
        "Limited" => {
            if !spec["exempt"].is_null() {
                errs.push(FieldError::forbidden("spec.exempt", "must be nil if the type is Limited"));
            }
            if spec["limited"].is_object() {
                errs.extend(shares(&spec["limited"], "spec.limited"));
                errs.extend(limit_response(&spec["limited"]["limitResponse"]));
            } else {
                errs.push(FieldError::required("spec.limited", "must not be empty when type is Limited"));
            }
        }
        _ => errs.push(FieldError::not_supported("spec.type", &spec["type"], &supported(&["Exempt", "Limited"]))),
    }
    errs
}

/// `nominalConcurrencyShares` (not negative) and `lendablePercent` (0 to 100).
fn shares(level: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if level["nominalConcurrencyShares"].as_i64().is_some_and(|n| n < 0) {
        let field = format!("{path}.nominalConcurrencyShares");
        errs.push(FieldError::invalid(&field, &level["nominalConcurrencyShares"], "must be a non-negative integer"));
    }
    if level["lendablePercent"].as_i64().is_some_and(|p| !(0..=100).contains(&p)) {
        let field = format!("{path}.lendablePercent");
        errs.push(FieldError::invalid(&field, &level["lendablePercent"], "must be between 0 and 100, inclusive"));
    }
    errs
}

fn limit_response(response: &Value) -> Vec<FieldError> {
    let path = "spec.limited.limitResponse";
    match response["type"].as_str() {
        Some("Reject") if !response["queuing"].is_null() => {
            vec![FieldError::forbidden(
                &format!("{path}.queuing"),
                "must be nil if limited.limitResponse.type is not Limited",
            )]
        }
        Some("Reject") => Vec::new(),
        Some("Queue") if response["queuing"].is_object() => queuing(&response["queuing"], &format!("{path}.queuing")),
        Some("Queue") => vec![FieldError::required(
            &format!("{path}.queuing"),
            "must not be empty if limited.limitResponse.type is Limited",
        )],
        _ => vec![FieldError::not_supported(
            &format!("{path}.type"),
            &response["type"],
            &supported(&["Queue", "Reject"]),
        )],
    }
}

fn queuing(q: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (queues, hand, limit) = (
        q["queues"].as_i64().unwrap_or(0),
        q["handSize"].as_i64().unwrap_or(0),
        q["queueLengthLimit"].as_i64().unwrap_or(0),
    );
    if limit <= 0 {
        errs.push(FieldError::invalid(&format!("{path}.queueLengthLimit"), &q["queueLengthLimit"], "must be positive"));
    }
    if queues <= 0 {
        errs.push(FieldError::invalid(&format!("{path}.queues"), &q["queues"], "must be positive"));
    } else if queues > MAX_QUEUES {
        let detail = format!("must not be greater than {MAX_QUEUES}");
        errs.push(FieldError::invalid(&format!("{path}.queues"), &q["queues"], &detail));
    }
    let field = format!("{path}.handSize");
    if hand <= 0 {
        errs.push(FieldError::invalid(&field, &q["handSize"], "must be positive"));
    } else if hand > queues {
        errs.push(FieldError::invalid(
            &field,
            &q["handSize"],
            &format!("should not be greater than queues ({queues})"),
        ));
    } else if (hand as f64 * (queues as f64).log2()).ceil() > MAX_HASH_BITS {
        let detail = format!(
            "required entropy bits of deckSize {queues} and handSize {hand} should not be greater than {MAX_HASH_BITS}"
        );
        errs.push(FieldError::invalid(&field, &q["handSize"], &detail));
    }
    errs
}

/// Condition types must be given and unique.
pub(super) fn conditions(status: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen = Vec::new();
    for (i, c) in items(&status["conditions"]).iter().enumerate() {
        let field = format!("status.conditions[{i}].type");
        match c["type"].as_str() {
            None | Some("") => errs.push(FieldError::required(&field, "must not be empty")),
            Some(t) if seen.contains(&t) => errs.push(FieldError::duplicate(&field, &c["type"])),
            Some(t) => seen.push(t),
        }
    }
    errs
}

/// A mandatory object's spec must equal its fixed value (`mandatory` gives it by name).
pub(super) fn fixed_spec(name: &str, spec: &Value, mandatory: fn(&str) -> Option<Value>) -> Option<FieldError> {
    let fixed = mandatory(name)?;
    (without_nulls(spec) != fixed["spec"])
        .then(|| FieldError::invalid("spec", spec, &format!("spec of '{name}' must equal the fixed value")))
}

/// The value with null members left out (absent and null are the same to Go).
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), without_nulls(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}
