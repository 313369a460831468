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
    let created = api
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    assert!(created.metadata.uid.is_some());
    let list = api.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 1);
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
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
