//! Strategic merge patch (`application/strategic-merge-patch+json`): maps merge recursively,
//! `null` deletes a key, lists with a merge key merge element-wise, primitive "merge" lists are
//! unioned, other lists are replaced. Directives: `$patch: replace|delete|merge`, `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>`.

use serde_json::{Map, Value};

use super::list_semantics::{ListSemantics, ListType, SchemaNode, child};

/// A strategic merge patch that cannot be applied. The variants are the two answers
/// kube-apiserver gives: a malformed patch (400 BadRequest) and a patch that does not fit
/// the object (422 Invalid).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrategicMergeError {
    /// The patch is malformed (unknown directive, missing merge key, ...).
    #[error("{0}")]
    BadRequest(String),
    /// The patch cannot be applied to this object (e.g. it contradicts `$retainKeys`).
    #[error("{0}")]
    Invalid(String),
}

impl StrategicMergeError {
    /// The HTTP status kube-apiserver answers with (400 or 422).
    pub fn status_code(&self) -> u16 {
        match self {
            StrategicMergeError::BadRequest(_) => 400,
            StrategicMergeError::Invalid(_) => 422,
        }
    }
}

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_PRIMITIVE: &str = "$deleteFromPrimitiveList/";
const SET_ORDER: &str = "$setElementOrder/";

/// Applies a strategic merge patch to `doc`, merging lists as `lists` says (see
/// [`ListSemantics::for_builtin`] and [`ListSemantics::from_crd_schema`]).
pub fn strategic_merge_patch(doc: &Value, patch: &Value, lists: &ListSemantics) -> Result<Value, StrategicMergeError> {
    let Value::Object(p) = patch else {
        return Err(StrategicMergeError::BadRequest("strategic merge patch format is not supported".to_string()));
    };
    let original = match doc {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    match merge_map(original, p, Some(lists.root()))? {
        Some(m) => Ok(Value::Object(m)),
        None => Ok(Value::Object(Map::new())),
    }
}

fn bad(msg: &str) -> StrategicMergeError {
    StrategicMergeError::BadRequest(msg.to_string())
}

/// Merges `patch` into `original`. `None` means "delete this map" (`$patch: delete`).
fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    node: Option<&SchemaNode>,
) -> Result<Option<Map<String, Value>>, StrategicMergeError> {
    match patch.get(DIRECTIVE) {
        None => {}
        Some(Value::String(s)) if s == "merge" => {}
        Some(Value::String(s)) if s == "delete" => return Ok(None),
        Some(Value::String(s)) if s == "replace" => {
            let mut out = Map::new();
            for (k, v) in patch {
                if k != DIRECTIVE && !v.is_null() {
                    out.insert(k.clone(), clean(v, child(node, k))?);
                }
            }
            return Ok(Some(out));
        }
        Some(other) => {
            return Err(StrategicMergeError::BadRequest(format!(
                "unknown patch type: {} in map: {}",
                other,
                Value::Object(patch.clone())
            )));
        }
    }
    if let Some(rk) = patch.get(RETAIN_KEYS) {
        retain_keys(&mut original, patch, rk)?;
    }
    let orders = list_directives(&mut original, patch)?;
    for (k, pv) in patch {
        if k.starts_with('$') {
            continue;
        }
        let cnode = child(node, k);
        if pv.is_null() {
            original.remove(k);
            continue;
        }
        let merged = match (original.remove(k), pv) {
            (Some(Value::Object(o)), Value::Object(p)) => merge_map(o, p, cnode)?.map(Value::Object),
            (None, Value::Object(p)) => merge_map(Map::new(), p, cnode)?.map(Value::Object),
            (Some(Value::Array(o)), Value::Array(p)) => Some(Value::Array(merge_list(o, p, cnode)?)),
            (None, Value::Array(p)) => Some(Value::Array(merge_list(Vec::new(), p, cnode)?)),
            (_, other) => Some(clean(other, cnode)?),
        };
        if let Some(v) = merged {
            original.insert(k.clone(), v);
        }
    }
    for (field, order) in orders {
        let lt = child(node, field).and_then(SchemaNode::list_type);
        if let Some(Value::Array(items)) = original.get_mut(field) {
            reorder(items, order, lt);
        }
    }
    Ok(Some(original))
}

/// `$retainKeys`: keeps only the listed keys of `original`; the patch may set no other.
fn retain_keys(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    rk: &Value,
) -> Result<(), StrategicMergeError> {
    let Value::Array(keys) = rk else {
        return Err(bad("invalid patch format of retainKeys"));
    };
    let mut retain = Vec::new();
    for k in keys {
        let Value::String(k) = k else {
            return Err(bad("invalid patch format of retainKeys"));
        };
        retain.push(k.as_str());
    }
    for k in patch.keys() {
        if !k.starts_with('$') && !retain.contains(&k.as_str()) {
            return Err(StrategicMergeError::Invalid("patch content doesn't match retainKeys list".to_string()));
        }
    }
    original.retain(|k, _| retain.contains(&k.as_str()));
    Ok(())
}

/// Applies the `$deleteFromPrimitiveList/<field>` directives to `original`, and returns
/// the `$setElementOrder/<field>` lists, applied once the fields are merged.
fn list_directives<'p>(
    original: &mut Map<String, Value>,
    patch: &'p Map<String, Value>,
) -> Result<Vec<(&'p str, &'p Vec<Value>)>, StrategicMergeError> {
    let mut orders = Vec::new();
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix(DELETE_PRIMITIVE) {
            let Value::Array(del) = v else {
                return Err(bad("invalid patch format of primitive list"));
            };
            if let Some(Value::Array(items)) = original.get_mut(field) {
                items.retain(|it| !del.contains(it));
            }
        } else if let Some(field) = k.strip_prefix(SET_ORDER) {
            let Value::Array(order) = v else {
                return Err(bad("invalid patch format of setElementOrder list"));
            };
            orders.push((field, order));
        }
    }
    Ok(orders)
}

/// A patch value stored as is: directives and nulls removed.
fn clean(v: &Value, node: Option<&SchemaNode>) -> Result<Value, StrategicMergeError> {
    match v {
        Value::Object(m) => Ok(merge_map(Map::new(), m, node)?.map(Value::Object).unwrap_or(Value::Object(Map::new()))),
        Value::Array(items) => Ok(Value::Array(merge_list(Vec::new(), items, node)?)),
        other => Ok(other.clone()),
    }
}

fn merge_list(
    original: Vec<Value>,
    patch: &[Value],
    node: Option<&SchemaNode>,
) -> Result<Vec<Value>, StrategicMergeError> {
    if patch.iter().any(|v| v.is_array()) && node.and_then(SchemaNode::list_type).is_some() {
        return Err(StrategicMergeError::Invalid("lists of lists are not supported".to_string()));
    }
    match node.and_then(SchemaNode::list_type) {
        Some(ListType::Set) => {
            let mut out = original;
            for v in patch {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            Ok(out)
        }
        Some(lt @ ListType::Map { .. }) => {
            let key = lt.smp_key().unwrap_or("name");
            merge_keyed_list(original, patch, key, node)
        }
        _ => {
            // Replace; drop a stray `{"$patch": "replace"}` marker element if present.
            let mut out = Vec::with_capacity(patch.len());
            for v in patch {
                if is_directive_elem(v, "replace") {
                    continue;
                }
                out.push(match v {
                    Value::Object(m) => {
                        merge_map(Map::new(), m, node)?.map(Value::Object).unwrap_or(Value::Object(Map::new()))
                    }
                    other => other.clone(),
                });
            }
            Ok(out)
        }
    }
}

fn is_directive_elem(v: &Value, which: &str) -> bool {
    matches!(v, Value::Object(m) if m.len() == 1 && m.get(DIRECTIVE).and_then(Value::as_str) == Some(which))
}

fn merge_keyed_list(
    mut original: Vec<Value>,
    patch: &[Value],
    key: &str,
    node: Option<&SchemaNode>,
) -> Result<Vec<Value>, StrategicMergeError> {
    if patch.iter().any(|v| is_directive_elem(v, "replace")) {
        original.clear();
    }
    for pv in patch {
        let Value::Object(pm) = pv else {
            // Not a list of maps after all: plain replace semantics for this element.
            if !original.contains(pv) {
                original.push(pv.clone());
            }
            continue;
        };
        if pm.len() == 1 && pm.contains_key(DIRECTIVE) {
            match pm.get(DIRECTIVE).and_then(Value::as_str) {
                Some("replace" | "merge") => continue,
                _ => {
                    return Err(StrategicMergeError::BadRequest(format!("unknown patch type in list element: {pv}")));
                }
            }
        }
        let Some(kv) = pm.get(key) else {
            return Err(StrategicMergeError::BadRequest(format!(
                "map: {pv} does not contain declared merge key: {key}"
            )));
        };
        let pos = original.iter().position(|o| o.get(key) == Some(kv));
        if pm.get(DIRECTIVE).and_then(Value::as_str) == Some("delete") {
            original.retain(|o| o.get(key) != Some(kv));
            continue;
        }
        match pos {
            Some(i) => {
                let base = match std::mem::take(&mut original[i]) {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
                match merge_map(base, pm, node)? {
                    Some(m) => original[i] = Value::Object(m),
                    None => {
                        original.remove(i);
                    }
                }
            }
            None => {
                if let Some(m) = merge_map(Map::new(), pm, node)? {
                    original.push(Value::Object(m));
                }
            }
        }
    }
    Ok(original)
}

/// Applies `$setElementOrder`: items named in `order` are placed in that order; items not named
/// keep their relative position from the merged list.
fn reorder(items: &mut Vec<Value>, order: &[Value], lt: Option<&ListType>) {
    let key = lt.and_then(ListType::smp_key);
    let ident = |v: &Value| -> Value {
        match key {
            Some(k) => v.get(k).cloned().unwrap_or(Value::Null),
            None => v.clone(),
        }
    };
    let wanted: Vec<Value> = order.iter().map(&ident).collect();
    let rank = |v: &Value| wanted.iter().position(|w| *w == ident(v));
    let mut ordered: Vec<(usize, Value)> = Vec::new();
    let mut server_only: Vec<(usize, Value)> = Vec::new();
    for (i, v) in std::mem::take(items).into_iter().enumerate() {
        match rank(&v) {
            Some(r) => ordered.push((r, v)),
            None => server_only.push((i, v)),
        }
    }
    ordered.sort_by_key(|(r, _)| *r);
    // Interleave: a server-only item keeps (roughly) its original position.
    let mut out = Vec::with_capacity(ordered.len() + server_only.len());
    let mut so = server_only.into_iter().peekable();
    for (idx, (_, v)) in ordered.into_iter().enumerate() {
        while let Some((orig_i, _)) = so.peek() {
            if *orig_i <= idx {
                if let Some((_, sv)) = so.next() {
                    out.push(sv);
                }
            } else {
                break;
            }
        }
        out.push(v);
    }
    out.extend(so.map(|(_, v)| v));
    *items = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deploy() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "finalizers": ["a"]},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
                {"name": "sidecar", "image": "side:1"}]}}}})
    }

    fn sem() -> ListSemantics {
        ListSemantics::for_builtin("apps", "Deployment")
    }

    #[test]
    fn patch_one_container_image_keeps_others() {
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}}});
        let out = strategic_merge_patch(&deploy(), &patch, &sem()).unwrap();
        let cs = &out["spec"]["template"]["spec"]["containers"];
        assert_eq!(cs.as_array().unwrap().len(), 2);
        assert_eq!(cs[0]["image"], "app:2");
        assert_eq!(cs[0]["env"][0]["name"], "A");
        assert_eq!(cs[1]["name"], "sidecar");
    }

    #[test]
    fn delete_list_element_and_null_key() {
        let patch = json!({"metadata": {"finalizers": ["b"]}, "spec": {"replicas": null,
            "template": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}}});
        let out = strategic_merge_patch(&deploy(), &patch, &sem()).unwrap();
        let cs = out["spec"]["template"]["spec"]["containers"].as_array().unwrap();
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0]["name"], "app");
        assert!(out["spec"].get("replicas").is_none());
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
    }

    #[test]
    fn set_element_order_and_primitive_delete() {
        let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
            "containers": [{"name": "app", "image": "app:3"}]}}}});
        let out = strategic_merge_patch(&deploy(), &patch, &sem()).unwrap();
        let cs = &out["spec"]["template"]["spec"]["containers"];
        assert_eq!(cs[0]["name"], "sidecar");
        assert_eq!(cs[1]["image"], "app:3");
        assert!(cs[1].get("$patch").is_none());
        assert_eq!(out["metadata"]["finalizers"], json!([]));
        assert!(out["spec"]["template"]["spec"].get("$setElementOrder/containers").is_none());
    }

    #[test]
    fn replace_and_retain_keys() {
        let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"$patch": "replace"}, {"name": "only", "image": "o"}]}}}});
        let out = strategic_merge_patch(&deploy(), &patch, &sem()).unwrap();
        assert_eq!(out["spec"]["template"]["spec"]["containers"], json!([{"name": "only", "image": "o"}]));
        let doc = json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}});
        let p = json!({"strategy": {"$retainKeys": ["type"], "type": "Recreate"}});
        let out = strategic_merge_patch(&doc, &p, &sem()).unwrap();
        assert_eq!(out, json!({"strategy": {"type": "Recreate"}}));
        let p = json!({"strategy": {"$retainKeys": ["type"], "other": 1}});
        assert_eq!(strategic_merge_patch(&doc, &p, &sem()).unwrap_err().status_code(), 422);
        let p = json!({"spec": {"$patch": "frob"}});
        assert_eq!(strategic_merge_patch(&doc, &p, &sem()).unwrap_err().status_code(), 400);
        let p = json!({"spec": {"$patch": "replace", "replicas": 5}});
        let out = strategic_merge_patch(&deploy(), &p, &sem()).unwrap();
        assert_eq!(out["spec"], json!({"replicas": 5}));
    }

    #[test]
    fn missing_merge_key_is_bad_request() {
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
        let err = strategic_merge_patch(&deploy(), &patch, &sem()).unwrap_err();
        assert_eq!(err.status_code(), 400);
    }

    #[test]
    fn delete_map_directive_and_set_union() {
        let patch = json!({"metadata": {"finalizers": ["a", "c"]}, "spec": {"template": {"$patch": "delete"}}});
        let out = strategic_merge_patch(&deploy(), &patch, &sem()).unwrap();
        assert!(out["spec"].get("template").is_none());
        assert_eq!(out["spec"]["replicas"], 1);
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "c"]), "sets are unioned");
    }

    #[test]
    fn merge_keys_from_a_crd_schema() {
        let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"items": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["id"], "items": {"type": "object"}},
                "plain": {"type": "array", "items": {"type": "string"}}}}}}});
        let lists = ListSemantics::from_crd_schema(&schema);
        let doc = json!({"spec": {"items": [{"id": "a", "v": 1}, {"id": "b", "v": 2}], "plain": ["x", "y"]}});
        let patch = json!({"spec": {"items": [{"id": "b", "v": 3}, {"id": "c", "v": 4}], "plain": ["z"]}});
        let out = strategic_merge_patch(&doc, &patch, &lists).unwrap();
        assert_eq!(out["spec"]["items"], json!([{"id": "a", "v": 1}, {"id": "b", "v": 3}, {"id": "c", "v": 4}]));
        assert_eq!(out["spec"]["plain"], json!(["z"]), "lists without a list type are replaced");
        let unkeyed = ListSemantics::deduced();
        let out = strategic_merge_patch(&doc, &patch, &unkeyed).unwrap();
        assert_eq!(out["spec"]["items"], json!([{"id": "b", "v": 3}, {"id": "c", "v": 4}]));
    }

    #[test]
    fn non_object_patch_is_bad_request() {
        let err = strategic_merge_patch(&deploy(), &json!([1]), &sem()).unwrap_err();
        assert_eq!(err, StrategicMergeError::BadRequest("strategic merge patch format is not supported".into()));
        let p = json!({"spec": {"template": {"spec": {"containers": [{"$patch": "frob"}]}}}});
        assert_eq!(strategic_merge_patch(&deploy(), &p, &sem()).unwrap_err().status_code(), 400);
    }
}
