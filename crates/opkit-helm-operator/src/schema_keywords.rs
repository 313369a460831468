//! The JSON-schema keywords a CRD's structural schema takes as they are (or, for
//! bounds, in OpenAPI v3's spelling), shared by the conversion of typed nodes
//! (`crd`) and of junctor branches (`junctors`), and how deep `$ref`s
//! are followed.

use serde_json::{Map, Value, json};

/// How deep `$ref`s are followed before a node is left open (recursive definitions).
pub(crate) const MAX_REF_DEPTH: usize = 16;

/// Copies the numeric or string `keywords` kube takes as they are.
pub(crate) fn copy_keywords(node: &Map<String, Value>, out: &mut Map<String, Value>, keywords: &[&str]) {
    for keyword in keywords {
        if let Some(value) = node.get(*keyword).filter(|v| v.is_number() || v.is_string()) {
            out.insert((*keyword).to_string(), value.clone());
        }
    }
}

/// A bound: OpenAPI v3's `minimum` with a boolean `exclusiveMinimum`, from either that
/// or JSON Schema's numeric `exclusiveMinimum` (draft 6 and later; the stricter wins).
pub(crate) fn bound(node: &Map<String, Value>, out: &mut Map<String, Value>, inclusive: &str, exclusive: &str) {
    let at = node.get(inclusive).filter(|v| v.is_number());
    match (at, node.get(exclusive)) {
        (_, Some(limit @ Value::Number(n))) => {
            let stricter = at.and_then(Value::as_f64).is_some_and(|a| {
                let e = n.as_f64().unwrap_or(a);
                if inclusive == "minimum" { a > e } else { a < e }
            });
            match at {
                Some(a) if stricter => {
                    out.insert(inclusive.into(), a.clone());
                }
                _ => {
                    out.insert(inclusive.into(), limit.clone());
                    out.insert(exclusive.into(), json!(true));
                }
            }
        }
        (Some(a), flag) => {
            out.insert(inclusive.into(), a.clone());
            if flag == Some(&Value::Bool(true)) {
                out.insert(exclusive.into(), json!(true));
            }
        }
        (None, _) => {}
    }
}
