//! Secondary indexes over an informer's cached objects (client-go's `Indexers`,
//! controller-runtime's field indexer): named functions from an object to index values,
//! and for each value the objects that have it, kept up to date as the cache changes, so
//! a controller can find e.g. the pods a ReplicaSet controls without scanning every pod.

use std::collections::HashMap;
use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;
use parking_lot::RwLock;

use crate::object::Kind;

/// Computes the index values of an object (none: not indexed).
pub(super) type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

struct Index<K: Kind> {
    func: IndexFn<K>,
    by_value: HashMap<String, HashMap<ObjectRef<K>, Arc<K>>>,
}

impl<K: Kind> Index<K> {
    fn remove(&mut self, key: &ObjectRef<K>, obj: &K) {
        for v in (self.func)(obj) {
            if let Some(set) = self.by_value.get_mut(&v) {
                set.remove(key);
                if set.is_empty() {
                    self.by_value.remove(&v);
                }
            }
        }
    }

    fn insert(&mut self, key: &ObjectRef<K>, obj: &Arc<K>) {
        for v in (self.func)(obj) {
            self.by_value.entry(v).or_default().insert(key.clone(), obj.clone());
        }
    }
}

/// The named indexes of one informer.
pub(super) struct Indexes<K: Kind> {
    inner: RwLock<HashMap<String, Index<K>>>,
    /// The run-time type of the objects (`()` for typed kinds), for their keys.
    dyntype: K::DynamicType,
}

impl<K: Kind> Indexes<K> {
    /// No indexes yet, over objects of type `dyntype`.
    pub(super) fn new(dyntype: K::DynamicType) -> Self {
        Indexes { inner: RwLock::new(HashMap::new()), dyntype }
    }

    fn key(&self, obj: &K) -> ObjectRef<K> {
        ObjectRef::from_obj_with(obj, self.dyntype.clone())
    }

    /// Adds (or replaces) the index `name`, filled from `current`. Returns false if an
    /// index of that name already existed (it is kept).
    pub(super) fn add(&self, name: &str, func: IndexFn<K>, current: &[Arc<K>]) -> bool {
        let mut all = self.inner.write();
        if all.contains_key(name) {
            return false;
        }
        let mut index = Index { func, by_value: HashMap::new() };
        for obj in current {
            index.insert(&self.key(obj), obj);
        }
        all.insert(name.to_string(), index);
        true
    }

    /// Records that `old` (if any) became `new`.
    pub(super) fn update(&self, old: Option<&K>, new: &Arc<K>) {
        let mut all = self.inner.write();
        if all.is_empty() {
            return;
        }
        let key = self.key(new);
        for index in all.values_mut() {
            if let Some(o) = old {
                index.remove(&key, o);
            }
            index.insert(&key, new);
        }
    }

    /// Records that `old` was deleted.
    pub(super) fn delete(&self, old: &K) {
        let mut all = self.inner.write();
        if all.is_empty() {
            return;
        }
        let key = self.key(old);
        for index in all.values_mut() {
            index.remove(&key, old);
        }
    }

    /// The objects whose index `name` has `value`; `None` if there is no such index.
    pub(super) fn get(&self, name: &str, value: &str) -> Option<Vec<Arc<K>>> {
        let all = self.inner.read();
        let index = all.get(name)?;
        Some(index.by_value.get(value).map(|set| set.values().cloned().collect()).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(name: &str, label: Option<&str>) -> Arc<ConfigMap> {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(name.into());
        c.metadata.namespace = Some("ns".into());
        if let Some(l) = label {
            c.metadata.labels = Some([("app".to_string(), l.to_string())].into());
        }
        Arc::new(c)
    }

    fn by_app() -> IndexFn<ConfigMap> {
        Arc::new(|c: &ConfigMap| {
            c.metadata.labels.iter().flatten().filter(|(k, _)| *k == "app").map(|(_, v)| v.clone()).collect()
        })
    }

    fn names(v: Option<Vec<Arc<ConfigMap>>>) -> Vec<String> {
        let mut n: Vec<String> = v.unwrap_or_default().iter().filter_map(|c| c.metadata.name.clone()).collect();
        n.sort();
        n
    }

    #[test]
    fn follows_updates_and_deletes() {
        let idx = Indexes::<ConfigMap>::new(());
        assert!(idx.get("app", "a").is_none());
        assert!(idx.add("app", by_app(), &[cm("x", Some("a")), cm("y", None)]));
        assert!(!idx.add("app", by_app(), &[]), "kept the first");
        assert_eq!(names(idx.get("app", "a")), ["x"]);
        let (old, new) = (cm("y", None), cm("y", Some("a")));
        idx.update(Some(&old), &new);
        assert_eq!(names(idx.get("app", "a")), ["x", "y"]);
        idx.update(Some(&new), &cm("y", Some("b")));
        assert_eq!(names(idx.get("app", "a")), ["x"]);
        assert_eq!(names(idx.get("app", "b")), ["y"]);
        idx.delete(&cm("x", Some("a")));
        assert_eq!(names(idx.get("app", "a")), Vec::<String>::new());
        idx.update(None, &cm("z", Some("b")));
        assert_eq!(names(idx.get("app", "b")), ["y", "z"]);
    }
}
