//! The template functions: Go's builtins, Sprig's (as Helm ships them: without `env` and
//! `expandenv`) and Helm's own (`include`, `tpl`, `required`, `toYaml`, `lookup`, ...).
//!
//! Every function is one row of `FUNCS`: its name, how many arguments it takes and its
//! implementation. The rows live in one file per category, laid out as Sprig's and Helm's
//! `funcMap()` are: `builtins` (Go's), `helm`, `strings`, `regex`, `lists`,
//! `dicts`, `math`, `encoding`, `crypto` and `certs`, `dates`, `semver`,
//! `reflect`, `defaults`, `paths` and `network`.

mod builtins;
mod certs;
mod crypto;
mod dates;
mod defaults;
mod dicts;
mod encoding;
pub(crate) mod fmt;
mod helm;
mod lists;
mod math;
mod network;
mod paths;
mod reflect;
mod regex;
mod semver;
mod strings;

use std::collections::HashMap;
use std::sync::LazyLock;

use crate::template::Exec;
use crate::value::{Value, go_string};

/// Why a function call failed.
#[derive(Debug)]
pub(crate) enum FuncError {
    /// The function's own error (wrapped as Go wraps it: `error calling NAME: MSG`).
    Message(String),
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

/// A function's implementation: the executor (for `include` and `tpl`) and the arguments.
type Impl = fn(&mut Exec<'_>, Args<'_>) -> FuncResult;

/// No upper bound on the number of arguments.
const ANY: usize = usize::MAX;

/// One template function.
pub(crate) struct Func {
    /// The name templates call it by.
    pub(crate) name: &'static str,
    /// The fewest arguments it takes (fewer is an error before it runs).
    pub(crate) min_args: usize,
    /// The most arguments it takes ([`ANY`] when it ignores or takes any number).
    pub(crate) max_args: usize,
    /// What it does.
    pub(crate) call: Impl,
}

/// A table row: `name` taking `min..=max` arguments, implemented by `call`.
const fn func(name: &'static str, min_args: usize, max_args: usize, call: Impl) -> Func {
    Func { name, min_args, max_args, call }
}

/// Every function templates may call, one table per category.
pub(crate) const FUNCS: &[&[Func]] = &[
    builtins::FUNCS,
    helm::FUNCS,
    strings::FUNCS,
    regex::FUNCS,
    lists::FUNCS,
    dicts::FUNCS,
    math::FUNCS,
    encoding::FUNCS,
    crypto::FUNCS,
    certs::FUNCS,
    dates::FUNCS,
    semver::FUNCS,
    reflect::FUNCS,
    defaults::FUNCS,
    paths::FUNCS,
    network::FUNCS,
];

static BY_NAME: LazyLock<HashMap<&'static str, &'static Func>> =
    LazyLock::new(|| FUNCS.iter().flat_map(|table| table.iter()).map(|f| (f.name, f)).collect());

/// Whether `name` is a function templates may call.
pub(crate) fn is_function(name: &str) -> bool {
    BY_NAME.contains_key(name)
}

/// Calls function `name` with evaluated `args` (`and`/`or` are short-circuited by the
/// executor before they get here).
pub(crate) fn call(ex: &mut Exec<'_>, name: &str, args: Vec<Value>) -> FuncResult {
    let Some(func) = BY_NAME.get(name) else {
        return Err(format!("{name} is not supported by opkit's renderer").into());
    };
    let n = args.len();
    if n < func.min_args || n > func.max_args {
        let want = if n < func.min_args { func.min_args } else { func.max_args };
        return Err(FuncError::Message(format!("wrong number of args for {name}: want {want} got {n}")));
    }
    (func.call)(ex, Args { name, values: args, nil: Value::Nil })
}

/// The function for names opkit knows but does not implement: an error naming it.
fn unsupported(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Err(format!("{} is not supported by opkit's renderer", a.name()).into())
}

/// The evaluated arguments of one call, read as Sprig's parameters convert them: a missing
/// argument reads as nil.
pub(crate) struct Args<'a> {
    name: &'a str,
    values: Vec<Value>,
    nil: Value,
}

impl Args<'_> {
    /// The name the template called (an alias's own name, for messages).
    fn name(&self) -> &str {
        self.name
    }

    /// How many arguments were given.
    fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no argument was given.
    fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Argument `i`, nil when missing.
    fn get(&self, i: usize) -> &Value {
        self.values.get(i).unwrap_or(&self.nil)
    }

    /// All the arguments.
    fn all(&self) -> &[Value] {
        &self.values
    }

    /// The arguments from `i` on.
    fn skip(&self, i: usize) -> &[Value] {
        self.values.get(i..).unwrap_or_default()
    }

    /// Argument `i` as a string parameter (see [`string_arg`]).
    fn str(&self, i: usize) -> String {
        self.values.get(i).map_or(String::new(), string_arg)
    }

    /// Argument `i` as an int parameter (see [`to_int64`]).
    fn int(&self, i: usize) -> i64 {
        to_int64(self.get(i))
    }

    /// Argument `i` as a float parameter (see [`to_float64`]).
    fn float(&self, i: usize) -> f64 {
        to_float64(self.get(i))
    }

    /// The arguments, taken.
    fn into_values(self) -> Vec<Value> {
        self.values
    }
}

/// Sprig's `strval`: the value as `fmt.Sprintf("%v")` prints it, strings as they are.
pub(crate) fn strval(v: &Value) -> String {
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

/// `cast.ToInt64` as Sprig uses it: floats truncate, strings parse (else 0), bools 0/1.
pub(crate) fn to_int64(v: &Value) -> i64 {
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
pub(crate) fn is_empty(v: &Value) -> bool {
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

/// A map argument (Sprig's `map[string]interface{}` parameters).
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

/// Lower-case hexadecimal, as Go's `hex.EncodeToString`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `version` satisfies the semver `constraint` (as `semverCompare`).
pub(crate) fn semver_compare(constraint: &str, version: &str) -> Result<bool, String> {
    semver::compare(constraint, version)
}

/// Major, minor and patch of a lenient semantic version.
pub(crate) fn parse_version(version: &str) -> Result<(u64, u64, u64), String> {
    semver::Version::parse(version).map(|v| v.parts())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::TemplateError;

    /// Renders `source` as a template of its own, with no data.
    pub(super) fn render(source: &str) -> Result<String, TemplateError> {
        let mut set = crate::template::Templates::new();
        set.add("t", source)?;
        Exec::new(&set).execute("t", &Value::Nil)
    }

    /// Calls `name` as a template would, outside any template.
    pub(super) fn run(name: &str, args: Vec<Value>) -> FuncResult {
        let set = crate::template::Templates::new();
        let mut ex = Exec::new(&set);
        call(&mut ex, name, args)
    }

    #[test]
    fn every_name_is_in_the_table_once() {
        let mut seen = std::collections::HashSet::new();
        for f in FUNCS.iter().flat_map(|t| t.iter()) {
            assert!(seen.insert(f.name), "{} is in the table twice", f.name);
            assert!(f.min_args <= f.max_args, "{}'s arity", f.name);
        }
        assert_eq!(seen.len(), BY_NAME.len());
        for name in ["and", "include", "toYaml", "trim", "dict", "genCA", "semverCompare", "osBase", "now"] {
            assert!(is_function(name), "{name}");
        }
        assert!(!is_function("env"));
        assert!(!is_function("expandenv"));
    }

    #[test]
    fn arity_is_checked_from_the_table() {
        let Err(FuncError::Message(m)) = run("ternary", vec![Value::Nil]) else { panic!("ternary with 1 arg") };
        assert_eq!(m, "wrong number of args for ternary: want 3 got 1");
        let Err(FuncError::Message(m)) = run("sub", vec![Value::int(1); 3]) else { panic!("sub with 3 args") };
        assert_eq!(m, "wrong number of args for sub: want 2 got 3");
        let Err(FuncError::Message(m)) = run("untilStep", vec![Value::int(1)]) else { panic!("untilStep") };
        assert_eq!(m, "wrong number of args for untilStep: want 3 got 1");
    }

    #[test]
    fn too_few_arguments_are_errors_not_panics() {
        let set = crate::template::Templates::new();
        let mut ex = Exec::new(&set);
        for f in FUNCS.iter().flat_map(|t| t.iter()) {
            // `genPrivateKey` of nil makes an RSA 4096 key, which takes long in a debug
            // build; its arguments are tested in `certs`.
            if matches!(f.name, "and" | "or" | "include" | "tpl" | "genPrivateKey") {
                continue;
            }
            for n in 0..3 {
                let _ = call(&mut ex, f.name, vec![Value::Nil; n]);
                let _ = call(&mut ex, f.name, vec![Value::str("x"); n]);
            }
        }
    }
}
