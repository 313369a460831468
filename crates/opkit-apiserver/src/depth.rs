//! The one nesting-depth limit of stored objects. The server parses JSON with serde_json,
//! whose recursion limit (128 nested arrays/objects) is far below kube-apiserver's 10000;
//! an object nested deeper than the server can parse back could be stored (a JSON patch
//! can nest values under each other) and then never read, listed, watched or deleted.
//! So every write checks the final object against [`MAX_OBJECT_DEPTH`], chosen so that a
//! stored object still parses inside the envelopes it is served in (a List adds 2
//! levels, a watch event 1, a Table row 3), by the server and by serde_json clients.

use serde_json::Value;

/// The deepest nesting of arrays and objects a stored object may have (the object
/// itself is level 1). Leaves room below serde_json's limit of 127 for envelopes.
pub(crate) const MAX_OBJECT_DEPTH: usize = 100;

/// How many arrays/objects deep `value` nests (a scalar is 0, `{}` is 1), counted
/// without recursion; counting stops at the first level deeper than `cutoff`.
pub(crate) fn nesting_depth(value: &Value, cutoff: usize) -> usize {
    let mut deepest = 0;
    let mut pending: Vec<(&Value, usize)> = vec![(value, 1)];
    while let Some((v, level)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Object(m) => Box::new(m.values()),
            Value::Array(a) => Box::new(a.iter()),
            _ => continue,
        };
        deepest = deepest.max(level);
        if level > cutoff {
            return level;
        }
        pending.extend(children.filter(|c| c.is_object() || c.is_array()).map(|c| (c, level + 1)));
    }
    deepest
}

/// Whether `value` nests deeper than [`MAX_OBJECT_DEPTH`].
pub(crate) fn too_deep(value: &Value) -> bool {
    nesting_depth(value, MAX_OBJECT_DEPTH) > MAX_OBJECT_DEPTH
}

/// The field (top-level key, e.g. `spec`) whose content makes `object` too deep, for
/// error messages: the deepest one, where `metadata` is measured without its
/// `managedFields` (which mirror the other fields' structure a few levels deeper, so
/// they are deepest whenever the client's own field is deep); empty if `object` is not an
/// object.
pub(crate) fn too_deep_field(object: &Value) -> String {
    let Value::Object(m) = object else { return String::new() };
    // Deep enough to rank every field of an object the limit refused.
    let cutoff = 4 * MAX_OBJECT_DEPTH;
    let depth_of = |key: &str, v: &Value| match (key, v) {
        ("metadata", Value::Object(meta)) => {
            let own = meta.iter().filter(|(k, _)| *k != "managedFields").map(|(_, v)| nesting_depth(v, cutoff));
            own.max().map_or(1, |d| d + 1)
        }
        _ => nesting_depth(v, cutoff),
    };
    let deepest =
        m.iter().map(|(k, v)| (depth_of(k, v), k)).fold(None, |best: Option<(usize, &String)>, cur| match best {
            Some(b) if b.0 >= cur.0 => Some(b),
            _ => Some(cur),
        });
    deepest.map(|(_, key)| key.clone()).unwrap_or_default()
}

/// The message of a refused too-deep object.
pub(crate) fn too_deep_message() -> String {
    format!("Invalid value: \"object\": nesting depth exceeds the maximum of {MAX_OBJECT_DEPTH}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn nested(levels: usize) -> Value {
        let mut v = json!(1);
        for _ in 0..levels {
            v = json!({ "a": v });
        }
        v
    }

    #[test]
    fn depth_counts_containers() {
        assert_eq!(nesting_depth(&json!(1), 10), 0);
        assert_eq!(nesting_depth(&json!({}), 10), 1);
        assert_eq!(nesting_depth(&json!({"a": [1, {"b": []}], "c": {}}), 10), 4);
        assert_eq!(nesting_depth(&nested(50), 100), 50);
        assert_eq!(nesting_depth(&nested(500), 100), 101, "counting stops past the cutoff");
    }

    #[test]
    fn the_limit_and_its_field() {
        assert!(!too_deep(&nested(MAX_OBJECT_DEPTH)));
        assert!(too_deep(&nested(MAX_OBJECT_DEPTH + 1)));
        let obj = json!({"metadata": {"name": "x"}, "spec": nested(MAX_OBJECT_DEPTH)});
        assert_eq!(too_deep_field(&obj), "spec");
        // managedFields mirror spec a few levels deeper, and come first: still `spec`.
        let mirrored = json!({"f:spec": nested(MAX_OBJECT_DEPTH - 2)});
        let obj = json!({
            "metadata": {"name": "x", "managedFields": [{"manager": "m", "fieldsV1": mirrored}]},
            "spec": nested(MAX_OBJECT_DEPTH - 3),
        });
        assert!(too_deep(&obj));
        assert_eq!(too_deep_field(&obj), "spec");
    }

    #[test]
    fn an_object_at_the_limit_parses_back_inside_a_list_and_a_table() {
        let obj = nested(MAX_OBJECT_DEPTH);
        let table = json!({"kind": "Table", "rows": [{"cells": [], "object": obj}]});
        let text = serde_json::to_string(&table).expect("encodes");
        assert!(serde_json::from_str::<Value>(&text).is_ok());
    }
}
