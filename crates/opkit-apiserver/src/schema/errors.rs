//! Field errors as kube-apiserver reports them (`field.Error` / metav1 `StatusCause`), plus the
//! Go-compatible value rendering (`%v`, `%q`, JSON) used inside their messages.

use serde_json::Value;

/// The machine-readable reason of a [`FieldError`] (a metav1 `CauseType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorReason {
    /// `FieldValueRequired`: a required value is missing.
    Required,
    /// `FieldValueInvalid`: the value is malformed or out of range.
    Invalid,
    /// `FieldValueNotSupported`: the value is not one of the enumerated values.
    NotSupported,
    /// `FieldValueTypeInvalid`: the value does not have the schema's type or format.
    TypeInvalid,
    /// `FieldValueTooLong`: a string is too long.
    TooLong,
    /// `FieldValueTooMany`: a list or map has too many entries.
    TooMany,
    /// `FieldValueForbidden`: the value is not permitted here.
    Forbidden,
    /// `FieldValueDuplicate`: the value must be unique but is not.
    Duplicate,
    /// `FieldValueNotFound`: the value names something that does not exist.
    NotFound,
}

impl FieldErrorReason {
    /// The metav1 `CauseType` string, e.g. `"FieldValueInvalid"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::TypeInvalid => "FieldValueTypeInvalid",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Forbidden => "FieldValueForbidden",
            Self::Duplicate => "FieldValueDuplicate",
            Self::NotFound => "FieldValueNotFound",
        }
    }

    /// The human-readable prefix kube puts in front of the message, e.g. `"Invalid value"`.
    pub fn title(&self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Forbidden => "Forbidden",
            Self::Duplicate => "Duplicate value",
            Self::NotFound => "Not found",
        }
    }

    /// Parses a `CauseType` string (as used by a CEL rule's `reason`).
    pub fn from_cause(s: &str) -> Option<Self> {
        Some(match s {
            "FieldValueRequired" => Self::Required,
            "FieldValueInvalid" => Self::Invalid,
            "FieldValueNotSupported" => Self::NotSupported,
            "FieldValueTypeInvalid" => Self::TypeInvalid,
            "FieldValueTooLong" => Self::TooLong,
            "FieldValueTooMany" => Self::TooMany,
            "FieldValueForbidden" => Self::Forbidden,
            "FieldValueDuplicate" => Self::Duplicate,
            "FieldValueNotFound" => Self::NotFound,
            _ => return None,
        })
    }
}

/// One invalid field, as kube-apiserver reports it in a metav1.Status cause.
///
/// `message` is the error body without the field (kube's `ErrorBody()`), e.g.
/// `Invalid value: 11: spec.number in body should be less than or equal to 10`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.to_message())]
pub struct FieldError {
    /// The field path, e.g. `spec.items[0].name` (`<nil>` for the whole object).
    pub field: String,
    /// The cause type.
    pub reason: FieldErrorReason,
    /// The message body (without the field path).
    pub message: String,
}

/// The offending value of a field error, as kube renders it.
#[derive(Debug, Clone)]
pub(crate) enum BadValue {
    /// A JSON value: numbers/bools plain, strings Go-quoted, composites as JSON.
    Json(Value),
    /// No value shown (kube's `field.OmitValueType`).
    Omit,
}

impl BadValue {
    /// A string bad value.
    pub(crate) fn str(s: &str) -> Self {
        Self::Json(Value::String(s.to_string()))
    }
}

impl FieldError {
    /// `<field>: <message>`, the full text kube shows (`field.Error.Error()`).
    pub fn to_message(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }

    fn with_value(field: &str, reason: FieldErrorReason, value: &BadValue, detail: &str) -> Self {
        let mut s = match value {
            BadValue::Omit => reason.title().to_string(),
            BadValue::Json(v) => format!("{}: {}", reason.title(), render_value(v)),
        };
        if !detail.is_empty() {
            s.push_str(": ");
            s.push_str(detail);
        }
        FieldError { field: field.to_string(), reason, message: s }
    }

    fn without_value(field: &str, reason: FieldErrorReason, detail: &str) -> Self {
        let mut s = reason.title().to_string();
        if !detail.is_empty() {
            s.push_str(": ");
            s.push_str(detail);
        }
        FieldError { field: field.to_string(), reason, message: s }
    }

    /// `field.Required`.
    pub fn required(field: &str, detail: &str) -> Self {
        Self::without_value(field, FieldErrorReason::Required, detail)
    }

    /// `field.Forbidden`.
    pub fn forbidden(field: &str, detail: &str) -> Self {
        Self::without_value(field, FieldErrorReason::Forbidden, detail)
    }

    /// `field.Invalid` with a JSON bad value.
    pub fn invalid(field: &str, value: &Value, detail: &str) -> Self {
        Self::with_value(field, FieldErrorReason::Invalid, &BadValue::Json(value.clone()), detail)
    }

    /// `field.Invalid` with a string bad value.
    pub fn invalid_str(field: &str, value: &str, detail: &str) -> Self {
        Self::with_value(field, FieldErrorReason::Invalid, &BadValue::str(value), detail)
    }

    pub(crate) fn invalid_bad(field: &str, value: &BadValue, detail: &str) -> Self {
        Self::with_value(field, FieldErrorReason::Invalid, value, detail)
    }

    /// `field.TypeInvalid` with a string bad value (kube passes the actual type name).
    pub fn type_invalid(field: &str, value: &str, detail: &str) -> Self {
        Self::with_value(field, FieldErrorReason::TypeInvalid, &BadValue::str(value), detail)
    }

    /// `field.Duplicate`.
    pub fn duplicate(field: &str, value: &Value) -> Self {
        Self::with_value(field, FieldErrorReason::Duplicate, &BadValue::Json(value.clone()), "")
    }

    /// `field.NotFound`.
    pub fn not_found(field: &str, value: &Value) -> Self {
        Self::with_value(field, FieldErrorReason::NotFound, &BadValue::Json(value.clone()), "")
    }

    /// `field.NotSupported` with the supported values (already rendered as strings).
    pub fn not_supported(field: &str, value: &Value, supported: &[String]) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::with_value(field, FieldErrorReason::NotSupported, &BadValue::Json(value.clone()), &detail)
    }

    /// `field.TooLong` (the value is never shown).
    pub fn too_long(field: &str, max: i64) -> Self {
        let detail = if max >= 0 {
            format!("may not be more than {max} {}", if max == 1 { "byte" } else { "bytes" })
        } else {
            "value is too long".to_string()
        };
        Self::without_value(field, FieldErrorReason::TooLong, &detail)
    }

    /// `field.TooMany`.
    pub fn too_many(field: &str, actual: i64, max: i64) -> Self {
        let detail = if max >= 0 {
            format!("must have at most {max} {}", if max == 1 { "item" } else { "items" })
        } else {
            "has too many items".to_string()
        };
        let value = if actual >= 0 { BadValue::Json(Value::from(actual)) } else { BadValue::Omit };
        Self::with_value(field, FieldErrorReason::TooMany, &value, &detail)
    }
}

/// Renders a JSON value the way kube's `ErrorBody` prints a bad value.
pub(crate) fn render_value(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => render_number(n),
        Value::String(s) => go_quote(s),
        other => sorted(other).to_string(),
    }
}

/// A copy of `v` whose object keys are sorted (Go's `json.Marshal` of a map sorts keys).
pub(crate) fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for k in keys {
                if let Some(x) = m.get(k) {
                    out.insert(k.clone(), sorted(x));
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Renders a JSON number like Go's `%v` of the decoded `int64`/`float64`.
pub(crate) fn render_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        // Go decodes this as float64
        go_float(u as f64)
    } else {
        go_float(n.as_f64().unwrap_or(0.0))
    }
}

/// Go's `%v` for a float64 (shortest representation, exponent when exp < -4 or >= 21).
pub(crate) fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf".to_string() } else { "-Inf".to_string() };
    }
    if f == 0.0 {
        return "0".to_string();
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse::<i32>().unwrap_or(0)),
        None => return format!("{f}"),
    };
    if !(-4..21).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

/// Go's `%q` / `strconv.Quote` for a string (written once, in opkit-apimachinery).
pub(crate) use opkit_apimachinery::strconv::quote as go_quote;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_float_formatting() {
        assert_eq!(go_float(10.0), "10");
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(1e20), "100000000000000000000");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(0.0001), "0.0001");
    }

    #[test]
    fn bodies() {
        let e = FieldError::invalid("spec.number", &json!(11), "x");
        assert_eq!(e.message, "Invalid value: 11: x");
        assert_eq!(e.to_message(), "spec.number: Invalid value: 11: x");
        assert_eq!(FieldError::required("spec.from", "").message, "Required value");
        assert_eq!(
            FieldError::not_supported("f", &json!("x"), &["a".into(), "b".into()]).message,
            "Unsupported value: \"x\": supported values: \"a\", \"b\""
        );
        assert_eq!(FieldError::too_long("f", 5).message, "Too long: may not be more than 5 bytes");
        assert_eq!(FieldError::too_many("f", 3, 2).message, "Too many: 3: must have at most 2 items");
        assert_eq!(go_quote("a\"b\n"), "\"a\\\"b\\n\"");
        assert_eq!(FieldErrorReason::TypeInvalid.as_str(), "FieldValueTypeInvalid");
    }
}
