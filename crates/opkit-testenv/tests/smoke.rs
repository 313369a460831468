//! Smoke tests: kube-rs CRUD against a fresh TestEnv.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use opkit_testenv::TestEnv;

#[tokio::test]
async fn configmap_crud() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("a".into());
    cm.data = Some([("k".to_string(), "v".to_string())].into());
    let created = api.create(&PostParams::default(), &cm).await.expect("create");
    assert!(created.metadata.uid.is_some());
    let list = api.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 1);
    api.delete("a", &DeleteParams::default()).await.expect("delete");
    let err = api.get("a").await.expect_err("gone");
    match err {
        kube::Error::Api(s) => assert_eq!(s.code, 404),
        other => panic!("unexpected {other}"),
    }
}

#[tokio::test]
async fn create_by_apply_records_an_apply_manager_and_is_idempotent() {
    use kube::api::{Patch, PatchParams};
    let env = TestEnv::start().await.expect("start");
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied", "labels": {"a": "1"}}, "data": {"k": "v"}});
    let pp = PatchParams::apply("tester");
    let first = api.patch("applied", &pp, &Patch::Apply(&cm)).await.expect("apply create");
    let fields = first.metadata.managed_fields.clone().unwrap_or_default();
    assert_eq!(fields.len(), 1, "{fields:?}");
    assert_eq!(fields[0].operation.as_deref(), Some("Apply"));
    assert_eq!(fields[0].manager.as_deref(), Some("tester"));
    let second = api.patch("applied", &pp, &Patch::Apply(&cm)).await.expect("apply again");
    assert_eq!(first.metadata.resource_version, second.metadata.resource_version, "identical apply is a no-op");
    // Dropping a label the manager applied removes it.
    let without = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"k": "v"}});
    let third = api.patch("applied", &pp, &Patch::Apply(&without)).await.expect("apply without label");
    assert!(third.metadata.labels.unwrap_or_default().is_empty());
}

#[tokio::test]
async fn events_k8s_io_events_are_core_events_too() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event;
    let env = TestEnv::start().await.expect("start");
    let events: Api<Event> = Api::namespaced(env.client(), "default");
    let e: Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web.1"},
        "eventTime": "2026-11-22T05:00:00.000000Z",
        "reportingController": "deployment-controller",
        "reportingInstance": "opkit",
        "action": "Scale",
        "reason": "ScalingReplicaSet",
        "note": "Scaled up replica set web-1 to 3",
        "type": "Normal",
        "regarding": {"kind": "Deployment", "name": "web", "namespace": "default", "apiVersion": "apps/v1"}
    }))
    .expect("event");
    events.create(&PostParams::default(), &e).await.expect("create");
    let core: Api<CoreEvent> = Api::namespaced(env.client(), "default");
    let seen = core.get("web.1").await.expect("visible as a core event");
    assert_eq!(seen.message.as_deref(), Some("Scaled up replica set web-1 to 3"));
    assert_eq!(seen.involved_object.name.as_deref(), Some("web"));
    assert_eq!(seen.reporting_component.as_deref(), Some("deployment-controller"));
    let back = events.get("web.1").await.expect("and as events.k8s.io");
    assert_eq!(back.note.as_deref(), Some("Scaled up replica set web-1 to 3"));
    assert_eq!(back.regarding.and_then(|r| r.kind).as_deref(), Some("Deployment"));
}
