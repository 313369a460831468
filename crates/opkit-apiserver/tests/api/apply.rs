//! Server-side apply: conflicts between field managers, forcing, and managedFields.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::common::{env, expect_status};

fn manifest(replicas: i32) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}
            }
        }
    })
}

fn replicas_only(replicas: i32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": replicas}})
}

fn entry<'a>(d: &'a Deployment, manager: &str) -> Option<&'a ManagedFieldsEntry> {
    d.metadata
        .managed_fields
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|e| e.manager.as_deref() == Some(manager) && e.operation.as_deref() == Some("Apply"))
}

fn owns_replicas(d: &Deployment, manager: &str) -> bool {
    entry(d, manager).and_then(|e| e.fields_v1.as_ref()).is_some_and(|f| f.0.pointer("/f:spec/f:replicas").is_some())
}

#[tokio::test]
async fn conflicting_appliers_conflict_until_forced() {
    let env = env().await;
    let api: Api<Deployment> = Api::namespaced(env.client(), "default");

    let first = api
        .patch("web", &PatchParams::apply("alice"), &Patch::Apply(manifest(2)))
        .await
        .expect("alice creates by apply");
    assert_eq!(first.spec.as_ref().and_then(|s| s.replicas), Some(2));
    assert!(owns_replicas(&first, "alice"), "alice owns .spec.replicas: {:?}", first.metadata.managed_fields);
    let e = entry(&first, "alice").expect("alice's entry");
    assert_eq!(e.api_version.as_deref(), Some("apps/v1"));
    assert_eq!(e.fields_type.as_deref(), Some("FieldsV1"));

    // Bob applies a different value without force: 409 Conflict naming alice and the field.
    let s = expect_status(
        api.patch("web", &PatchParams::apply("bob"), &Patch::Apply(replicas_only(5))).await,
        409,
        "Conflict",
    );
    assert!(s.message.contains("alice") && s.message.contains(".spec.replicas"), "message: {}", s.message);
    let causes = s.details.map(|d| d.causes).unwrap_or_default();
    assert!(
        causes.iter().any(|c| c.reason == "FieldManagerConflict" && c.field == ".spec.replicas"),
        "causes: {causes:?}"
    );
    let unchanged = api.get("web").await.expect("get");
    assert_eq!(unchanged.spec.as_ref().and_then(|s| s.replicas), Some(2), "a conflicting apply changes nothing");

    // Applying the same value is not a conflict: both become co-owners.
    let shared = api
        .patch("web", &PatchParams::apply("carol"), &Patch::Apply(replicas_only(2)))
        .await
        .expect("same value is shared");
    assert!(owns_replicas(&shared, "alice") && owns_replicas(&shared, "carol"), "{:?}", shared.metadata.managed_fields);

    // Forcing takes ownership away from everyone else.
    let forced = api
        .patch("web", &PatchParams::apply("bob").force(), &Patch::Apply(replicas_only(5)))
        .await
        .expect("forced apply");
    assert_eq!(forced.spec.as_ref().and_then(|s| s.replicas), Some(5));
    assert!(owns_replicas(&forced, "bob"), "bob owns replicas: {:?}", forced.metadata.managed_fields);
    assert!(!owns_replicas(&forced, "alice"), "alice lost replicas: {:?}", forced.metadata.managed_fields);
    assert!(!owns_replicas(&forced, "carol"), "carol lost replicas: {:?}", forced.metadata.managed_fields);
    let alice = entry(&forced, "alice").expect("alice still manages the rest");
    assert!(alice.fields_v1.as_ref().is_some_and(|f| f.0.pointer("/f:spec/f:template").is_some()));

    // Now alice is the one who conflicts.
    expect_status(api.patch("web", &PatchParams::apply("alice"), &Patch::Apply(manifest(2))).await, 409, "Conflict");
    assert_eq!(api.get("web").await.expect("get").spec.and_then(|s| s.replicas), Some(5));
}

#[tokio::test]
async fn apply_requires_a_field_manager_and_records_updates() {
    let env = env().await;
    let api: Api<Deployment> = Api::namespaced(env.client(), "default");
    api.patch("web", &PatchParams::apply("alice"), &Patch::Apply(manifest(1))).await.expect("apply");

    // A non-apply write is tracked as an Update by its manager.
    let pp = PatchParams { field_manager: Some("scaler".into()), ..Default::default() };
    let scaled = api.patch("web", &pp, &Patch::Merge(json!({"spec": {"replicas": 4}}))).await.expect("merge patch");
    let update = scaled
        .metadata
        .managed_fields
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|e| e.manager.as_deref() == Some("scaler"))
        .expect("scaler entry");
    assert_eq!(update.operation.as_deref(), Some("Update"));
    assert!(update.fields_v1.as_ref().is_some_and(|f| f.0.pointer("/f:spec/f:replicas").is_some()));
    assert!(!owns_replicas(&scaled, "alice"), "an update takes the field from the applier");

    // Apply without fieldManager is invalid.
    let body = serde_json::to_vec(&replicas_only(3)).expect("encode");
    let res = crate::common::raw(
        &env.client(),
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/web",
        Some("application/apply-patch+yaml"),
        body,
    )
    .await;
    assert_eq!(res.code, 422, "{}", res.text);
    assert_eq!(res.json["reason"], "Invalid");
}
