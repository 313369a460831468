//! Go's `text/template` builtins: `not`, `len`, `index`, `print`/`printf`/`println`, the
//! comparisons, `slice`, the `html`/`js`/`urlquery` escapers and `call` (`and` and `or`
//! short-circuit in the executor; their rows here serve already evaluated arguments).

use std::cmp::Ordering;

use super::{ANY, Args, Func, FuncError, FuncResult, fmt, func, strval, to_int64};
use crate::template::Exec;
use crate::value::{IntType, Value, go_string};

/// Go's builtins.
pub(super) const FUNCS: &[Func] = &[
    func("and", 0, ANY, and),
    func("or", 0, ANY, or),
    func("not", 1, 1, not),
    func("len", 1, 1, len),
    func("index", 0, ANY, index),
    func("print", 0, ANY, print),
    func("printf", 0, ANY, printf),
    func("println", 0, ANY, println),
    func("eq", 0, ANY, eq),
    func("ne", 2, 2, ne),
    func("lt", 2, 2, compare),
    func("le", 2, 2, compare),
    func("gt", 2, 2, compare),
    func("ge", 2, 2, compare),
    func("slice", 0, ANY, slice),
    func("html", 0, ANY, html),
    func("js", 0, ANY, js),
    func("urlquery", 0, ANY, urlquery),
    func("call", 0, ANY, call),
];

fn and(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(a.all().iter().find(|v| !v.truthy()).or(a.all().last()).cloned().unwrap_or(Value::Nil))
}

fn or(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(a.all().iter().find(|v| v.truthy()).or(a.all().last()).cloned().unwrap_or(Value::Nil))
}

fn not(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Bool(!a.get(0).truthy()))
}

fn len(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::int(match a.get(0) {
        Value::Str(s) => s.len() as i64,
        Value::List(l) => l.len() as i64,
        Value::Map(m) => m.borrow().len() as i64,
        Value::Object(o) => o.range_items().map_or(0, |i| i.len() as i64),
        Value::Nil => return Err("len of nil pointer".into()),
        other => return Err(format!("len of type {}", other.type_name()).into()),
    }))
}

fn index(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    if a.is_empty() {
        return Err("wrong number of args for index: want at least 1 got 0".into());
    }
    if matches!(a.get(0), Value::Nil) {
        return Err("index of untyped nil".into());
    }
    let mut item = a.get(0).clone();
    for key in a.skip(1) {
        item = match (&item, key) {
            (Value::Map(m), k) => m.borrow().get(&strval(k)).cloned().unwrap_or(Value::Nil),
            (Value::List(l), Value::Int(i, _)) => {
                if *i < 0 || *i as usize >= l.len() {
                    return Err(format!("index out of range: {i}").into());
                }
                l[*i as usize].clone()
            }
            (Value::Str(s), Value::Int(i, _)) => {
                let b = s.as_bytes();
                if *i < 0 || *i as usize >= b.len() {
                    return Err(format!("index out of range: {i}").into());
                }
                Value::Int(i64::from(b[*i as usize]), IntType::Uint8)
            }
            (Value::Nil, _) => return Err("index of nil pointer".into()),
            (other, _) => return Err(format!("can't index item of type {}", other.type_name()).into()),
        };
    }
    Ok(item)
}

fn print(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(fmt::sprint(a.all())))
}

fn println(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(fmt::sprintln(a.all())))
}

fn printf(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    if a.is_empty() {
        return Err("wrong number of args for printf: want at least 1 got 0".into());
    }
    Ok(Value::str(fmt::sprintf(&a.str(0), a.skip(1))))
}

fn eq(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    if a.len() < 2 {
        return Err("missing argument for comparison".into());
    }
    for b in a.skip(1) {
        if go_eq(a.get(0), b)? {
            return Ok(Value::Bool(true));
        }
    }
    Ok(Value::Bool(false))
}

fn ne(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Bool(!go_eq(a.get(0), a.get(1))?))
}

/// `lt`, `le`, `gt` and `ge`, told apart by the called name.
fn compare(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let o = go_cmp(a.get(0), a.get(1))?;
    Ok(Value::Bool(match a.name() {
        "lt" => o == Ordering::Less,
        "le" => o != Ordering::Greater,
        "gt" => o == Ordering::Greater,
        _ => o != Ordering::Less,
    }))
}

/// Go's `slice` (Sprig's `mustSlice` is the same).
pub(super) fn slice(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    if a.is_empty() {
        return Err("wrong number of args for slice: want at least 1 got 0".into());
    }
    let idx: Vec<i64> = a.skip(1).iter().map(to_int64).collect();
    match a.get(0) {
        Value::List(l) => {
            let start = idx.first().copied().unwrap_or(0).max(0) as usize;
            let end = idx.get(1).map_or(l.len(), |e| (*e).max(0) as usize);
            if start > end || end > l.len() {
                return Err(format!("index out of range: {end}").into());
            }
            Ok(Value::list(l[start..end].to_vec()))
        }
        other => Err(format!("list should be type of slice or array but {}", other.type_name()).into()),
    }
}

fn html(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(html_escape(&fmt::sprint(a.all()))))
}

fn js(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(js_escape(&fmt::sprint(a.all()))))
}

fn urlquery(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(query_escape(&fmt::sprint(a.all()))))
}

fn call(_: &mut Exec<'_>, _: Args<'_>) -> FuncResult {
    Err("call of non-function".into())
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum BasicKind {
    Invalid,
    Bool,
    Int,
    Float,
    Str,
    Other,
}

fn basic_kind(v: &Value) -> BasicKind {
    match v {
        Value::Nil => BasicKind::Invalid,
        Value::Bool(_) => BasicKind::Bool,
        Value::Int(_, _) => BasicKind::Int,
        Value::Float(_) => BasicKind::Float,
        Value::Str(_) => BasicKind::Str,
        _ => BasicKind::Other,
    }
}

/// Go's `eq` for two operands.
fn go_eq(a: &Value, b: &Value) -> Result<bool, FuncError> {
    let (ka, kb) = (basic_kind(a), basic_kind(b));
    if ka != kb {
        if ka != BasicKind::Invalid && kb != BasicKind::Invalid {
            return Err("incompatible types for comparison".into());
        }
        return Ok(false);
    }
    Ok(match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x, _), Value::Int(y, _)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Nil, Value::Nil) => true,
        (Value::List(_), _) | (Value::Map(_), _) => {
            return Err(format!("non-comparable type {}: {}", go_string(a), a.type_name()).into());
        }
        _ => false,
    })
}

/// Go's `lt` and friends: the ordering of two basic values of one kind.
fn go_cmp(a: &Value, b: &Value) -> Result<Ordering, FuncError> {
    match (a, b) {
        (Value::Int(x, _), Value::Int(y, _)) => Ok(x.cmp(y)),
        (Value::Float(x), Value::Float(y)) => Ok(x.partial_cmp(y).unwrap_or(Ordering::Equal)),
        (Value::Str(x), Value::Str(y)) => Ok(x.cmp(y)),
        _ if basic_kind(a) == BasicKind::Other
            || basic_kind(b) == BasicKind::Other
            || basic_kind(a) == BasicKind::Bool =>
        {
            Err("invalid type for comparison".into())
        }
        _ => Err("incompatible types for comparison".into()),
    }
}

fn js_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

fn html_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\'' => out.push_str("&#39;"),
            '"' => out.push_str("&#34;"),
            '\0' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

fn query_escape(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
