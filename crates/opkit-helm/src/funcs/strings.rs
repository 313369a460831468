//! Sprig's string functions (`strings.go` and its part of `funcMap()`): trimming, case,
//! `substr`/`trunc`/`abbrev`, wrapping, quoting, `indent`, `replace`, splitting and
//! joining, and the random strings (`randAlpha`, ...).

use super::{ANY, Args, Func, FuncResult, fmt, func, strslice, strval};
use crate::template::Exec;
use crate::value::Value;

/// Sprig's string functions.
pub(super) const FUNCS: &[Func] = &[
    func("trim", 0, ANY, trim),
    func("trimAll", 0, ANY, trim_all),
    func("trimPrefix", 0, ANY, trim_prefix),
    func("trimSuffix", 0, ANY, trim_suffix),
    func("upper", 0, ANY, upper),
    func("lower", 0, ANY, lower),
    func("title", 0, ANY, title),
    func("untitle", 0, ANY, untitle),
    func("repeat", 2, ANY, repeat),
    func("substr", 3, 3, substr),
    func("nospace", 0, ANY, nospace),
    func("trunc", 2, 2, trunc),
    func("abbrev", 2, ANY, abbrev),
    func("abbrevboth", 0, ANY, abbrevboth),
    func("initials", 0, ANY, initials),
    func("wrap", 0, ANY, wrap),
    func("wrapWith", 0, ANY, wrap_with),
    func("contains", 0, ANY, contains),
    func("hasPrefix", 0, ANY, has_prefix),
    func("hasSuffix", 0, ANY, has_suffix),
    func("quote", 0, ANY, quote),
    func("squote", 0, ANY, squote),
    func("cat", 0, ANY, cat),
    func("indent", 2, 2, indent),
    func("nindent", 2, 2, indent),
    func("replace", 3, 3, replace),
    func("plural", 3, 3, plural),
    func("snakecase", 0, ANY, snakecase),
    func("camelcase", 0, ANY, camelcase),
    func("kebabcase", 0, ANY, kebabcase),
    func("swapcase", 0, ANY, swapcase),
    func("shuffle", 0, ANY, shuffle),
    func("toString", 1, 1, to_string),
    func("toStrings", 0, ANY, to_strings),
    func("split", 0, ANY, split),
    func("splitList", 0, ANY, split_list),
    func("splitn", 3, ANY, splitn),
    func("join", 2, 2, join),
    func("sortAlpha", 1, 1, sort_alpha),
    func("randAlpha", 1, ANY, rand_alpha),
    func("randAlphaNum", 1, ANY, rand_alpha_num),
    func("randAscii", 1, ANY, rand_ascii),
    func("randNumeric", 1, ANY, rand_numeric),
];

fn trim(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(a.str(0).trim()))
}

fn trim_all(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let cut: Vec<char> = a.str(0).chars().collect();
    Ok(Value::str(a.str(1).trim_matches(cut.as_slice())))
}

fn trim_prefix(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (p, v) = (a.str(0), a.str(1));
    Ok(Value::str(v.strip_prefix(p.as_str()).unwrap_or(&v)))
}

fn trim_suffix(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (p, v) = (a.str(0), a.str(1));
    Ok(Value::str(v.strip_suffix(p.as_str()).unwrap_or(&v)))
}

fn upper(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(a.str(0).to_uppercase()))
}

fn lower(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(a.str(0).to_lowercase()))
}

fn title(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(title_case(&a.str(0))))
}

fn untitle(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let mut out = String::new();
    let mut prev_space = true;
    for c in a.str(0).chars() {
        if prev_space {
            out.extend(c.to_lowercase())
        } else {
            out.push(c)
        }
        prev_space = c.is_whitespace();
    }
    Ok(Value::str(out))
}

fn repeat(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(a.str(1).repeat(a.int(0).max(0) as usize)))
}

fn substr(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (start, end, v) = (a.int(0), a.int(1), a.str(2));
    let len = v.len() as i64;
    let sub = if start < 0 {
        v.get(..end.clamp(0, len) as usize)
    } else if end < 0 || end > len {
        v.get(start.min(len) as usize..)
    } else {
        v.get(start.min(end) as usize..end as usize)
    };
    Ok(Value::str(sub.unwrap_or("")))
}

fn nospace(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(a.str(0).chars().filter(|c| !c.is_whitespace()).collect::<String>()))
}

fn trunc(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (c, v) = (a.int(0), a.str(1));
    let len = v.len() as i64;
    let out = if c < 0 && len + c > 0 {
        v.get((len + c) as usize..).unwrap_or(&v)
    } else if c >= 0 && len > c {
        v.get(..c as usize).unwrap_or(&v)
    } else {
        &v
    };
    Ok(Value::str(out))
}

fn abbrev(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (w, v) = (a.int(0), a.str(1));
    if w < 4 || v.chars().count() as i64 <= w {
        Ok(Value::str(v))
    } else {
        Ok(Value::str(format!("{}...", v.chars().take((w - 3) as usize).collect::<String>())))
    }
}

fn abbrevboth(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(a.str(2)))
}

fn initials(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(a.str(0).split_whitespace().filter_map(|w| w.chars().next()).collect::<String>()))
}

fn wrap(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(wrap_custom(&a.str(1), a.int(0), "", false)))
}

fn wrap_with(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(wrap_custom(&a.str(2), a.int(0), &a.str(1), true)))
}

fn contains(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Bool(a.str(1).contains(a.str(0).as_str())))
}

fn has_prefix(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Bool(a.str(1).starts_with(a.str(0).as_str())))
}

fn has_suffix(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Bool(a.str(1).ends_with(a.str(0).as_str())))
}

/// The non-nil arguments, each as `each` prints it, joined by spaces.
fn join_non_nil(a: &Args<'_>, each: impl Fn(String) -> String) -> String {
    a.all().iter().filter(|v| !matches!(v, Value::Nil)).map(|v| each(strval(v))).collect::<Vec<_>>().join(" ")
}

fn quote(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(join_non_nil(&a, |s| fmt::go_quote(&s))))
}

fn squote(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(join_non_nil(&a, |s| format!("'{s}'"))))
}

fn cat(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(join_non_nil(&a, |s| s)))
}

/// `indent`, and `nindent`, which starts with a newline.
fn indent(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let pad = " ".repeat(a.int(0).max(0) as usize);
    let body = format!("{pad}{}", a.str(1).replace('\n', &format!("\n{pad}")));
    Ok(Value::str(if a.name() == "nindent" { format!("\n{body}") } else { body }))
}

fn replace(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(a.str(2).replace(a.str(0).as_str(), &a.str(1))))
}

fn plural(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(if a.int(2) == 1 { a.str(0) } else { a.str(1) }))
}

fn snakecase(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(words(&a.str(0)).iter().map(|w| w.to_lowercase()).collect::<Vec<_>>().join("_")))
}

fn kebabcase(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(words(&a.str(0)).iter().map(|w| w.to_lowercase()).collect::<Vec<_>>().join("-")))
}

fn camelcase(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let upper_first = |w: &str| {
        let mut c = w.chars();
        c.next().map(|f| f.to_uppercase().chain(c).collect::<String>()).unwrap_or_default()
    };
    Ok(Value::str(a.str(0).split('_').map(upper_first).collect::<String>()))
}

fn swapcase(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let swap = |c: char| {
        if c.is_uppercase() { c.to_lowercase().collect::<String>() } else { c.to_uppercase().collect() }
    };
    Ok(Value::str(a.str(0).chars().map(swap).collect::<String>()))
}

/// Sprig shuffles randomly; opkit keeps the string as it is.
fn shuffle(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(a.str(0)))
}

fn to_string(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(strval(a.get(0))))
}

fn to_strings(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::list(strslice(a.get(0)).into_iter().map(Value::str).collect()))
}

/// A list of parts as Sprig's `split` returns it: a map with keys `_0`, `_1`, ...
fn numbered_parts(parts: Vec<&str>) -> Value {
    Value::map(parts.into_iter().enumerate().map(|(i, p)| (format!("_{i}"), Value::str(p))).collect())
}

fn split(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (sep, v) = (a.str(0), a.str(1));
    let parts: Vec<&str> =
        if sep.is_empty() { v.split("").filter(|p| !p.is_empty()).collect() } else { v.split(sep.as_str()).collect() };
    Ok(numbered_parts(parts))
}

fn splitn(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (sep, n, v) = (a.str(0), a.int(1), a.str(2));
    let parts: Vec<&str> =
        if n < 0 { v.split(sep.as_str()).collect() } else { v.splitn(n as usize, sep.as_str()).collect() };
    Ok(numbered_parts(parts))
}

fn split_list(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (sep, v) = (a.str(0), a.str(1));
    if sep.is_empty() {
        Ok(Value::list(v.chars().map(|c| Value::str(c.to_string())).collect()))
    } else {
        Ok(Value::list(v.split(sep.as_str()).map(Value::str).collect()))
    }
}

fn join(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(strslice(a.get(1)).join(&a.str(0))))
}

fn sort_alpha(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let mut l = strslice(a.get(0));
    l.sort();
    Ok(Value::list(l.into_iter().map(Value::str).collect()))
}

fn rand_alpha(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(pseudo_random(a.int(0).max(0) as usize, b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")))
}

fn rand_alpha_num(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(pseudo_random(
        a.int(0).max(0) as usize,
        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    )))
}

fn rand_numeric(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(pseudo_random(a.int(0).max(0) as usize, b"0123456789")))
}

fn rand_ascii(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(pseudo_random(a.int(0).max(0) as usize, b"abcdefghijklmnopqrstuvwxyz!#%&()*+,-./:;<=>?@[]^_{|}~")))
}

/// Go's `strings.Title`: the first letter after a separator (anything but a letter, a
/// digit or `_`) is upper-cased.
fn title_case(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev_separator = true;
    for c in s.chars() {
        if prev_separator {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        prev_separator = !(c.is_alphanumeric() || c == '_');
    }
    out
}

/// goutils' `WrapCustom`: lines broken at the last space before `width`; a longer word is
/// cut (`wrap_long_words`) or kept whole up to the next space.
fn wrap_custom(s: &str, width: i64, newline: &str, wrap_long_words: bool) -> String {
    if s.is_empty() {
        return String::new();
    }
    let newline = if newline.is_empty() { "\n" } else { newline };
    let width = width.max(1) as usize;
    let bytes = s.as_bytes();
    let len = bytes.len();
    let mut offset = 0;
    let mut out = String::new();
    let piece = |a: usize, b: usize| s.get(a..b).unwrap_or_default();
    while len - offset > width {
        if bytes[offset] == b' ' {
            offset += 1;
            continue;
        }
        let end = (width + offset + 1).min(len);
        match piece(offset, end).rfind(' ') {
            Some(i) => {
                out.push_str(piece(offset, offset + i));
                out.push_str(newline);
                offset += i + 1;
            }
            None if wrap_long_words => {
                out.push_str(piece(offset, offset + width));
                out.push_str(newline);
                offset += width;
            }
            None => {
                let end = width + offset;
                match piece(end, len).find(' ') {
                    None => {
                        out.push_str(piece(offset, len));
                        offset = len;
                    }
                    Some(i) => {
                        out.push_str(piece(offset, end + i));
                        out.push_str(newline);
                        offset = end + i + 1;
                    }
                }
            }
        }
    }
    out.push_str(piece(offset, len));
    out
}

/// The words of an identifier, split at separators and case changes (for `snakecase`).
fn words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = s.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let boundary = c.is_uppercase()
            && !cur.is_empty()
            && (chars[i - 1].is_lowercase()
                || chars.get(i + 1).is_some_and(|n| n.is_lowercase()) && chars[i - 1].is_uppercase());
        if boundary {
            words.push(std::mem::take(&mut cur));
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// `n` characters of `alphabet`, picked by a clock-seeded xorshift (random strings differ
/// from helm's run by design, so no stronger source is needed here).
pub(super) fn pseudo_random(n: usize, alphabet: &[u8]) -> String {
    let mut seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(7)
            | 1;
    (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            alphabet[(seed % alphabet.len() as u64) as usize] as char
        })
        .collect()
}
