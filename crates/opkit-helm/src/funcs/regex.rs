//! Sprig's regular expression functions (`regex.go`): `regexMatch`, `regexFind[All]`,
//! `regexReplaceAll[Literal]`, `regexSplit`, `regexQuoteMeta` and their `must` forms, on
//! Go (RE2) patterns translated for Rust's `regex`.

use super::{ANY, Args, Func, FuncError, FuncResult, func};
use crate::template::Exec;
use crate::value::Value;

/// Sprig's regex functions.
pub(super) const FUNCS: &[Func] = &[
    func("regexMatch", 0, ANY, regex_match),
    func("mustRegexMatch", 0, ANY, regex_match),
    func("regexFind", 0, ANY, regex_find),
    func("mustRegexFind", 0, ANY, regex_find),
    func("regexFindAll", 3, ANY, regex_find_all),
    func("mustRegexFindAll", 3, ANY, regex_find_all),
    func("regexReplaceAll", 0, ANY, regex_replace_all),
    func("mustRegexReplaceAll", 0, ANY, regex_replace_all),
    func("regexReplaceAllLiteral", 0, ANY, regex_replace_all_literal),
    func("mustRegexReplaceAllLiteral", 0, ANY, regex_replace_all_literal),
    func("regexSplit", 3, ANY, regex_split),
    func("mustRegexSplit", 3, ANY, regex_split),
    func("regexQuoteMeta", 0, ANY, regex_quote_meta),
];

fn regex_match(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Bool(regex(&a.str(0))?.is_match(&a.str(1))))
}

fn regex_find(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let v = a.str(1);
    Ok(Value::str(regex(&a.str(0))?.find(&v).map_or("", |m| m.as_str())))
}

fn regex_find_all(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (v, n) = (a.str(1), a.int(2));
    let re = regex(&a.str(0))?;
    let it = re.find_iter(&v).map(|m| Value::str(m.as_str()));
    Ok(Value::list(if n < 0 { it.collect() } else { it.take(n as usize).collect() }))
}

fn regex_replace_all(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (v, repl) = (a.str(1), a.str(2));
    Ok(Value::str(regex(&a.str(0))?.replace_all(&v, repl.as_str()).into_owned()))
}

fn regex_replace_all_literal(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (v, repl) = (a.str(1), a.str(2));
    Ok(Value::str(regex(&a.str(0))?.replace_all(&v, ::regex::NoExpand(&repl)).into_owned()))
}

fn regex_split(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (v, n) = (a.str(1), a.int(2));
    let re = regex(&a.str(0))?;
    Ok(Value::list(if n < 0 {
        re.split(&v).map(Value::str).collect()
    } else {
        re.splitn(&v, n as usize).map(Value::str).collect()
    }))
}

fn regex_quote_meta(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(::regex::escape(&a.str(0))))
}

thread_local! {
    /// Compiled regular expressions by pattern: charts call the same few in every helper.
    static REGEX_CACHE: std::cell::RefCell<std::collections::HashMap<String, ::regex::Regex>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// A Go (RE2) regular expression for Rust's `regex`, compiled once per pattern.
fn regex(pattern: &str) -> Result<::regex::Regex, FuncError> {
    if let Some(re) = REGEX_CACHE.with(|c| c.borrow().get(pattern).cloned()) {
        return Ok(re);
    }
    let re = compile_go_regex(pattern)?;
    REGEX_CACHE.with(|c| c.borrow_mut().insert(pattern.to_string(), re.clone()));
    Ok(re)
}

/// RE2 takes a `-` next to a class escape inside brackets (`[\w-.]`) as a literal; Rust
/// wants it escaped.
fn compile_go_regex(pattern: &str) -> Result<::regex::Regex, FuncError> {
    let mut translated = String::with_capacity(pattern.len());
    let chars: Vec<char> = pattern.chars().collect();
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            translated.push(c);
            translated.push(chars[i + 1]);
            i += 2;
            continue;
        }
        if c == '[' && !in_class {
            in_class = true;
            translated.push(c);
            if chars.get(i + 1) == Some(&'^') {
                translated.push('^');
                i += 1;
            }
            if chars.get(i + 1) == Some(&']') {
                translated.push_str("\\]");
                i += 1;
            }
        } else if c == ']' && in_class {
            in_class = false;
            translated.push(c);
        } else if c == '-' && in_class {
            let after_class_escape = i >= 2 && chars[i - 2] == '\\' && "wWdDsS".contains(chars[i - 1]);
            let before_class_escape =
                chars.get(i + 1) == Some(&'\\') && chars.get(i + 2).is_some_and(|n| "wWdDsS".contains(*n));
            if after_class_escape || before_class_escape {
                translated.push_str("\\-");
            } else {
                translated.push('-');
            }
        } else {
            translated.push(c);
        }
        i += 1;
    }
    ::regex::Regex::new(&translated).map_err(|e| FuncError::Message(format!("error parsing regexp: {e}")))
}
