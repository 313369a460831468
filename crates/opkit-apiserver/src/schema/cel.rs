//! `x-kubernetes-validations` (CEL) rules of one schema node: compiled with `kube-cel`, evaluated
//! per node, and their failures reported as kube-apiserver's `celValidator` reports them.

use kube_cel::cel::common::ast::IdedExpr;
use kube_cel::{CompiledSchema, ErrorKind};
use serde_json::Value;

use super::cel_cost::{PER_CALL_LIMIT, RuntimeBudget, runtime_cost};
use super::cel_depth;
use super::errors::{FieldError, FieldErrorReason};
use super::structural::{Schema, first_line};

/// The reasons a rule may declare.
const SUPPORTED_REASONS: [&str; 4] =
    ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"];

/// What we keep of one rule besides its compiled program.
#[derive(Debug)]
struct RuleInfo {
    rule: String,
    message: String,
    /// `fieldPath` normalised to a kube field path suffix (e.g. `foo.bar[key]`).
    field_path: Option<String>,
    reason: Option<FieldErrorReason>,
    /// The parsed rule, for its cost on each value (None if it does not parse).
    expr: Option<IdedExpr>,
}

impl RuleInfo {
    /// How kube names the rule in errors: its message, else its text.
    fn error_string(&self) -> &str {
        if self.message.is_empty() { self.rule.trim() } else { self.message.trim() }
    }
}

/// The compiled rules of one node.
#[derive(Debug)]
pub(crate) struct CelRules {
    /// This node's subtree with nested rules stripped, so only this node's rules run.
    compiled: CompiledSchema,
    rules: Vec<RuleInfo>,
    /// This node's schema (nested rules stripped), for the rules' cost on a value.
    node: Value,
    /// The depth of the deepest rule's syntax tree (see `cel_depth`).
    depth: usize,
}

/// Removes `x-kubernetes-validations` from every descendant of `v` (not from `v` itself).
fn strip_nested(v: &mut Value) {
    let Some(obj) = v.as_object_mut() else { return };
    fn strip_all(v: &mut Value) {
        if let Some(o) = v.as_object_mut() {
            o.remove("x-kubernetes-validations");
        }
        strip_nested(v);
    }
    if let Some(props) = obj.get_mut("properties").and_then(Value::as_object_mut) {
        props.values_mut().for_each(strip_all);
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(child) = obj.get_mut(key) {
            strip_all(child);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(arr) = obj.get_mut(key).and_then(Value::as_array_mut) {
            arr.iter_mut().for_each(strip_all);
        }
    }
}

/// Parses every rule and `messageExpression` of a node with the depth guard before the
/// rules are compiled together: one nested too deep is a compile error (and nothing of
/// the node is compiled). Returns the deepest tree's depth.
fn guard_depth(raw_rules: &[Value], path: &str, errs: &mut Vec<FieldError>) -> Option<usize> {
    let mut deepest = 0;
    let mut refused = false;
    for (i, raw) in raw_rules.iter().enumerate() {
        let rpath = format!("{path}.x-kubernetes-validations[{i}]");
        for (key, detail_prefix) in [("rule", ""), ("messageExpression", "messageExpression ")] {
            let Some(text) = raw.get(key).and_then(Value::as_str).filter(|t| !t.trim().is_empty()) else { continue };
            match cel_depth::parse(text) {
                Ok((_, depth)) => deepest = deepest.max(depth),
                Err(e) if e.contains("max recursion depth") => {
                    let detail = format!("{detail_prefix}{e}");
                    errs.push(FieldError::invalid_str(&format!("{rpath}.{key}"), text, &detail));
                    refused = true;
                }
                // Other parse errors are reported by the compilation, in its words.
                Err(_) => {}
            }
        }
    }
    (!refused).then_some(deepest)
}

impl CelRules {
    /// Compiles the rules of node `v` (whose structure is already in `schema`).
    pub(crate) fn compile(v: &Value, schema: &Schema, path: &str, errs: &mut Vec<FieldError>) -> Option<CelRules> {
        let raw_rules = v.get("x-kubernetes-validations").and_then(Value::as_array)?;
        let depth = guard_depth(raw_rules, path, errs)?;
        let mut stripped = v.clone();
        strip_nested(&mut stripped);
        let compiled = cel_depth::on_stack_for(depth, || kube_cel::compile_schema(&stripped));
        let mut rules = Vec::new();
        let mut ok = true;
        for (i, raw) in raw_rules.iter().enumerate() {
            let rpath = format!("{path}.x-kubernetes-validations[{i}]");
            let rule = raw.get("rule").and_then(Value::as_str).unwrap_or("").to_string();
            let message = raw.get("message").and_then(Value::as_str).unwrap_or("").to_string();
            if rule.trim().is_empty() {
                errs.push(FieldError::required(&format!("{rpath}.rule"), ""));
                ok = false;
                continue;
            }
            if message.contains('\n') {
                errs.push(FieldError::invalid_str(
                    &format!("{rpath}.message"),
                    &message,
                    "message must not contain line breaks",
                ));
                ok = false;
            }
            if message.is_empty() && rule.contains('\n') {
                errs.push(FieldError::required(
                    &format!("{rpath}.message"),
                    "message must be specified if rule contains line breaks",
                ));
                ok = false;
            }
            let reason = read_reason(raw, &rpath).unwrap_or_else(|e| {
                errs.push(e);
                ok = false;
                None
            });
            let field_path = read_field_path(raw, &rpath, schema).unwrap_or_else(|e| {
                errs.push(e);
                ok = false;
                None
            });
            if let Some(Err(e)) = compiled.validations.get(i) {
                ok = false;
                errs.push(compilation_error(e, &rpath, &rule));
            }
            let expr = cel_depth::parse(&rule).ok().map(|(p, _)| p.expression().clone());
            rules.push(RuleInfo { rule, message, field_path, reason, expr });
        }
        ok.then_some(CelRules { compiled, rules, node: stripped, depth })
    }

    /// Evaluates the rules against `value` (and `old` for transition rules) at `path`
    /// (`""` for the object root). `ty` is the node's schema type.
    pub(crate) fn evaluate(
        &self,
        ty: &str,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        errs: &mut Vec<FieldError>,
        budget: &mut RuntimeBudget,
    ) {
        if !self.within_cost(ty, value, path, errs, budget) {
            return;
        }

        let validated = cel_depth::on_stack_for(self.depth, || kube_cel::validate_compiled(&self.compiled, value, old));
        let Err(failures) = validated else {
            return;
        };
        let mut used = vec![false; self.rules.len()];
        let type_value = Value::String(ty.to_string());
        for f in failures.iter() {
            let idx = self
                .rules
                .iter()
                .enumerate()
                .position(|(i, r)| !used[i] && r.rule == f.rule)
                .or_else(|| self.rules.iter().position(|r| r.rule == f.rule));
            let info = idx.and_then(|i| {
                used[i] = true;
                self.rules.get(i)
            });
            let base = if path.is_empty() { "<nil>" } else { path };
            let field = match info.and_then(|i| i.field_path.as_deref()) {
                Some(fp) if path.is_empty() => fp.to_string(),
                Some(fp) => format!("{path}.{fp}"),
                None => base.to_string(),
            };
            let rule_error = info.map_or_else(|| f.rule.trim().to_string(), |i| i.error_string().to_string());
            let err = match f.kind {
                ErrorKind::ValidationFailure => {
                    let detail = f.message.as_str();
                    match info.and_then(|i| i.reason) {
                        Some(FieldErrorReason::Forbidden) => FieldError::forbidden(&field, detail),
                        Some(FieldErrorReason::Required) => FieldError::required(&field, detail),
                        Some(FieldErrorReason::Duplicate) => FieldError::duplicate(&field, &type_value),
                        _ => FieldError::invalid(&field, &type_value, detail),
                    }
                }
                ErrorKind::EvaluationError => {
                    let cause = std::error::Error::source(f).map_or_else(|| f.message.clone(), |s| s.to_string());
                    let detail = if cause.starts_with("no such overload") {
                        format!(
                            "'{cause}': call arguments did not match a supported operator, function or macro signature for rule: {rule_error}"
                        )
                    } else {
                        format!("{cause} evaluating rule: {rule_error}")
                    };
                    FieldError::invalid(base, &type_value, &detail)
                }
                _ => FieldError::invalid(base, &type_value, &f.message),
            };
            errs.push(err);
        }
    }
}

impl CelRules {
    /// Whether this node's rules may run on `value`: none costs more than kube's
    /// `PerCallLimit` on it, and the request's budget covers them all. Otherwise the
    /// errors kube reports are added and nothing runs.
    fn within_cost(
        &self,
        ty: &str,
        value: &Value,
        path: &str,
        errs: &mut Vec<FieldError>,
        budget: &mut RuntimeBudget,
    ) -> bool {
        let base = if path.is_empty() { "<nil>" } else { path };
        let type_value = Value::String(ty.to_string());
        if budget.exhausted() {
            return false;
        }
        let mut total = 0u64;
        let mut over_limit = false;
        for info in &self.rules {
            let Some(expr) = &info.expr else { continue };
            let cost = runtime_cost(&expr.expr, &self.node, value);
            if cost > PER_CALL_LIMIT {
                over_limit = true;
                let detail = format!(
                    "'operation cancelled: actual cost limit exceeded': call cost exceeds limit for rule: {}",
                    info.error_string()
                );
                errs.push(FieldError::invalid(base, &type_value, &detail));
            }
            total = total.saturating_add(cost);
        }
        if over_limit {
            return false;
        }
        if !budget.spend(total) {
            let detail = "validation failed due to running out of cost budget, no further validation rules will be run";
            errs.push(FieldError::invalid(base, &type_value, detail));
            return false;
        }
        true
    }
}

/// Normalises a rule's `fieldPath` (`.a.b`, `.m['key']`) against `schema`, like kube's
/// `ValidFieldPath`: property segments become `.name`, map keys become `[key]`.
pub(crate) fn normalize_field_path(fp: &str, schema: &Schema) -> Result<String, String> {
    resolve_field_path(fp, schema, true).map(|(p, _)| p)
}

/// Resolves a JSON path to its normalised field path and schema node; with `allow_array`
/// false, `['key']` notation is rejected (as for `selectableFields`).
pub(crate) fn resolve_field_path<'a>(
    fp: &str,
    schema: &'a Schema,
    allow_array: bool,
) -> Result<(String, &'a Schema), String> {
    let chars: Vec<char> = fp.chars().collect();
    let mut out = String::new();
    let mut node = schema;
    let mut i = 0;
    let invalid = || "does not refer to a valid field".to_string();
    while i < chars.len() {
        let name = match chars[i] {
            '.' => {
                i += 1;
                let start = i;
                while i < chars.len() && chars[i] != '.' && chars[i] != '[' {
                    i += 1;
                }
                if start == i {
                    return Err("unexpected end of JSON path".to_string());
                }
                chars[start..i].iter().collect::<String>()
            }
            '[' if !allow_array => return Err("array notation is not allowed".to_string()),
            '[' => bracketed_name(&chars, &mut i)?,
            c => return Err(format!("expected [ or . but got: {c}")),
        };
        if !node.properties.is_empty() {
            let child = node.property(&name).ok_or_else(invalid)?;
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&name);
            node = child;
        } else if let Some(ap) = node.additional_schema() {
            out.push('[');
            out.push_str(&name);
            out.push(']');
            node = ap;
        } else {
            return Err(invalid());
        }
    }
    Ok((out, node))
}

/// The name in a `['name']` segment of a field path, starting at the `[` at `chars[*i]`;
/// `*i` ends after the `]`. The name may escape `'`, `\\`, newline and tab.
fn bracketed_name(chars: &[char], i: &mut usize) -> Result<String, String> {
    *i += 1;
    if *i >= chars.len() || chars[*i] != '\'' {
        return Err("expected single quoted string".to_string());
    }
    *i += 1;
    let mut s = String::new();
    loop {
        match chars.get(*i) {
            None => return Err("unexpected end of JSON path".to_string()),
            Some('\\') => {
                match chars.get(*i + 1) {
                    Some('\'') => s.push('\''),
                    Some('\\') => s.push('\\'),
                    Some('n') => s.push('\n'),
                    Some('t') => s.push('\t'),
                    Some(c) => return Err(format!("invalid string literal: invalid escape char \\{c}")),
                    None => return Err("unexpected end of JSON path".to_string()),
                }
                *i += 2;
            }
            Some('\'') => {
                *i += 1;
                break;
            }
            Some(c) => {
                s.push(*c);
                *i += 1;
            }
        }
    }
    if chars.get(*i) != Some(&']') {
        return Err("expected ]".to_string());
    }
    *i += 1;
    Ok(s)
}

/// A rule's `reason`, which must be one kube supports.
fn read_reason(raw: &Value, rpath: &str) -> Result<Option<FieldErrorReason>, FieldError> {
    match raw.get("reason").and_then(Value::as_str) {
        None => Ok(None),
        Some(r) if SUPPORTED_REASONS.contains(&r) => Ok(FieldErrorReason::from_cause(r)),
        Some(r) => {
            let supported: Vec<String> = SUPPORTED_REASONS.iter().map(|s| s.to_string()).collect();
            Err(FieldError::not_supported(&format!("{rpath}.reason"), &Value::from(r), &supported))
        }
    }
}

/// A rule's `fieldPath`, normalised against `schema`.
fn read_field_path(raw: &Value, rpath: &str, schema: &Schema) -> Result<Option<String>, FieldError> {
    let Some(fp) = raw.get("fieldPath").and_then(Value::as_str).filter(|p| !p.is_empty()) else { return Ok(None) };
    normalize_field_path(fp, schema).map(Some).map_err(|e| {
        FieldError::invalid_str(&format!("{rpath}.fieldPath"), fp, &format!("fieldPath must be a valid path: {e}"))
    })
}

/// The field error for a rule (or its messageExpression) that does not compile, with the
/// first line of the parser's message, as kube reports it.
fn compilation_error(e: &kube_cel::CompilationError, rpath: &str, rule: &str) -> FieldError {
    let (field, detail) = match e {
        kube_cel::CompilationError::MessageExpressionParse { source, .. } => (
            format!("{rpath}.messageExpression"),
            format!("messageExpression compilation failed: {}", first_line(&source.to_string())),
        ),
        kube_cel::CompilationError::Parse { source, .. } => {
            (format!("{rpath}.rule"), format!("compilation failed: {}", first_line(&source.to_string())))
        }
        other => (format!("{rpath}.rule"), format!("compilation failed: {other}")),
    };
    FieldError::invalid_str(&field, rule, &detail)
}
