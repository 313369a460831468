//! The values templates work on, with Go's semantics: maps are shared references (a
//! `set` is seen by every holder, as with Go maps), lists are immutable, numbers keep
//! Go's int64/float64 distinction, and printing follows `fmt`'s `%v`. Helm's typed
//! objects (`.Files`, `.Capabilities`) are values too ([`Object`]; their methods are in
//! `objects`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;

/// A shared, mutable map with Go's sorted iteration order.
pub type Map = Rc<RefCell<BTreeMap<String, Value>>>;

/// A template value.
#[derive(Clone, Debug, Default)]
pub enum Value {
    /// Go's untyped nil (a missing map key, an unset value).
    #[default]
    Nil,
    /// A bool.
    Bool(bool),
    /// An integer of one of Go's integer types: `int` (template literals, `len`, `atoi`,
    /// `int`, range indexes), `int64` (`--set` integers, `int64`, Sprig's arithmetic), ...
    Int(i64, IntType),
    /// A float64 (every number read from YAML or JSON values, as Helm reads them).
    Float(f64),
    /// A string.
    Str(Rc<str>),
    /// A `[]interface{}`.
    List(Rc<Vec<Value>>),
    /// A `map[string]interface{}`.
    Map(Map),
    /// One of Helm's objects with methods (`.Files`, `.Capabilities.APIVersions`, ...).
    Object(Rc<Object>),
}

/// One of Helm's typed objects.
#[derive(Debug)]
pub enum Object {
    /// A chart's non-template files, by path in the chart.
    Files(BTreeMap<String, Rc<[u8]>>),
    /// `.Capabilities.APIVersions`: group/versions (and group/version/kinds) served.
    ApiVersions(Vec<String>),
    /// `.Capabilities.KubeVersion`.
    KubeVersion {
        /// `v1.33.0`
        version: String,
        /// `1`
        major: String,
        /// `33`
        minor: String,
    },
}

/// Go's type of an integer value, which `typeOf`, `kindOf` and `%T` print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntType {
    /// `int`.
    Int,
    /// `int64`.
    Int64,
    /// `uint8` (a byte of a string or of `.Files.GetBytes`).
    Uint8,
    /// `uint64` (a semver's parts).
    Uint64,
}

impl IntType {
    /// Go's name of the type.
    pub fn name(self) -> &'static str {
        match self {
            IntType::Int => "int",
            IntType::Int64 => "int64",
            IntType::Uint8 => "uint8",
            IntType::Uint64 => "uint64",
        }
    }
}

impl Value {
    /// A Go `int`.
    pub fn int(i: i64) -> Value {
        Value::Int(i, IntType::Int)
    }

    /// A Go `int64`.
    pub fn int64(i: i64) -> Value {
        Value::Int(i, IntType::Int64)
    }

    /// A string value.
    pub fn str(s: impl Into<Rc<str>>) -> Value {
        Value::Str(s.into())
    }

    /// A new map value holding `entries`.
    pub fn map(entries: BTreeMap<String, Value>) -> Value {
        Value::Map(Rc::new(RefCell::new(entries)))
    }

    /// A new list value.
    pub fn list(items: Vec<Value>) -> Value {
        Value::List(Rc::new(items))
    }

    /// Go's truth: false, 0, nil and empty strings, lists and maps are false.
    pub fn truthy(&self) -> bool {
        match self {
            Value::Nil => false,
            Value::Bool(b) => *b,
            Value::Int(i, _) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::List(l) => !l.is_empty(),
            Value::Map(m) => !m.borrow().is_empty(),
            Value::Object(o) => o.truthy(),
        }
    }

    /// Go's kind name (`reflect.Kind.String()`), as Sprig's `kindOf` prints it.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Nil => "invalid",
            Value::Bool(_) => "bool",
            Value::Int(_, t) => t.name(),
            Value::Float(_) => "float64",
            Value::Str(_) => "string",
            Value::List(_) => "slice",
            Value::Map(_) => "map",
            Value::Object(_) => "struct",
        }
    }

    /// Go's type name (`%T`), as Sprig's `typeOf` prints it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Nil => "<nil>",
            Value::Bool(_) => "bool",
            Value::Int(_, t) => t.name(),
            Value::Float(_) => "float64",
            Value::Str(_) => "string",
            Value::List(_) => "[]interface {}",
            Value::Map(_) => "map[string]interface {}",
            Value::Object(o) => o.type_name(),
        }
    }

    /// The string inside, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// A copy that shares nothing mutable with `self` (Sprig's `deepCopy`).
    pub fn deep_copy(&self) -> Value {
        match self {
            Value::Map(m) => Value::map(m.borrow().iter().map(|(k, v)| (k.clone(), v.deep_copy())).collect()),
            Value::List(l) => Value::list(l.iter().map(Value::deep_copy).collect()),
            other => other.clone(),
        }
    }

    /// Converts JSON, where numbers become float64 as Go's `encoding/json` decodes them
    /// into `interface{}` (and as Helm reads every values file).
    pub fn from_json(json: &serde_json::Value) -> Value {
        Value::from_json_keys(json, str::to_string)
    }

    fn from_json_keys(json: &serde_json::Value, key: fn(&str) -> String) -> Value {
        match json {
            serde_json::Value::Null => Value::Nil,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => Value::Float(n.as_f64().unwrap_or(0.0)),
            serde_json::Value::String(s) => Value::str(s.as_str()),
            serde_json::Value::Array(a) => Value::list(a.iter().map(|v| Value::from_json_keys(v, key)).collect()),
            serde_json::Value::Object(o) => {
                Value::map(o.iter().map(|(k, v)| (key(k), Value::from_json_keys(v, key))).collect())
            }
        }
    }

    /// Converts to JSON (maps sorted by key as Go's `encoding/json` writes them).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Nil => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i, _) => serde_json::Value::from(*i),
            Value::Float(f) => {
                serde_json::Number::from_f64(*f).map(serde_json::Value::Number).unwrap_or(serde_json::Value::Null)
            }
            Value::Str(s) => serde_json::Value::String(s.to_string()),
            Value::List(l) => serde_json::Value::Array(l.iter().map(Value::to_json).collect()),
            Value::Map(m) => {
                serde_json::Value::Object(m.borrow().iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
            Value::Object(o) => o.to_value().to_json(),
        }
    }
}

/// A mapping key as go-yaml v2 reads it before `sigs.k8s.io/yaml` turns it back into a
/// string: YAML 1.1 booleans (`yes`, `on`, `y`, ...) become `true`/`false`.
pub(crate) fn yaml11_key(k: &str) -> String {
    match k {
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => "true".to_string(),
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => "false".to_string(),
        other => other.to_string(),
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::str(s)
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::str(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::int64(i)
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)`, which `%v` prints floats with: the
/// shortest digits that read back the same, in exponent form when the exponent is
/// below -4 or at least 21 for `big_exponent` (JSON) or 6 (`%v`).
pub fn format_float(f: f64, exponent_at: i32) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    // Rust's `{:e}` prints the shortest round-tripping digits: "1.2345e6".
    let sci = format!("{:e}", f);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if exp < -4 || exp >= exponent_at {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    } else if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let point = exp as usize + 1;
        if digits.len() <= point {
            out.push_str(&digits);
            for _ in digits.len()..point {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
    out
}

/// Writes `value` as Go's `fmt` prints it with `%v` (nil as `<nil>`).
pub fn write_go(out: &mut String, value: &Value) {
    match value {
        Value::Nil => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i, _) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => out.push_str(&format_float(*f, 6)),
        Value::Str(s) => out.push_str(s),
        Value::List(l) => {
            out.push('[');
            for (i, item) in l.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_go(out, item);
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push_str("map[");
            for (i, (k, v)) in m.borrow().iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                write_go(out, v);
            }
            out.push(']');
        }
        Value::Object(o) => out.push_str(&o.to_go_string()),
    }
}

/// `value` as Go's `fmt.Sprint` prints it.
pub fn go_string(value: &Value) -> String {
    match value {
        Value::Str(s) => s.to_string(),
        other => {
            let mut out = String::new();
            write_go(&mut out, other);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_go_prints_them() {
        assert_eq!(format_float(1.0, 6), "1");
        assert_eq!(format_float(1_000_000.0, 6), "1e+06");
        assert_eq!(format_float(123_456.0, 6), "123456");
        assert_eq!(format_float(1.5, 6), "1.5");
        assert_eq!(format_float(0.0001, 6), "0.0001");
        assert_eq!(format_float(0.00001, 6), "1e-05");
        assert_eq!(format_float(1_234_567.0, 6), "1.234567e+06");
        assert_eq!(format_float(1_000_000.0, 21), "1000000");
        assert_eq!(format_float(-2.25, 6), "-2.25");
    }

    #[test]
    fn maps_and_lists_print_as_go_prints_them() {
        let m = Value::map(
            [("b".to_string(), Value::Float(2.0)), ("a".to_string(), Value::list(vec![Value::str("x"), Value::Nil]))]
                .into_iter()
                .collect(),
        );
        assert_eq!(go_string(&m), "map[a:[x <nil>] b:2]");
    }
}
