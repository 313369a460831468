//! Owner references, as controller-runtime's `controllerutil`: building a controller
//! reference to an owner, setting it on a dependent object (refusing a second controller or
//! an owner in another namespace), plain owner references and lookups.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;

/// Why an owner reference could not be set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OwnerError {
    /// The object already has a controller reference to a different owner
    /// (controller-runtime's `AlreadyOwnedError`).
    #[error("Object {namespace}/{name} is already owned by another {owner_kind} controller {owner_name}")]
    AlreadyOwned {
        /// Namespace of the dependent object (empty when cluster-scoped).
        namespace: String,
        /// Name of the dependent object.
        name: String,
        /// Kind of the existing controller.
        owner_kind: String,
        /// Name of the existing controller.
        owner_name: String,
    },
    /// A namespaced owner cannot own an object in another namespace.
    #[error(
        "cross-namespace owner references are disallowed, owner's namespace {owner_namespace}, obj's namespace {object_namespace}"
    )]
    CrossNamespace {
        /// Namespace of the owner.
        owner_namespace: String,
        /// Namespace of the dependent object.
        object_namespace: String,
    },
    /// A namespaced owner cannot own a cluster-scoped object.
    #[error("cluster-scoped resource must not have a namespace-scoped owner, owner's namespace {owner_namespace}")]
    ClusterScopedDependent {
        /// Namespace of the owner.
        owner_namespace: String,
    },
    /// The owner has no name or uid yet (it was not read from the API server).
    #[error("the owner {kind} has no {missing}; owner references need an object read from the API server")]
    MissingIdentity {
        /// Kind of the owner.
        kind: String,
        /// `"metadata.name"` or `"metadata.uid"`.
        missing: &'static str,
    },
}

/// Builds a plain owner reference (no `controller`, no `blockOwnerDeletion`) to `owner`.
pub fn owner_reference<O>(owner: &O) -> Result<OwnerReference, OwnerError>
where
    O: Resource<DynamicType = ()>,
{
    let kind = O::kind(&()).to_string();
    let meta = owner.meta();
    let name = match meta.name.as_deref() {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => {
            return Err(OwnerError::MissingIdentity { kind, missing: "metadata.name" });
        }
    };
    let uid = match meta.uid.as_deref() {
        Some(u) if !u.is_empty() => u.to_string(),
        _ => {
            return Err(OwnerError::MissingIdentity { kind, missing: "metadata.uid" });
        }
    };
    Ok(OwnerReference {
        api_version: O::api_version(&()).to_string(),
        kind,
        name,
        uid,
        controller: None,
        block_owner_deletion: None,
    })
}

/// Builds the controller reference to `owner`, with `controller: true` and
/// `blockOwnerDeletion: true`; `None` when the owner has no name or uid yet.
pub fn controller_reference<O>(owner: &O) -> Option<OwnerReference>
where
    O: Resource<DynamicType = ()>,
{
    owner_reference(owner).ok().map(|r| OwnerReference {
        controller: Some(true),
        block_owner_deletion: Some(true),
        ..r
    })
}

/// Makes `owner` the managing controller of `object` (controller-runtime's
/// `SetControllerReference`): the reference has `controller: true` and
/// `blockOwnerDeletion: true`, replaces an existing reference to the same owner, and is
/// refused when another controller already owns the object, when the owner is namespaced
/// and the object is in another namespace, or when the object is cluster-scoped and the
/// owner is not. A cluster-scoped owner may own objects anywhere.
pub fn set_controller_reference<O, C>(owner: &O, object: &mut C) -> Result<(), OwnerError>
where
    O: Resource<DynamicType = ()>,
    C: Resource,
{
    validate_owner(owner, object)?;
    let reference =
        OwnerReference { controller: Some(true), block_owner_deletion: Some(true), ..owner_reference(owner)? };
    if let Some(existing) = controller_of(object)
        && !refer_same_object(existing, &reference)
    {
        let meta = object.meta();
        return Err(OwnerError::AlreadyOwned {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            owner_kind: existing.kind.clone(),
            owner_name: existing.name.clone(),
        });
    }
    upsert_owner_reference(object, reference);
    Ok(())
}

/// Adds (or updates) a plain, non-controller owner reference to `owner` on `object`
/// (controller-runtime's `SetOwnerReference`). An existing reference to the same owner keeps
/// its `controller` and `blockOwnerDeletion` flags.
pub fn set_owner_reference<O, C>(owner: &O, object: &mut C) -> Result<(), OwnerError>
where
    O: Resource<DynamicType = ()>,
    C: Resource,
{
    validate_owner(owner, object)?;
    let mut reference = owner_reference(owner)?;
    if let Some(existing) = object.meta().owner_references.iter().flatten().find(|r| refer_same_object(r, &reference)) {
        reference.controller = existing.controller;
        reference.block_owner_deletion = existing.block_owner_deletion;
    }
    upsert_owner_reference(object, reference);
    Ok(())
}

/// Removes every owner reference to `owner` from `object`; returns whether one was removed.
pub fn remove_owner_reference<O, C>(owner: &O, object: &mut C) -> bool
where
    O: Resource<DynamicType = ()>,
    C: Resource,
{
    let Some(name) = owner.meta().name.clone() else {
        return false;
    };
    let target = OwnerReference {
        api_version: O::api_version(&()).to_string(),
        kind: O::kind(&()).to_string(),
        name,
        ..OwnerReference::default()
    };
    let Some(refs) = object.meta_mut().owner_references.as_mut() else {
        return false;
    };
    let before = refs.len();
    refs.retain(|r| !refer_same_object(r, &target));
    let removed = refs.len() != before;
    if refs.is_empty() {
        object.meta_mut().owner_references = None;
    }
    removed
}

/// The owner reference marked `controller: true` on `object`, if any (`metav1.GetControllerOf`).
pub fn controller_of<C: Resource>(object: &C) -> Option<&OwnerReference> {
    object.meta().owner_references.iter().flatten().find(|r| r.controller == Some(true))
}

/// Whether `object` has a controller reference to `owner` (same group, kind and name).
pub fn is_controlled_by<O, C>(owner: &O, object: &C) -> bool
where
    O: Resource<DynamicType = ()>,
    C: Resource,
{
    let (Some(existing), Some(name)) = (controller_of(object), owner.meta().name.as_deref()) else {
        return false;
    };
    group_of(&existing.api_version) == group_of(&O::api_version(&()))
        && existing.kind == O::kind(&())
        && existing.name == name
}

/// Whether `object` has any owner reference to `owner` (same group, kind and name).
pub fn has_owner_reference<O, C>(owner: &O, object: &C) -> bool
where
    O: Resource<DynamicType = ()>,
    C: Resource,
{
    let Some(name) = owner.meta().name.as_deref() else {
        return false;
    };
    let api_version = O::api_version(&());
    let kind = O::kind(&());
    object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .any(|r| group_of(&r.api_version) == group_of(&api_version) && r.kind == kind && r.name == name)
}

fn validate_owner<O: Resource, C: Resource>(owner: &O, object: &C) -> Result<(), OwnerError> {
    let owner_ns = owner.meta().namespace.as_deref().unwrap_or_default();
    if owner_ns.is_empty() {
        return Ok(());
    }
    let object_ns = object.meta().namespace.as_deref().unwrap_or_default();
    if object_ns.is_empty() {
        return Err(OwnerError::ClusterScopedDependent { owner_namespace: owner_ns.to_string() });
    }
    if owner_ns != object_ns {
        return Err(OwnerError::CrossNamespace {
            owner_namespace: owner_ns.to_string(),
            object_namespace: object_ns.to_string(),
        });
    }
    Ok(())
}

/// The group of an apiVersion (`apps/v1` → `apps`, `v1` → ``).
fn group_of(api_version: &str) -> &str {
    match api_version.split_once('/') {
        Some((group, _)) => group,
        None => "",
    }
}

/// Two references name the same object when group, kind and name agree (the version and uid
/// may differ), as controller-runtime's `referSameObject`.
fn refer_same_object(a: &OwnerReference, b: &OwnerReference) -> bool {
    group_of(&a.api_version) == group_of(&b.api_version) && a.kind == b.kind && a.name == b.name
}

fn upsert_owner_reference<C: Resource>(object: &mut C, reference: OwnerReference) {
    let refs = object.meta_mut().owner_references.get_or_insert_with(Vec::new);
    match refs.iter_mut().find(|r| refer_same_object(r, &reference)) {
        Some(slot) => *slot = reference,
        None => refs.push(reference),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn deployment(ns: &str, name: &str, uid: &str) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                uid: Some(uid.into()),
                ..ObjectMeta::default()
            },
            ..Deployment::default()
        }
    }

    fn config_map(ns: Option<&str>) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta { name: Some("child".into()), namespace: ns.map(Into::into), ..ObjectMeta::default() },
            ..ConfigMap::default()
        }
    }

    #[test]
    fn sets_controller_reference_with_flags() {
        let owner = deployment("ns", "web", "u1");
        let mut cm = config_map(Some("ns"));
        set_controller_reference(&owner, &mut cm).expect("set");
        let refs = cm.metadata.owner_references.expect("refs");
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].api_version, "apps/v1");
        assert_eq!(refs[0].kind, "Deployment");
        assert_eq!(refs[0].name, "web");
        assert_eq!(refs[0].uid, "u1");
        assert_eq!(refs[0].controller, Some(true));
        assert_eq!(refs[0].block_owner_deletion, Some(true));
    }

    #[test]
    fn setting_twice_is_idempotent_and_updates_uid() {
        let mut cm = config_map(Some("ns"));
        set_controller_reference(&deployment("ns", "web", "u1"), &mut cm).expect("first");
        set_controller_reference(&deployment("ns", "web", "u2"), &mut cm).expect("second");
        let refs = cm.metadata.owner_references.expect("refs");
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].uid, "u2");
    }

    #[test]
    fn refuses_second_controller() {
        let mut cm = config_map(Some("ns"));
        set_controller_reference(&deployment("ns", "web", "u1"), &mut cm).expect("first");
        let err = set_controller_reference(&deployment("ns", "other", "u2"), &mut cm).expect_err("already owned");
        assert!(matches!(err, OwnerError::AlreadyOwned { ref owner_name, .. } if owner_name == "web"));
        assert_eq!(err.to_string(), "Object ns/child is already owned by another Deployment controller web");
    }

    #[test]
    fn plain_owner_reference_coexists_with_controller() {
        let mut cm = config_map(Some("ns"));
        set_controller_reference(&deployment("ns", "web", "u1"), &mut cm).expect("controller");
        set_owner_reference(&deployment("ns", "other", "u2"), &mut cm).expect("owner");
        set_owner_reference(&deployment("ns", "web", "u1"), &mut cm).expect("keeps flags");
        let refs = cm.metadata.owner_references.clone().expect("refs");
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[0].controller, Some(true));
        assert_eq!(refs[1].controller, None);
        assert!(is_controlled_by(&deployment("ns", "web", "u1"), &cm));
        assert!(!is_controlled_by(&deployment("ns", "other", "u2"), &cm));
        assert!(has_owner_reference(&deployment("ns", "other", "u2"), &cm));
        assert!(remove_owner_reference(&deployment("ns", "other", "u2"), &mut cm));
        assert!(!has_owner_reference(&deployment("ns", "other", "u2"), &cm));
        assert!(remove_owner_reference(&deployment("ns", "web", "u1"), &mut cm));
        assert!(cm.metadata.owner_references.is_none());
    }

    #[test]
    fn refuses_cross_namespace_and_cluster_scoped_dependents() {
        let owner = deployment("a", "web", "u1");
        let err = set_controller_reference(&owner, &mut config_map(Some("b"))).expect_err("x-ns");
        assert!(matches!(err, OwnerError::CrossNamespace { .. }));
        let err = set_controller_reference(&owner, &mut config_map(None)).expect_err("cluster");
        assert!(matches!(err, OwnerError::ClusterScopedDependent { .. }));
    }

    #[test]
    fn cluster_scoped_owner_may_own_namespaced_object() {
        let owner = Namespace {
            metadata: ObjectMeta { name: Some("team".into()), uid: Some("u9".into()), ..ObjectMeta::default() },
            ..Namespace::default()
        };
        let mut cm = config_map(Some("team"));
        set_controller_reference(&owner, &mut cm).expect("allowed");
        let r = controller_of(&cm).expect("controller");
        assert_eq!((r.api_version.as_str(), r.kind.as_str()), ("v1", "Namespace"));
    }

    #[test]
    fn owner_without_uid_is_refused() {
        let mut owner = deployment("ns", "web", "");
        owner.metadata.uid = None;
        let err = set_controller_reference(&owner, &mut config_map(Some("ns"))).expect_err("uid");
        assert!(matches!(err, OwnerError::MissingIdentity { missing: "metadata.uid", .. }));
        assert!(controller_reference(&owner).is_none());
    }

    #[tokio::test]
    async fn controller_reference_round_trips_through_the_api_server() {
        use kube::api::{Api, PostParams};
        let env = opkit_testenv::TestEnv::start().await.expect("test env");
        let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
        let pp = PostParams::default();
        let owner = cms.create(&pp, &config_map_named("owner")).await.expect("owner");
        let other = cms.create(&pp, &config_map_named("other")).await.expect("other");

        let mut child = config_map_named("child");
        set_controller_reference(&owner, &mut child).expect("set");
        let child = cms.create(&pp, &child).await.expect("child");
        let refs = child.metadata.owner_references.clone().expect("stored refs");
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].uid, owner.metadata.uid.clone().expect("uid"));
        assert_eq!(refs[0].controller, Some(true));
        assert_eq!(refs[0].block_owner_deletion, Some(true));
        assert!(is_controlled_by(&owner, &child));

        let mut stolen = child.clone();
        let err = set_controller_reference(&other, &mut stolen).expect_err("refused");
        assert!(matches!(err, OwnerError::AlreadyOwned { .. }));
        assert_eq!(stolen.metadata.owner_references, child.metadata.owner_references);

        // A cluster-scoped owner is allowed for a namespaced dependent.
        let namespaces: Api<Namespace> = Api::all(env.client());
        let ns = namespaces.get("default").await.expect("default namespace");
        let mut dependent = config_map_named("of-namespace");
        set_controller_reference(&ns, &mut dependent).expect("cluster-scoped owner");
        let dependent = cms.create(&pp, &dependent).await.expect("created");
        let stored = controller_of(&dependent).expect("controller");
        assert_eq!(stored.kind, "Namespace");
    }

    fn config_map_named(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }
}
