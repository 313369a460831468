//! What the collector's watches decode: only `apiVersion`, `kind` and `metadata` of each
//! object (it reads nothing else), skipping the rest of the JSON without building it, as
//! kube's garbage collector does with metadata-only informers.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;
use kube::core::{DynamicResourceScope, Resource, TypeMeta};
use serde::{Deserialize, Serialize};

/// An object of any resource, with its metadata only.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub(super) struct MetaObject {
    /// `apiVersion` and `kind`, when present.
    #[serde(flatten, default)]
    pub types: Option<TypeMeta>,
    /// The object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
}

impl Resource for MetaObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }
    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_metadata_and_skips_the_rest() {
        let o: MetaObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "uid": "u1", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u0", "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Running"}
        }))
        .expect("test object");
        assert_eq!(o.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(o.metadata.owner_references.as_ref().map(Vec::len), Some(1));
        assert_eq!(o.types.map(|t| t.kind), Some("Pod".to_string()));
        let bare: MetaObject =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "x"}})).expect("test object");
        assert_eq!(bare.metadata.name.as_deref(), Some("x"));
    }
}
