//! The Table printer for admission webhook configurations (admissionregistration.k8s.io).

use super::Printer;
use super::util::{Col, age, age_col, arr, at, col, format_label_selector, i, name, name_col, s, st};

/// The columns of webhook configurations.
fn webhooks() -> Vec<Col> {
    vec![
        name_col(),
        col("Webhooks", "integer", "Webhooks indicates the number of webhooks registered in this configuration"),
        age_col(),
    ]
}

/// The printer of admissionregistration.k8s.io mutating and validating webhook configurations.
pub(crate) fn webhook_configurations() -> Printer {
    Printer::of((webhooks(), |o, now| vec![name(o), i(arr(o, "webhooks").len() as i64), age(o, now)]))
}

/// The printer of ValidatingAdmissionPolicies: how many validations, the param kind.
pub(crate) fn validating_admission_policies() -> Printer {
    let cols = vec![
        name_col(),
        col(
            "Validations",
            "integer",
            "Validations indicates the number of validation rules defined in this configuration",
        ),
        col("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy"),
        age_col(),
    ];
    Printer::of((cols, |o, now| {
        let param_kind = match at(o, "spec.paramKind") {
            Some(k) => format!("{}/{}", s(k, "apiVersion"), s(k, "kind")),
            None => "<unset>".to_string(),
        };
        vec![name(o), i(arr(o, "spec.validations").len() as i64), st(param_kind), age(o, now)]
    }))
}

/// The printer of ValidatingAdmissionPolicyBindings: the policy and the param.
pub(crate) fn validating_admission_policy_bindings() -> Printer {
    let cols = vec![
        name_col(),
        col("PolicyName", "string", "PolicyName indicates the policy definition which the policy binding binded to"),
        col("ParamRef", "string", "ParamRef indicates the param resource which sets the configration param"),
        age_col(),
    ];
    Printer::of((cols, |o, now| {
        let param = match at(o, "spec.paramRef") {
            Some(p) if !s(p, "name").is_empty() => {
                // As kube: a param without a namespace may be cluster-scoped or the request's.
                let ns = if s(p, "namespace").is_empty() { "*" } else { s(p, "namespace") };
                format!("{ns}/{}", s(p, "name"))
            }
            Some(p) if at(p, "selector").is_some() => format_label_selector(at(p, "selector")),
            _ => "<unset>".to_string(),
        };
        vec![name(o), st(s(o, "spec.policyName")), st(param), age(o, now)]
    }))
}
