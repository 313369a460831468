//! What a DELETE answers: kube's `Status` of `Success` naming the object for kinds whose
//! registry does not return the deleted object (ConfigMaps, Deployments …), and the object
//! for those that do (custom resources, pods, services) or when the deletion is pending.

use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use serde_json::json;

use crate::common::{config_map, create_cm, env, env_with_flights, flight, raw};

#[tokio::test]
async fn deleting_a_config_map_answers_kubes_success_status() {
    let env = env().await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let created = create_cm(&cms, "gone").await;
    let uid = created.metadata.uid.expect("uid");

    let status = cms
        .delete("gone", &DeleteParams::default())
        .await
        .expect("delete")
        .right()
        .expect("a ConfigMap DELETE must answer a Status, as kube's generic store does");
    assert_eq!(status.status, Some(kube::core::response::StatusSummary::Success));
    let details = status.details.expect("details");
    assert_eq!(
        (details.name.as_str(), details.kind.as_str(), details.uid.as_str()),
        ("gone", "configmaps", uid.as_str())
    );
    assert_eq!(details.group, "");

    // The raw body, field by field; a group is named for grouped resources.
    let res = raw(
        &env.client(),
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        Some("application/json"),
        serde_json::to_vec(&json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "reader"}, "rules": []}))
        .expect("json"),
    )
    .await;
    assert_eq!(res.code, 201, "{}", res.text);
    let uid = res.json["metadata"]["uid"].clone();
    let res =
        raw(&env.client(), "DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterroles/reader", None, vec![]).await;
    assert_eq!(res.code, 200, "{}", res.text);
    assert_eq!(
        res.json,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": "reader", "group": "rbac.authorization.k8s.io", "kind": "clusterroles", "uid": uid}})
    );

    // A dry-run delete answers the same way and removes nothing.
    create_cm(&cms, "kept").await;
    let dry = DeleteParams { dry_run: true, ..Default::default() };
    assert!(cms.delete("kept", &dry).await.expect("dry-run delete").is_right());
    cms.get("kept").await.expect("a dry-run delete removes nothing");
}

#[tokio::test]
async fn deletes_that_return_the_object_or_are_pending_answer_the_object() {
    let env = env_with_flights().await;
    let tickets = Api::namespaced(env.client(), "default");
    tickets.create(&PostParams::default(), &flight("f1", "A", "B", 1)).await.expect("create ticket");
    let deleted = tickets.delete("f1", &DeleteParams::default()).await.expect("delete ticket");
    assert_eq!(
        deleted.left().expect("a custom resource DELETE returns the object").metadata.name.as_deref(),
        Some("f1")
    );

    let sas: Api<ServiceAccount> = Api::namespaced(env.client(), "default");
    let sa = ServiceAccount {
        metadata: ObjectMeta { name: Some("bot".into()), ..Default::default() },
        ..Default::default()
    };
    sas.create(&PostParams::default(), &sa).await.expect("create service account");
    assert!(sas.delete("bot", &DeleteParams::default()).await.expect("delete service account").is_left());

    // Held by a finalizer: the object, marked, whatever the kind.
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut held = config_map("held", &[]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &held).await.expect("create held");
    let pending = cms.delete("held", &DeleteParams::default()).await.expect("delete held");
    assert!(pending.left().expect("a pending deletion returns the object").metadata.deletion_timestamp.is_some());
}

#[tokio::test]
async fn delete_collection_answers_the_listed_objects() {
    let env = env().await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for name in ["a", "b"] {
        create_cm(&cms, name).await;
    }
    let deleted =
        cms.delete_collection(&DeleteParams::default(), &Default::default()).await.expect("delete collection");
    let list = deleted.left().expect("the list of deleted objects");
    let names: Vec<_> = list.items.iter().filter_map(|c| c.metadata.name.clone()).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(list.items.iter().all(|c| c.metadata.uid.is_some()));
}
