//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding objects read into
//! their compiled form, with kube's validation of both (required fields, supported
//! values, expressions that compile) as field errors.

use opkit_apimachinery::selector::LabelSelector;
use serde_json::Value;

use super::expr::{Declarations, Expression};
use crate::schema::CEL_RESERVED;
use crate::schema::FieldError;

/// The stored policies' resource.
pub(crate) const POLICIES: (&str, &str) = ("admissionregistration.k8s.io", "validatingadmissionpolicies");
/// The stored bindings' resource.
pub(crate) const BINDINGS: (&str, &str) = ("admissionregistration.k8s.io", "validatingadmissionpolicybindings");

/// `NamedRuleWithOperations`: which requests a rule matches.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rule {
    /// `operations` (`*` for all).
    pub operations: Vec<String>,
    /// `apiGroups` (`*` for all).
    pub api_groups: Vec<String>,
    /// `apiVersions` (`*` for all).
    pub api_versions: Vec<String>,
    /// `resources`: `pods`, `pods/status`, `pods/*`, `*/status`, `*`, `*/*`.
    pub resources: Vec<String>,
    /// `resourceNames` (empty for all).
    pub resource_names: Vec<String>,
    /// `*`, `Cluster` or `Namespaced`.
    pub scope: String,
}

/// `MatchResources` of a policy (its `matchConstraints`) or of a binding.
#[derive(Debug, Clone, Default)]
pub(crate) struct MatchResources {
    /// `namespaceSelector`.
    pub namespace_selector: LabelSelector,
    /// `objectSelector`.
    pub object_selector: LabelSelector,
    /// `resourceRules`.
    pub resource_rules: Vec<Rule>,
    /// `excludeResourceRules`.
    pub exclude_resource_rules: Vec<Rule>,
    /// `matchPolicy: Exact` (Equivalent otherwise).
    pub exact: bool,
}

/// One entry of `validations`.
#[derive(Debug)]
pub(crate) struct Validation {
    /// `expression`.
    pub expression: Expression,
    /// `message` (may be empty).
    pub message: String,
    /// `messageExpression`.
    pub message_expression: Option<Expression>,
    /// `reason` (kube answers `Invalid` without one).
    pub reason: Option<String>,
}

/// A policy, compiled.
#[derive(Debug)]
pub(crate) struct Policy {
    /// The policy's name.
    pub name: String,
    /// `failurePolicy: Ignore` (Fail otherwise).
    pub ignore_failures: bool,
    /// `paramKind` as (apiVersion, kind).
    pub param_kind: Option<(String, String)>,
    /// `matchConstraints`.
    pub constraints: MatchResources,
    /// `matchConditions` as (name, expression).
    pub match_conditions: Vec<(String, Expression)>,
    /// `variables` as (name, expression), in order.
    pub variables: Vec<(String, Expression)>,
    /// `validations`.
    pub validations: Vec<Validation>,
    /// `auditAnnotations` as (key, valueExpression).
    pub audit_annotations: Vec<(String, Expression)>,
    /// Whether an expression uses `authorizer` (its checks are bound per request).
    pub uses_authorizer: bool,
    /// Why a stored policy cannot be used (it no longer compiles), reported through its
    /// failure policy as kube does.
    pub config_error: Option<String>,
}

/// `paramRef` of a binding.
#[derive(Debug, Clone, Default)]
pub(crate) struct ParamRef {
    /// `name`: one param.
    pub name: Option<String>,
    /// `namespace` (the request's when unset, for a namespaced param kind).
    pub namespace: Option<String>,
    /// `selector`: every param it selects.
    pub selector: Option<LabelSelector>,
    /// `parameterNotFoundAction: Deny` (Allow otherwise).
    pub deny_when_missing: bool,
}

/// The actions a binding takes on a failed validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Reject the request.
    Deny,
    /// Admit it with a warning.
    Warn,
    /// Admit it with an audit annotation.
    Audit,
}

impl Action {
    /// The name in `validationActions`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Action::Deny => "Deny",
            Action::Warn => "Warn",
            Action::Audit => "Audit",
        }
    }
}

/// A binding, read.
#[derive(Debug)]
pub(crate) struct Binding {
    /// The binding's name.
    pub name: String,
    /// `policyName`.
    pub policy_name: String,
    /// `paramRef`.
    pub param_ref: Option<ParamRef>,
    /// `matchResources`, narrowing the policy's constraints.
    pub match_resources: Option<MatchResources>,
    /// `validationActions`.
    pub actions: Vec<Action>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect()).unwrap_or_default()
}

fn str_of(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(String::from)
}

/// The supported operations, sorted as kube lists them in errors.
const OPERATIONS: [&str; 5] = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
/// The reasons a validation may give.
const REASONS: [&str; 3] = ["Forbidden", "Invalid", "RequestEntityTooLarge"];

fn supported(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn read_selector(v: &Value, path: &str, errs: &mut Vec<FieldError>) -> LabelSelector {
    if v.is_null() {
        return LabelSelector::default();
    }
    LabelSelector::from_label_selector_json(v).unwrap_or_else(|e| {
        errs.push(FieldError::invalid(path, v, &e.to_string()));
        LabelSelector::default()
    })
}

fn read_rules(v: &Value, path: &str, errs: &mut Vec<FieldError>) -> Vec<Rule> {
    let Some(items) = v.as_array() else { return Vec::new() };
    let mut rules = Vec::new();
    for (i, r) in items.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let rule = Rule {
            operations: strings(&r["operations"]),
            api_groups: strings(&r["apiGroups"]),
            api_versions: strings(&r["apiVersions"]),
            resources: strings(&r["resources"]),
            resource_names: strings(&r["resourceNames"]),
            scope: r["scope"].as_str().unwrap_or("*").to_string(),
        };
        for (field, list) in [
            ("operations", &rule.operations),
            ("apiGroups", &rule.api_groups),
            ("apiVersions", &rule.api_versions),
            ("resources", &rule.resources),
        ] {
            if list.is_empty() {
                errs.push(FieldError::required(&format!("{p}.{field}"), ""));
            }
        }
        for (j, op) in rule.operations.iter().enumerate() {
            if !OPERATIONS.contains(&op.as_str()) {
                errs.push(FieldError::not_supported(
                    &format!("{p}.operations[{j}]"),
                    &Value::from(op.as_str()),
                    &supported(&OPERATIONS),
                ));
            }
        }
        if !["*", "Cluster", "Namespaced"].contains(&rule.scope.as_str()) {
            errs.push(FieldError::not_supported(
                &format!("{p}.scope"),
                &Value::from(rule.scope.as_str()),
                &supported(&["*", "Cluster", "Namespaced"]),
            ));
        }
        rules.push(rule);
    }
    rules
}

/// Reads `matchConstraints` (`constraints`: resourceRules required) or a binding's
/// `matchResources`.
fn read_match_resources(v: &Value, path: &str, constraints: bool, errs: &mut Vec<FieldError>) -> MatchResources {
    let match_policy = v["matchPolicy"].as_str().unwrap_or("Equivalent");
    if !["Equivalent", "Exact"].contains(&match_policy) {
        errs.push(FieldError::not_supported(
            &format!("{path}.matchPolicy"),
            &Value::from(match_policy),
            &supported(&["Equivalent", "Exact"]),
        ));
    }
    let resource_rules = read_rules(&v["resourceRules"], &format!("{path}.resourceRules"), errs);
    if constraints && resource_rules.is_empty() {
        errs.push(FieldError::required(&format!("{path}.resourceRules"), ""));
    }
    MatchResources {
        namespace_selector: read_selector(&v["namespaceSelector"], &format!("{path}.namespaceSelector"), errs),
        object_selector: read_selector(&v["objectSelector"], &format!("{path}.objectSelector"), errs),
        resource_rules,
        exclude_resource_rules: read_rules(&v["excludeResourceRules"], &format!("{path}.excludeResourceRules"), errs),
        exact: match_policy == "Exact",
    }
}

/// Compiles `source` at `path`, reporting kube's errors (`what` names the field in
/// the Required error: `expression is not specified`).
fn compile(
    source: &Value,
    path: &str,
    what: &str,
    decls: &Declarations,
    errs: &mut Vec<FieldError>,
) -> Option<Expression> {
    let text = source.as_str().unwrap_or_default();
    if text.trim().is_empty() {
        let detail = if what.is_empty() { String::new() } else { format!("{what} is not specified") };
        errs.push(FieldError::required(path, &detail));
        return None;
    }
    match Expression::compile(text, decls) {
        Ok(e) => Some(e),
        Err(why) => {
            errs.push(FieldError::invalid_str(path, text, &why));
            None
        }
    }
}

/// Whether `s` is a CEL identifier (a variable's name).
fn is_cel_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !CEL_RESERVED.contains(&s)
}

/// Reads and validates a policy. The errors are kube's, at kube's field paths.
pub(crate) fn read_policy(obj: &Value) -> (Policy, Vec<FieldError>) {
    let mut errs = Vec::new();
    let spec = &obj["spec"];
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let failure = spec["failurePolicy"].as_str().unwrap_or("Fail");
    if !["Fail", "Ignore"].contains(&failure) {
        errs.push(FieldError::not_supported(
            "spec.failurePolicy",
            &Value::from(failure),
            &supported(&["Fail", "Ignore"]),
        ));
    }
    let param_kind = read_param_kind(&spec["paramKind"], &mut errs);
    let constraints = if spec["matchConstraints"].is_object() {
        read_match_resources(&spec["matchConstraints"], "spec.matchConstraints", true, &mut errs)
    } else {
        errs.push(FieldError::required("spec.matchConstraints", ""));
        MatchResources::default()
    };
    let mut decls = Declarations { params: param_kind.is_some(), variables: Vec::new() };
    let variables = read_variables(&spec["variables"], &mut decls, &mut errs);
    let match_conditions = read_match_conditions(&spec["matchConditions"], &decls, &mut errs);
    let validations = spec["validations"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, v)| read_validation(v, &format!("spec.validations[{i}]"), &decls, &mut errs))
        .collect();
    let audit_annotations = read_audit_annotations(&spec["auditAnnotations"], &decls, &mut errs);
    let none = |k: &str| spec[k].as_array().is_none_or(|a| a.is_empty());
    if none("validations") && none("auditAnnotations") {
        for field in ["spec.validations", "spec.auditAnnotations"] {
            errs.push(FieldError::required(field, "validations or auditAnnotations must contain at least one item"));
        }
    }
    let config_error = errs.first().map(|e| e.to_message());
    let mut policy = Policy {
        name,
        ignore_failures: failure == "Ignore",
        param_kind,
        constraints,
        match_conditions,
        variables,
        validations,
        audit_annotations,
        uses_authorizer: false,
        config_error,
    };
    policy.uses_authorizer = uses_authorizer(&policy);
    (policy, errs)
}

/// Reads `spec.paramKind` (apiVersion and kind required), `None` when there is none.
fn read_param_kind(v: &Value, errs: &mut Vec<FieldError>) -> Option<(String, String)> {
    if !v.is_object() {
        return None;
    }
    let api_version = v["apiVersion"].as_str().unwrap_or_default().to_string();
    let kind = v["kind"].as_str().unwrap_or_default().to_string();
    if api_version.is_empty() {
        errs.push(FieldError::required("spec.paramKind.apiVersion", ""));
    }
    if kind.is_empty() {
        errs.push(FieldError::required("spec.paramKind.kind", ""));
    }
    Some((api_version, kind))
}

/// Reads and compiles `spec.variables`, each in scope of the ones after it (declared in
/// `decls` as it goes).
fn read_variables(v: &Value, decls: &mut Declarations, errs: &mut Vec<FieldError>) -> Vec<(String, Expression)> {
    let mut variables = Vec::new();
    for (i, v) in v.as_array().into_iter().flatten().enumerate() {
        let path = format!("spec.variables[{i}]");
        let var_name = v["name"].as_str().unwrap_or_default().to_string();
        if var_name.trim().is_empty() {
            errs.push(FieldError::required(&format!("{path}.name"), "name is not specified"));
        } else if !is_cel_identifier(&var_name) {
            errs.push(FieldError::invalid_str(&format!("{path}.name"), &var_name, "must be a valid CEL identifier"));
        }
        if let Some(e) = compile(&v["expression"], &format!("{path}.expression"), "expression", decls, errs) {
            variables.push((var_name.clone(), e));
        }
        decls.variables.push(var_name);
    }
    variables
}

/// Reads and compiles `spec.matchConditions` (names required and unique).
fn read_match_conditions(v: &Value, decls: &Declarations, errs: &mut Vec<FieldError>) -> Vec<(String, Expression)> {
    let mut match_conditions = Vec::new();
    let mut seen = Vec::new();
    for (i, c) in v.as_array().into_iter().flatten().enumerate() {
        let path = format!("spec.matchConditions[{i}]");
        let cond_name = c["name"].as_str().unwrap_or_default().to_string();
        if cond_name.is_empty() {
            errs.push(FieldError::required(&format!("{path}.name"), ""));
        } else if seen.contains(&cond_name) {
            errs.push(FieldError::duplicate(&format!("{path}.name"), &Value::from(cond_name.as_str())));
        }
        seen.push(cond_name.clone());
        if let Some(e) = compile(&c["expression"], &format!("{path}.expression"), "", decls, errs) {
            match_conditions.push((cond_name, e));
        }
    }
    match_conditions
}

/// Reads and compiles one of `spec.validations`, at `path`; `None` when its expression
/// does not compile.
fn read_validation(v: &Value, path: &str, decls: &Declarations, errs: &mut Vec<FieldError>) -> Option<Validation> {
    let message = v["message"].as_str().unwrap_or_default().to_string();
    if !message.is_empty() && message.trim().is_empty() {
        errs.push(FieldError::invalid_str(&format!("{path}.message"), &message, "must be non-empty if specified"));
    } else if message.trim().contains(['\n', '\r']) {
        errs.push(FieldError::invalid_str(
            &format!("{path}.message"),
            &message,
            "message must not contain line breaks",
        ));
    }
    let reason = str_of(&v["reason"]);
    if let Some(r) = &reason
        && !REASONS.contains(&r.as_str())
    {
        errs.push(FieldError::not_supported(&format!("{path}.reason"), &Value::from(r.as_str()), &supported(&REASONS)));
    }
    let expression = compile(&v["expression"], &format!("{path}.expression"), "expression", decls, errs);
    let message_expression = match v["messageExpression"].as_str() {
        Some(m) if !m.is_empty() && m.trim().is_empty() => {
            errs.push(FieldError::invalid_str(
                &format!("{path}.messageExpression"),
                m,
                "must be non-empty if specified",
            ));
            None
        }
        Some(m) if !m.is_empty() => {
            compile(&v["messageExpression"], &format!("{path}.messageExpression"), "", decls, errs)
        }
        _ => None,
    };
    Some(Validation { expression: expression?, message, message_expression, reason })
}

/// Reads and compiles `spec.auditAnnotations` (keys required).
fn read_audit_annotations(v: &Value, decls: &Declarations, errs: &mut Vec<FieldError>) -> Vec<(String, Expression)> {
    let mut audit_annotations = Vec::new();
    for (i, a) in v.as_array().into_iter().flatten().enumerate() {
        let path = format!("spec.auditAnnotations[{i}]");
        let key = a["key"].as_str().unwrap_or_default().to_string();
        if key.is_empty() {
            errs.push(FieldError::required(&format!("{path}.key"), ""));
        }
        let value_path = format!("{path}.valueExpression");
        if let Some(e) = compile(&a["valueExpression"], &value_path, "valueExpression", decls, errs) {
            audit_annotations.push((key, e));
        }
    }
    audit_annotations
}

/// Whether any of the policy's expressions uses the `authorizer` variable.
fn uses_authorizer(policy: &Policy) -> bool {
    policy
        .match_conditions
        .iter()
        .chain(&policy.variables)
        .chain(&policy.audit_annotations)
        .map(|(_, e)| e)
        .chain(policy.validations.iter().flat_map(|v| std::iter::once(&v.expression).chain(&v.message_expression)))
        .any(|e| e.program.references().has_variable("authorizer"))
}

/// Reads and validates a binding.
pub(crate) fn read_binding(obj: &Value) -> (Binding, Vec<FieldError>) {
    let mut errs = Vec::new();
    let spec = &obj["spec"];
    let policy_name = spec["policyName"].as_str().unwrap_or_default().to_string();
    if policy_name.is_empty() {
        errs.push(FieldError::required("spec.policyName", ""));
    }
    let mut actions = Vec::new();
    let raw_actions = strings(&spec["validationActions"]);
    if raw_actions.is_empty() {
        errs.push(FieldError::required("spec.validationActions", "at least one validation action is required"));
    }
    for (i, a) in raw_actions.iter().enumerate() {
        let action = match a.as_str() {
            "Deny" => Action::Deny,
            "Warn" => Action::Warn,
            "Audit" => Action::Audit,
            other => {
                errs.push(FieldError::not_supported(
                    &format!("spec.validationActions[{i}]"),
                    &Value::from(other),
                    &supported(&["Audit", "Deny", "Warn"]),
                ));
                continue;
            }
        };
        if actions.contains(&action) {
            errs.push(FieldError::duplicate(&format!("spec.validationActions[{i}]"), &Value::from(a.as_str())));
        }
        actions.push(action);
    }
    if actions.contains(&Action::Deny) && actions.contains(&Action::Warn) {
        errs.push(FieldError::invalid(
            "spec.validationActions",
            &spec["validationActions"],
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    let param_ref = spec["paramRef"].is_object().then(|| {
        let p = &spec["paramRef"];
        let name = str_of(&p["name"]);
        let selector =
            p["selector"].is_object().then(|| read_selector(&p["selector"], "spec.paramRef.selector", &mut errs));
        match (&name, &selector) {
            (Some(_), Some(_)) => {
                for field in ["spec.paramRef.name", "spec.paramRef.selector"] {
                    errs.push(FieldError::forbidden(field, "name and selector are mutually exclusive"));
                }
            }
            (None, None) => {
                errs.push(FieldError::required("spec.paramRef", "one of name or selector must be specified"))
            }
            _ => {}
        }
        let action = p["parameterNotFoundAction"].as_str().unwrap_or_default();
        match action {
            "Deny" | "Allow" => {}
            "" => errs.push(FieldError::required("spec.paramRef.parameterNotFoundAction", "")),
            other => errs.push(FieldError::not_supported(
                "spec.paramRef.parameterNotFoundAction",
                &Value::from(other),
                &supported(&["Deny", "Allow"]),
            )),
        }
        ParamRef { name, namespace: str_of(&p["namespace"]), selector, deny_when_missing: action == "Deny" }
    });
    let match_resources = spec["matchResources"]
        .is_object()
        .then(|| read_match_resources(&spec["matchResources"], "spec.matchResources", false, &mut errs));
    let binding = Binding {
        name: obj["metadata"]["name"].as_str().unwrap_or_default().to_string(),
        policy_name,
        param_ref,
        match_resources,
        actions,
    };
    (binding, errs)
}

/// kube's defaults for a policy or binding's match resources: `matchPolicy`
/// Equivalent, empty selectors, rules of every scope.
pub(crate) fn default_match_resources(v: &mut Value) {
    let Some(o) = v.as_object_mut() else { return };
    o.entry("matchPolicy").or_insert_with(|| Value::from("Equivalent"));
    o.entry("namespaceSelector").or_insert_with(|| serde_json::json!({}));
    o.entry("objectSelector").or_insert_with(|| serde_json::json!({}));
    for key in ["resourceRules", "excludeResourceRules"] {
        for r in o.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(r) = r.as_object_mut() {
                r.entry("scope").or_insert_with(|| Value::from("*"));
            }
        }
    }
}
