//! Sprig's list functions (`list.go`): `list`, `first`/`rest`/`last`/`initial`,
//! `append`/`prepend`/`concat`, `reverse`, `uniq`, `without`, `has`, `compact`, `chunk`
//! and `mustSlice`, each with its `must` form.

use super::reflect::deep_equal;
use super::{ANY, Args, Func, FuncError, FuncResult, builtins, func, is_empty, list_arg};
use crate::template::Exec;
use crate::value::Value;

/// Sprig's list functions.
pub(super) const FUNCS: &[Func] = &[
    func("list", 0, ANY, list),
    func("tuple", 0, ANY, list),
    func("first", 1, ANY, first),
    func("mustFirst", 1, ANY, first),
    func("rest", 1, ANY, rest),
    func("mustRest", 1, ANY, rest),
    func("last", 1, ANY, last),
    func("mustLast", 1, ANY, last),
    func("initial", 1, ANY, initial),
    func("mustInitial", 1, ANY, initial),
    func("append", 2, 2, push),
    func("mustAppend", 2, 2, push),
    func("push", 2, 2, push),
    func("mustPush", 2, 2, push),
    func("prepend", 2, 2, prepend),
    func("mustPrepend", 2, 2, prepend),
    func("concat", 0, ANY, concat),
    func("reverse", 1, ANY, reverse),
    func("mustReverse", 1, ANY, reverse),
    func("uniq", 1, ANY, uniq),
    func("mustUniq", 1, ANY, uniq),
    func("without", 1, ANY, without),
    func("mustWithout", 1, ANY, without),
    func("has", 2, 2, has),
    func("mustHas", 2, 2, has),
    func("compact", 0, ANY, compact),
    func("mustCompact", 0, ANY, compact),
    func("chunk", 2, ANY, chunk),
    func("mustChunk", 2, ANY, chunk),
    func("mustSlice", 0, ANY, builtins::slice),
];

fn list(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::list(a.into_values()))
}

/// The first argument as a list, or the error Sprig gives for this function.
fn the_list(a: &Args<'_>) -> Result<Vec<Value>, FuncError> {
    list_arg(a.name(), a.get(0))
}

fn first(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(the_list(&a)?.first().cloned().unwrap_or(Value::Nil))
}

fn last(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(the_list(&a)?.last().cloned().unwrap_or(Value::Nil))
}

fn rest(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let l = the_list(&a)?;
    Ok(Value::list(l.get(1..).map(<[Value]>::to_vec).unwrap_or_default()))
}

fn initial(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let l = the_list(&a)?;
    Ok(Value::list(l[..l.len().saturating_sub(1)].to_vec()))
}

fn push(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let mut l =
        the_list(&a).map_err(|_| FuncError::Message(format!("Cannot push on type {}", a.get(0).type_name())))?;
    l.push(a.get(1).clone());
    Ok(Value::list(l))
}

fn prepend(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let mut l = the_list(&a)?;
    l.insert(0, a.get(1).clone());
    Ok(Value::list(l))
}

fn concat(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let mut out = Vec::new();
    for l in a.all() {
        out.extend(list_arg(a.name(), l)?);
    }
    Ok(Value::list(out))
}

fn reverse(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let mut l = the_list(&a)?;
    l.reverse();
    Ok(Value::list(l))
}

fn uniq(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let mut out: Vec<Value> = Vec::new();
    for v in the_list(&a)? {
        if !out.iter().any(|o| deep_equal(o, &v)) {
            out.push(v);
        }
    }
    Ok(Value::list(out))
}

fn without(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let l = the_list(&a)?;
    Ok(Value::list(l.into_iter().filter(|v| !a.skip(1).iter().any(|o| deep_equal(o, v))).collect()))
}

fn has(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    match a.get(1) {
        Value::Nil => Ok(Value::Bool(false)),
        hay => Ok(Value::Bool(list_arg(a.name(), hay)?.iter().any(|v| deep_equal(v, a.get(0))))),
    }
}

fn compact(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::list(the_list(&a)?.into_iter().filter(|v| !is_empty(v)).collect()))
}

fn chunk(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let size = a.int(0).max(1) as usize;
    let l = list_arg(a.name(), a.get(1))?;
    Ok(Value::list(l.chunks(size).map(|c| Value::list(c.to_vec())).collect()))
}
