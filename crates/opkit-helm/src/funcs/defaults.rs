//! Sprig's defaults (`defaults.go`): `default`, `empty`, `coalesce`, `all`, `any`,
//! `ternary` and `deepCopy`. Its JSON functions are in [`helm`](super::helm), beside
//! Helm's.

use super::{ANY, Args, Func, FuncResult, func, is_empty};
use crate::template::Exec;
use crate::value::Value;

/// Sprig's default functions.
pub(super) const FUNCS: &[Func] = &[
    func("default", 0, ANY, default),
    func("empty", 1, 1, empty),
    func("coalesce", 0, ANY, coalesce),
    func("all", 0, ANY, all),
    func("any", 0, ANY, any),
    func("ternary", 3, 3, ternary),
    func("deepCopy", 1, 1, deep_copy),
    func("mustDeepCopy", 1, 1, deep_copy),
];

fn default(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    if a.is_empty() {
        return Err("wrong number of args for default: want at least 1 got 0".into());
    }
    Ok(match a.all().get(1) {
        Some(given) if !is_empty(given) => given.clone(),
        _ => a.get(0).clone(),
    })
}

fn empty(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Bool(is_empty(a.get(0))))
}

fn coalesce(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(a.all().iter().find(|v| !is_empty(v)).cloned().unwrap_or(Value::Nil))
}

fn all(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Bool(a.all().iter().all(|v| !is_empty(v))))
}

fn any(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Bool(a.all().iter().any(|v| !is_empty(v))))
}

fn ternary(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(if a.get(2).truthy() { a.get(0).clone() } else { a.get(1).clone() })
}

fn deep_copy(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(a.get(0).deep_copy())
}
