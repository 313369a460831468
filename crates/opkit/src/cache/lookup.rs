//! The built-in lookups of every informer: its objects by namespace, and by label
//! `key=value` (controller-runtime's cache reads with `InNamespace` and
//! `MatchingLabels`/`MatchingLabelsSelector`, served from its namespace index). A
//! namespaced or label-selected read looks at the objects of that namespace, or at the
//! objects carrying one of the selector's required labels, not at the whole cache.
//!
//! Updates of an object whose labels did not change allocate nothing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use kube::Resource;
use kube::core::{Expression, Selector, SelectorExt};

/// Where an object is: namespace (`""` for cluster-scoped objects) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    namespace: String,
    name: String,
}

/// Objects by namespace and name, and object keys by label.
pub(super) struct Lookup<K> {
    by_namespace: HashMap<String, HashMap<String, Arc<K>>>,
    by_label: HashMap<String, HashMap<String, HashSet<Key>>>,
}

impl<K> Default for Lookup<K> {
    fn default() -> Self {
        Lookup { by_namespace: HashMap::new(), by_label: HashMap::new() }
    }
}

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

fn labels<K: Resource>(obj: &K) -> &BTreeMap<String, String> {
    obj.meta().labels.as_ref().unwrap_or(&NO_LABELS)
}

fn location<K: Resource>(obj: &K) -> (&str, &str) {
    let m = obj.meta();
    (m.namespace.as_deref().unwrap_or(""), m.name.as_deref().unwrap_or(""))
}

impl<K: Resource> Lookup<K> {
    /// Records the current version of an object.
    pub(super) fn apply(&mut self, obj: &Arc<K>) {
        let (ns, name) = location(&**obj);
        let slot = self.by_namespace.get_mut(ns).and_then(|objects| objects.get_mut(name));
        let previous = match slot {
            Some(slot) => Some(std::mem::replace(slot, obj.clone())),
            None => {
                self.by_namespace.entry(ns.to_string()).or_default().insert(name.to_string(), obj.clone());
                None
            }
        };
        let old = previous.as_deref().map_or(&NO_LABELS, labels);
        let new = labels(&**obj);
        if old != new {
            self.relabel(ns, name, old, new);
        }
    }

    /// Forgets a deleted object.
    pub(super) fn delete(&mut self, obj: &K) {
        let (ns, name) = location(obj);
        let Some(objects) = self.by_namespace.get_mut(ns) else { return };
        let Some(previous) = objects.remove(name) else { return };
        if objects.is_empty() {
            self.by_namespace.remove(ns);
        }
        self.relabel(ns, name, labels(&*previous), &NO_LABELS);
    }

    fn relabel(&mut self, ns: &str, name: &str, old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) {
        let key = Key { namespace: ns.to_string(), name: name.to_string() };
        for (k, v) in old {
            if new.get(k) == Some(v) {
                continue;
            }
            if let Some(values) = self.by_label.get_mut(k) {
                if let Some(keys) = values.get_mut(v) {
                    keys.remove(&key);
                    if keys.is_empty() {
                        values.remove(v);
                    }
                }
                if values.is_empty() {
                    self.by_label.remove(k);
                }
            }
        }
        for (k, v) in new {
            if old.get(k) != Some(v) {
                self.by_label.entry(k.clone()).or_default().entry(v.clone()).or_default().insert(key.clone());
            }
        }
    }

    /// The objects in `namespace`.
    pub(super) fn in_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.by_namespace.get(namespace).map(|objects| objects.values().cloned().collect()).unwrap_or_default()
    }

    /// The objects (in `namespace`, or anywhere when `None`) whose labels match `selector`.
    pub(super) fn matching(&self, namespace: Option<&str>, selector: &Selector) -> Vec<Arc<K>> {
        let matches = |obj: &Arc<K>| selector.matches(labels(&**obj));
        match self.candidates(selector) {
            Some(keys) => keys
                .into_iter()
                .filter(|key| namespace.is_none_or(|ns| ns == key.namespace))
                .filter_map(|key| self.by_namespace.get(&key.namespace)?.get(&key.name))
                .filter(|obj| matches(obj))
                .cloned()
                .collect(),
            None => match namespace {
                Some(ns) => self
                    .by_namespace
                    .get(ns)
                    .into_iter()
                    .flat_map(|o| o.values())
                    .filter(|o| matches(o))
                    .cloned()
                    .collect(),
                None => self.by_namespace.values().flat_map(|o| o.values()).filter(|o| matches(o)).cloned().collect(),
            },
        }
    }

    /// The keys of the objects carrying a label the selector requires (the smallest such
    /// set), or `None` if it requires no particular label value.
    fn candidates(&self, selector: &Selector) -> Option<HashSet<&Key>> {
        let mut best: Option<HashSet<&Key>> = None;
        for expr in selector.clone() {
            let (key, values): (String, Vec<String>) = match expr {
                Expression::Equal(k, v) => (k, vec![v]),
                Expression::In(k, vs) => (k, vs.into_iter().collect()),
                _ => continue,
            };
            let by_value = self.by_label.get(&key);
            let keys: HashSet<&Key> = values.iter().filter_map(|v| by_value.and_then(|m| m.get(v))).flatten().collect();
            if best.as_ref().is_none_or(|b| keys.len() < b.len()) {
                best = Some(keys);
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(ns: &str, name: &str, labels: &[(&str, &str)]) -> Arc<ConfigMap> {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(name.into());
        c.metadata.namespace = Some(ns.into());
        c.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        Arc::new(c)
    }

    fn names(v: Vec<Arc<ConfigMap>>) -> Vec<String> {
        let mut n: Vec<String> = v.iter().filter_map(|c| c.metadata.name.clone()).collect();
        n.sort();
        n
    }

    #[test]
    fn follows_relabels_and_deletes() {
        let mut l = Lookup::default();
        l.apply(&cm("a", "x", &[("app", "web")]));
        l.apply(&cm("a", "y", &[("app", "db")]));
        l.apply(&cm("b", "x", &[("app", "web")]));
        let web: Selector = Expression::Equal("app".into(), "web".into()).into();
        assert_eq!(names(l.in_namespace("a")), ["x", "y"]);
        assert_eq!(names(l.matching(Some("a"), &web)), ["x"]);
        assert_eq!(l.matching(None, &web).len(), 2);
        l.apply(&cm("a", "x", &[("app", "db")]));
        assert!(l.matching(Some("a"), &web).is_empty());
        let db: Selector = Expression::In("app".into(), ["db".to_string()].into()).into();
        assert_eq!(names(l.matching(Some("a"), &db)), ["x", "y"]);
        l.delete(&cm("a", "y", &[]));
        assert_eq!(names(l.matching(Some("a"), &db)), ["x"]);
        assert_eq!(names(l.in_namespace("a")), ["x"]);
        let not_db: Selector = Expression::NotEqual("app".into(), "db".into()).into();
        assert_eq!(names(l.matching(None, &not_db)), ["x"]);
        assert!(l.by_label.get("app").and_then(|v| v.get("web")).is_some_and(|k| k.len() == 1));
    }
}
