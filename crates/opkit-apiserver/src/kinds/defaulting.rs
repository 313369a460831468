//! Helpers for defaulting fields of JSON objects, shared by the kinds' `default` methods.

use serde_json::{Map, Value, json};

/// The object at `key`, made an empty object when it is absent or not an object.
pub(super) fn obj_mut<'a>(v: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !v[key].is_object() {
        v[key] = json!({});
    }
    match v.get_mut(key).and_then(Value::as_object_mut) {
        Some(m) => m,
        None => unreachable!("just made an object"),
    }
}

/// Sets `key` to `value` when it is absent or null.
pub(super) fn default(m: &mut Map<String, Value>, key: &str, value: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), value);
    }
}
