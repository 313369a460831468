//! `opkit_cli::cluster_ops` against the in-process control plane: a CRD and a CR of it applied in
//! one stream, idempotent re-apply, errors naming the object, and delete-and-wait.

use std::sync::Mutex;
use std::time::Duration;

use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use opkit_cli::cluster_ops::{self, ClusterOpsError};
use opkit_testenv::TestEnv;
use serde_json::{Value, json};

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "memcacheds.cache.example.com"},
        "spec": {
            "group": "cache.example.com",
            "names": {"kind": "Memcached", "listKind": "MemcachedList", "plural": "memcacheds", "singular": "memcached"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}
                }}}
            }]
        }
    })
}

fn cr(size: i64) -> Value {
    json!({
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": "sample"},
        "spec": {"size": size}
    })
}

fn memcacheds(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Memcached");
    Api::namespaced_with(client.clone(), "default", &ApiResource::from_gvk_with_plural(&gvk, "memcacheds"))
}

#[tokio::test]
async fn apply_crd_and_cr_reapply_errors_and_delete() {
    let env = TestEnv::builder().without_controllers().start().await.expect("testenv");
    let client = env.client();
    let lines = Mutex::new(Vec::<String>::new());
    let progress = |l: &str| lines.lock().expect("lock").push(l.to_string());

    // The CR comes first in the stream: apply must still create the CRD first.
    let objs = vec![cr(3), crd()];
    let applied =
        cluster_ops::apply(&client, &objs, "opkit-test", &progress, cluster_ops::DEFAULT_TIMEOUT).await.expect("apply");
    let names: Vec<String> = applied.iter().map(ToString::to_string).collect();
    assert_eq!(
        names,
        [
            "customresourcedefinition.apiextensions.k8s.io/memcacheds.cache.example.com",
            "memcached.cache.example.com/sample"
        ]
    );
    assert_eq!(applied[1].namespace.as_deref(), Some("default"), "namespaced objects default to the client namespace");
    assert!(lines.lock().expect("lock").iter().any(|l| l == "memcached.cache.example.com/sample serverside-applied"));

    let api = memcacheds(&client);
    let first = api.get("sample").await.expect("CR exists");
    assert_eq!(first.data["spec"]["size"], 3);
    assert!(first.metadata.managed_fields.iter().flatten().any(|m| m.manager.as_deref() == Some("opkit-test")));

    // Re-applying the same stream is a no-op.
    cluster_ops::apply(&client, &objs, "opkit-test", &progress, cluster_ops::DEFAULT_TIMEOUT).await.expect("re-apply");
    let again = api.get("sample").await.expect("CR exists");
    assert_eq!(again.metadata.resource_version, first.metadata.resource_version, "unchanged apply keeps the object");
    // A change goes through, forcing ownership.
    cluster_ops::apply(&client, &[cr(5)], "other-manager", &progress, cluster_ops::DEFAULT_TIMEOUT)
        .await
        .expect("apply change");
    assert_eq!(api.get("sample").await.expect("CR").data["spec"]["size"], 5);

    // An invalid object: the error names it and carries the server's message.
    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_A_Valid_Name"}});
    let err = cluster_ops::apply(&client, &[bad], "opkit-test", &progress, cluster_ops::DEFAULT_TIMEOUT)
        .await
        .expect_err("invalid name");
    let msg = err.to_string();
    assert!(matches!(err, ClusterOpsError::Api { code: 422, .. }), "{msg}");
    assert!(msg.starts_with("apply configmap/Not_A_Valid_Name: 422 Invalid: "), "{msg}");

    // A kind nobody serves.
    let unknown = json!({"apiVersion": "nope.example.com/v1", "kind": "Ghost", "metadata": {"name": "g"}});
    let err = cluster_ops::apply(&client, &[unknown], "opkit-test", &progress, cluster_ops::DEFAULT_TIMEOUT)
        .await
        .expect_err("unknown kind");
    assert!(matches!(err, ClusterOpsError::UnknownKind { .. }), "{err}");
    assert!(err.to_string().contains("ghost.nope.example.com/g"), "{err}");

    // Delete everything and wait until it is gone; the CR goes first (reverse order).
    lines.lock().expect("lock").clear();
    let deleted =
        cluster_ops::delete(&client, &objs, &progress, Some(cluster_ops::DEFAULT_TIMEOUT)).await.expect("delete");
    assert_eq!(deleted.len(), 2);
    assert_eq!(deleted[0].kind, "Memcached");
    assert_eq!(deleted[1].kind, "CustomResourceDefinition");
    assert!(matches!(api.get_opt("sample").await, Ok(None) | Err(_)));
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    assert!(crds.get_opt("memcacheds.cache.example.com").await.expect("get crd").is_none());
    cluster_ops::wait_crds_gone(&client, &["memcacheds.cache.example.com".to_string()], Duration::from_secs(5))
        .await
        .expect("already gone");

    // Deleting again is fine: the CR's kind is not served any more, the CRD is NotFound.
    let again =
        cluster_ops::delete(&client, &objs, &progress, Some(cluster_ops::DEFAULT_TIMEOUT)).await.expect("delete again");
    assert!(again.is_empty());
    let lines = lines.lock().expect("lock").clone();
    assert!(lines.iter().any(|l| l.contains("skipped")), "{lines:?}");
}

#[tokio::test]
async fn waits_time_out_with_a_description() {
    let env = TestEnv::builder().without_controllers().start().await.expect("testenv");
    let client = env.client();
    let err = cluster_ops::wait_deployment_available(&client, "default", "missing", Duration::from_millis(300))
        .await
        .expect_err("no such deployment");
    assert!(matches!(err, ClusterOpsError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("deployment default/missing to become available"), "{err}");
    let err =
        cluster_ops::wait_crds_established(&client, &["nope.example.com".to_string()], Duration::from_millis(300))
            .await
            .expect_err("no such crd");
    assert!(err.to_string().contains("customresourcedefinition nope.example.com to be established"), "{err}");
}

#[tokio::test]
async fn deployment_becomes_available_in_the_simulated_cluster() {
    let env = TestEnv::start().await.expect("testenv");
    let client = env.client();
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}
            }
        }
    });
    cluster_ops::apply(&client, &[deployment], "opkit-test", &|_| {}, cluster_ops::DEFAULT_TIMEOUT)
        .await
        .expect("apply");
    cluster_ops::wait_deployment_available(&client, "default", "web", Duration::from_secs(60))
        .await
        .expect("deployment becomes available");
}
