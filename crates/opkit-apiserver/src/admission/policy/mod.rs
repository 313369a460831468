//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding, evaluated as
//! kube-apiserver's `ValidatingAdmissionPolicy` plugin does: for each binding whose
//! policy matches the request, its params are found, the match conditions, variables
//! and validations run in CEL, and a failed validation is denied, warned about or
//! audited as the binding's `validationActions` say.
//!
//! - `model`: the objects read and validated (kube's field errors);
//! - `expr`: one compiled expression and kube's compile errors;
//! - `activation`: the CEL values the expressions see;
//! - `authorizer`: the `authorizer` variable, answered by RBAC;
//! - `matching`: resource rules and selectors;
//! - `params`: a binding's params;
//! - `cache`: the compiled policies, rebuilt after a policy or binding is written;
//! - `type_check`: `status.typeChecking`, written after a policy changes.

pub(crate) mod activation;
mod authorizer;
mod cache;
mod expr;
mod matching;
pub(crate) mod model;
mod params;
pub(crate) mod type_check;

pub(crate) use cache::PolicyCache;

use std::collections::BTreeMap;

use kube_cel::cel::Value as Cel;
use serde_json::{Value, json};

use super::{Attributes, Operation, Verdict};
use crate::authz::attributes::ResourceAttributes;
use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::Registry;
use crate::storage::ResourceId;
use activation::{cel_type_name, context, eval, eval_bool, root_context};
use model::{Action, Binding, Policy};

/// The audit annotation a failed validation of an `Audit` binding adds.
const VALIDATION_FAILURE_ANNOTATION: &str = "validation.policy.admission.k8s.io/validation_failure";

/// One denial: the policy, the binding (None for a policy that cannot be used), why,
/// and the reason the Status carries.
struct Denial {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: String,
}

/// Evaluates the bound policies that match the request.
pub(crate) async fn validate(
    policies: &PolicyCache,
    registry: &Registry,
    attrs: &Attributes<'_>,
    obj: &Value,
) -> ApiResult<Verdict> {
    let snapshot = policies.snapshot(registry).await?;
    if snapshot.policies.is_empty() {
        return Ok(Verdict::default());
    }
    let subject = Subject::read(registry, attrs, obj).await?;
    let request_match = subject.request_match(attrs);
    let request =
        PolicyRequest { registry, attrs, request_resource: subject.request_resource(attrs), subject: &subject };
    let mut findings = Findings::default();
    for (policy, bindings) in &snapshot.policies {
        let Some(matched_version) = matching::matches(&policy.constraints, &request_match) else {
            continue;
        };
        if let Some(err) = &policy.config_error {
            config_error(policy, None, &format!("failed to configure policy: {err}"), &mut findings.denials);
            continue;
        }
        for binding in bindings {
            if let Some(m) = &binding.match_resources
                && matching::matches(m, &request_match).is_none()
            {
                continue;
            }
            match params::collect(registry.view(), policy, binding, &subject.namespace).await {
                Ok(params) => request.evaluate_binding(policy, binding, matched_version, params, &mut findings),
                Err(why) => {
                    let message = format!("failed to configure binding: {why}");
                    config_error(policy, Some(binding), &message, &mut findings.denials);
                }
            }
        }
    }
    publish_audit_failures(&mut findings.verdict, findings.audit_failures);
    if let Some(d) = findings.denials.into_iter().next() {
        return Err(denied(attrs, &subject.name, d));
    }
    Ok(findings.verdict)
}

/// The request as the policies see it: the object and the old object (for a delete,
/// the object deleted), its name and namespace, and the namespace's object.
struct Subject {
    object: Value,
    old_object: Value,
    name: String,
    /// The request's namespace, empty for a cluster-scoped resource.
    namespace: String,
    namespace_object: Option<Value>,
}

impl Subject {
    async fn read(registry: &Registry, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<Subject> {
        let info = &attrs.target.info;
        let (object, old_object) = match attrs.operation {
            Operation::Delete => (Value::Null, attrs.old.cloned().unwrap_or_else(|| obj.clone())),
            _ => (obj.clone(), attrs.old.cloned().unwrap_or(Value::Null)),
        };
        let namespace = attrs.target.namespace.clone().filter(|_| info.namespaced).unwrap_or_default();
        let namespace_object = if namespace.is_empty() {
            None
        } else {
            registry.view().stored(&ResourceId::new("", "namespaces"), "", &namespace).await?
        };
        let mut subject = Subject { object, old_object, name: attrs.name.to_string(), namespace, namespace_object };
        if attrs.name.is_empty() {
            subject.name = subject.labelled()["metadata"]["name"].as_str().unwrap_or_default().to_string();
        }
        Ok(subject)
    }

    /// The object whose labels the selectors see: the object, or the old one on a delete.
    fn labelled(&self) -> &Value {
        if self.object.is_null() { &self.old_object } else { &self.object }
    }

    /// What the policies' and bindings' match rules and selectors are matched against.
    fn request_match<'s>(&'s self, attrs: &'s Attributes<'_>) -> matching::Request<'s> {
        let info = &attrs.target.info;
        let labelled = self.labelled();
        let namespace_labels = if info.group.is_empty() && info.resource == "namespaces" {
            Some(labelled["metadata"]["labels"].as_object())
        } else if self.namespace.is_empty() {
            None
        } else {
            Some(self.namespace_object.as_ref().and_then(|n| n["metadata"]["labels"].as_object()))
        };
        matching::Request {
            operation: attrs.operation,
            group: &info.group,
            version: &attrs.target.version,
            resource: &info.resource,
            subresource: attrs.subresource,
            name: &self.name,
            namespaced: info.namespaced,
            other_versions: info
                .versions
                .iter()
                .map(|v| v.name.as_str())
                .filter(|v| *v != attrs.target.version)
                .collect(),
            object_labels: labelled["metadata"]["labels"].as_object(),
            namespace_labels,
        }
    }

    /// The resource the `authorizer` variable's checks are about.
    fn request_resource(&self, attrs: &Attributes<'_>) -> ResourceAttributes {
        let info = &attrs.target.info;
        ResourceAttributes {
            namespace: self.namespace.clone(),
            group: info.group.clone(),
            version: attrs.target.version.clone(),
            resource: info.resource.clone(),
            subresource: attrs.subresource.unwrap_or_default().to_string(),
            name: self.name.clone(),
        }
    }
}

/// What the bound policies' evaluations found: the verdict (warnings, annotations),
/// the denials and the failures of `Audit` bindings.
#[derive(Default)]
struct Findings {
    verdict: Verdict,
    denials: Vec<Denial>,
    audit_failures: Vec<Value>,
}

/// One admission request being validated by the bound policies.
struct PolicyRequest<'r> {
    registry: &'r Registry,
    attrs: &'r Attributes<'r>,
    subject: &'r Subject,
    request_resource: ResourceAttributes,
}

impl PolicyRequest<'_> {
    /// Runs `policy` under `binding` once per param (the object at the matched version),
    /// and adds what it finds to `findings`.
    fn evaluate_binding(
        &self,
        policy: &Policy,
        binding: &Binding,
        matched_version: &str,
        params: Vec<Option<Value>>,
        findings: &mut Findings,
    ) {
        let (attrs, subject) = (self.attrs, self.subject);
        let request = request_object(attrs, &subject.name, &subject.namespace, matched_version);
        let object = at_matched_version(attrs, &subject.object, matched_version);
        let old_object = at_matched_version(attrs, &subject.old_object, matched_version);
        let null = Value::Null;
        let ns_value = subject.namespace_object.as_ref().map(namespace_view).unwrap_or(Value::Null);
        for param in params {
            let vars: Vec<(&str, &Value)> = vec![
                ("object", &object),
                ("oldObject", &old_object),
                ("request", &request),
                ("namespaceObject", &ns_value),
                ("params", param.as_ref().unwrap_or(&null)),
            ];
            let ctx = if policy.uses_authorizer {
                let mut ctx = root_context(&vars);
                ctx.add_variable_from_value("authorizer", authorizer::value(&self.request_resource));
                authorizer::register(&mut ctx, self.registry, &attrs.opts.user);
                ctx
            } else {
                context(&vars)
            };
            let outcome = evaluate(policy, ctx);
            let Findings { verdict, denials, audit_failures } = &mut *findings;
            apply_actions(policy, binding, outcome.failures, verdict, denials, audit_failures);
            if let Some(why) = outcome.error {
                audit_annotation_error(policy, binding, why, denials);
            }
            for (key, value) in outcome.annotations {
                verdict.audit_annotations.insert(format!("{}/{key}", policy.name), value);
            }
        }
    }
}

/// What a binding's `validationActions` make of a policy's failed validations
/// (index, message, reason): denials, warnings, audited failures.
fn apply_actions(
    policy: &Policy,
    binding: &Binding,
    failures: Vec<(usize, String, String)>,
    verdict: &mut Verdict,
    denials: &mut Vec<Denial>,
    audit_failures: &mut Vec<Value>,
) {
    for (index, message, reason) in failures {
        for action in &binding.actions {
            match action {
                Action::Deny => denials.push(Denial {
                    policy: policy.name.clone(),
                    binding: Some(binding.name.clone()),
                    message: message.clone(),
                    reason: reason.clone(),
                }),
                Action::Warn => verdict.warnings.push(format!(
                    "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {message}",
                    policy.name, binding.name
                )),
                Action::Audit => audit_failures.push(json!({
                    "message": message,
                    "policy": policy.name,
                    "binding": binding.name,
                    "expressionIndex": index,
                    "validationActions": binding.actions.iter().map(|a| a.as_str()).collect::<Vec<_>>(),
                })),
            }
        }
    }
}

/// The audited failures of the request as one audit annotation (a JSON list), as kube
/// publishes them.
fn publish_audit_failures(verdict: &mut Verdict, audit_failures: Vec<Value>) {
    if !audit_failures.is_empty() {
        verdict
            .audit_annotations
            .insert(VALIDATION_FAILURE_ANNOTATION.to_string(), Value::Array(audit_failures).to_string());
    }
}

/// A policy or binding that cannot be applied: denied under `failurePolicy: Fail`.
fn config_error(policy: &Policy, binding: Option<&Binding>, message: &str, denials: &mut Vec<Denial>) {
    if policy.ignore_failures {
        return;
    }
    denials.push(Denial {
        policy: policy.name.clone(),
        binding: binding.map(|b| b.name.clone()),
        message: message.to_string(),
        reason: String::new(),
    });
}

/// An audit annotation that cannot be evaluated denies under `failurePolicy: Fail`
/// (whatever the actions say), with kube's reason `InternalError`.
fn audit_annotation_error(policy: &Policy, binding: &Binding, why: String, denials: &mut Vec<Denial>) {
    denials.push(Denial {
        policy: policy.name.clone(),
        binding: Some(binding.name.clone()),
        message: why,
        reason: "InternalError".to_string(),
    });
}

/// kube's answer to a denial: `admission.NewForbidden`'s message with the decision's
/// reason and its code (Invalid, 422, by default), the message as a cause.
fn denied(attrs: &Attributes<'_>, name: &str, d: Denial) -> ApiError {
    let message = match &d.binding {
        Some(b) => format!("ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}", d.policy, d.message),
        None => format!("ValidatingAdmissionPolicy '{}' denied request: {}", d.policy, d.message),
    };
    let info = &attrs.target.info;
    let mut err = ApiError::forbidden_object(&info.group, &info.resource, name, &message);
    let (code, reason) = match d.reason.as_str() {
        "Forbidden" => (403, "Forbidden"),
        "Unauthorized" => (401, "Unauthorized"),
        "RequestEntityTooLarge" => (413, "RequestEntityTooLarge"),
        "InternalError" => (422, "InternalError"),
        _ => (422, "Invalid"),
    };
    err.code = code;
    err.reason = reason;
    err.details.causes.push(Cause { reason: String::new(), message, field: String::new() });
    err
}

/// What one policy says about one request with one param.
#[derive(Default)]
struct Outcome {
    /// Failed validations: (index, message, reason). Under `failurePolicy: Fail` an
    /// expression that cannot be evaluated fails too, with the error as its message.
    failures: Vec<(usize, String, String)>,
    /// An audit annotation that cannot be evaluated, under `failurePolicy: Fail`.
    error: Option<String>,
    /// Audit annotations published: (key, value).
    annotations: BTreeMap<String, String>,
}

/// Runs the policy's match conditions, variables, validations and audit annotations.
fn evaluate(policy: &Policy, mut ctx: kube_cel::cel::Context<'static>) -> Outcome {
    let mut out = Outcome::default();
    // Variables, in order: each sees the ones before it.
    let mut var_map = std::collections::HashMap::new();
    for (name, e) in &policy.variables {
        ctx.add_variable_from_value("variables", Cel::Map(var_map.clone().into()));
        if let Ok(v) = e.program.execute(&ctx) {
            var_map.insert(kube_cel::cel::objects::Key::String(name.clone().into()), v);
        }
    }
    ctx.add_variable_from_value("variables", Cel::Map(var_map.into()));

    let mut errors = Vec::new();
    for (_, cond) in &policy.match_conditions {
        match eval_bool(cond, &ctx) {
            Ok(true) => {}
            Ok(false) => return out,
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        if !policy.ignore_failures {
            let why = if errors.len() == 1 { errors.remove(0) } else { format!("[{}]", errors.join(", ")) };
            out.failures.push((0, why, String::new()));
        }
        return out;
    }
    for (index, v) in policy.validations.iter().enumerate() {
        match eval_bool(&v.expression, &ctx) {
            Ok(true) => {}
            Ok(false) => {
                let from_expression = v.message_expression.as_ref().and_then(|m| match eval(m, &ctx) {
                    Ok(Cel::String(s)) => {
                        let s = s.trim().to_string();
                        (!s.is_empty() && !s.contains('\n') && s.len() <= 5 * 1024).then_some(s)
                    }
                    _ => None,
                });
                let message = from_expression
                    .or_else(|| Some(v.message.trim().to_string()).filter(|m| !m.is_empty()))
                    .unwrap_or_else(|| format!("failed expression: {}", v.expression.source.trim()));
                out.failures.push((index, message, v.reason.clone().unwrap_or_default()));
            }
            Err(e) if !policy.ignore_failures => out.failures.push((index, e, String::new())),
            Err(_) => {}
        }
    }
    for (key, e) in &policy.audit_annotations {
        match eval(e, &ctx) {
            Ok(Cel::String(s)) if !s.trim().is_empty() => {
                out.annotations.insert(key.clone(), s.trim().to_string());
            }
            Ok(Cel::String(_)) | Ok(Cel::Null) => {}
            Ok(_) | Err(_) if policy.ignore_failures => {}
            Ok(other) => {
                out.error.get_or_insert_with(|| {
                    format!(
                        "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                        e.source,
                        cel_type_name(&other)
                    )
                });
            }
            Err(why) => {
                out.error.get_or_insert(why);
            }
        }
    }
    out
}

/// The `request` variable (kube's `AdmissionRequest` as CEL sees it), at the version
/// the policy matched.
fn request_object(attrs: &Attributes<'_>, name: &str, namespace: &str, matched_version: &str) -> Value {
    let info = &attrs.target.info;
    let options_kind = match attrs.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
        Operation::Connect => "",
    };
    let mut options = json!({"kind": options_kind, "apiVersion": "meta.k8s.io/v1"});
    if !attrs.opts.field_manager.is_empty() && attrs.operation != Operation::Delete {
        options["fieldManager"] = json!(attrs.opts.field_manager);
    }
    if attrs.opts.dry_run {
        options["dryRun"] = json!(["All"]);
    }
    let kind = json!({"group": info.group, "version": matched_version, "kind": info.kind});
    let resource = json!({"group": info.group, "version": matched_version, "resource": info.resource});
    json!({
        "kind": kind,
        "resource": resource,
        "subResource": attrs.subresource.unwrap_or_default(),
        "requestKind": {"group": info.group, "version": attrs.target.version, "kind": info.kind},
        "requestResource": {"group": info.group, "version": attrs.target.version, "resource": info.resource},
        "requestSubResource": attrs.subresource.unwrap_or_default(),
        "name": name,
        "namespace": namespace,
        "operation": attrs.operation.as_str(),
        "userInfo": attrs.opts.user.to_json(),
        "dryRun": attrs.opts.dry_run,
        "options": options,
    })
}

/// `obj` (at the requested version) at the version the policy matched, as kube converts
/// it for `matchPolicy: Equivalent`.
fn at_matched_version(attrs: &Attributes<'_>, obj: &Value, matched_version: &str) -> Value {
    let requested = attrs.target.version.as_str();
    if obj.is_null() || matched_version == requested {
        return obj.clone();
    }
    let strategy = attrs.target.strategy;
    let mut converted = obj.clone();
    strategy.convert_to_storage(&mut converted, requested);
    strategy.convert_from_storage(&mut converted, matched_version);
    if let Some(m) = converted.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(attrs.target.info.api_version(matched_version)));
    }
    converted
}

/// `namespaceObject`: the namespace's metadata (without managed fields), spec and status.
fn namespace_view(ns: &Value) -> Value {
    let mut v = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": ns["metadata"], "spec": ns["spec"], "status": ns["status"]});
    if let Some(m) = v["metadata"].as_object_mut() {
        m.remove("managedFields");
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(policy: &Value, binding: &Value, object: &Value) -> (Verdict, Vec<Denial>) {
        let (policy, errs) = model::read_policy(policy);
        assert!(errs.is_empty(), "{errs:?}");
        let (binding, errs) = model::read_binding(binding);
        assert!(errs.is_empty(), "{errs:?}");
        let null = Value::Null;
        let request = json!({"operation": "CREATE"});
        let vars = [
            ("object", object),
            ("oldObject", &null),
            ("request", &request),
            ("namespaceObject", &null),
            ("params", &null),
        ];
        let outcome = evaluate(&policy, context(&vars));
        let (mut verdict, mut denials, mut audits) = (Verdict::default(), Vec::new(), Vec::new());
        for (key, value) in outcome.annotations {
            verdict.audit_annotations.insert(format!("{}/{key}", policy.name), value);
        }
        apply_actions(&policy, &binding, outcome.failures, &mut verdict, &mut denials, &mut audits);
        publish_audit_failures(&mut verdict, audits);
        (verdict, denials)
    }

    #[test]
    fn audit_publishes_the_failure_and_the_policys_annotations_without_denying() {
        let policy = json!({"metadata": {"name": "replicas"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["deployments"]}]},
            "validations": [{"expression": "true"}, {"expression": "object.spec.replicas < 3", "message": "too many"}],
            "auditAnnotations": [
                {"key": "replicas", "valueExpression": "'asked for ' + string(object.spec.replicas)"},
                {"key": "skipped", "valueExpression": "null"},
            ],
        }});
        let binding =
            json!({"metadata": {"name": "audit"}, "spec": {"policyName": "replicas", "validationActions": ["Audit"]}});
        let (verdict, denials) = run(&policy, &binding, &json!({"spec": {"replicas": 5}}));
        assert!(denials.is_empty());
        assert!(verdict.warnings.is_empty());
        let failure: Value =
            serde_json::from_str(&verdict.audit_annotations[VALIDATION_FAILURE_ANNOTATION]).expect("JSON");
        assert_eq!(
            failure,
            json!([{"message": "too many", "policy": "replicas", "binding": "audit", "expressionIndex": 1,
                "validationActions": ["Audit"]}])
        );
        assert_eq!(verdict.audit_annotations["replicas/replicas"], "asked for 5");
        assert!(!verdict.audit_annotations.contains_key("replicas/skipped"));

        let (verdict, _) = run(&policy, &binding, &json!({"spec": {"replicas": 1}}));
        assert!(!verdict.audit_annotations.contains_key(VALIDATION_FAILURE_ANNOTATION));
    }

    fn failing_policy(failure_policy: &str) -> Value {
        json!({"metadata": {"name": "broken"}, "spec": {
            "failurePolicy": failure_policy,
            "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                "operations": ["*"], "resources": ["*"]}]},
            "validations": [{"expression": "object.spec.nope == 1"}],
        }})
    }

    #[test]
    fn an_evaluation_error_fails_the_validation_under_fail_and_is_ignored_under_ignore() {
        let object = json!({"spec": {}});
        let warn = json!({"metadata": {"name": "b"}, "spec": {"policyName": "broken", "validationActions": ["Warn"]}});
        let (verdict, denials) = run(&failing_policy("Fail"), &warn, &object);
        assert!(denials.is_empty(), "a Warn binding only warns");
        assert_eq!(
            verdict.warnings,
            ["Validation failed for ValidatingAdmissionPolicy 'broken' with binding 'b': expression \
              'object.spec.nope == 1' resulted in error: no such key: nope"]
        );
        let deny = json!({"metadata": {"name": "b"}, "spec": {"policyName": "broken", "validationActions": ["Deny"]}});
        let (_, denials) = run(&failing_policy("Fail"), &deny, &object);
        assert_eq!(denials.len(), 1);
        let (verdict, denials) = run(&failing_policy("Ignore"), &deny, &object);
        assert!(denials.is_empty() && verdict.warnings.is_empty());
    }
}
