//! JSON and TOML output as Go writes them: `encoding/json` (keys sorted, `<>&` escaped for
//! HTML unless raw, floats in `strconv`'s shortest form) and a TOML encoder for `toToml`.

use std::fmt::Write as _;

use crate::value::{Value, format_float};

/// `json.Marshal` (or `json.MarshalIndent(v, "", "  ")` with `pretty`) of `value`;
/// `escape_html` as `json.Marshal` does and `toRawJson` does not.
pub(crate) fn to_json(value: &Value, escape_html: bool, pretty: bool) -> String {
    let mut out = String::new();
    write_json(&mut out, value, escape_html, if pretty { Some(0) } else { None });
    out
}

fn newline(out: &mut String, indent: Option<usize>) {
    if let Some(n) = indent {
        out.push('\n');
        for _ in 0..n {
            out.push_str("  ");
        }
    }
}

fn write_json(out: &mut String, value: &Value, escape_html: bool, indent: Option<usize>) {
    match value {
        Value::Nil => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i, _) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => out.push_str(&json_float(*f)),
        Value::Str(s) => json_string(out, s, escape_html),
        Value::List(l) => {
            if l.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in l.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent.map(|n| n + 1));
                write_json(out, item, escape_html, indent.map(|n| n + 1));
            }
            newline(out, indent);
            out.push(']');
        }
        Value::Map(m) => {
            let m = m.borrow();
            if m.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent.map(|n| n + 1));
                json_string(out, k, escape_html);
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                write_json(out, v, escape_html, indent.map(|n| n + 1));
            }
            newline(out, indent);
            out.push('}');
        }
        Value::Object(o) => write_json(out, &o.to_value(), escape_html, indent),
    }
}

/// A float64 as `encoding/json` writes it.
pub(crate) fn json_float(f: f64) -> String {
    if !f.is_finite() {
        return "null".into();
    }
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // 'e' format with Go's exponent cleanup: e-07 becomes e-7.
        let s = format_float(f, 0);
        let s = if s.contains('e') { s } else { format!("{s}e+00") };
        let (m, e) = s.split_once('e').unwrap_or((&s, "+00"));
        let (sign, digits) = e.split_at(1);
        let digits = digits.trim_start_matches('0');
        format!("{m}e{sign}{}", if digits.is_empty() { "0" } else { digits })
    } else {
        format_float(f, 1000)
    }
}

fn json_string(out: &mut String, s: &str, escape_html: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' if escape_html => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A TOML document for `toToml` (BurntSushi/toml's layout: plain keys first, then tables).
pub(crate) fn to_toml(value: &Value) -> String {
    let mut out = String::new();
    if let Value::Map(m) = value {
        write_toml_table(&mut out, &m.borrow(), "");
    }
    out
}

fn toml_key(k: &str) -> String {
    if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        k.to_string()
    } else {
        let mut s = String::new();
        json_string(&mut s, k, false);
        s
    }
}

fn toml_value(v: &Value) -> String {
    match v {
        Value::Str(s) => {
            let mut out = String::new();
            json_string(&mut out, s, false);
            out
        }
        Value::Int(i, _) => i.to_string(),
        Value::Float(f) => {
            if f.fract() == 0.0 && f.abs() < 1e17 {
                format!("{f:.1}")
            } else {
                format!("{f}")
            }
        }
        Value::Bool(b) => b.to_string(),
        Value::List(l) => format!("[{}]", l.iter().map(toml_value).collect::<Vec<_>>().join(", ")),
        Value::Map(m) => format!(
            "{{{}}}",
            m.borrow()
                .iter()
                .map(|(k, v)| format!("{} = {}", toml_key(k), toml_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Nil => String::new(),
        Value::Object(o) => toml_value(&o.to_value()),
    }
}

fn write_toml_table(out: &mut String, m: &std::collections::BTreeMap<String, Value>, prefix: &str) {
    let indent = if prefix.is_empty() { String::new() } else { "  ".repeat(prefix.matches('.').count() + 1) };
    for (k, v) in m {
        if !matches!(v, Value::Map(_) | Value::Nil) {
            let _ = writeln!(out, "{indent}{} = {}", toml_key(k), toml_value(v));
        }
    }
    for (k, v) in m {
        if let Value::Map(sub) = v {
            let name = if prefix.is_empty() { toml_key(k) } else { format!("{prefix}.{}", toml_key(k)) };
            let _ = writeln!(out, "\n{indent}[{name}]");
            write_toml_table(out, &sub.borrow(), &name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_go_json() {
        let v = Value::from_json(&serde_json::json!({"b": [1, 2.5, "<x>"], "a": {}, "c": 1e21}));
        assert_eq!(to_json(&v, true, false), r#"{"a":{},"b":[1,2.5,"\u003cx\u003e"],"c":1e+21}"#);
        assert_eq!(to_json(&v, false, false), r#"{"a":{},"b":[1,2.5,"<x>"],"c":1e+21}"#);
        assert_eq!(json_float(0.0000001), "1e-7");
        assert_eq!(json_float(100000000.0), "100000000");
    }
}
