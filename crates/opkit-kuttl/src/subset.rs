//! kuttl's partial match (`IsSubset`): an expected object matches an actual one when
//! every map key it sets is present with a matching value; keys it leaves out are
//! ignored, while arrays must have the same length and match element by element, and
//! scalars must be equal and of the same type. The error names the first mismatching
//! path as kuttl does: `.status.readyReplicas: key is missing from map`.

use std::fmt;

use serde_json::Value;

/// Why an expected value is not a subset of the actual one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SubsetError {
    /// The keys from the root to the mismatch.
    pub path: Vec<String>,
    /// What differs there.
    pub message: String,
}

impl fmt::Display for SubsetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            return f.write_str(&self.message);
        }
        for key in &self.path {
            write!(f, ".{key}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for SubsetError {}

/// Checks that `expected` is a subset of `actual` (kuttl's `IsSubset`).
pub(crate) fn is_subset(expected: &Value, actual: &Value) -> Result<(), SubsetError> {
    let at = |message: String| Err(SubsetError { path: Vec::new(), message });
    if go_type(expected) != go_type(actual) {
        return at(format!("type mismatch: {} != {}", go_type(expected), go_type(actual)));
    }
    match (expected, actual) {
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                return at(format!("slice length mismatch: {} != {}", e.len(), a.len()));
            }
            e.iter().zip(a).try_for_each(|(e, a)| is_subset(e, a))
        }
        (Value::Object(e), Value::Object(a)) => {
            // Go ranges over a map in no particular order; the first key in order is
            // reported here, so the message is the same on every run.
            let mut keys: Vec<&String> = e.keys().collect();
            keys.sort();
            for key in keys {
                let Some(actual_value) = a.get(key) else {
                    return Err(SubsetError { path: vec![key.clone()], message: "key is missing from map".into() });
                };
                if let Err(mut inner) = is_subset(&e[key], actual_value) {
                    inner.path.insert(0, key.clone());
                    return Err(inner);
                }
            }
            Ok(())
        }
        (Value::Number(e), Value::Number(a)) if numbers_equal(e, a) => Ok(()),
        (e, a) if e == a => Ok(()),
        (e, a) => at(format!("value mismatch, expected: {} != actual: {}", go_value(e), go_value(a))),
    }
}

fn numbers_equal(e: &serde_json::Number, a: &serde_json::Number) -> bool {
    match (e.as_i64(), a.as_i64()) {
        (Some(x), Some(y)) => x == y,
        _ => e.as_f64() == a.as_f64(),
    }
}

/// The Go type an unstructured value decodes to (`reflect.TypeOf`).
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// A value as Go's `%v` prints it.
fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => opkit_helm::value::format_float(n.as_f64().unwrap_or_default(), 6),
        },
        Value::String(s) => s.clone(),
        Value::Array(items) => format!("[{}]", items.iter().map(go_value).collect::<Vec<_>>().join(" ")),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let entries: Vec<String> = keys.into_iter().map(|k| format!("{k}:{}", go_value(&map[k]))).collect();
            format!("map[{}]", entries.join(" "))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn err(e: Value, a: Value) -> String {
        is_subset(&e, &a).map_or_else(|e| e.to_string(), |()| "ok".into())
    }

    #[test]
    fn extra_keys_in_the_actual_object_are_ignored() {
        assert_eq!(err(json!({"a": 1}), json!({"a": 1, "b": 2})), "ok");
        assert_eq!(err(json!({"s": {"x": [1, {"y": 2}]}}), json!({"s": {"x": [1, {"y": 2, "z": 3}]}})), "ok");
    }

    #[test]
    fn mismatches_name_the_path_as_kuttl_does() {
        assert_eq!(
            err(json!({"status": {"readyReplicas": 2}}), json!({"status": {}})),
            ".status.readyReplicas: key is missing from map"
        );
        assert_eq!(
            err(json!({"spec": {"replicas": 3}}), json!({"spec": {"replicas": 2}})),
            ".spec.replicas: value mismatch, expected: 3 != actual: 2"
        );
        assert_eq!(err(json!({"a": "1"}), json!({"a": 1})), ".a: type mismatch: string != int64");
        assert_eq!(err(json!({"l": [1]}), json!({"l": [1, 2]})), ".l: slice length mismatch: 1 != 2");
        assert_eq!(err(json!({"f": 0.5}), json!({"f": 0.25})), ".f: value mismatch, expected: 0.5 != actual: 0.25");
    }

    #[test]
    fn arrays_match_element_by_element() {
        let actual = json!({"c": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]});
        assert_eq!(err(json!({"c": [{"name": "a"}, {"name": "b"}]}), actual.clone()), "ok");
        assert_eq!(
            err(json!({"c": [{"name": "b"}, {"name": "a"}]}), actual),
            ".c.name: value mismatch, expected: b != actual: a"
        );
    }
}
