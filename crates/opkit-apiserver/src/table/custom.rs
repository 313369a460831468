//! Tables for custom resources (CRD `additionalPrinterColumns`, as the
//! apiextensions-apiserver table convertor builds them) and kube's default
//! table (`NAME`, `CREATED AT`) for resources without a printer.

use serde_json::{Map, Value};

use super::PrinterColumn;
use super::util::{Col, DESC_CREATED, name, name_col, parse_ts, s};
use crate::jsonpath::JsonPath;

/// A CRD column ready to evaluate.
pub(crate) struct CustomColumn {
    path: Option<JsonPath>,
    type_: String,
}

/// Column definitions and evaluators for CRD printer columns (NAME first; `Age` when none are defined).
pub(crate) fn columns(custom: &[PrinterColumn]) -> (Vec<Col>, Vec<CustomColumn>) {
    let default_age;
    let custom = if custom.is_empty() {
        default_age = [PrinterColumn {
            name: "Age".into(),
            type_: "date".into(),
            format: String::new(),
            description: DESC_CREATED.into(),
            priority: 0,
            json_path: ".metadata.creationTimestamp".into(),
        }];
        &default_age[..]
    } else {
        custom
    };
    let mut cols = vec![name_col()];
    let mut evals = Vec::new();
    for c in custom {
        let description = if c.description.is_empty() {
            format!("Custom resource definition column (in JSONPath format): {}", c.json_path)
        } else {
            c.description.clone()
        };
        cols.push(Col {
            name: c.name.clone(),
            type_: c.type_.clone(),
            format: c.format.clone(),
            description,
            priority: c.priority,
        });
        evals.push(CustomColumn { path: JsonPath::parse(&c.json_path).ok(), type_: c.type_.clone() });
    }
    (cols, evals)
}

/// The cells of one custom-resource row.
pub(crate) fn cells(o: &Value, now: i64, evals: &[CustomColumn]) -> Vec<Value> {
    let mut out = vec![name(o)];
    for c in evals {
        let found = c.path.as_ref().and_then(|p| p.eval_first(o));
        out.push(match found {
            None => Value::Null,
            Some(v) if c.type_ == "string" => Value::String(print_text(v)),
            Some(v) => cell_for_json_value(&c.type_, v, now),
        });
    }
    out
}

/// apiextensions' `cellForJSONValue`: coerce a JSON value to the column type, or null.
fn cell_for_json_value(ty: &str, v: &Value, now: i64) -> Value {
    match (ty, v) {
        ("integer", Value::Number(n)) => {
            n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)).map_or(Value::Null, Value::from)
        }
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, float_cell),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(ts)) => match parse_ts(ts) {
            Some(t) => Value::String(super::human_duration(now - t)),
            None => Value::String("<invalid>".into()),
        },
        _ => Value::Null,
    }
}

/// A float cell encoded as Go would (`3` rather than `3.0` for integral values).
fn float_cell(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        Value::from(f as i64)
    } else {
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// Go's `fmt.Sprint` of a float64 (`%v`: shortest repr, exponent form outside [1e-4, 1e21)).
pub(crate) fn go_float(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f.is_infinite() {
            if f > 0.0 { "+Inf".into() } else { "-Inf".into() }
        } else {
            "0".into()
        };
    }
    let exp = f.abs().log10().floor() as i32;
    if (-4..21).contains(&exp) {
        return format!("{f}");
    }
    let e = format!("{f:e}");
    match e.split_once('e') {
        Some((mant, ex)) => {
            let (sign, digits) = ex.strip_prefix('-').map_or(("+", ex), |d| ("-", d));
            format!("{mant}e{sign}{digits:0>2}")
        }
        None => e,
    }
}

/// Sorts object keys recursively, as Go's `json.Marshal` of a map does.
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect::<Map<_, _>>())
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// client-go jsonpath's `PrintResults` for one value: raw strings, Go number
/// formatting, compact JSON for objects and arrays.
pub(crate) fn print_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => n.as_u64().map_or_else(|| go_float(n.as_f64().unwrap_or_default()), |u| u.to_string()),
        },
        Value::Bool(b) => b.to_string(),
        Value::Null => "<no value>".into(),
        other => sorted(other).to_string(),
    }
}

/// kube's default table columns (`rest.NewDefaultTableConvertor`).
pub(crate) fn default_columns() -> Vec<Col> {
    vec![
        name_col(),
        Col {
            name: "Created At".into(),
            type_: "date".into(),
            format: String::new(),
            description: DESC_CREATED.into(),
            priority: 0,
        },
    ]
}

/// A default-table row: name and the creation time in RFC3339 (UTC).
pub(crate) fn default_row(o: &Value, _now: i64) -> Vec<Value> {
    let created = s(o, "metadata.creationTimestamp")
        .parse::<jiff::Timestamp>()
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|_| "0001-01-01T00:00:00Z".into());
    vec![name(o), Value::String(created)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_float_formatting() {
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(123456.25), "123456.25");
    }

    #[test]
    fn text_and_cells() {
        assert_eq!(print_text(&json!({"b": 1, "a": [true]})), r#"{"a":[true],"b":1}"#);
        assert_eq!(print_text(&json!(7)), "7");
        assert_eq!(cell_for_json_value("integer", &json!(2.9), 0), json!(2));
        assert_eq!(cell_for_json_value("number", &json!(3), 0), json!(3));
        assert_eq!(cell_for_json_value("integer", &json!("x"), 0), Value::Null);
        assert_eq!(cell_for_json_value("date", &json!("nope"), 0), json!("<invalid>"));
        assert_eq!(
            default_row(&json!({"metadata": {"name": "r", "creationTimestamp": "2026-11-22T03:53:23Z"}}), 0)[1],
            json!("2026-11-22T03:53:23Z")
        );
    }
}
