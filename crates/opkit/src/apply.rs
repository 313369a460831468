//! Server-side apply helpers: send the desired state of an object (or of its status) as an
//! apply patch owned by a field manager, forcing ownership of conflicting fields as
//! controllers do (controller-runtime's `client.Apply` with `client.ForceOwnership`).

use std::fmt::Debug;

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Errors from the apply helpers.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The object has no `metadata.name`.
    #[error("the object to apply has no metadata.name")]
    MissingName,
    /// The object could not be serialized to JSON.
    #[error("serializing the object to apply: {0}")]
    Serialize(#[from] serde_json::Error),
    /// The object did not serialize to a JSON object.
    #[error("the object to apply did not serialize to a JSON object")]
    NotAnObject,
    /// The API server refused the apply.
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

/// The apply body for `obj`: its JSON with `apiVersion` and `kind` filled in when absent and
/// `metadata.managedFields` dropped (the server rejects applies that carry them).
pub fn apply_body<K>(obj: &K) -> Result<Value, ApplyError>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let mut value = serde_json::to_value(obj)?;
    let map = value.as_object_mut().ok_or(ApplyError::NotAnObject)?;
    for (key, want) in [("apiVersion", K::api_version(&()).to_string()), ("kind", K::kind(&()).to_string())] {
        let missing = map.get(key).and_then(Value::as_str).is_none_or(str::is_empty);
        if missing {
            map.insert(key.to_string(), Value::String(want));
        }
    }
    if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    Ok(value)
}

fn name_of<K: Resource>(obj: &K) -> Result<String, ApplyError> {
    match obj.meta().name.as_deref() {
        Some(n) if !n.is_empty() => Ok(n.to_string()),
        _ => Err(ApplyError::MissingName),
    }
}

/// The patch parameters used by [`apply`]: server-side apply as `field_manager`, forced.
pub fn apply_params(field_manager: &str) -> PatchParams {
    PatchParams::apply(field_manager).force()
}

/// Server-side applies `obj` as `field_manager`, taking ownership of conflicting fields
/// (`force`), and returns the stored object. Fields this manager applied before and leaves
/// out now are removed. The `Api`'s namespace is used for namespaced kinds.
pub async fn apply<K>(api: &Api<K>, field_manager: &str, obj: &K) -> Result<K, ApplyError>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
{
    let name = name_of(obj)?;
    let body = apply_body(obj)?;
    Ok(api.patch(&name, &apply_params(field_manager), &Patch::Apply(&body)).await?)
}

/// Server-side applies `obj`'s status through the `/status` subresource as `field_manager`,
/// forced, and returns the stored object. Only the fields present in `obj` are owned.
pub async fn apply_status<K>(api: &Api<K>, field_manager: &str, obj: &K) -> Result<K, ApplyError>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
{
    let name = name_of(obj)?;
    let body = apply_body(obj)?;
    Ok(api.patch_status(&name, &apply_params(field_manager), &Patch::Apply(&body)).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
    use serde_json::json;

    #[test]
    fn body_has_type_and_no_managed_fields() {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                managed_fields: Some(vec![ManagedFieldsEntry::default()]),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        let body = apply_body(&cm).expect("body");
        assert_eq!(body["apiVersion"], json!("v1"));
        assert_eq!(body["kind"], json!("ConfigMap"));
        assert!(body["metadata"].get("managedFields").is_none());
        assert_eq!(body["metadata"]["name"], json!("c"));
    }

    #[test]
    fn params_force_with_manager() {
        let p = apply_params("ctl");
        assert!(p.force);
        assert_eq!(p.field_manager.as_deref(), Some("ctl"));
    }

    #[test]
    fn missing_name_is_an_error() {
        assert!(matches!(name_of(&ConfigMap::default()), Err(ApplyError::MissingName)));
    }

    #[tokio::test]
    async fn apply_is_idempotent_and_prunes_dropped_fields() {
        use std::collections::BTreeMap;
        let env = opkit_testenv::TestEnv::start().await.expect("test env");
        let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
        let desired = |keys: &[&str]| ConfigMap {
            metadata: ObjectMeta { name: Some("applied".into()), ..ObjectMeta::default() },
            data: Some(keys.iter().map(|k| (k.to_string(), format!("value-{k}"))).collect::<BTreeMap<_, _>>()),
            ..ConfigMap::default()
        };
        // Created by another manager, then taken over by force.
        let pp = kube::api::PostParams { field_manager: Some("creator".into()), ..Default::default() };
        cms.create(&pp, &desired(&["a", "b", "c"])).await.expect("create");
        let second = apply(&cms, "opkit-test", &desired(&["a", "b"])).await.expect("first");
        assert_eq!(second.data, desired(&["a", "b", "c"]).data);
        let third = apply(&cms, "opkit-test", &desired(&["a", "b"])).await.expect("second");
        // Re-applying the same intent changes nothing.
        assert_eq!(second.metadata.resource_version, third.metadata.resource_version);
        assert_eq!(third.data, desired(&["a", "b", "c"]).data);
        assert!(
            third
                .metadata
                .managed_fields
                .iter()
                .flatten()
                .any(|m| m.manager.as_deref() == Some("opkit-test") && m.operation.as_deref() == Some("Apply"))
        );

        // A key only this manager applied is removed when it is left out again; keys the
        // creator also owns stay.
        let added = apply(&cms, "opkit-test", &desired(&["a", "b", "d"])).await.expect("add d");
        assert_eq!(added.data, desired(&["a", "b", "c", "d"]).data);
        let pruned = apply(&cms, "opkit-test", &desired(&["a"])).await.expect("prune");
        assert_eq!(pruned.data, desired(&["a", "b", "c"]).data);

        // Force takes over a value another manager set, and an object read back (with
        // managedFields) can be applied as is.
        let mut theirs = pruned.clone();
        theirs.data = Some(BTreeMap::from([("a".to_string(), "theirs".to_string())]));
        let theirs = apply(&cms, "someone-else", &theirs).await.expect("conflicting apply");
        assert_eq!(theirs.data.as_ref().and_then(|d| d.get("a")).map(String::as_str), Some("theirs"));
        let ours = apply(&cms, "opkit-test", &desired(&["a"])).await.expect("forced");
        assert_eq!(ours.data.as_ref().and_then(|d| d.get("a")).map(String::as_str), Some("value-a"));
        assert!(matches!(apply(&cms, "opkit-test", &ConfigMap::default()).await, Err(ApplyError::MissingName)));
    }
}
