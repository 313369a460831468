//! Field paths and field sets as used by server-side apply (the structured-merge-diff model):
//! path elements (`f:` field, `k:` list-map key, `v:` set value, `i:` index), sets of paths, the
//! `FieldsV1` JSON encoding stored in `metadata.managedFields`, and the human-readable path form
//! used in conflict messages (`.spec.containers[name="nginx"].image`).

use std::cmp::Ordering;
use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// One step of a field path.
#[derive(Clone, Debug)]
pub(crate) enum PathElement {
    /// A field of a map/struct (`f:name`).
    Field(String),
    /// An element of a list-map, selected by its key fields sorted by name (`k:{...}`).
    Key(Vec<(String, Value)>),
    /// An element of a set-list, selected by its value (`v:...`).
    Value(Value),
    /// An element of a list selected by index (`i:N`); only appears in decoded foreign sets.
    Index(usize),
}

/// Total order over JSON values (used for keys and set values).
pub(crate) fn cmp_values(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::Number(_) => 2,
            Value::String(_) => 3,
            Value::Array(_) => 4,
            Value::Object(_) => 5,
        }
    }
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Number(x), Value::Number(y)) => {
            let (fx, fy) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            fx.partial_cmp(&fy).unwrap_or(Ordering::Equal)
        }
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (ex, ey) in x.iter().zip(y.iter()) {
                let c = cmp_values(ex, ey);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            let mut kx: Vec<_> = x.iter().collect();
            let mut ky: Vec<_> = y.iter().collect();
            kx.sort_by(|p, q| p.0.cmp(q.0));
            ky.sort_by(|p, q| p.0.cmp(q.0));
            for ((nx, vx), (ny, vy)) in kx.iter().zip(ky.iter()) {
                let c = nx.cmp(ny).then_with(|| cmp_values(vx, vy));
                if c != Ordering::Equal {
                    return c;
                }
            }
            kx.len().cmp(&ky.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        use PathElement::*;
        let rank = |p: &PathElement| match p {
            Field(_) => 0,
            Key(_) => 1,
            Value(_) => 2,
            Index(_) => 3,
        };
        match (self, other) {
            (Field(a), Field(b)) => a.cmp(b),
            (Key(a), Key(b)) => {
                for ((na, va), (nb, vb)) in a.iter().zip(b.iter()) {
                    let c = na.cmp(nb).then_with(|| cmp_values(va, vb));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                a.len().cmp(&b.len())
            }
            (Value(a), Value(b)) => cmp_values(a, b),
            (Index(a), Index(b)) => a.cmp(b),
            _ => rank(self).cmp(&rank(other)),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl PathElement {
    /// The `FieldsV1` key for this element (`f:name`, `k:{"name":"x"}`, `v:"a"`, `i:0`).
    pub(crate) fn to_fields_key(&self) -> String {
        match self {
            PathElement::Field(n) => format!("f:{n}"),
            PathElement::Key(fields) => {
                let mut m = Map::new();
                for (n, v) in fields {
                    m.insert(n.clone(), v.clone());
                }
                format!("k:{}", Value::Object(m))
            }
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a `FieldsV1` key. `Ok(None)` for unknown prefixes (ignored, like kube does).
    pub(crate) fn from_fields_key(key: &str) -> Result<Option<PathElement>, String> {
        let Some((prefix, rest)) = key.split_once(':') else {
            return Err(format!("invalid path element {key:?}"));
        };
        match prefix {
            "f" => Ok(Some(PathElement::Field(rest.to_string()))),
            "k" => {
                let v: Value =
                    serde_json::from_str(rest).map_err(|e| format!("invalid key path element {key:?}: {e}"))?;
                let Value::Object(m) = v else {
                    return Err(format!("key path element {key:?} is not an object"));
                };
                let mut fields: Vec<(String, Value)> = m.into_iter().collect();
                fields.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(Some(PathElement::Key(fields)))
            }
            "v" => serde_json::from_str(rest)
                .map(|v| Some(PathElement::Value(v)))
                .map_err(|e| format!("invalid value path element {key:?}: {e}")),
            "i" => rest
                .parse::<usize>()
                .map(|i| Some(PathElement::Index(i)))
                .map_err(|e| format!("invalid index path element {key:?}: {e}")),
            _ => Ok(None),
        }
    }

    /// Human-readable form used in conflict messages.
    pub(crate) fn display(&self) -> String {
        match self {
            PathElement::Field(n) => format!(".{n}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields.iter().map(|(n, v)| format!("{n}={v}")).collect();
                format!("[{}]", parts.join(","))
            }
            PathElement::Value(v) => format!("[={v}]"),
            PathElement::Index(i) => format!("[{i}]"),
        }
    }
}

/// A field path: a sequence of path elements from the object root.
pub(crate) type Path = Vec<PathElement>;

/// Human-readable form of a path, e.g. `.spec.replicas`.
pub(crate) fn path_to_string(path: &[PathElement]) -> String {
    path.iter().map(PathElement::display).collect()
}

/// Builds a path of plain field names.
#[cfg(test)]
pub(crate) fn field_path(names: &[&str]) -> Path {
    names.iter().map(|n| PathElement::Field((*n).to_string())).collect()
}

/// A set of field paths (each path is a member; prefixes are not implicitly members).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldSet {
    paths: BTreeSet<Path>,
}

impl FieldSet {
    /// An empty set.
    pub(crate) fn new() -> FieldSet {
        FieldSet::default()
    }

    /// Adds a path.
    pub(crate) fn insert(&mut self, path: Path) {
        self.paths.insert(path);
    }

    /// Whether the path is a member.
    pub(crate) fn contains(&self, path: &[PathElement]) -> bool {
        self.paths.contains(path)
    }

    /// Whether some member lies strictly below `prefix`.
    pub(crate) fn has_descendant(&self, prefix: &[PathElement]) -> bool {
        self.paths
            .range::<[PathElement], _>((std::ops::Bound::Excluded(prefix), std::ops::Bound::Unbounded))
            .next()
            .is_some_and(|p| p.len() > prefix.len() && p.starts_with(prefix))
    }

    /// Whether the path or anything below it is a member.
    pub(crate) fn contains_or_descendant(&self, path: &[PathElement]) -> bool {
        self.contains(path) || self.has_descendant(path)
    }

    /// True when the set has no members.
    pub(crate) fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Iterates over the members in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Path> {
        self.paths.iter()
    }

    /// Members of either set.
    pub(crate) fn union(&self, other: &FieldSet) -> FieldSet {
        FieldSet { paths: self.paths.union(&other.paths).cloned().collect() }
    }

    /// Members of `self` not in `other`.
    pub(crate) fn difference(&self, other: &FieldSet) -> FieldSet {
        FieldSet { paths: self.paths.difference(&other.paths).cloned().collect() }
    }

    /// Members of both sets.
    pub(crate) fn intersection(&self, other: &FieldSet) -> FieldSet {
        FieldSet { paths: self.paths.intersection(&other.paths).cloned().collect() }
    }

    /// Encodes the set as a `FieldsV1` JSON object.
    pub(crate) fn to_fields_v1(&self) -> Value {
        #[derive(Default)]
        struct Node {
            member: bool,
            children: std::collections::BTreeMap<PathElement, Node>,
        }
        fn emit(node: &Node) -> Value {
            let mut m = Map::new();
            if node.member && !node.children.is_empty() {
                m.insert(".".to_string(), Value::Object(Map::new()));
            }
            for (pe, child) in &node.children {
                m.insert(pe.to_fields_key(), emit(child));
            }
            Value::Object(m)
        }
        let mut root = Node::default();
        for p in &self.paths {
            let mut cur = &mut root;
            for pe in p {
                cur = cur.children.entry(pe.clone()).or_default();
            }
            cur.member = true;
        }
        emit(&root)
    }

    /// Decodes a `FieldsV1` JSON object.
    pub(crate) fn from_fields_v1(v: &Value) -> Result<FieldSet, String> {
        fn walk(v: &Value, prefix: &mut Path, out: &mut FieldSet) -> Result<(), String> {
            let Value::Object(m) = v else {
                return Err("FieldsV1 nodes must be JSON objects".to_string());
            };
            for (k, child) in m {
                if k == "." {
                    if !prefix.is_empty() {
                        out.insert(prefix.clone());
                    }
                    continue;
                }
                let Some(pe) = PathElement::from_fields_key(k)? else {
                    continue;
                };
                prefix.push(pe);
                let leaf = matches!(child, Value::Object(cm) if cm.is_empty());
                if leaf {
                    out.insert(prefix.clone());
                } else {
                    walk(child, prefix, out)?;
                }
                prefix.pop();
            }
            Ok(())
        }
        let mut out = FieldSet::new();
        walk(v, &mut Vec::new(), &mut out)?;
        Ok(out)
    }
}

impl FromIterator<Path> for FieldSet {
    fn from_iter<T: IntoIterator<Item = Path>>(iter: T) -> Self {
        FieldSet { paths: iter.into_iter().collect() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_v1_round_trip_and_format() {
        let text = r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{}}},"f:finalizers":{"v:\"a\"":{}}}}"#;
        let v: Value = serde_json::from_str(text).unwrap();
        let set = FieldSet::from_fields_v1(&v).unwrap();
        assert_eq!(set.iter().count(), 5);
        assert!(set.contains(&field_path(&["metadata", "labels"])));
        assert!(!set.contains(&field_path(&["metadata"])));
        assert_eq!(set.to_fields_v1().to_string(), text);
    }

    #[test]
    fn display_paths() {
        let p = vec![
            PathElement::Field("spec".into()),
            PathElement::Key(vec![("name".into(), json!("nginx"))]),
            PathElement::Field("image".into()),
        ];
        assert_eq!(path_to_string(&p), ".spec[name=\"nginx\"].image");
        assert_eq!(path_to_string(&[PathElement::Value(json!("x"))]), "[=\"x\"]");
    }

    #[test]
    fn descendants() {
        let mut s = FieldSet::new();
        s.insert(field_path(&["a", "b", "c"]));
        assert!(s.has_descendant(&field_path(&["a"])));
        assert!(s.has_descendant(&field_path(&["a", "b"])));
        assert!(!s.has_descendant(&field_path(&["a", "b", "c"])));
        assert!(!s.has_descendant(&field_path(&["b"])));
    }

    #[test]
    fn bad_fields_rejected() {
        assert!(FieldSet::from_fields_v1(&json!({"k:notjson": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"f:a": 1})).is_err());
        // unknown prefixes are dropped
        assert!(FieldSet::from_fields_v1(&json!({"r:a": {}})).unwrap().is_empty());
    }
}
