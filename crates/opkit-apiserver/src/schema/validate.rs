//! OpenAPI value validation of custom resources, mirroring kube-openapi's `SchemaValidator` as
//! converted to field errors by apiextensions' `ValidateCustomResource`.

use serde_json::Value;

use super::errors::{BadValue, FieldError, go_float, render_number};
use super::format::check_string_format;
use super::structural::Schema;

/// JSON type name of a value, as kube-openapi infers it.
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Deep equality with numeric equivalence (`1 == 1.0`).
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

fn field_of(path: &str) -> &str {
    if path.is_empty() { "<nil>" } else { path }
}

fn is_integral(f: f64) -> bool {
    f.is_finite() && f.fract() == 0.0
}

/// Validates `v` against `s`; `path` is both the field path and the name used in messages.
/// `root` marks the custom resource root, whose `metadata` is validated elsewhere.
pub(crate) fn validate_value(s: &Schema, v: &Value, path: &str, root: bool, errs: &mut Vec<FieldError>) {
    let field = field_of(path);
    // type
    let expected: Vec<&str> = if !s.ty.is_empty() {
        vec![s.ty.as_str()]
    } else if s.int_or_string {
        vec!["integer", "string"]
    } else {
        vec![]
    };
    if v.is_null() {
        if !expected.is_empty() && !s.nullable {
            errs.push(FieldError::type_invalid(
                field,
                "null",
                &format!("{path} in body must be of type {}: \"null\"", expected.join(",")),
            ));
        }
        validate_enum(s, v, field, errs);
        return;
    }
    let actual = json_type(v);
    if !expected.is_empty() {
        let float_int = actual == "number" && v.as_f64().is_some_and(is_integral) && expected.contains(&"integer");
        let int_float = actual == "integer" && expected.contains(&"number");
        if !(expected.contains(&actual) || float_int || int_float) {
            errs.push(FieldError::type_invalid(
                field,
                actual,
                &format!("{path} in body must be of type {}: \"{actual}\"", expected.join(",")),
            ));
        }
    }
    validate_props(s, v, path, errs);
    match v {
        Value::String(st) => validate_string(s, st, path, errs),
        Value::Number(n) => validate_number(s, n, path, errs),
        Value::Array(items) => validate_array(s, items, path, errs),
        _ => {}
    }
    validate_enum(s, v, field, errs);
    if let Value::Object(obj) = v {
        validate_object(s, obj, path, root, errs);
    }
}

fn validate_string(s: &Schema, st: &str, path: &str, errs: &mut Vec<FieldError>) {
    let field = field_of(path);
    let len = st.chars().count() as i64;
    if let Some(max) = s.max_length
        && len > max
    {
        errs.push(FieldError::too_long(field, max));
    }
    if let Some(min) = s.min_length
        && len < min
    {
        errs.push(FieldError::invalid_str(field, st, &format!("{path} in body should be at least {min} chars long")));
    }
    if let Some((p, re)) = &s.pattern
        && !re.is_match(st)
    {
        errs.push(FieldError::invalid_str(field, st, &format!("{path} in body should match '{p}'")));
    }
    if !s.format.is_empty() && !check_string_format(&s.format, st) {
        errs.push(FieldError::type_invalid(
            field,
            st,
            &format!("{path} in body must be of type {}: {}", s.format, super::errors::go_quote(st)),
        ));
    }
}

fn validate_number(s: &Schema, n: &serde_json::Number, path: &str, errs: &mut Vec<FieldError>) {
    let field = field_of(path);
    let value = Value::Number(n.clone());
    let f = n.as_f64().unwrap_or(0.0);
    if let Some(m) = s.multiple_of
        && m > 0.0
    {
        let ok = match (n.as_i64(), is_integral(m)) {
            (Some(i), true) if m.abs() < 9.0e15 => i % (m as i64) == 0,
            _ => is_integral(f / m),
        };
        if !ok {
            errs.push(FieldError::invalid(
                field,
                &value,
                &format!("{path} in body should be a multiple of {}", go_float(m)),
            ));
        }
    }
    if let Some(max) = s.maximum {
        let bad = if s.exclusive_maximum { f >= max } else { f > max };
        if bad {
            let word = if s.exclusive_maximum { "less than" } else { "less than or equal to" };
            errs.push(FieldError::invalid(
                field,
                &value,
                &format!("{path} in body should be {word} {}", go_float(max)),
            ));
        }
    }
    if let Some(min) = s.minimum {
        let bad = if s.exclusive_minimum { f <= min } else { f < min };
        if bad {
            let word = if s.exclusive_minimum { "greater than" } else { "greater than or equal to" };
            errs.push(FieldError::invalid(
                field,
                &value,
                &format!("{path} in body should be {word} {}", go_float(min)),
            ));
        }
    }
}

fn validate_array(s: &Schema, items: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    let field = field_of(path);
    if let Some(item_schema) = &s.items {
        for (i, item) in items.iter().enumerate() {
            validate_value(item_schema, item, &format!("{path}[{i}]"), false, errs);
        }
    }
    let size = items.len() as i64;
    if let Some(min) = s.min_items
        && size < min
    {
        errs.push(FieldError::invalid(
            field,
            &Value::from(size),
            &format!("{path} in body should have at least {min} items"),
        ));
    }
    if let Some(max) = s.max_items
        && size > max
    {
        errs.push(FieldError::too_many(field, size, max));
    }
    if s.unique_items {
        let dup = items.iter().enumerate().any(|(i, a)| items[..i].iter().any(|b| json_eq(a, b)));
        if dup {
            errs.push(FieldError::invalid_str(field, "", &format!("{path} in body shouldn't contain duplicates")));
        }
    }
}

fn validate_enum(s: &Schema, v: &Value, field: &str, errs: &mut Vec<FieldError>) {
    let Some(values) = &s.enum_values else { return };
    if values.is_empty() || (v.is_null() && s.nullable) || values.iter().any(|e| json_eq(e, v)) {
        return;
    }
    let supported: Vec<String> = values
        .iter()
        .map(|e| match e {
            Value::String(st) => st.clone(),
            Value::Number(n) => render_number(n),
            other => super::errors::sorted(other).to_string(),
        })
        .collect();
    errs.push(FieldError::not_supported(field, v, &supported));
}

fn validate_object(
    s: &Schema,
    obj: &serde_json::Map<String, Value>,
    path: &str,
    root: bool,
    errs: &mut Vec<FieldError>,
) {
    let field = field_of(path);
    let n = obj.len() as i64;
    if let Some(min) = s.min_properties
        && n < min
    {
        errs.push(FieldError::invalid(
            field,
            &Value::from(n),
            &format!("{path} in body should have at least {min} properties"),
        ));
    }
    if let Some(max) = s.max_properties
        && n > max
    {
        errs.push(FieldError::too_many(field, n, max));
    }
    let child = |k: &str| {
        if path.is_empty() { k.to_string() } else { format!("{path}.{k}") }
    };
    for (k, ps) in &s.properties {
        if root && k == "metadata" {
            continue;
        }
        if let Some(cv) = obj.get(k) {
            validate_value(ps, cv, &child(k), false, errs);
        }
    }
    for r in &s.required {
        if !obj.contains_key(r) {
            errs.push(FieldError::required(&child(r), ""));
        }
    }
    if let Some(ap) = s.additional_schema() {
        for (k, cv) in obj {
            if s.property(k).is_none() && !(root && (k == "metadata" || k == "apiVersion" || k == "kind")) {
                validate_value(ap, cv, &child(k), false, errs);
            }
        }
    }
    if s.embedded_resource && !root {
        for k in ["apiVersion", "kind"] {
            match obj.get(k) {
                Some(Value::String(x)) if !x.is_empty() => {}
                Some(Value::String(_)) | None => errs.push(FieldError::required(&child(k), "must not be empty")),
                Some(other) => errs.push(FieldError::invalid(&child(k), other, "must be a string")),
            }
        }
    }
}

/// allOf / anyOf / oneOf / not.
fn validate_props(s: &Schema, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let run = |sub: &Schema| {
        let mut e = Vec::new();
        validate_value(sub, v, path, false, &mut e);
        e
    };
    let quoted = super::errors::go_quote(path);
    let bad = BadValue::str("");
    if !s.all_of.is_empty() {
        let mut validated = 0;
        let mut all = Vec::new();
        for sub in &s.all_of {
            let e = run(sub);
            if e.is_empty() {
                validated += 1;
            }
            all.extend(e);
        }
        errs.extend(all);
        if validated == 0 {
            errs.push(FieldError::invalid_bad(
                "<nil>",
                &bad,
                &format!("{quoted} must validate all the schemas (allOf). None validated"),
            ));
        } else if validated != s.all_of.len() {
            errs.push(FieldError::invalid_bad(
                "<nil>",
                &bad,
                &format!("{quoted} must validate all the schemas (allOf)"),
            ));
        }
    }
    if !s.any_of.is_empty() {
        let results: Vec<Vec<FieldError>> = s.any_of.iter().map(run).collect();
        if !results.iter().any(Vec::is_empty) {
            errs.push(FieldError::invalid_bad(
                "<nil>",
                &bad,
                &format!("{quoted} must validate at least one schema (anyOf)"),
            ));
            if let Some(best) = results.iter().min_by_key(|e| e.len()) {
                errs.extend(best.iter().cloned());
            }
        }
    }
    if !s.one_of.is_empty() {
        let results: Vec<Vec<FieldError>> = s.one_of.iter().map(run).collect();
        let valid = results.iter().filter(|e| e.is_empty()).count();
        if valid == 0 {
            errs.push(FieldError::invalid_bad(
                "<nil>",
                &bad,
                &format!("{quoted} must validate one and only one schema (oneOf). Found none valid"),
            ));
            if let Some(best) = results.iter().min_by_key(|e| e.len()) {
                errs.extend(best.iter().cloned());
            }
        } else if valid > 1 {
            errs.push(FieldError::invalid_bad(
                "<nil>",
                &bad,
                &format!("{quoted} must validate one and only one schema (oneOf). Found {valid} valid alternatives"),
            ));
        }
    }
    if let Some(not) = &s.not
        && run(not).is_empty()
    {
        errs.push(FieldError::invalid_bad("<nil>", &bad, &format!("{quoted} must not validate the schema (not)")));
    }
}
