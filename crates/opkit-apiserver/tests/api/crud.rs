//! CRUD on built-in resources: ConfigMap, Deployment, Namespace and Secret.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Namespace, PodSpec, PodTemplateSpec, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{config_map, env, expect_status, rv_num};

#[tokio::test]
async fn configmap_create_get_list_replace_patch_delete() {
    let env = env().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");

    let created = api.create(&PostParams::default(), &config_map("settings", &[("a", "1")])).await.expect("create");
    let meta = &created.metadata;
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert!(meta.uid.as_deref().is_some_and(|u| !u.is_empty()), "uid set");
    assert!(meta.creation_timestamp.is_some(), "creationTimestamp set");
    let rv1 = rv_num(meta);

    let got = api.get("settings").await.expect("get");
    assert_eq!(got.data, created.data);
    assert_eq!(got.metadata.resource_version, created.metadata.resource_version);

    let mut other = config_map("other", &[("b", "2")]);
    other.metadata.labels = Some(BTreeMap::from([("tier".to_string(), "x".to_string())]));
    api.create(&PostParams::default(), &other).await.expect("create other");
    let all = api.list(&ListParams::default()).await.expect("list");
    let mut names: Vec<_> = all.items.iter().filter_map(|c| c.metadata.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["other", "settings"]);
    let labelled = api.list(&ListParams::default().labels("tier=x")).await.expect("list by label");
    assert_eq!(labelled.items.len(), 1);
    assert_eq!(labelled.items[0].metadata.name.as_deref(), Some("other"));

    let mut changed = got.clone();
    changed.data = Some(BTreeMap::from([("a".to_string(), "2".to_string())]));
    let replaced = api.replace("settings", &PostParams::default(), &changed).await.expect("replace");
    assert_eq!(replaced.data.as_ref().and_then(|d| d.get("a")).map(String::as_str), Some("2"));
    let rv2 = rv_num(&replaced.metadata);
    assert!(rv2 > rv1, "replace must advance the resourceVersion ({rv1} -> {rv2})");
    assert_eq!(replaced.metadata.uid, created.metadata.uid, "uid is immutable");

    let patched = api
        .patch("settings", &PatchParams::default(), &Patch::Merge(json!({"data": {"c": "3"}})))
        .await
        .expect("merge patch");
    let data = patched.data.expect("data");
    assert_eq!(data.get("a").map(String::as_str), Some("2"));
    assert_eq!(data.get("c").map(String::as_str), Some("3"));
    assert!(rv_num(&patched.metadata) > rv2);

    api.delete("settings", &DeleteParams::default()).await.expect("delete");
    expect_status(api.get("settings").await, 404, "NotFound");
    let left = api.list(&ListParams::default()).await.expect("list after delete");
    assert_eq!(left.items.len(), 1);
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    let labels = BTreeMap::from([("app".to_string(), name.to_string())]);
    Deployment {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector { match_labels: Some(labels.clone()), ..Default::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels), ..Default::default() }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "web".into(),
                        image: Some("nginx:1.27".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn deployment_crud_and_generation() {
    let env = env().await;
    let api: Api<Deployment> = Api::namespaced(env.client(), "default");
    let created = api.create(&PostParams::default(), &deployment("web", 2)).await.expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.spec.as_ref().and_then(|s| s.replicas), Some(2));

    let got = api.get("web").await.expect("get");
    assert_eq!(
        got.spec.as_ref().map(|s| &s.template.spec.as_ref().expect("pod spec").containers[0].name).map(String::as_str),
        Some("web")
    );

    let scaled = api
        .patch("web", &PatchParams::default(), &Patch::Strategic(json!({"spec": {"replicas": 5}})))
        .await
        .expect("strategic patch");
    assert_eq!(scaled.spec.as_ref().and_then(|s| s.replicas), Some(5));
    assert_eq!(scaled.metadata.generation, Some(2), "a spec change bumps generation");

    let list = api.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 1);

    api.delete("web", &DeleteParams::default()).await.expect("delete");
    expect_status(api.get("web").await, 404, "NotFound");
}

#[tokio::test]
async fn namespace_crud_and_namespaced_objects() {
    let env = env().await;
    let nss: Api<Namespace> = Api::all(env.client());
    let ns =
        Namespace { metadata: ObjectMeta { name: Some("team-a".into()), ..Default::default() }, ..Default::default() };
    let created = nss.create(&PostParams::default(), &ns).await.expect("create namespace");
    assert_eq!(created.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Active"));
    let names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for expected in ["default", "kube-system", "team-a"] {
        assert!(names.iter().any(|n| n == expected), "namespace {expected} listed in {names:?}");
    }

    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "team-a");
    cms.create(&PostParams::default(), &config_map("in-team-a", &[])).await.expect("create in team-a");
    let everywhere: Api<ConfigMap> = Api::all(env.client());
    let all = everywhere.list(&ListParams::default()).await.expect("list all namespaces");
    assert!(
        all.items
            .iter()
            .any(|c| c.metadata.namespace.as_deref() == Some("team-a")
                && c.metadata.name.as_deref() == Some("in-team-a"))
    );
    let default_only: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    assert!(default_only.get_opt("in-team-a").await.expect("get_opt").is_none(), "namespaces isolate objects");

    // Creating in a namespace that does not exist is refused.
    let missing: Api<ConfigMap> = Api::namespaced(env.client(), "nope");
    expect_status(missing.create(&PostParams::default(), &config_map("x", &[])).await, 404, "NotFound");

    // Deleting a namespace moves it to Terminating (there is no namespace controller).
    nss.delete("team-a", &DeleteParams::default()).await.expect("delete namespace");
    match nss.get_opt("team-a").await.expect("get namespace") {
        None => {}
        Some(ns) => {
            assert!(ns.metadata.deletion_timestamp.is_some(), "deletionTimestamp set");
            assert_eq!(ns.status.and_then(|s| s.phase).as_deref(), Some("Terminating"));
        }
    }
}

#[tokio::test]
async fn secret_string_data_is_merged_into_data() {
    let env = env().await;
    let api: Api<Secret> = Api::namespaced(env.client(), "default");
    let secret = Secret {
        metadata: ObjectMeta { name: Some("creds".into()), ..Default::default() },
        string_data: Some(BTreeMap::from([("user".to_string(), "admin".to_string())])),
        data: Some(BTreeMap::from([("pass".to_string(), ByteString(b"s3cret".to_vec()))])),
        ..Default::default()
    };
    let created = api.create(&PostParams::default(), &secret).await.expect("create");
    assert_eq!(created.type_.as_deref(), Some("Opaque"), "type defaults to Opaque");
    assert!(created.string_data.is_none(), "stringData is write-only");
    let got = api.get("creds").await.expect("get");
    let data = got.data.expect("data");
    assert_eq!(data.get("user").map(|b| b.0.as_slice()), Some(&b"admin"[..]));
    assert_eq!(data.get("pass").map(|b| b.0.as_slice()), Some(&b"s3cret"[..]));

    api.delete("creds", &DeleteParams::default()).await.expect("delete");
    expect_status(api.get("creds").await, 404, "NotFound");
}
