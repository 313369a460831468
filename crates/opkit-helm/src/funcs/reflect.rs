//! Sprig's reflection (`reflect.go`): `typeOf`, `typeIs`, `typeIsLike`, `kindOf`,
//! `kindIs` and `deepEqual` (Go's `reflect.DeepEqual`, also used by the list functions).

use super::{ANY, Args, Func, FuncResult, func};
use crate::template::Exec;
use crate::value::Value;

/// Sprig's reflection functions.
pub(super) const FUNCS: &[Func] = &[
    func("typeOf", 0, ANY, type_of),
    func("typeIs", 0, ANY, type_is),
    func("typeIsLike", 0, ANY, type_is_like),
    func("kindOf", 0, ANY, kind_of),
    func("kindIs", 0, ANY, kind_is),
    func("deepEqual", 2, 2, deep_equal_fn),
];

fn type_of(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(a.get(0).type_name()))
}

fn type_is(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Bool(a.str(0) == a.get(1).type_name()))
}

fn type_is_like(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (t, tn) = (a.str(0), a.get(1).type_name());
    Ok(Value::Bool(t == tn || t == format!("*{tn}")))
}

fn kind_of(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(a.get(0).kind()))
}

fn kind_is(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Bool(a.str(0) == a.get(1).kind()))
}

fn deep_equal_fn(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Bool(deep_equal(a.get(0), a.get(1))))
}

/// Go's `reflect.DeepEqual` on template values.
pub(super) fn deep_equal(a: &Value, b: &Value) -> bool {
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
