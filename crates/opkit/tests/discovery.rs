//! The RestMapper against an in-process API server: built-in kinds and their scopes,
//! resources back to kinds, kinds whose CRDs appear after the first lookup, and the typed
//! errors for what the server does not serve.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::gvk::{GroupVersionKind, GroupVersionResource};
use kube::discovery::{Scope, verbs};
use opkit::discovery::{MappingError, RestMapper};
use opkit_testenv::TestEnv;

/// A CRD for `kind` in group `mapper.opkit.dev`, version v1.
fn crd(kind: &str, plural: &str, scope: &str) -> CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.mapper.opkit.dev")},
        "spec": {
            "group": "mapper.opkit.dev",
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .expect("a CRD")
}

#[tokio::test]
async fn maps_built_in_kinds_with_their_scope() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let mapper = RestMapper::new(env.client());

    let (deployments, caps) =
        mapper.rest_mapping(&GroupVersionKind::gvk("apps", "v1", "Deployment")).await.expect("Deployment");
    assert_eq!((deployments.api_version.as_str(), deployments.plural.as_str()), ("apps/v1", "deployments"));
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(caps.supports_operation(verbs::WATCH));
    assert!(caps.subresources.iter().any(|(sub, _)| sub.plural == "scale"), "{:?}", caps.subresources);

    let (namespaces, caps) =
        mapper.rest_mapping(&GroupVersionKind::gvk("", "v1", "Namespace")).await.expect("Namespace");
    assert_eq!((namespaces.api_version.as_str(), namespaces.plural.as_str()), ("v1", "namespaces"));
    assert_eq!(caps.scope, Scope::Cluster);

    // A clone shares the map, and a resource maps back to its kind.
    let (roles, caps) = mapper
        .clone()
        .kind_for(&GroupVersionResource::gvr("rbac.authorization.k8s.io", "v1", "clusterroles"))
        .await
        .expect("clusterroles");
    assert_eq!(roles.kind, "ClusterRole");
    assert_eq!(caps.scope, Scope::Cluster);
}

#[tokio::test]
async fn finds_kinds_whose_crds_appear_after_the_first_lookup() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let mapper = RestMapper::new(env.client());
    let gadget = GroupVersionKind::gvk("mapper.opkit.dev", "v1", "Gadget");
    let widget = GroupVersionKind::gvk("mapper.opkit.dev", "v1", "Widget");

    // Not served yet: the group/version does not exist.
    let missing = mapper.rest_mapping(&gadget).await;
    assert!(
        matches!(&missing, Err(MappingError::NoKindMatch { api_version, kind }) if api_version == "mapper.opkit.dev/v1" && kind == "Gadget"),
        "{missing:?}"
    );

    env.install_crds([crd("Gadget", "gadgets", "Namespaced")]).await.expect("Gadget CRD");
    let (gadgets, caps) = mapper.rest_mapping(&gadget).await.expect("Gadget after its CRD");
    assert_eq!(gadgets.plural, "gadgets");
    assert_eq!(caps.scope, Scope::Namespaced);

    // The group/version is now known without Widget; its CRD makes the next miss re-fetch.
    assert!(matches!(mapper.rest_mapping(&widget).await, Err(MappingError::NoKindMatch { .. })));
    env.install_crds([crd("Widget", "widgets", "Cluster")]).await.expect("Widget CRD");
    let (widgets, caps) = mapper.rest_mapping(&widget).await.expect("Widget after its CRD");
    assert_eq!(widgets.plural, "widgets");
    assert_eq!(caps.scope, Scope::Cluster);
    let (by_resource, _) =
        mapper.kind_for(&GroupVersionResource::gvr("mapper.opkit.dev", "v1", "widgets")).await.expect("widgets");
    assert_eq!(by_resource.kind, "Widget");
}

#[tokio::test]
async fn unknown_kinds_and_resources_are_typed_errors() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let mapper = RestMapper::new(env.client());

    // In a served group/version, and in one that is not served.
    for gvk in [GroupVersionKind::gvk("apps", "v1", "Gizmo"), GroupVersionKind::gvk("nowhere.opkit.dev", "v1", "Gizmo")]
    {
        let missing = mapper.rest_mapping(&gvk).await;
        assert!(
            matches!(&missing, Err(MappingError::NoKindMatch { kind, .. }) if kind == "Gizmo"),
            "{gvk:?}: {missing:?}"
        );
    }
    let missing = mapper.kind_for(&GroupVersionResource::gvr("", "v1", "gizmos")).await;
    assert!(
        matches!(&missing, Err(MappingError::NoResourceMatch { api_version, resource }) if api_version == "v1" && resource == "gizmos"),
        "{missing:?}"
    );
    let text = missing.expect_err("gizmos").to_string();
    assert_eq!(text, r#"the server doesn't have a resource type "gizmos" in version "v1""#);
}
