//! Go's `fmt` as templates use it: `printf`'s verbs and flags, `print`/`println` spacing
//! and `%q` quoting (`strconv.Quote`).

use std::fmt::Write as _;

use crate::value::{Value, format_float, go_string, write_go};

/// Go's `strconv.Quote` (written once, in opkit-apimachinery).
pub(crate) use opkit_apimachinery::strconv::quote as go_quote;

/// `fmt.Sprint`: a space between operands when neither is a string.
pub(crate) fn sprint(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 && !matches!(a, Value::Str(_)) && !matches!(args[i - 1], Value::Str(_)) {
            out.push(' ');
        }
        write_go(&mut out, a);
    }
    out
}

/// `fmt.Sprintln`: spaces between all operands and a newline.
pub(crate) fn sprintln(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        write_go(&mut out, a);
    }
    out.push('\n');
    out
}

#[derive(Default)]
struct Spec {
    minus: bool,
    plus: bool,
    zero: bool,
    sharp: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

impl Spec {
    /// The flags, width (`*` takes it from the next argument, at `arg_index`) and
    /// precision after a `%`.
    fn parse(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, args: &[Value], arg_index: &mut usize) -> Spec {
        let mut spec = Spec::default();
        while let Some(&f) = chars.peek() {
            match f {
                '-' => spec.minus = true,
                '+' => spec.plus = true,
                '0' => spec.zero = true,
                ' ' => {}
                '#' => spec.sharp = true,
                _ => break,
            }
            chars.next();
        }
        if chars.peek() == Some(&'*') {
            chars.next();
            if let Some(Value::Int(w, _)) = args.get(*arg_index) {
                spec.width = Some((*w).max(0) as usize);
            }
            *arg_index += 1;
        }
        let mut width = String::new();
        while let Some(&d) = chars.peek() {
            if d.is_ascii_digit() {
                width.push(d);
                chars.next();
            } else {
                break;
            }
        }
        if !width.is_empty() {
            spec.width = width.parse().ok();
        }
        if chars.peek() == Some(&'.') {
            chars.next();
            let mut prec = String::new();
            while let Some(&d) = chars.peek() {
                if d.is_ascii_digit() {
                    prec.push(d);
                    chars.next();
                } else {
                    break;
                }
            }
            spec.prec = Some(prec.parse().unwrap_or(0));
        }
        spec
    }
}

/// Go's `%!(EXTRA type=value, ...)` for the operands no verb took.
fn write_extra(out: &mut String, extra: &[Value]) {
    out.push_str("%!(EXTRA ");
    for (i, a) in extra.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}={}", a.type_name(), go_string(a));
    }
    out.push(')');
}

/// `fmt.Sprintf` with Go's verbs for the values templates hold.
pub(crate) fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    let mut arg_index = 0;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let spec = Spec::parse(&mut chars, args, &mut arg_index);
        let Some(verb) = chars.next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        if verb == '%' {
            out.push('%');
            continue;
        }
        let Some(arg) = args.get(arg_index) else {
            let _ = write!(out, "%!{verb}(MISSING)");
            continue;
        };
        arg_index += 1;
        let body = format_one(verb, &spec, arg);
        pad(&mut out, &body, &spec, verb);
    }
    if arg_index < args.len() {
        write_extra(&mut out, &args[arg_index..]);
    }
    out
}

fn pad(out: &mut String, body: &str, spec: &Spec, verb: char) {
    let len = body.chars().count();
    let width = spec.width.unwrap_or(0);
    if len >= width {
        out.push_str(body);
        return;
    }
    let fill = width - len;
    if spec.minus {
        out.push_str(body);
        out.extend(std::iter::repeat_n(' ', fill));
    } else if spec.zero && matches!(verb, 'd' | 'f' | 'F' | 'e' | 'g' | 'x' | 'X' | 'o' | 'b' | 'v') {
        let (sign, digits) = match body.strip_prefix('-') {
            Some(d) => ("-", d),
            None => ("", body),
        };
        out.push_str(sign);
        out.extend(std::iter::repeat_n('0', fill));
        out.push_str(digits);
    } else {
        out.extend(std::iter::repeat_n(' ', fill));
        out.push_str(body);
    }
}

fn bad_verb(verb: char, arg: &Value) -> String {
    match arg {
        Value::Nil => format!("%!{verb}(<nil>)"),
        other => format!("%!{verb}({}={})", other.type_name(), go_string(other)),
    }
}

fn signed(mut s: String, plus: bool) -> String {
    if plus && !s.starts_with('-') {
        s.insert(0, '+');
    }
    s
}

fn format_one(verb: char, spec: &Spec, arg: &Value) -> String {
    match verb {
        'v' => format_v(spec, arg),
        's' => format_s(spec, arg),
        'q' => match arg {
            Value::Str(s) => go_quote(s),
            Value::Int(i, _) => format!("'{}'", char::from_u32(*i as u32).unwrap_or('\u{fffd}')),
            other => bad_verb(verb, other),
        },
        'd' => match arg {
            Value::Int(i, _) => signed(i.to_string(), spec.plus),
            other => bad_verb(verb, other),
        },
        't' => match arg {
            Value::Bool(b) => b.to_string(),
            other => bad_verb(verb, other),
        },
        'x' | 'X' => format_hex(verb, spec, arg),
        'o' => match arg {
            Value::Int(i, _) => format!("{i:o}"),
            other => bad_verb(verb, other),
        },
        'b' => match arg {
            Value::Int(i, _) => format!("{i:b}"),
            other => bad_verb(verb, other),
        },
        'c' => match arg {
            Value::Int(i, _) => char::from_u32(*i as u32).unwrap_or('\u{fffd}').to_string(),
            other => bad_verb(verb, other),
        },
        'f' | 'F' | 'e' | 'g' => format_float_verb(verb, spec, arg),
        'T' => arg.type_name().to_string(),
        _ => bad_verb(verb, arg),
    }
}

/// `%v`: a number as Go prints it (`%+v` signed), anything else as `%v` prints it.
fn format_v(spec: &Spec, arg: &Value) -> String {
    match arg {
        Value::Float(f) => signed(
            match spec.prec {
                Some(p) => format_g(*f, p),
                None => format_float(*f, 6),
            },
            spec.plus,
        ),
        Value::Int(i, _) => signed(i.to_string(), spec.plus),
        other => go_string(other),
    }
}

/// `%s`: a string or a composite value (`%.Ns` cut to N characters); not a number, bool
/// or nil.
fn format_s(spec: &Spec, arg: &Value) -> String {
    let verb = 's';
    match arg {
        Value::Int(_, _) | Value::Float(_) | Value::Bool(_) | Value::Nil => bad_verb(verb, arg),
        other => {
            let s = go_string(other);
            match spec.prec {
                Some(p) => s.chars().take(p).collect(),
                None => s,
            }
        }
    }
}

/// `%x` / `%X`: an integer in hex (negative with `-`) or a string's bytes; `%#x` with `0x`.
fn format_hex(verb: char, spec: &Spec, arg: &Value) -> String {
    let s = match arg {
        Value::Int(i, _) => {
            if *i < 0 {
                format!("-{:x}", i.unsigned_abs())
            } else {
                format!("{i:x}")
            }
        }
        Value::Str(s) => s.bytes().map(|b| format!("{b:02x}")).collect(),
        other => return bad_verb(verb, other),
    };
    let s = if spec.sharp { format!("0x{s}") } else { s };
    if verb == 'X' { s.to_uppercase() } else { s }
}

/// `%f`, `%e`, `%g` of a float.
fn format_float_verb(verb: char, spec: &Spec, arg: &Value) -> String {
    let Value::Float(f) = arg else { return bad_verb(verb, arg) };
    match verb {
        'f' | 'F' => signed(format!("{:.*}", spec.prec.unwrap_or(6), f), spec.plus),
        'e' => format_e(*f, spec.prec.unwrap_or(6)),
        _ => match spec.prec {
            Some(p) => format_g(*f, p),
            None => format_float(*f, 6),
        },
    }
}

fn format_e(f: f64, prec: usize) -> String {
    let s = format!("{:.*e}", prec, f);
    let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
}

fn format_g(f: f64, prec: usize) -> String {
    let prec = prec.max(1);
    let e = format!("{:.*e}", prec - 1, f);
    let exp: i32 = e.split_once('e').and_then(|(_, x)| x.parse().ok()).unwrap_or(0);
    if exp < -4 || exp >= prec as i32 {
        let s = format_e(f, prec - 1);
        let (m, x) = s.split_once('e').unwrap_or((&s, ""));
        let m = if m.contains('.') { m.trim_end_matches('0').trim_end_matches('.') } else { m };
        format!("{m}e{x}")
    } else {
        let decimals = (prec as i32 - 1 - exp).max(0) as usize;
        let s = format!("{:.*}", decimals, f);
        if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printf_follows_go() {
        assert_eq!(sprintf("%s-%d", &[Value::str("a"), Value::int(3)]), "a-3");
        assert_eq!(sprintf("%v", &[Value::Float(1e6)]), "1e+06");
        assert_eq!(sprintf("%05d|%-4s|%4s", &[Value::int(42), Value::str("ab"), Value::str("cd")]), "00042|ab  |  cd");
        assert_eq!(sprintf("%q", &[Value::str("a\"b")]), "\"a\\\"b\"");
        assert_eq!(sprintf("%d", &[Value::str("x")]), "%!d(string=x)");
        assert_eq!(sprintf("%.2f", &[Value::Float(1.25)]), "1.25");
        assert_eq!(sprintf("%s", &[]), "%!s(MISSING)");
        assert_eq!(sprint(&[Value::int(1), Value::int(2), Value::str("a"), Value::int(3)]), "1 2a3");
    }
}
