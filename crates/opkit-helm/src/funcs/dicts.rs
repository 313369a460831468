//! Sprig's dictionary functions (`dict.go`): `dict`, `get`/`set`/`unset`/`hasKey`,
//! `pluck`, `keys`, `values`, `pick`/`omit`, `dig`, and `merge`/`mergeOverwrite` with
//! mergo's semantics.

use std::collections::{BTreeMap, HashSet};

use super::{ANY, Args, Func, FuncResult, func, map_arg, strval};
use crate::template::Exec;
use crate::value::{Map, Value};

/// Sprig's dict functions.
pub(super) const FUNCS: &[Func] = &[
    func("dict", 0, ANY, dict),
    func("get", 2, 2, get),
    func("set", 3, 3, set),
    func("unset", 2, 2, unset),
    func("hasKey", 2, 2, has_key),
    func("pluck", 1, ANY, pluck),
    func("keys", 0, ANY, keys),
    func("pick", 1, ANY, pick),
    func("omit", 1, ANY, omit),
    func("merge", 0, ANY, merge),
    func("mustMerge", 0, ANY, merge),
    func("mergeOverwrite", 0, ANY, merge),
    func("mustMergeOverwrite", 0, ANY, merge),
    func("values", 1, ANY, values),
    func("dig", 0, ANY, dig),
];

fn dict(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let mut m = BTreeMap::new();
    let mut it = a.all().iter();
    while let Some(k) = it.next() {
        m.insert(strval(k), it.next().cloned().unwrap_or(Value::str("")));
    }
    Ok(Value::map(m))
}

fn get(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(map_arg(a.name(), a.get(0))?.borrow().get(&a.str(1)).cloned().unwrap_or(Value::str("")))
}

fn set(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let m = map_arg(a.name(), a.get(0))?;
    m.borrow_mut().insert(a.str(1), a.get(2).clone());
    Ok(Value::Map(m))
}

fn unset(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let m = map_arg(a.name(), a.get(0))?;
    m.borrow_mut().remove(&a.str(1));
    Ok(Value::Map(m))
}

fn has_key(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Bool(map_arg(a.name(), a.get(0))?.borrow().contains_key(&a.str(1))))
}

fn pluck(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let key = a.str(0);
    let mut out = Vec::new();
    for d in a.skip(1) {
        if let Some(v) = map_arg(a.name(), d)?.borrow().get(&key) {
            out.push(v.clone());
        }
    }
    Ok(Value::list(out))
}

fn keys(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let mut out = Vec::new();
    for d in a.all() {
        out.extend(map_arg(a.name(), d)?.borrow().keys().map(|k| Value::str(k.as_str())));
    }
    Ok(Value::list(out))
}

fn values(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::list(map_arg(a.name(), a.get(0))?.borrow().values().cloned().collect()))
}

fn pick(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let m = map_arg(a.name(), a.get(0))?;
    let m = m.borrow();
    let mut out = BTreeMap::new();
    for k in a.skip(1) {
        let k = strval(k);
        if let Some(v) = m.get(&k) {
            out.insert(k, v.clone());
        }
    }
    Ok(Value::map(out))
}

fn omit(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let m = map_arg(a.name(), a.get(0))?;
    let drop: HashSet<String> = a.skip(1).iter().map(strval).collect();
    let out = m.borrow().iter().filter(|(k, _)| !drop.contains(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    Ok(Value::map(out))
}

/// `merge` and `mergeOverwrite` (and their `must` forms), told apart by the called name.
fn merge(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let name = a.name();
    if a.is_empty() {
        return Err(format!("wrong number of args for {name}: want at least 1 got 0").into());
    }
    let dst = map_arg(name, a.get(0))?;
    let overwrite = name.ends_with("Overwrite");
    for src in a.skip(1) {
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
    Ok(Value::Map(dst))
}

fn dig(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let all = a.all();
    let n = all.len();
    if n < 3 {
        return Err("dig needs at least three arguments".into());
    }
    let default = all[n - 2].clone();
    let mut cur = all[n - 1].clone();
    for k in &all[..n - 2] {
        let next = match &cur {
            Value::Map(m) => m.borrow().get(&strval(k)).cloned(),
            _ => None,
        };
        match next {
            Some(v) => cur = v,
            None => return Ok(default),
        }
    }
    Ok(cur)
}

/// mergo's `isEmptyValue` (through interfaces): nil, false, 0, "" and empty collections.
fn mergo_empty(v: &Value) -> bool {
    !v.truthy()
}

/// mergo's `Merge` of `src` into `dst` (Sprig's `merge` without, `mergeOverwrite` with
/// `overwrite`): maps merge deeply, other values fill empty ones (or replace with
/// `overwrite`).
fn mergo(dst: &Map, src: &Map, overwrite: bool) {
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
}
