//! Finalizers: deletion waits for them, removing the last one completes the deletion, and
//! no new finalizer may be added to an object that is being deleted.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;

use crate::common::{FlightTicket, env, env_with_flights, expect_status, flight, within};

#[tokio::test]
async fn finalizer_blocks_deletion_until_removed() {
    let env = env().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("guarded".into()),
            finalizers: Some(vec!["example.com/guard".into()]),
            ..Default::default()
        },
        ..Default::default()
    };
    let created = api.create(&PostParams::default(), &cm).await.expect("create");
    let uid = created.metadata.uid.clone().expect("uid");

    let deleted = api.delete("guarded", &DeleteParams::default()).await.expect("delete");
    let pending = deleted.left().expect("deletion with a finalizer returns the object, not a Status");
    assert!(pending.metadata.deletion_timestamp.is_some(), "deletionTimestamp set");

    let still = api.get("guarded").await.expect("object kept while finalizers remain");
    assert!(still.metadata.deletion_timestamp.is_some());
    assert_eq!(still.metadata.finalizers.as_deref(), Some(&["example.com/guard".to_string()][..]));

    // Deleting again is accepted and changes nothing.
    let again = api.delete("guarded", &DeleteParams::default()).await.expect("second delete");
    assert!(again.is_left());
    assert_eq!(
        api.get("guarded").await.expect("still there").metadata.deletion_timestamp,
        still.metadata.deletion_timestamp
    );

    // Other updates remain possible while terminating.
    api.patch("guarded", &PatchParams::default(), &Patch::Merge(json!({"data": {"note": "cleaning up"}})))
        .await
        .expect("update while terminating");

    // Adding a new finalizer while deleting is rejected.
    let s = expect_status(
        api.patch(
            "guarded",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/guard", "example.com/late"]}})),
        )
        .await,
        422,
        "Invalid",
    );
    let causes = s.details.map(|d| d.causes).unwrap_or_default();
    assert!(causes.iter().any(|c| c.field == "metadata.finalizers"), "cause names metadata.finalizers: {causes:?}");

    // Removing the finalizer completes the deletion.
    api.patch("guarded", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .expect("remove finalizer");
    within("deletion to complete", await_condition(api.clone(), "guarded", conditions::is_deleted(&uid)))
        .await
        .expect("await");
    expect_status(api.get("guarded").await, 404, "NotFound");
}

#[tokio::test]
async fn finalizers_on_custom_resources() {
    let env = env_with_flights().await;
    let api: Api<FlightTicket> = Api::namespaced(env.client(), "default");
    let mut ft = flight("fin", "A", "B", 1);
    ft.metadata.finalizers = Some(vec!["flights.com/a".into(), "flights.com/b".into()]);
    api.create(&PostParams::default(), &ft).await.expect("create");
    api.delete("fin", &DeleteParams::default()).await.expect("delete");
    let pending = api.get("fin").await.expect("kept");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert_eq!(pending.metadata.generation, Some(2), "setting deletionTimestamp bumps generation of custom resources");

    // Removing one of two finalizers keeps the object; removing the last deletes it.
    let one_left = api
        .patch(
            "fin",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "remove", "path": "/metadata/finalizers/0"}])).expect("patch"),
            ),
        )
        .await
        .expect("remove first finalizer");
    assert_eq!(one_left.metadata.finalizers.as_deref(), Some(&["flights.com/b".to_string()][..]));
    let mut last = api.get("fin").await.expect("get");
    last.metadata.finalizers = None;
    api.replace("fin", &PostParams::default(), &last).await.expect("remove last finalizer");
    expect_status(api.get("fin").await, 404, "NotFound");
}
