//! The template functions: Go's builtins, Sprig's (as Helm ships them: without `env` and
//! `expandenv`) and Helm's own (`include`, `tpl`, `required`, `toYaml`, `lookup`, ...).

pub mod fmt;
mod semver;

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};
use std::sync::LazyLock;

use base64::Engine as _;

use crate::template::{Exec, TemplateError};
use crate::value::{IntType, Value, go_string};
use crate::yaml;

/// Why a function call failed.
#[derive(Debug)]
pub enum FuncError {
    /// The function's own error (wrapped as Go wraps it: `error calling NAME: MSG`).
    Message(String),
    /// An error from a template the function executed, passed on as is.
    Template(TemplateError),
}

impl From<String> for FuncError {
    fn from(s: String) -> FuncError {
        FuncError::Message(s)
    }
}

impl From<&str> for FuncError {
    fn from(s: &str) -> FuncError {
        FuncError::Message(s.to_string())
    }
}

type FuncResult = Result<Value, FuncError>;

/// Every function name templates may call.
const NAMES: &[&str] = &[
    // Go's builtins.
    "and",
    "or",
    "not",
    "len",
    "index",
    "print",
    "printf",
    "println",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "slice",
    "html",
    "js",
    "urlquery",
    "call",
    // Helm's.
    "include",
    "tpl",
    "required",
    "fail",
    "lookup",
    "toYaml",
    "mustToYaml",
    "toYamlPretty",
    "fromYaml",
    "fromYamlArray",
    "toJson",
    "mustToJson",
    "fromJson",
    "fromJsonArray",
    "mustFromJson",
    "toToml",
    "toPrettyJson",
    "mustToPrettyJson",
    "toRawJson",
    "mustToRawJson",
    // Sprig: strings.
    "trim",
    "trimAll",
    "trimPrefix",
    "trimSuffix",
    "upper",
    "lower",
    "title",
    "untitle",
    "repeat",
    "substr",
    "nospace",
    "trunc",
    "abbrev",
    "abbrevboth",
    "initials",
    "wrap",
    "wrapWith",
    "contains",
    "hasPrefix",
    "hasSuffix",
    "quote",
    "squote",
    "cat",
    "indent",
    "nindent",
    "replace",
    "plural",
    "snakecase",
    "camelcase",
    "kebabcase",
    "swapcase",
    "shuffle",
    "toString",
    "toStrings",
    "atoi",
    "int",
    "int64",
    "float64",
    "toDecimal",
    "split",
    "splitList",
    "splitn",
    "join",
    "sortAlpha",
    "default",
    "empty",
    "coalesce",
    "all",
    "any",
    "compact",
    "mustCompact",
    "ternary",
    "deepCopy",
    "mustDeepCopy",
    "typeOf",
    "typeIs",
    "typeIsLike",
    "kindOf",
    "kindIs",
    "deepEqual",
    "regexMatch",
    "mustRegexMatch",
    "regexFind",
    "mustRegexFind",
    "regexFindAll",
    "mustRegexFindAll",
    "regexReplaceAll",
    "mustRegexReplaceAll",
    "regexReplaceAllLiteral",
    "mustRegexReplaceAllLiteral",
    "regexSplit",
    "mustRegexSplit",
    "regexQuoteMeta",
    "b64enc",
    "b64dec",
    "b32enc",
    "b32dec",
    "sha1sum",
    "sha256sum",
    "adler32sum",
    "base",
    "dir",
    "ext",
    "clean",
    "isAbs",
    "osBase",
    "osDir",
    "osExt",
    "osClean",
    "osIsAbs",
    "semver",
    "semverCompare",
    // Sprig: lists.
    "list",
    "tuple",
    "first",
    "mustFirst",
    "rest",
    "mustRest",
    "last",
    "mustLast",
    "initial",
    "mustInitial",
    "append",
    "mustAppend",
    "push",
    "mustPush",
    "prepend",
    "mustPrepend",
    "concat",
    "reverse",
    "mustReverse",
    "uniq",
    "mustUniq",
    "without",
    "mustWithout",
    "has",
    "mustHas",
    "until",
    "untilStep",
    "seq",
    "chunk",
    "mustChunk",
    "mustSlice",
    // Sprig: dicts.
    "dict",
    "get",
    "set",
    "unset",
    "hasKey",
    "pluck",
    "keys",
    "pick",
    "omit",
    "merge",
    "mustMerge",
    "mergeOverwrite",
    "mustMergeOverwrite",
    "values",
    "dig",
    // Sprig: math.
    "add",
    "add1",
    "sub",
    "div",
    "mod",
    "mul",
    "max",
    "min",
    "biggest",
    "floor",
    "ceil",
    "round",
    "addf",
    "add1f",
    "subf",
    "mulf",
    "divf",
    "maxf",
    "minf",
    // Sprig: nondeterministic and crypto (not rendered identically to helm by design).
    "randAlpha",
    "randAlphaNum",
    "randAscii",
    "randNumeric",
    "randInt",
    "uuidv4",
    "now",
    "date",
    "dateInZone",
    "date_in_zone",
    "dateModify",
    "mustDateModify",
    "ago",
    "toDate",
    "mustToDate",
    "unixEpoch",
    "duration",
    "durationRound",
    "htmlDate",
    "htmlDateInZone",
    "genCA",
    "genCAWithKey",
    "genSelfSignedCert",
    "genSelfSignedCertWithKey",
    "genSignedCert",
    "genSignedCertWithKey",
    "genPrivateKey",
    "derivePassword",
    "buildCustomCert",
    "encryptAES",
    "decryptAES",
    "htpasswd",
    "randBytes",
    "getHostByName",
    "urlParse",
    "urlJoin",
    "bcrypt",
];

static NAME_SET: LazyLock<HashSet<&'static str>> = LazyLock::new(|| NAMES.iter().copied().collect());

/// Whether `name` is a function templates may call.
pub fn is_function(name: &str) -> bool {
    NAME_SET.contains(name)
}

fn arity(name: &str, args: &[Value], n: usize) -> Result<(), FuncError> {
    if args.len() != n {
        return Err(FuncError::Message(format!("wrong number of args for {name}: want {n} got {}", args.len())));
    }
    Ok(())
}

/// Sprig's `strval`: the value as `fmt.Sprintf("%v")` prints it, strings as they are.
pub fn strval(v: &Value) -> String {
    go_string(v)
}

/// A string parameter: nil (a missing value) reads as "", other values as `%v` prints them.
fn string_arg(v: &Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        Value::Nil => String::new(),
        other => go_string(other),
    }
}

/// An int parameter (Go converts untyped constants; Sprig's `toInt` semantics otherwise).
fn int_arg(v: &Value) -> i64 {
    to_int64(v)
}

/// `cast.ToInt64` as Sprig uses it: floats truncate, strings parse (else 0), bools 0/1.
pub fn to_int64(v: &Value) -> i64 {
    match v {
        Value::Int(i, _) => *i,
        Value::Float(f) => *f as i64,
        Value::Bool(b) => i64::from(*b),
        Value::Str(s) => parse_go_int(s.trim()).unwrap_or(0),
        _ => 0,
    }
}

fn parse_go_int(s: &str) -> Option<i64> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let lower = body.to_ascii_lowercase();
    let v = if let Some(h) = lower.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()?
    } else if let Some(b) = lower.strip_prefix("0b") {
        i64::from_str_radix(b, 2).ok()?
    } else if let Some(o) = lower.strip_prefix("0o") {
        i64::from_str_radix(o, 8).ok()?
    } else if lower.len() > 1 && lower.starts_with('0') {
        i64::from_str_radix(&lower[1..], 8).ok()?
    } else {
        lower.parse().ok()?
    };
    Some(if neg { -v } else { v })
}

/// `cast.ToFloat64`.
fn to_float64(v: &Value) -> f64 {
    match v {
        Value::Int(i, _) => *i as f64,
        Value::Float(f) => *f,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Str(s) => s.trim().parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

/// Sprig's `empty`.
pub fn is_empty(v: &Value) -> bool {
    !v.truthy()
}

/// A list argument, as Sprig's reflect-based list functions take one.
fn list_arg(name: &str, v: &Value) -> Result<Vec<Value>, FuncError> {
    match v {
        Value::List(l) => Ok(l.as_ref().clone()),
        Value::Object(o) => o
            .range_items()
            .map(|i| i.into_iter().map(|(_, v)| v).collect())
            .ok_or_else(|| FuncError::Message(format!("Cannot {name} on type {}", v.type_name()))),
        Value::Nil => Ok(Vec::new()),
        other => Err(FuncError::Message(format!("Cannot {name} on type {}", other.type_name()))),
    }
}

fn map_arg(name: &str, v: &Value) -> Result<crate::value::Map, FuncError> {
    match v {
        Value::Map(m) => Ok(m.clone()),
        other => Err(FuncError::Message(format!(
            "wrong type for value; expected map[string]interface {{}}; got {} (in {name})",
            other.type_name()
        ))),
    }
}

/// Sprig's `strslice`: a list of strings from a list (nils dropped), a string or a value.
fn strslice(v: &Value) -> Vec<String> {
    match v {
        Value::List(l) => l.iter().filter(|x| !matches!(x, Value::Nil)).map(strval).collect(),
        Value::Nil => Vec::new(),
        other => vec![strval(other)],
    }
}

thread_local! {
    /// Compiled regular expressions by pattern: charts call the same few in every helper.
    static REGEX_CACHE: std::cell::RefCell<std::collections::HashMap<String, regex::Regex>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// A Go (RE2) regular expression for Rust's `regex`, compiled once per pattern.
fn regex(pattern: &str) -> Result<regex::Regex, FuncError> {
    if let Some(re) = REGEX_CACHE.with(|c| c.borrow().get(pattern).cloned()) {
        return Ok(re);
    }
    let re = compile_go_regex(pattern)?;
    REGEX_CACHE.with(|c| c.borrow_mut().insert(pattern.to_string(), re.clone()));
    Ok(re)
}

/// RE2 takes a `-` next to a class escape inside brackets (`[\w-.]`) as a literal; Rust
/// wants it escaped.
fn compile_go_regex(pattern: &str) -> Result<regex::Regex, FuncError> {
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
    regex::Regex::new(&translated).map_err(|e| FuncError::Message(format!("error parsing regexp: {e}")))
}

/// Go's `reflect.DeepEqual` on template values.
fn deep_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x, t), Value::Int(y, u)) => x == y && t == u,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::List(x), Value::List(y)) => x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| deep_equal(p, q)),
        (Value::Map(x), Value::Map(y)) => {
            if std::rc::Rc::ptr_eq(x, y) {
                return true;
            }
            let (x, y) = (x.borrow(), y.borrow());
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| deep_equal(v, w)))
        }
        _ => false,
    }
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

/// mergo's `isEmptyValue` (through interfaces): nil, false, 0, "" and empty collections.
fn mergo_empty(v: &Value) -> bool {
    !v.truthy()
}

/// mergo's `Merge` of `src` into `dst` (Sprig's `merge` without, `mergeOverwrite` with
/// `overwrite`): maps merge deeply, other values fill empty ones (or replace with
/// `overwrite`).
fn mergo(dst: &crate::value::Map, src: &crate::value::Map, overwrite: bool) {
    if std::rc::Rc::ptr_eq(dst, src) {
        return;
    }
    let entries: Vec<(String, Value)> = src.borrow().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for (key, sv) in entries {
        let dv = dst.borrow().get(&key).cloned();
        if matches!(sv, Value::Nil) {
            if overwrite {
                dst.borrow_mut().insert(key, Value::Nil);
            }
            continue;
        }
        if let (Value::Map(sm), Some(Value::Map(dm))) = (&sv, &dv) {
            mergo(dm, sm, overwrite);
        }
        if let Some(d) = &dv
            && !mergo_empty(d)
            && ((matches!(sv, Value::List(_)) && !overwrite)
                || (matches!(sv, Value::Map(_)) && matches!(d, Value::Map(_))))
        {
            continue;
        }
        if overwrite || dv.as_ref().is_none_or(mergo_empty) {
            dst.borrow_mut().insert(key, sv);
        }
    }
}

fn to_yaml_string(v: &Value) -> String {
    let s = yaml::to_yaml(v);
    s.strip_suffix('\n').unwrap_or(&s).to_string()
}

fn error_map(msg: String) -> Value {
    Value::map(BTreeMap::from([("Error".to_string(), Value::str(msg))]))
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

const BASE32: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// Base32 (RFC 4648, padded), as Go's `base32.StdEncoding`.
fn base32_encode(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let bits = buf.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        let chars = (chunk.len() * 8).div_ceil(5);
        for i in 0..8 {
            if i < chars {
                out.push(BASE32[((bits >> (35 - i * 5)) & 31) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Base32 decoding; `None` on bad input.
fn base32_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (mut acc, mut nbits) = (0u64, 0u32);
    for c in text.trim_end_matches('=').bytes() {
        let v = BASE32.iter().position(|b| *b == c)? as u64;
        acc = (acc << 5) | v;
        nbits += 5;
        if nbits >= 8 {
            nbits -= 8;
            out.push((acc >> nbits) as u8);
            acc &= (1 << nbits) - 1;
        }
    }
    Some(out)
}

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

fn pseudo_random(n: usize, alphabet: &[u8]) -> String {
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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

fn path_clean(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

fn path_base(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return "/".into();
    }
    t.rsplit('/').next().unwrap_or(t).to_string()
}

fn path_dir(p: &str) -> String {
    let dir = match p.rfind('/') {
        Some(i) => &p[..=i],
        None => "",
    };
    path_clean(dir)
}

fn path_ext(p: &str) -> String {
    let base_start = p.rfind('/').map_or(0, |i| i + 1);
    match p[base_start..].rfind('.') {
        Some(i) => p[base_start + i..].to_string(),
        None => String::new(),
    }
}

/// The fewest arguments of functions whose arity the code below does not check itself.
const MIN_ARGS: &[(&str, usize)] = &[
    ("abbrev", 2),
    ("add1", 1),
    ("add1f", 1),
    ("ceil", 1),
    ("chunk", 2),
    ("mustChunk", 2),
    ("divf", 1),
    ("subf", 1),
    ("first", 1),
    ("mustFirst", 1),
    ("last", 1),
    ("mustLast", 1),
    ("rest", 1),
    ("mustRest", 1),
    ("initial", 1),
    ("mustInitial", 1),
    ("floor", 1),
    ("round", 1),
    ("omit", 1),
    ("pick", 1),
    ("pluck", 1),
    ("values", 1),
    ("randAlpha", 1),
    ("randAlphaNum", 1),
    ("randAscii", 1),
    ("randNumeric", 1),
    ("regexFindAll", 3),
    ("mustRegexFindAll", 3),
    ("regexSplit", 3),
    ("mustRegexSplit", 3),
    ("repeat", 2),
    ("reverse", 1),
    ("mustReverse", 1),
    ("splitn", 3),
    ("uniq", 1),
    ("mustUniq", 1),
    ("until", 1),
    ("untilStep", 3),
    ("without", 1),
    ("mustWithout", 1),
];

/// Calls function `name` with evaluated `args` (`and`/`or` are handled by the executor).
pub fn call(ex: &mut Exec<'_>, name: &str, mut args: Vec<Value>) -> FuncResult {
    if let Some((_, min)) = MIN_ARGS.iter().find(|(n, _)| *n == name)
        && args.len() < *min
    {
        return Err(FuncError::Message(format!("wrong number of args for {name}: want {min} got {}", args.len())));
    }
    let a = &args;
    let s = |i: usize| -> Result<String, FuncError> { Ok(a.get(i).map_or(String::new(), string_arg)) };
    let need = |n: usize| arity(name, a, n);
    Ok(match name {
        // Go's builtins.
        "not" => {
            need(1)?;
            Value::Bool(!a[0].truthy())
        }
        "len" => {
            need(1)?;
            Value::int(match &a[0] {
                Value::Str(s) => s.len() as i64,
                Value::List(l) => l.len() as i64,
                Value::Map(m) => m.borrow().len() as i64,
                Value::Object(o) => o.range_items().map_or(0, |i| i.len() as i64),
                Value::Nil => return Err("len of nil pointer".into()),
                other => return Err(format!("len of type {}", other.type_name()).into()),
            })
        }
        "index" => {
            if a.is_empty() {
                return Err("wrong number of args for index: want at least 1 got 0".into());
            }
            if matches!(a[0], Value::Nil) {
                return Err("index of untyped nil".into());
            }
            let mut item = a[0].clone();
            for key in &a[1..] {
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
            item
        }
        "print" => Value::str(fmt::sprint(a)),
        "println" => Value::str(fmt::sprintln(a)),
        "printf" => {
            if a.is_empty() {
                return Err("wrong number of args for printf: want at least 1 got 0".into());
            }
            Value::str(fmt::sprintf(&s(0)?, &a[1..]))
        }
        "eq" => {
            if a.len() < 2 {
                return Err("missing argument for comparison".into());
            }
            let mut truth = false;
            for b in &a[1..] {
                if go_eq(&a[0], b)? {
                    truth = true;
                    break;
                }
            }
            Value::Bool(truth)
        }
        "ne" => {
            need(2)?;
            Value::Bool(!go_eq(&a[0], &a[1])?)
        }
        "lt" | "le" | "gt" | "ge" => {
            need(2)?;
            let o = go_cmp(&a[0], &a[1])?;
            Value::Bool(match name {
                "lt" => o == Ordering::Less,
                "le" => o != Ordering::Greater,
                "gt" => o == Ordering::Greater,
                _ => o != Ordering::Less,
            })
        }
        "slice" | "mustSlice" => {
            if a.is_empty() {
                return Err("wrong number of args for slice: want at least 1 got 0".into());
            }
            let idx: Vec<i64> = a[1..].iter().map(to_int64).collect();
            match &a[0] {
                Value::List(l) => {
                    let start = idx.first().copied().unwrap_or(0).max(0) as usize;
                    let end = idx.get(1).map_or(l.len(), |e| (*e).max(0) as usize);
                    if start > end || end > l.len() {
                        return Err(format!("index out of range: {end}").into());
                    }
                    Value::list(l[start..end].to_vec())
                }
                other => return Err(format!("list should be type of slice or array but {}", other.type_name()).into()),
            }
        }
        "html" => Value::str(html_escape(&fmt::sprint(a))),
        "js" => Value::str(js_escape(&fmt::sprint(a))),
        "urlquery" => Value::str(query_escape(&fmt::sprint(a))),
        "call" => return Err("call of non-function".into()),

        // Helm's.
        "include" => {
            need(2)?;
            let tname = s(0)?;
            Value::str(ex.include(&tname, &a[1]).map_err(FuncError::Message)?)
        }
        "tpl" => {
            need(2)?;
            let src = s(0)?;
            Value::str(ex.tpl(&src, &a[1]).map_err(FuncError::Message)?)
        }
        "required" => {
            need(2)?;
            match &a[1] {
                Value::Nil => return Err(s(0)?.into()),
                Value::Str(v) if v.is_empty() => return Err(s(0)?.into()),
                v => v.clone(),
            }
        }
        "fail" => {
            need(1)?;
            return Err(s(0)?.into());
        }
        "lookup" => Value::map(BTreeMap::new()),
        "toYaml" | "mustToYaml" => {
            need(1)?;
            Value::str(to_yaml_string(&a[0]))
        }
        "toYamlPretty" => {
            need(1)?;
            Value::str(to_yaml_string(&a[0]))
        }
        "fromYaml" => {
            need(1)?;
            match yaml::from_yaml_str(&s(0)?) {
                Ok(Value::Map(m)) => Value::Map(m),
                Ok(Value::Nil) => Value::map(BTreeMap::new()),
                Ok(other) => error_map(format!(
                    "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                    json_kind(&other)
                )),
                Err(e) => error_map(e),
            }
        }
        "fromYamlArray" => {
            need(1)?;
            match yaml::from_yaml_str(&s(0)?) {
                Ok(Value::List(l)) => Value::List(l),
                Ok(Value::Nil) => Value::list(Vec::new()),
                Ok(other) => Value::list(vec![Value::str(format!(
                    "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type []interface {{}}",
                    json_kind(&other)
                ))]),
                Err(e) => Value::list(vec![Value::str(e)]),
            }
        }
        "toJson" | "mustToJson" => {
            need(1)?;
            Value::str(crate::json::to_json(&a[0], true, false))
        }
        "toRawJson" | "mustToRawJson" => {
            need(1)?;
            Value::str(crate::json::to_json(&a[0], false, false))
        }
        "toPrettyJson" | "mustToPrettyJson" => {
            need(1)?;
            Value::str(crate::json::to_json(&a[0], true, true))
        }
        "fromJson" | "mustFromJson" => {
            need(1)?;
            match serde_json::from_str::<serde_json::Value>(&s(0)?) {
                Ok(v @ serde_json::Value::Object(_)) => Value::from_json(&v),
                Ok(_) => error_map("json: cannot unmarshal into Go value of type map[string]interface {}".into()),
                Err(e) => {
                    if name == "mustFromJson" {
                        return Err(e.to_string().into());
                    }
                    error_map(e.to_string())
                }
            }
        }
        "fromJsonArray" => {
            need(1)?;
            match serde_json::from_str::<serde_json::Value>(&s(0)?) {
                Ok(v @ serde_json::Value::Array(_)) => Value::from_json(&v),
                Ok(_) => Value::list(vec![Value::str("json: cannot unmarshal into Go value of type []interface {}")]),
                Err(e) => Value::list(vec![Value::str(e.to_string())]),
            }
        }
        "toToml" => {
            need(1)?;
            Value::str(crate::json::to_toml(&a[0]))
        }

        // Sprig: strings.
        "trim" => Value::str(s(0)?.trim()),
        "trimAll" => {
            let cut: Vec<char> = s(0)?.chars().collect();
            Value::str(s(1)?.trim_matches(cut.as_slice()))
        }
        "trimPrefix" => {
            let (p, v) = (s(0)?, s(1)?);
            Value::str(v.strip_prefix(p.as_str()).unwrap_or(&v))
        }
        "trimSuffix" => {
            let (p, v) = (s(0)?, s(1)?);
            Value::str(v.strip_suffix(p.as_str()).unwrap_or(&v))
        }
        "upper" => Value::str(s(0)?.to_uppercase()),
        "lower" => Value::str(s(0)?.to_lowercase()),
        "title" => Value::str(title_case(&s(0)?)),
        "untitle" => {
            let v = s(0)?;
            let mut out = String::new();
            let mut prev_space = true;
            for c in v.chars() {
                if prev_space {
                    out.extend(c.to_lowercase())
                } else {
                    out.push(c)
                }
                prev_space = c.is_whitespace();
            }
            Value::str(out)
        }
        "repeat" => Value::str(s(1)?.repeat(int_arg(&a[0]).max(0) as usize)),
        "substr" => {
            need(3)?;
            let (start, end, v) = (int_arg(&a[0]), int_arg(&a[1]), s(2)?);
            let len = v.len() as i64;
            let sub = if start < 0 {
                v.get(..end.clamp(0, len) as usize)
            } else if end < 0 || end > len {
                v.get(start.min(len) as usize..)
            } else {
                v.get(start.min(end) as usize..end as usize)
            };
            Value::str(sub.unwrap_or(""))
        }
        "nospace" => Value::str(s(0)?.chars().filter(|c| !c.is_whitespace()).collect::<String>()),
        "trunc" => {
            need(2)?;
            let (c, v) = (int_arg(&a[0]), s(1)?);
            let len = v.len() as i64;
            let out = if c < 0 && len + c > 0 {
                v.get((len + c) as usize..).unwrap_or(&v)
            } else if c >= 0 && len > c {
                v.get(..c as usize).unwrap_or(&v)
            } else {
                &v
            };
            Value::str(out)
        }
        "abbrev" => {
            let (w, v) = (int_arg(&a[0]), s(1)?);
            if w < 4 || v.chars().count() as i64 <= w {
                Value::str(v)
            } else {
                Value::str(format!("{}...", v.chars().take((w - 3) as usize).collect::<String>()))
            }
        }
        "abbrevboth" => Value::str(s(2)?),
        "initials" => Value::str(s(0)?.split_whitespace().filter_map(|w| w.chars().next()).collect::<String>()),
        "wrap" => Value::str(wrap_custom(&s(1)?, int_arg(a.first().unwrap_or(&Value::Nil)), "", false)),
        "wrapWith" => Value::str(wrap_custom(&s(2)?, int_arg(a.first().unwrap_or(&Value::Nil)), &s(1)?, true)),
        "contains" => Value::Bool(s(1)?.contains(s(0)?.as_str())),
        "hasPrefix" => Value::Bool(s(1)?.starts_with(s(0)?.as_str())),
        "hasSuffix" => Value::Bool(s(1)?.ends_with(s(0)?.as_str())),
        "quote" => Value::str(
            a.iter()
                .filter(|v| !matches!(v, Value::Nil))
                .map(|v| fmt::go_quote(&strval(v)))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        "squote" => Value::str(
            a.iter()
                .filter(|v| !matches!(v, Value::Nil))
                .map(|v| format!("'{}'", strval(v)))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        "cat" => Value::str(a.iter().filter(|v| !matches!(v, Value::Nil)).map(strval).collect::<Vec<_>>().join(" ")),
        "indent" | "nindent" => {
            need(2)?;
            let pad = " ".repeat(int_arg(&a[0]).max(0) as usize);
            let body = format!("{pad}{}", s(1)?.replace('\n', &format!("\n{pad}")));
            Value::str(if name == "nindent" { format!("\n{body}") } else { body })
        }
        "replace" => {
            need(3)?;
            Value::str(s(2)?.replace(s(0)?.as_str(), &s(1)?))
        }
        "plural" => {
            need(3)?;
            Value::str(if int_arg(&a[2]) == 1 { s(0)? } else { s(1)? })
        }
        "snakecase" => Value::str(words(&s(0)?).iter().map(|w| w.to_lowercase()).collect::<Vec<_>>().join("_")),
        "kebabcase" => Value::str(words(&s(0)?).iter().map(|w| w.to_lowercase()).collect::<Vec<_>>().join("-")),
        "camelcase" => Value::str(
            s(0)?
                .split('_')
                .map(|w| {
                    let mut c = w.chars();
                    c.next().map(|f| f.to_uppercase().chain(c).collect::<String>()).unwrap_or_default()
                })
                .collect::<String>(),
        ),
        "swapcase" => {
            Value::str(
                s(0)?
                    .chars()
                    .map(|c| {
                        if c.is_uppercase() { c.to_lowercase().collect::<String>() } else { c.to_uppercase().collect() }
                    })
                    .collect::<String>(),
            )
        }
        "shuffle" => Value::str(s(0)?),
        "toString" => {
            need(1)?;
            Value::str(strval(&a[0]))
        }
        "toStrings" => Value::list(strslice(a.first().unwrap_or(&Value::Nil)).into_iter().map(Value::str).collect()),
        "atoi" => Value::int(s(0)?.trim().parse().unwrap_or(0)),
        "int" => {
            need(1)?;
            Value::int(to_int64(&a[0]))
        }
        "int64" => {
            need(1)?;
            Value::int64(to_int64(&a[0]))
        }
        "float64" | "toDecimal" => {
            need(1)?;
            Value::Float(to_float64(&a[0]))
        }
        "split" => {
            let (sep, v) = (s(0)?, s(1)?);
            let parts: Vec<&str> = if sep.is_empty() {
                v.split("").filter(|p| !p.is_empty()).collect()
            } else {
                v.split(sep.as_str()).collect()
            };
            Value::map(parts.into_iter().enumerate().map(|(i, p)| (format!("_{i}"), Value::str(p))).collect())
        }
        "splitn" => {
            let (sep, n, v) = (s(0)?, int_arg(&a[1]), s(2)?);
            let parts: Vec<&str> =
                if n < 0 { v.split(sep.as_str()).collect() } else { v.splitn(n as usize, sep.as_str()).collect() };
            Value::map(parts.into_iter().enumerate().map(|(i, p)| (format!("_{i}"), Value::str(p))).collect())
        }
        "splitList" => {
            let (sep, v) = (s(0)?, s(1)?);
            if sep.is_empty() {
                Value::list(v.chars().map(|c| Value::str(c.to_string())).collect())
            } else {
                Value::list(v.split(sep.as_str()).map(Value::str).collect())
            }
        }
        "join" => {
            need(2)?;
            Value::str(strslice(&a[1]).join(&s(0)?))
        }
        "sortAlpha" => {
            need(1)?;
            let mut l = strslice(&a[0]);
            l.sort();
            Value::list(l.into_iter().map(Value::str).collect())
        }
        "default" => {
            if a.is_empty() {
                return Err("wrong number of args for default: want at least 1 got 0".into());
            }
            match a.get(1) {
                Some(given) if !is_empty(given) => given.clone(),
                _ => a[0].clone(),
            }
        }
        "empty" => {
            need(1)?;
            Value::Bool(is_empty(&a[0]))
        }
        "coalesce" => a.iter().find(|v| !is_empty(v)).cloned().unwrap_or(Value::Nil),
        "all" => Value::Bool(a.iter().all(|v| !is_empty(v))),
        "any" => Value::Bool(a.iter().any(|v| !is_empty(v))),
        "compact" | "mustCompact" => Value::list(
            list_arg(name, a.first().unwrap_or(&Value::Nil))?.into_iter().filter(|v| !is_empty(v)).collect(),
        ),
        "ternary" => {
            need(3)?;
            if a[2].truthy() { a[0].clone() } else { a[1].clone() }
        }
        "deepCopy" | "mustDeepCopy" => {
            need(1)?;
            a[0].deep_copy()
        }
        "typeOf" => Value::str(a.first().unwrap_or(&Value::Nil).type_name()),
        "typeIs" => Value::Bool(s(0)? == a.get(1).unwrap_or(&Value::Nil).type_name()),
        "typeIsLike" => {
            let t = s(0)?;
            let tn = a.get(1).unwrap_or(&Value::Nil).type_name();
            Value::Bool(t == tn || t == format!("*{tn}"))
        }
        "kindOf" => Value::str(a.first().unwrap_or(&Value::Nil).kind()),
        "kindIs" => Value::Bool(s(0)? == a.get(1).unwrap_or(&Value::Nil).kind()),
        "deepEqual" => {
            need(2)?;
            Value::Bool(deep_equal(&a[0], &a[1]))
        }
        "regexMatch" | "mustRegexMatch" => Value::Bool(regex(&s(0)?)?.is_match(&s(1)?)),
        "regexFind" | "mustRegexFind" => {
            let v = s(1)?;
            Value::str(regex(&s(0)?)?.find(&v).map_or("", |m| m.as_str()))
        }
        "regexFindAll" | "mustRegexFindAll" => {
            let (v, n) = (s(1)?, int_arg(&a[2]));
            let re = regex(&s(0)?)?;
            let it = re.find_iter(&v).map(|m| Value::str(m.as_str()));
            Value::list(if n < 0 { it.collect() } else { it.take(n as usize).collect() })
        }
        "regexReplaceAll" | "mustRegexReplaceAll" => {
            let (v, repl) = (s(1)?, s(2)?);
            Value::str(regex(&s(0)?)?.replace_all(&v, repl.as_str()).into_owned())
        }
        "regexReplaceAllLiteral" | "mustRegexReplaceAllLiteral" => {
            let (v, repl) = (s(1)?, s(2)?);
            Value::str(regex(&s(0)?)?.replace_all(&v, regex::NoExpand(&repl)).into_owned())
        }
        "regexSplit" | "mustRegexSplit" => {
            let (v, n) = (s(1)?, int_arg(&a[2]));
            let re = regex(&s(0)?)?;
            Value::list(if n < 0 {
                re.split(&v).map(Value::str).collect()
            } else {
                re.splitn(&v, n as usize).map(Value::str).collect()
            })
        }
        "regexQuoteMeta" => Value::str(regex::escape(&s(0)?)),
        "b64enc" => Value::str(base64::engine::general_purpose::STANDARD.encode(s(0)?)),
        "b64dec" => match base64::engine::general_purpose::STANDARD.decode(s(0)?) {
            Ok(b) => Value::str(String::from_utf8_lossy(&b).into_owned()),
            Err(e) => Value::str(e.to_string()),
        },
        "b32enc" => Value::str(base32_encode(s(0)?.as_bytes())),
        "b32dec" => match base32_decode(&s(0)?) {
            Some(b) => Value::str(String::from_utf8_lossy(&b).into_owned()),
            None => Value::str("illegal base32 data"),
        },
        "sha256sum" => Value::str(hex(ring::digest::digest(&ring::digest::SHA256, s(0)?.as_bytes()).as_ref())),
        "sha1sum" => {
            Value::str(hex(ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, s(0)?.as_bytes()).as_ref()))
        }
        "adler32sum" => {
            let (mut x, mut y) = (1u32, 0u32);
            for b in s(0)?.bytes() {
                x = (x + u32::from(b)) % 65521;
                y = (y + x) % 65521;
            }
            Value::str(((y << 16) | x).to_string())
        }
        "base" | "osBase" => Value::str(path_base(&s(0)?)),
        "dir" | "osDir" => Value::str(path_dir(&s(0)?)),
        "ext" | "osExt" => Value::str(path_ext(&s(0)?)),
        "clean" | "osClean" => Value::str(path_clean(&s(0)?)),
        "isAbs" | "osIsAbs" => Value::Bool(s(0)?.starts_with('/')),
        "semverCompare" => {
            need(2)?;
            Value::Bool(semver::compare(&s(0)?, &s(1)?).map_err(FuncError::Message)?)
        }
        "semver" => {
            let v = semver::Version::parse(&s(0)?).map_err(FuncError::Message)?;
            v.to_value()
        }

        // Sprig: lists.
        "list" | "tuple" => Value::list(std::mem::take(&mut args)),
        "first" | "mustFirst" => list_arg(name, &a[0])?.first().cloned().unwrap_or(Value::Nil),
        "last" | "mustLast" => list_arg(name, &a[0])?.last().cloned().unwrap_or(Value::Nil),
        "rest" | "mustRest" => {
            let l = list_arg(name, &a[0])?;
            Value::list(l.get(1..).map(<[Value]>::to_vec).unwrap_or_default())
        }
        "initial" | "mustInitial" => {
            let l = list_arg(name, &a[0])?;
            Value::list(l[..l.len().saturating_sub(1)].to_vec())
        }
        "append" | "mustAppend" | "push" | "mustPush" => {
            need(2)?;
            let mut l = list_arg(name, &a[0])
                .map_err(|_| FuncError::Message(format!("Cannot push on type {}", a[0].type_name())))?;
            l.push(a[1].clone());
            Value::list(l)
        }
        "prepend" | "mustPrepend" => {
            need(2)?;
            let mut l = list_arg(name, &a[0])?;
            l.insert(0, a[1].clone());
            Value::list(l)
        }
        "concat" => {
            let mut out = Vec::new();
            for l in a {
                out.extend(list_arg(name, l)?);
            }
            Value::list(out)
        }
        "reverse" | "mustReverse" => {
            let mut l = list_arg(name, &a[0])?;
            l.reverse();
            Value::list(l)
        }
        "uniq" | "mustUniq" => {
            let mut out: Vec<Value> = Vec::new();
            for v in list_arg(name, &a[0])? {
                if !out.iter().any(|o| deep_equal(o, &v)) {
                    out.push(v);
                }
            }
            Value::list(out)
        }
        "without" | "mustWithout" => {
            let l = list_arg(name, &a[0])?;
            Value::list(l.into_iter().filter(|v| !a[1..].iter().any(|o| deep_equal(o, v))).collect())
        }
        "has" | "mustHas" => {
            need(2)?;
            match &a[1] {
                Value::Nil => Value::Bool(false),
                hay => Value::Bool(list_arg(name, hay)?.iter().any(|v| deep_equal(v, &a[0]))),
            }
        }
        "until" => Value::list((0..int_arg(&a[0]).max(0)).map(Value::int).collect()),
        "untilStep" => {
            let (start, stop, step) = (int_arg(&a[0]), int_arg(&a[1]), int_arg(&a[2]));
            let mut out = Vec::new();
            if step > 0 {
                let mut i = start;
                while i < stop {
                    out.push(Value::int(i));
                    i += step;
                }
            } else if step < 0 {
                let mut i = start;
                while i > stop {
                    out.push(Value::int(i));
                    i += step;
                }
            }
            Value::list(out)
        }
        "seq" => {
            let nums: Vec<i64> = a.iter().map(to_int64).collect();
            let (start, step, end) = match nums.as_slice() {
                [end] => (1, if *end >= 1 { 1 } else { -1 }, *end),
                [start, end] => (*start, if end >= start { 1 } else { -1 }, *end),
                [start, step, end] => (*start, *step, *end),
                _ => return Ok(Value::str("")),
            };
            let mut out = Vec::new();
            if step != 0 {
                let mut i = start;
                while (step > 0 && i <= end) || (step < 0 && i >= end) {
                    out.push(i.to_string());
                    i += step;
                }
            }
            Value::str(out.join(" "))
        }
        "chunk" | "mustChunk" => {
            let size = int_arg(&a[0]).max(1) as usize;
            let l = list_arg(name, &a[1])?;
            Value::list(l.chunks(size).map(|c| Value::list(c.to_vec())).collect())
        }

        // Sprig: dicts.
        "dict" => {
            let mut m = BTreeMap::new();
            let mut it = a.iter();
            while let Some(k) = it.next() {
                m.insert(strval(k), it.next().cloned().unwrap_or(Value::str("")));
            }
            Value::map(m)
        }
        "get" => {
            need(2)?;
            map_arg(name, &a[0])?.borrow().get(&s(1)?).cloned().unwrap_or(Value::str(""))
        }
        "set" => {
            need(3)?;
            let m = map_arg(name, &a[0])?;
            m.borrow_mut().insert(s(1)?, a[2].clone());
            Value::Map(m)
        }
        "unset" => {
            need(2)?;
            let m = map_arg(name, &a[0])?;
            m.borrow_mut().remove(&s(1)?);
            Value::Map(m)
        }
        "hasKey" => {
            need(2)?;
            Value::Bool(map_arg(name, &a[0])?.borrow().contains_key(&s(1)?))
        }
        "pluck" => {
            let key = s(0)?;
            let mut out = Vec::new();
            for d in &a[1..] {
                if let Some(v) = map_arg(name, d)?.borrow().get(&key) {
                    out.push(v.clone());
                }
            }
            Value::list(out)
        }
        "keys" => {
            let mut out = Vec::new();
            for d in a {
                out.extend(map_arg(name, d)?.borrow().keys().map(|k| Value::str(k.as_str())));
            }
            Value::list(out)
        }
        "values" => Value::list(map_arg(name, &a[0])?.borrow().values().cloned().collect()),
        "pick" => {
            let m = map_arg(name, &a[0])?;
            let m = m.borrow();
            let mut out = BTreeMap::new();
            for k in &a[1..] {
                let k = strval(k);
                if let Some(v) = m.get(&k) {
                    out.insert(k, v.clone());
                }
            }
            Value::map(out)
        }
        "omit" => {
            let m = map_arg(name, &a[0])?;
            let drop: HashSet<String> = a[1..].iter().map(strval).collect();
            let out =
                m.borrow().iter().filter(|(k, _)| !drop.contains(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
            Value::map(out)
        }
        "merge" | "mustMerge" | "mergeOverwrite" | "mustMergeOverwrite" => {
            if a.is_empty() {
                return Err(format!("wrong number of args for {name}: want at least 1 got 0").into());
            }
            let dst = map_arg(name, &a[0])?;
            let overwrite = name.ends_with("Overwrite");
            for src in &a[1..] {
                match src {
                    Value::Map(src) => mergo(&dst, src, overwrite),
                    Value::Nil => {}
                    other => {
                        return Err(format!(
                            "wrong type for value; expected map[string]interface {{}}; got {}",
                            other.type_name()
                        )
                        .into());
                    }
                }
            }
            Value::Map(dst)
        }
        "dig" => {
            if a.len() < 3 {
                return Err("dig needs at least three arguments".into());
            }
            let n = a.len();
            let default = a[n - 2].clone();
            let mut cur = a[n - 1].clone();
            for k in &a[..n - 2] {
                let next = match &cur {
                    Value::Map(m) => m.borrow().get(&strval(k)).cloned(),
                    _ => None,
                };
                match next {
                    Some(v) => cur = v,
                    None => return Ok(default),
                }
            }
            cur
        }

        // Sprig: math.
        "add" => Value::int64(a.iter().map(to_int64).fold(0i64, i64::wrapping_add)),
        "add1" => Value::int64(to_int64(&a[0]).wrapping_add(1)),
        "sub" => {
            need(2)?;
            Value::int64(to_int64(&a[0]).wrapping_sub(to_int64(&a[1])))
        }
        "mul" => Value::int64(a.iter().map(to_int64).fold(1i64, i64::wrapping_mul)),
        "div" | "mod" => {
            need(2)?;
            let d = to_int64(&a[1]);
            if d == 0 {
                return Err("runtime error: integer divide by zero".into());
            }
            Value::int64(if name == "div" { to_int64(&a[0]).wrapping_div(d) } else { to_int64(&a[0]).wrapping_rem(d) })
        }
        "max" | "biggest" => Value::int64(a.iter().map(to_int64).max().unwrap_or(0)),
        "min" => Value::int64(a.iter().map(to_int64).min().unwrap_or(0)),
        "floor" => Value::Float(to_float64(&a[0]).floor()),
        "ceil" => Value::Float(to_float64(&a[0]).ceil()),
        "round" => {
            let places = a.get(1).map_or(0, to_int64) as i32;
            let f = 10f64.powi(places);
            Value::Float((to_float64(&a[0]) * f).round() / f)
        }
        "addf" => Value::Float(a.iter().map(to_float64).sum()),
        "add1f" => Value::Float(to_float64(&a[0]) + 1.0),
        "subf" => Value::Float(a.iter().skip(1).fold(to_float64(&a[0]), |acc, v| acc - to_float64(v))),
        "mulf" => Value::Float(a.iter().map(to_float64).product()),
        "divf" => Value::Float(a.iter().skip(1).fold(to_float64(&a[0]), |acc, v| acc / to_float64(v))),
        "maxf" => Value::Float(a.iter().map(to_float64).fold(f64::MIN, f64::max)),
        "minf" => Value::Float(a.iter().map(to_float64).fold(f64::MAX, f64::min)),

        // Nondeterministic: random values differ from helm's run by design.
        "randAlpha" => Value::str(pseudo_random(
            int_arg(&a[0]).max(0) as usize,
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        )),
        "randAlphaNum" => Value::str(pseudo_random(
            int_arg(&a[0]).max(0) as usize,
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        )),
        "randNumeric" => Value::str(pseudo_random(int_arg(&a[0]).max(0) as usize, b"0123456789")),
        "randAscii" => Value::str(pseudo_random(
            int_arg(&a[0]).max(0) as usize,
            b"abcdefghijklmnopqrstuvwxyz!#%&()*+,-./:;<=>?@[]^_{|}~",
        )),
        "uuidv4" => {
            let h = pseudo_random(32, b"0123456789abcdef");
            Value::str(format!("{}-{}-4{}-a{}-{}", &h[..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32]))
        }
        other => return Err(format!("{other} is not supported by opkit's renderer").into()),
    })
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::List(_) => "array",
        Value::Str(_) => "string",
        Value::Bool(_) => "bool",
        Value::Int(_, _) | Value::Float(_) => "number",
        _ => "value",
    }
}

/// Whether `version` satisfies the semver `constraint` (as `semverCompare`).
pub fn semver_compare(constraint: &str, version: &str) -> Result<bool, String> {
    semver::compare(constraint, version)
}

/// Major, minor and patch of a lenient semantic version.
pub fn parse_version(version: &str) -> Result<(u64, u64, u64), String> {
    semver::Version::parse(version).map(|v| v.parts())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_fills_and_merge_overwrite_replaces() {
        let dst = Value::from_json(&serde_json::json!({"a": {"x": 1, "y": false}, "b": "keep"}));
        let src = Value::from_json(&serde_json::json!({"a": {"x": 2, "y": true, "z": 3}, "b": "new", "c": null}));
        let (Value::Map(d), Value::Map(s)) = (&dst, &src) else { panic!("maps") };
        mergo(d, s, false);
        assert_eq!(dst.to_json(), serde_json::json!({"a": {"x": 1.0, "y": true, "z": 3.0}, "b": "keep"}));
        let dst2 = Value::from_json(&serde_json::json!({"a": {"x": 1}, "b": "keep"}));
        let Value::Map(d2) = &dst2 else { panic!("map") };
        mergo(d2, s, true);
        assert_eq!(dst2.to_json(), serde_json::json!({"a": {"x": 2.0, "y": true, "z": 3.0}, "b": "new", "c": null}));
    }

    #[test]
    fn too_few_arguments_are_errors_not_panics() {
        let set = crate::template::Templates::new();
        let mut ex = Exec::new(&set);
        for name in NAMES {
            if matches!(*name, "and" | "or" | "include" | "tpl") {
                continue;
            }
            for n in 0..3 {
                let _ = call(&mut ex, name, vec![Value::Nil; n]);
                let _ = call(&mut ex, name, vec![Value::str("x"); n]);
            }
        }
    }

    #[test]
    fn paths_follow_go() {
        assert_eq!(path_base("a/b/c.yaml"), "c.yaml");
        assert_eq!(path_dir("a/b/c.yaml"), "a/b");
        assert_eq!(path_ext("a/b.c/d"), "");
        assert_eq!(path_clean("a//b/../c/"), "a/c");
    }
}
