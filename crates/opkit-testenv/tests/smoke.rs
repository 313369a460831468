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
