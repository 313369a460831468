//! Schema-aware operations on JSON objects used by field management: the set of fields an
//! object sets, the comparison of two objects (added/removed/modified paths), the merge of an
//! applied configuration into a live object, and removal of fields an applier gave up.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fieldset::{FieldSet, Path, PathElement};
use super::schema::{ListType, SchemaNode, child};

/// The list type at a node, if the list is granular (set or map).
fn granular_list(node: Option<&SchemaNode>) -> Option<&ListType> {
    match node.and_then(SchemaNode::list_type) {
        Some(ListType::Atomic) | None => None,
        Some(lt) => Some(lt),
    }
}

fn atomic_map(node: Option<&SchemaNode>) -> bool {
    node.is_some_and(SchemaNode::is_atomic_map)
}

/// The path element selecting `item` in a granular list, or `None` when the item cannot be
/// identified (missing key field).
pub(super) fn item_pe(lt: &ListType, item: &Value) -> Option<PathElement> {
    match lt {
        ListType::Atomic => None,
        ListType::Set => Some(PathElement::Value(item.clone())),
        ListType::Map { keys, .. } => {
            let obj = item.as_object()?;
            let mut fields = Vec::with_capacity(keys.len());
            for k in keys {
                let v = match obj.get(&k.name) {
                    Some(v) if !v.is_null() => v.clone(),
                    _ => k.default.clone()?,
                };
                fields.push((k.name.clone(), v));
            }
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            Some(PathElement::Key(fields))
        }
    }
}

/// Identifies every item of a list; `None` when some item cannot be identified or two items
/// share an identity (such lists are then treated atomically).
fn index_list<'v>(lt: &ListType, items: &'v [Value]) -> Option<Vec<(PathElement, &'v Value)>> {
    let mut out: Vec<(PathElement, &Value)> = Vec::with_capacity(items.len());
    let mut seen = std::collections::BTreeSet::new();
    for it in items {
        let pe = item_pe(lt, it)?;
        if !seen.insert(pe.clone()) {
            return None;
        }
        out.push((pe, it));
    }
    Some(out)
}

/// The fields an (applied) object sets: every scalar, atomic value and list item, but not map
/// nodes themselves.
pub(super) fn to_field_set(value: &Value, root: &SchemaNode) -> FieldSet {
    fn walk(v: &Value, node: Option<&SchemaNode>, path: &mut Path, out: &mut FieldSet) {
        match v {
            Value::Object(m) if !atomic_map(node) => {
                for (k, cv) in m {
                    path.push(PathElement::Field(k.clone()));
                    walk(cv, child(node, k), path, out);
                    path.pop();
                }
            }
            Value::Array(items) => match granular_list(node).and_then(|lt| index_list(lt, items)) {
                Some(indexed) => {
                    for (pe, it) in indexed {
                        path.push(pe);
                        out.insert(path.clone());
                        if it.is_object() {
                            walk(it, node, path, out);
                        }
                        path.pop();
                    }
                }
                None => out.insert(path.clone()),
            },
            _ => {
                if !path.is_empty() {
                    out.insert(path.clone());
                }
            }
        }
    }
    let mut out = FieldSet::new();
    walk(value, Some(root), &mut Vec::new(), &mut out);
    out
}

/// Paths that differ between two objects.
#[derive(Debug, Default)]
pub(super) struct Comparison {
    /// Present only in the new object (including map and list nodes).
    pub added: FieldSet,
    /// Present only in the old object.
    pub removed: FieldSet,
    /// Leaves (scalars, atomic values) present in both with different values.
    pub modified: FieldSet,
}

impl Comparison {
    /// Added or modified paths.
    pub(super) fn changed(&self) -> FieldSet {
        self.added.union(&self.modified)
    }
}

/// Compares `old` and `new`.
pub(super) fn compare(old: &Value, new: &Value, root: &SchemaNode) -> Comparison {
    let mut out = Comparison::default();
    cmp_walk(Some(old), Some(new), Some(root), &mut Vec::new(), &mut out);
    out
}

fn children_of<'v>(v: &'v Value, node: Option<&SchemaNode>) -> Option<Vec<(PathElement, &'v Value)>> {
    match v {
        Value::Object(m) if !atomic_map(node) => {
            Some(m.iter().map(|(k, cv)| (PathElement::Field(k.clone()), cv)).collect())
        }
        Value::Array(items) => granular_list(node).and_then(|lt| index_list(lt, items)),
        _ => None,
    }
}

fn child_node<'a>(node: Option<&'a SchemaNode>, pe: &PathElement) -> Option<&'a SchemaNode> {
    match pe {
        PathElement::Field(k) => child(node, k),
        _ => node,
    }
}

fn cmp_walk(
    old: Option<&Value>,
    new: Option<&Value>,
    node: Option<&SchemaNode>,
    path: &mut Path,
    out: &mut Comparison,
) {
    match (old, new) {
        (Some(o), Some(n)) => {
            let same_kind = matches!((o, n), (Value::Object(_), Value::Object(_)) | (Value::Array(_), Value::Array(_)));
            let (co, cn) = if same_kind { (children_of(o, node), children_of(n, node)) } else { (None, None) };
            match (co, cn) {
                (Some(co), Some(cn)) => {
                    let co: BTreeMap<PathElement, &Value> = co.into_iter().collect();
                    let mut cn: BTreeMap<PathElement, &Value> = cn.into_iter().collect();
                    for (pe, ov) in co {
                        let nv = cn.remove(&pe);
                        let cnode = child_node(node, &pe);
                        path.push(pe);
                        cmp_walk(Some(ov), nv, cnode, path, out);
                        path.pop();
                    }
                    for (pe, nv) in cn {
                        let cnode = child_node(node, &pe);
                        path.push(pe);
                        cmp_walk(None, Some(nv), cnode, path, out);
                        path.pop();
                    }
                }
                _ => {
                    if o != n && !path.is_empty() {
                        out.modified.insert(path.clone());
                    }
                }
            }
        }
        (None, Some(v)) | (Some(v), None) => {
            let added = old.is_none();
            if !path.is_empty() {
                if added {
                    out.added.insert(path.clone());
                } else {
                    out.removed.insert(path.clone());
                }
            }
            if let Some(cs) = children_of(v, node) {
                for (pe, cv) in cs {
                    let cnode = child_node(node, &pe);
                    path.push(pe);
                    if added {
                        cmp_walk(None, Some(cv), cnode, path, out);
                    } else {
                        cmp_walk(Some(cv), None, cnode, path, out);
                    }
                    path.pop();
                }
            }
        }
        (None, None) => {}
    }
}

/// Removes `null` members of objects, recursively (applied nulls never get stored).
pub(super) fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter().filter(|(_, cv)| !cv.is_null()).map(|(k, cv)| (k.clone(), strip_nulls(cv))).collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

/// Merges an applied configuration into a live object (structured-merge-diff's `Merge`).
pub(super) fn merge(live: &Value, config: &Value, root: &SchemaNode) -> Value {
    merge_walk(live, config, Some(root))
}

fn merge_walk(live: &Value, config: &Value, node: Option<&SchemaNode>) -> Value {
    match (live, config) {
        (Value::Object(l), Value::Object(c)) if !atomic_map(node) => {
            let mut out = l.clone();
            for (k, cv) in c {
                if cv.is_null() {
                    out.remove(k);
                    continue;
                }
                let merged = match l.get(k) {
                    Some(lv) => merge_walk(lv, cv, child(node, k)),
                    None => strip_nulls(cv),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(c)) => {
            let Some(lt) = granular_list(node) else {
                return strip_nulls(config);
            };
            match (index_list(lt, l), index_list(lt, c)) {
                (Some(li), Some(ci)) => Value::Array(merge_lists(&li, &ci, node)),
                _ => strip_nulls(config),
            }
        }
        _ => strip_nulls(config),
    }
}

fn find<'v>(list: &[(PathElement, &'v Value)], pe: &PathElement) -> Option<&'v Value> {
    list.iter().find(|(p, _)| p == pe).map(|(_, v)| *v)
}

/// Merges two identified lists, keeping live-only items in place and ordering the applied items
/// as the configuration orders them.
fn merge_lists(lhs: &[(PathElement, &Value)], rhs: &[(PathElement, &Value)], node: Option<&SchemaNode>) -> Vec<Value> {
    let merge_item = |pe: &PathElement| match (find(lhs, pe), find(rhs, pe)) {
        (Some(l), Some(r)) => merge_walk(l, r, node),
        (None, Some(r)) => strip_nulls(r),
        (Some(l), None) => l.clone(),
        (None, None) => Value::Null,
    };
    let shared: Vec<&PathElement> = rhs.iter().map(|(pe, _)| pe).filter(|pe| find(lhs, pe).is_some()).collect();
    let mut shared_iter = shared.into_iter();
    let mut next_shared = shared_iter.next();
    let mut done: Vec<PathElement> = Vec::new();
    let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
    let (mut li, mut ri) = (0, 0);
    while li < lhs.len() || ri < rhs.len() {
        if li < lhs.len() && ri < rhs.len() {
            let pe = &lhs[li].0;
            if *pe == rhs[ri].0 {
                if !done.contains(pe) {
                    out.push(merge_item(pe));
                    done.push(pe.clone());
                }
                li += 1;
                ri += 1;
                next_shared = shared_iter.next();
                continue;
            }
            if find(rhs, pe).is_some() && next_shared.is_some_and(|s| s != pe) {
                li += 1;
                continue;
            }
        }
        if li < lhs.len() {
            let pe = &lhs[li].0;
            if find(rhs, pe).is_none() {
                out.push(lhs[li].1.clone());
                li += 1;
                continue;
            }
            if done.contains(pe) {
                li += 1;
                continue;
            }
        }
        if ri < rhs.len() {
            let pe = &rhs[ri].0;
            if !done.contains(pe) {
                out.push(merge_item(pe));
                done.push(pe.clone());
            }
            ri += 1;
            if next_shared.is_some_and(|s| s == pe) {
                next_shared = shared_iter.next();
            }
        }
    }
    out
}

/// Removes from `value` the fields in `last` (the applier's previous set) that nobody in `owned`
/// owns any more; fields never owned by the applier are kept. Maps and lists left empty by the
/// removal are dropped too, unless someone owns them.
pub(super) fn prune(value: &mut Value, last: &FieldSet, owned: &FieldSet, root: &SchemaNode) {
    prune_walk(value, Some(root), &mut Vec::new(), last, owned);
}

fn is_empty_container(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn prune_walk(value: &mut Value, node: Option<&SchemaNode>, path: &mut Path, last: &FieldSet, owned: &FieldSet) {
    let drop = |p: &Path| last.contains(p) && !owned.contains_or_descendant(p);
    match value {
        Value::Object(m) if !atomic_map(node) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            let mut kept = Map::new();
            for k in keys {
                let Some(mut cv) = m.remove(&k) else { continue };
                path.push(PathElement::Field(k.clone()));
                let mut remove = drop(path);
                if !remove && last.has_descendant(path) {
                    prune_walk(&mut cv, child(node, &k), path, last, owned);
                    remove = is_empty_container(&cv) && !owned.contains_or_descendant(path);
                }
                path.pop();
                if !remove {
                    kept.insert(k, cv);
                }
            }
            *m = kept;
        }
        Value::Array(items) => {
            let Some(lt) = granular_list(node) else {
                return;
            };
            let lt = lt.clone();
            let mut kept = Vec::with_capacity(items.len());
            for mut it in std::mem::take(items) {
                match item_pe(&lt, &it) {
                    Some(pe) => {
                        path.push(pe);
                        let remove = drop(path);
                        if !remove && last.has_descendant(path) {
                            prune_walk(&mut it, node, path, last, owned);
                        }
                        path.pop();
                        if !remove {
                            kept.push(it);
                        }
                    }
                    None => kept.push(it),
                }
            }
            *items = kept;
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::fieldset::{field_path, path_to_string};
    use super::super::schema::ListSemantics;
    use super::*;
    use serde_json::json;

    fn sem() -> ListSemantics {
        ListSemantics::for_builtin("", "Pod")
    }

    #[test]
    fn field_set_of_pod() {
        let pod = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [
            {"name": "c", "image": "i", "ports": [{"containerPort": 80}], "args": ["x"]}]}});
        let s = to_field_set(&pod, sem().root());
        let strs: Vec<String> = s.iter().map(|p| path_to_string(p)).collect();
        assert!(strs.contains(&".metadata.labels.a".to_string()));
        assert!(strs.contains(&".spec.containers[name=\"c\"]".to_string()));
        assert!(strs.contains(&".spec.containers[name=\"c\"].args".to_string()));
        assert!(strs.contains(&".spec.containers[name=\"c\"].ports[containerPort=80,protocol=\"TCP\"]".to_string()));
        assert!(!strs.contains(&".metadata.labels".to_string()));
    }

    #[test]
    fn compare_detects_changes() {
        let old = json!({"spec": {"replicas": 1, "a": "x"}});
        let new = json!({"spec": {"replicas": 2, "b": {"c": 1}}});
        let c = compare(&old, &new, ListSemantics::deduced().root());
        assert!(c.modified.contains(&field_path(&["spec", "replicas"])));
        assert!(c.removed.contains(&field_path(&["spec", "a"])));
        assert!(c.added.contains(&field_path(&["spec", "b"])));
        assert!(c.added.contains(&field_path(&["spec", "b", "c"])));
        assert!(!c.added.contains(&field_path(&["spec"])));
    }

    #[test]
    fn merge_keyed_lists_keeps_live_items() {
        let live = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}});
        let cfg = json!({"spec": {"containers": [{"name": "b", "image": "3"}, {"name": "c", "image": "4"}]}});
        let m = merge(&live, &cfg, sem().root());
        assert_eq!(
            m["spec"]["containers"],
            json!([{"name": "a", "image": "1"}, {"name": "b", "image": "3"}, {"name": "c", "image": "4"}])
        );
    }

    #[test]
    fn prune_removes_unowned() {
        let mut v = json!({"metadata": {"name": "x", "labels": {"a": "1", "b": "2"}, "annotations": {"c": "3"}}});
        let mut last = FieldSet::new();
        last.insert(field_path(&["metadata", "labels", "a"]));
        last.insert(field_path(&["metadata", "annotations", "c"]));
        let mut owned = FieldSet::new();
        owned.insert(field_path(&["metadata", "name"]));
        prune(&mut v, &last, &owned, sem().root());
        assert_eq!(v, json!({"metadata": {"name": "x", "labels": {"b": "2"}}}));
    }
}
