//! `values.schema.json` validation as Helm reports it (the subset of JSON Schema charts
//! use: type, required, properties, items, enum, additionalProperties, min/max), each
//! chart checked against its own part of the values.

use crate::HelmError;
use crate::chart::Chart;
use crate::value::{Map, Value};

/// Checks the values of `chart` and its subcharts against their schemas.
pub(crate) fn validate_chart(chart: &Chart, values: &Map) -> Result<(), HelmError> {
    let mut report = String::new();
    collect(chart, &Value::Map(values.clone()), &mut report);
    if report.is_empty() {
        Ok(())
    } else {
        Err(HelmError::Schema(format!(
            "values don't meet the specifications of the schema(s) in the following chart(s):\n{report}"
        )))
    }
}

fn collect(chart: &Chart, values: &Value, report: &mut String) {
    if let Some(schema) = &chart.schema {
        let mut errors = Vec::new();
        check(schema, &values.to_json(), "", &mut errors);
        if !errors.is_empty() {
            report.push_str(&format!("{}:\n", chart.name));
            for e in errors {
                report.push_str(&format!("- {e}\n"));
            }
        }
    }
    for sub in &chart.subcharts {
        let sub_values = match values {
            Value::Map(m) => m.borrow().get(&sub.name).cloned().unwrap_or(Value::Nil),
            _ => Value::Nil,
        };
        collect(sub, &sub_values, report);
    }
}

fn type_name(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(n) => {
            if n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                "integer"
            } else {
                "number"
            }
        }
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

fn type_matches(want: &str, v: &serde_json::Value) -> bool {
    let got = type_name(v);
    want == got || (want == "number" && got == "integer")
}

fn field(path: &str) -> String {
    if path.is_empty() { "(root)".into() } else { path.to_string() }
}

fn check(schema: &serde_json::Value, v: &serde_json::Value, path: &str, errors: &mut Vec<String>) {
    let Some(s) = schema.as_object() else { return };
    if let Some(t) = s.get("type") {
        let wants: Vec<&str> = match t {
            serde_json::Value::String(t) => vec![t.as_str()],
            serde_json::Value::Array(a) => a.iter().filter_map(|x| x.as_str()).collect(),
            _ => Vec::new(),
        };
        if !wants.is_empty() && !wants.iter().any(|w| type_matches(w, v)) {
            errors.push(format!(
                "{}: Invalid type. Expected: {}, given: {}",
                field(path),
                wants.join("/"),
                type_name(v)
            ));
            return;
        }
    }
    if let Some(e) = s.get("enum").and_then(|e| e.as_array())
        && !e.iter().any(|x| x == v)
    {
        {
            let allowed: Vec<String> = e.iter().map(|x| x.to_string()).collect();
            errors.push(format!(
                "{}: {} must be one of the following: {}",
                field(path),
                field(path),
                allowed.join(", ")
            ));
        }
    }
    if let serde_json::Value::Object(o) = v {
        if let Some(req) = s.get("required").and_then(|r| r.as_array()) {
            for r in req.iter().filter_map(|r| r.as_str()) {
                if !o.contains_key(r) {
                    errors.push(format!("{}: {r} is required", field(path)));
                }
            }
        }
        let props = s.get("properties").and_then(|p| p.as_object());
        let mut keys: Vec<&String> = o.keys().collect();
        keys.sort();
        for k in keys {
            let child_path = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
            match props.and_then(|p| p.get(k)) {
                Some(ps) => check(ps, &o[k], &child_path, errors),
                None => match s.get("additionalProperties") {
                    Some(serde_json::Value::Bool(false)) => {
                        errors.push(format!("{}: Additional property {k} is not allowed", field(path)));
                    }
                    Some(ap @ serde_json::Value::Object(_)) => check(ap, &o[k], &child_path, errors),
                    _ => {}
                },
            }
        }
    }
    if let (serde_json::Value::Array(a), Some(items)) = (v, s.get("items")) {
        for (i, item) in a.iter().enumerate() {
            check(items, item, &format!("{}.{i}", field(path)), errors);
        }
    }
    if let (Some(n), Some(min)) = (v.as_f64(), s.get("minimum").and_then(|m| m.as_f64()))
        && n < min
    {
        errors.push(format!("{}: Must be greater than or equal to {}", field(path), crate::json::json_float(min)));
    }
    if let (Some(n), Some(max)) = (v.as_f64(), s.get("maximum").and_then(|m| m.as_f64()))
        && n > max
    {
        errors.push(format!("{}: Must be less than or equal to {}", field(path), crate::json::json_float(max)));
    }
}
