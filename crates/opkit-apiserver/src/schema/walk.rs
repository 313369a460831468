//! Tree walks run after OpenAPI validation: `x-kubernetes-list-type` set/map uniqueness
//! (apiextensions `structurallisttype`) and CEL rule evaluation (apiextensions `cel.Validator`).

use serde_json::{Map, Value};

use super::cel_cost::RuntimeBudget;
use super::errors::FieldError;
use super::structural::Schema;
use super::validate::json_eq;

fn join(path: &str, k: &str) -> String {
    if path.is_empty() { k.to_string() } else { format!("{path}.{k}") }
}

/// Validates list-type `set` and `map` invariants everywhere in `v`.
pub(crate) fn validate_list_types(s: &Schema, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if let Some(c) = s.property(k).or_else(|| s.additional_schema()) {
                    validate_list_types(c, x, &join(path, k), errs);
                }
            }
        }
        Value::Array(a) => {
            match s.list_type.as_deref() {
                Some("set") => {
                    for (i, x) in a.iter().enumerate() {
                        if a[..i].iter().any(|y| json_eq(x, y)) {
                            errs.push(FieldError::duplicate(&format!("{path}[{i}]"), x));
                        }
                    }
                }
                Some("map") => validate_list_map(s, a, path, errs),
                _ => {}
            }
            if let Some(items) = &s.items {
                for (i, x) in a.iter().enumerate() {
                    validate_list_types(items, x, &format!("{path}[{i}]"), errs);
                }
            }
        }
        _ => {}
    }
}

/// The key-field values of a list-map item (only those present).
fn map_key(keys: &[String], item: &Value) -> Value {
    let mut out = Map::new();
    if let Some(m) = item.as_object() {
        for k in keys {
            if let Some(x) = m.get(k) {
                out.insert(k.clone(), x.clone());
            }
        }
    }
    Value::Object(out)
}

fn validate_list_map(s: &Schema, a: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    for (i, x) in a.iter().enumerate() {
        if !x.is_object() && !x.is_null() {
            errs.push(FieldError::invalid(
                &format!("{path}[{i}]"),
                x,
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    let keys: Vec<Value> = a.iter().map(|x| map_key(&s.list_map_keys, x)).collect();
    for (i, k) in keys.iter().enumerate() {
        if keys[..i].iter().any(|y| json_eq(k, y)) {
            errs.push(FieldError::duplicate(&format!("{path}[{i}]"), k));
        }
    }
}

/// Evaluates CEL rules in the whole tree; `old` is the correlated previous value, if any.
/// Every rule's cost is taken from the request's `budget` (see [`super::cel_cost`]).
pub(crate) fn validate_cel(
    s: &Schema,
    v: &Value,
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
    budget: &mut RuntimeBudget,
) {
    if v.is_null() {
        return;
    }
    let old = old.filter(|o| !o.is_null());
    if let Some(rules) = &s.cel {
        rules.evaluate(s.type_name(), v, old, path, errs, budget);
    }
    for sub in &s.all_of {
        validate_cel(sub, v, old, path, errs, budget);
    }
    match v {
        Value::Object(m) => {
            let old_map = old.and_then(Value::as_object);
            for (k, x) in m {
                if let Some(c) = s.property(k).or_else(|| s.additional_schema()) {
                    validate_cel(c, x, old_map.and_then(|o| o.get(k)), &join(path, k), errs, budget);
                }
            }
        }
        Value::Array(a) => {
            let Some(items) = &s.items else { return };
            let old_items = old.and_then(Value::as_array);
            let is_map = s.list_type.as_deref() == Some("map");
            for (i, x) in a.iter().enumerate() {
                let old_item = if is_map {
                    let key = map_key(&s.list_map_keys, x);
                    old_items.and_then(|o| o.iter().find(|y| json_eq(&map_key(&s.list_map_keys, y), &key)))
                } else {
                    None
                };
                validate_cel(items, x, old_item, &format!("{path}[{i}]"), errs, budget);
            }
        }
        _ => {}
    }
}
