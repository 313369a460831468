//! Object mutation driven by a structural schema: null pruning + `default`s (apiextensions
//! `structuraldefaulting`) and unknown-field pruning (apiextensions `pruning`).

use serde_json::Value;

use super::structural::{AdditionalProperties, Schema};

/// Fields kept at the resource root and in embedded resources.
const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

fn child_schema<'a>(s: &'a Schema, k: &str) -> Option<&'a Schema> {
    s.property(k).or_else(|| s.additional_schema())
}

/// Removes `null` values of non-nullable fields that have no default
/// (`PruneNonNullableNullsWithoutDefaults`).
pub(crate) fn prune_non_nullable_nulls(v: &mut Value, s: &Schema) {
    match v {
        Value::Object(m) => {
            let drop: Vec<String> = m
                .iter()
                .filter(|(k, x)| x.is_null() && child_schema(s, k).is_some_and(|c| !c.nullable && c.default.is_none()))
                .map(|(k, _)| k.clone())
                .collect();
            for k in drop {
                m.shift_remove(&k);
            }
            for (k, x) in m.iter_mut() {
                if let Some(c) = child_schema(s, k) {
                    prune_non_nullable_nulls(x, c);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = &s.items {
                for x in a.iter_mut() {
                    prune_non_nullable_nulls(x, items);
                }
            }
        }
        _ => {}
    }
}

fn is_non_nullable_null(x: &Value, s: &Schema) -> bool {
    x.is_null() && !s.nullable
}

/// Applies `default` values recursively (`structuraldefaulting.Default`).
pub(crate) fn default(v: &mut Value, s: &Schema) {
    match v {
        Value::Object(m) => {
            for (k, prop) in &s.properties {
                let Some(d) = &prop.default else { continue };
                match m.get(k) {
                    Some(x) if !is_non_nullable_null(x, prop) => {}
                    _ => {
                        m.insert(k.clone(), d.clone());
                    }
                }
            }
            for (k, x) in m.iter_mut() {
                if let Some(prop) = s.property(k) {
                    default(x, prop);
                } else if let Some(ap) = s.additional_schema() {
                    if let Some(d) = &ap.default
                        && is_non_nullable_null(x, ap)
                    {
                        *x = d.clone();
                    }
                    default(x, ap);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = &s.items {
                for x in a.iter_mut() {
                    if let Some(d) = &items.default
                        && is_non_nullable_null(x, items)
                    {
                        *x = d.clone();
                    }
                    default(x, items);
                }
            }
        }
        _ => {}
    }
}

fn join(path: &str, k: &str) -> String {
    if path.is_empty() { k.to_string() } else { format!("{path}.{k}") }
}

/// Drops fields not specified by `s` (`pruning.Prune`), recording their paths in `out`.
/// `embedded` keeps `apiVersion`/`kind`/`metadata` (true at the resource root).
pub(crate) fn prune(v: &mut Value, s: Option<&Schema>, embedded: bool, path: &str, out: &mut Vec<String>) {
    if let Some(s) = s
        && s.preserve_unknown_fields
    {
        skip_prune(v, s, embedded, path, out);
        return;
    }
    match v {
        Value::Object(m) => {
            let Some(s) = s else {
                for k in m.keys() {
                    out.push(join(path, k));
                }
                m.clear();
                return;
            };
            let mut removed = Vec::new();
            for (k, x) in m.iter_mut() {
                if (embedded || s.embedded_resource) && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(prop) = s.property(k) {
                    prune(x, Some(prop), prop.embedded_resource, &join(path, k), out);
                } else if let Some(ap) = &s.additional_properties {
                    match ap {
                        AdditionalProperties::Schema(aps) => {
                            prune(x, Some(aps), aps.embedded_resource, &join(path, k), out)
                        }
                        AdditionalProperties::Bool => prune(x, None, false, &join(path, k), out),
                    }
                } else {
                    removed.push(k.clone());
                }
            }
            for k in removed {
                out.push(join(path, &k));
                m.shift_remove(&k);
            }
        }
        Value::Array(a) => {
            let items = s.and_then(|s| s.items.as_deref());
            let emb = items.is_some_and(|i| i.embedded_resource);
            for (i, x) in a.iter_mut().enumerate() {
                prune(x, items, emb, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn skip_prune(v: &mut Value, s: &Schema, embedded: bool, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if (embedded || s.embedded_resource) && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(prop) = s.property(k) {
                    prune(x, Some(prop), prop.embedded_resource, &join(path, k), out);
                } else if let Some(ap) = s.additional_schema() {
                    prune(x, Some(ap), ap.embedded_resource, &join(path, k), out);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = s.items.as_deref() {
                for (i, x) in a.iter_mut().enumerate() {
                    skip_prune(x, items, items.embedded_resource, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}
