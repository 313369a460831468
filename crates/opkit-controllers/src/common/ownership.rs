//! Ownership as the workload controllers use it: whether an object is controlled by an owner
//! uid, the cache index of objects by controller (kube's `controllerUIDIndex`), the objects an
//! owner controls or may adopt, and releasing an object from its controller.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use opkit::Cache;

/// Whether `meta` has a controller reference whose uid is `uid`.
pub(crate) fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references.iter().flatten().any(|o| o.controller == Some(true) && o.uid == uid)
}

/// The cached pods of namespace `ns` controlled by the owner with `uid`.
pub(crate) fn owned_pods(cache: &Cache, ns: &str, uid: &str) -> Vec<Arc<Pod>> {
    cache
        .list::<Pod>()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns) && controlled_by(&p.metadata, uid))
        .collect()
}

/// The cache index of objects by controller (kube's `controllerUIDIndex`): the
/// controller's uid, or [`orphan_index_key`] for objects without one.
pub(crate) const CONTROLLER_INDEX: &str = "opkit.dev/controller-uid";

/// The [`CONTROLLER_INDEX`] value of orphans in namespace `ns`.
pub(crate) fn orphan_index_key(ns: &str) -> String {
    format!("orphan/{ns}")
}

/// The [`CONTROLLER_INDEX`] values of an object.
pub(crate) fn controller_index<K: Resource>(obj: &K) -> Vec<String> {
    match opkit::owner::controller_of(obj) {
        Some(r) => vec![r.uid.clone()],
        None => vec![orphan_index_key(obj.meta().namespace.as_deref().unwrap_or_default())],
    }
}

/// The cached `K`s of namespace `ns` that the object with `uid` controls, and the
/// namespace's orphans (the only ones it may own), found through [`CONTROLLER_INDEX`]
/// (every cached `K` if that index was not added).
pub(crate) fn controlled_or_orphans<K: opkit::Object>(cache: &Cache, uid: &str, ns: &str) -> Vec<Arc<K>> {
    let all = match cache.by_index::<K>(CONTROLLER_INDEX, uid) {
        Some(mut controlled) => {
            controlled.extend(cache.by_index::<K>(CONTROLLER_INDEX, &orphan_index_key(ns)).unwrap_or_default());
            controlled
        }
        None => cache.list::<K>(),
    };
    all.into_iter().filter(|o| o.meta().namespace.as_deref() == Some(ns)).collect()
}

/// Releases an object from the controller with `owner_uid`: drops that owner reference with
/// a merge patch. An object that is already gone counts as released.
pub(crate) async fn release<K>(api: &kube::Api<K>, name: &str, meta: &ObjectMeta, owner_uid: &str) -> kube::Result<()>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let refs: Vec<&OwnerReference> = meta.owner_references.iter().flatten().filter(|r| r.uid != owner_uid).collect();
    let refs = if refs.is_empty() { serde_json::Value::Null } else { serde_json::json!(refs) };
    let body = serde_json::json!({"metadata": {"ownerReferences": refs}});
    match api.patch(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&body)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}
