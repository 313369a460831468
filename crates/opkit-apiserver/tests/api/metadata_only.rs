//! Metadata-only reads (`Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`,
//! what kube's `Api<PartialObjectMeta<K>>` and client-go's metadata client send): gets,
//! lists and watch events carry each object's metadata alone, as kube-apiserver answers.

use futures::{AsyncBufReadExt, TryStreamExt};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::core::PartialObjectMeta;
use serde_json::Value;

use crate::common::{config_map, env, within};

const OBJECT: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

async fn get_as(client: &kube::Client, path: &str, accept: &str) -> Value {
    let req = http::Request::builder()
        .uri(path)
        .header(http::header::ACCEPT, format!("{accept},application/json"))
        .body(kube::client::Body::from(Vec::new()))
        .expect("request builds");
    let res = within(path, client.send(req)).await.expect("answered");
    assert_eq!(res.status(), 200, "{path}");
    let bytes = within(path, http_body_util::BodyExt::collect(res.into_body())).await.expect("body").to_bytes();
    serde_json::from_slice(&bytes).expect("JSON")
}

#[tokio::test]
async fn gets_lists_and_watches_carry_metadata_alone() {
    let env = env().await;
    let client = env.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &config_map("big", &[("payload", &"x".repeat(4096))])).await.expect("create");

    let one = get_as(&client, "/api/v1/namespaces/default/configmaps/big", OBJECT).await;
    assert_eq!(
        (one["kind"].as_str(), one["apiVersion"].as_str()),
        (Some("PartialObjectMetadata"), Some("meta.k8s.io/v1"))
    );
    assert_eq!(one["metadata"]["name"], "big");
    assert!(one.get("data").is_none(), "no data in {one}");

    let list = get_as(&client, "/api/v1/namespaces/default/configmaps", LIST).await;
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert!(list["metadata"]["resourceVersion"].as_str().is_some_and(|rv| !rv.is_empty()));
    let item =
        list["items"].as_array().and_then(|items| items.iter().find(|i| i["metadata"]["name"] == "big")).cloned();
    let item = item.expect("the ConfigMap is listed");
    assert_eq!(item["kind"], "PartialObjectMetadata");
    assert!(item.get("data").is_none(), "no data in {item}");

    // A watch's events, read raw.
    let req = http::Request::builder()
        .uri("/api/v1/namespaces/default/configmaps?watch=true&fieldSelector=metadata.name%3Dbig")
        .header(http::header::ACCEPT, OBJECT)
        .body(kube::client::Body::from(Vec::new()))
        .expect("request builds");
    let res = within("watch", client.send(req)).await.expect("watch answered");
    let mut lines = res.into_body().into_data_stream().map_err(std::io::Error::other).into_async_read().lines();
    let first = within("the first event", lines.try_next()).await.expect("read").expect("an event");
    let event: Value = serde_json::from_str(&first).expect("JSON event");
    assert_eq!(
        (event["type"].as_str(), event["object"]["kind"].as_str()),
        (Some("ADDED"), Some("PartialObjectMetadata"))
    );
    assert!(event["object"].get("data").is_none(), "no data in {event}");

    // kube's metadata API reads it too.
    let meta: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client, "default");
    let got = meta.get("big").await.expect("metadata get");
    assert_eq!(got.metadata.name.as_deref(), Some("big"));
}
