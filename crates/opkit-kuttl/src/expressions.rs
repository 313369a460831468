//! A `TestAssert`'s CEL expressions (`assertAll`, `assertAny`) as kuttl runs them: each
//! `resourceRefs` entry is read from the cluster (in the test's namespace unless it names
//! one) and bound as a variable; every `assertAll` expression and at least one
//! `assertAny` expression must be `true`. Expressions are compiled when the step loads,
//! so a syntax error stops the test at once.

use std::sync::Arc;

use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, Program, Value as Cel};
use serde_json::Value;

use crate::api::{Assertion, TestAssert};
use crate::cluster::Cluster;

/// Checks the references and compiles every expression (kuttl's `LoadPrograms`).
pub(crate) fn check_compiles(assert: &TestAssert) -> Result<(), String> {
    let invalid: Vec<String> = assert
        .resource_refs
        .iter()
        .filter_map(|r| r.validate().err().map(|e| format!("validation failed for reference '{}': {e}", r.describe())))
        .collect();
    if !invalid.is_empty() {
        return Err(format!(
            "failed to build CEL environment: failed to load resource reference(s): {}",
            invalid.join("\n")
        ));
    }
    let failed: Vec<String> = assert
        .assert_any
        .iter()
        .chain(&assert.assert_all)
        .filter_map(|a| {
            Program::compile(&a.cel_expr)
                .err()
                .map(|e| format!("failed to build CEL program from expression {:?}: type-check error: {e}", a.cel_expr))
        })
        .collect();
    if failed.is_empty() { Ok(()) } else { Err(format!("failed to load expression(s): {}", failed.join("\n"))) }
}

/// Evaluates the expressions against the cluster (kuttl's `CheckAssertExpressions`).
pub(crate) async fn check(cluster: &Cluster, namespace: &str, assert: &TestAssert) -> Vec<String> {
    if assert.assert_all.is_empty() && assert.assert_any.is_empty() {
        return Vec::new();
    }
    let mut context = Context::default();
    for reference in &assert.resource_refs {
        let ns = if reference.namespace.is_empty() { namespace } else { &reference.namespace };
        let found = match cluster.resolve(&reference.api_version, &reference.kind).await {
            Ok(kind) => cluster.get(&kind, kind.namespaced.then_some(ns), &reference.name).await,
            Err(e) => Err(e),
        };
        match found {
            Ok(Some(object)) => context.add_variable_from_value(reference.reference.clone(), to_cel(&object)),
            Ok(None) => {
                return vec![format!("failed to get referenced resource '{ns}/{}': not found", reference.name)];
            }
            Err(e) => return vec![format!("failed to get referenced resource '{ns}/{}': {e}", reference.name)],
        }
    }
    let failures = |list: &[Assertion]| -> Vec<String> {
        list.iter().filter_map(|a| evaluate(&a.cel_expr, &context).err()).collect()
    };
    let any_failed = failures(&assert.assert_any);
    let all_failed = failures(&assert.assert_all);
    let mut errors = Vec::new();
    if !assert.assert_any.is_empty() && any_failed.len() == assert.assert_any.len() {
        errors.push(format!("no expression evaluated to true: {}", any_failed.join("\n")));
    }
    if !all_failed.is_empty() {
        errors.push(format!("not all assertAll expressions evaluated to true: {}", all_failed.join("\n")));
    }
    errors
}

/// Runs one expression: `Ok` when it is `true`.
fn evaluate(expr: &str, context: &Context<'_>) -> Result<(), String> {
    let program =
        Program::compile(expr).map_err(|e| format!("couldn't find pre-built parsed CEL expression {expr:?}: {e}"))?;
    match program.execute(context) {
        Ok(Cel::Bool(true)) => Ok(()),
        Ok(other) => Err(format!("expression {expr:?} evaluated to '{}'", go_text(&other))),
        Err(e) => Err(format!("failed to evaluate CEL expression: {e}")),
    }
}

/// A CEL result as Go's `%v` prints it, for the common cases.
fn go_text(value: &Cel) -> String {
    match value {
        Cel::Bool(b) => b.to_string(),
        Cel::Int(i) => i.to_string(),
        Cel::UInt(u) => u.to_string(),
        Cel::Float(f) => f.to_string(),
        Cel::String(s) => s.to_string(),
        Cel::Null => "<nil>".into(),
        other => format!("{other:?}"),
    }
}

/// A JSON value as CEL sees it: integers are `int`, objects maps with string keys.
fn to_cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(o) => Cel::Map(Map {
            map: Arc::new(o.iter().map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v))).collect()),
        }),
    }
}
