//! The one nesting-depth limit of stored objects: every write path refuses an object
//! nested deeper than the server can read back (422 Status), everything it accepted stays
//! readable (get, list, watch, delete), and a durable server starts over stored rows it
//! cannot read, quarantining them.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams};
use opkit_apiserver::{ApiServer, ServerConfig};
use serde_json::{Value, json};

use crate::common::{client_for, client_without_retry, env, raw, within};

const BLOBS: &str = "/apis/depth.example.com/v1/namespaces/default/blobs";
const JSON: &str = "application/json";

/// `levels` objects nested as `{"a": {"a": ... 1}}`.
fn nested(levels: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..levels {
        v = json!({ "a": v });
    }
    v
}

/// A JSON pointer `prefix/a/a/...` with `levels` `a` tokens.
fn deep_path(prefix: &str, levels: usize) -> String {
    format!("{prefix}{}", "/a".repeat(levels))
}

/// A namespaced `Blob` whose spec keeps any unknown fields.
fn blob_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "blobs.depth.example.com"},
        "spec": {
            "group": "depth.example.com",
            "names": {"plural": "blobs", "singular": "blob", "kind": "Blob", "listKind": "BlobList"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}
            }]
        }
    }))
    .expect("CRD")
}

fn blob(name: &str, spec: Value) -> Vec<u8> {
    let obj = json!({"apiVersion": "depth.example.com/v1", "kind": "Blob", "metadata": {"name": name}, "spec": spec});
    serde_json::to_vec(&obj).expect("encodes")
}

fn blob_resource() -> ApiResource {
    ApiResource {
        group: "depth.example.com".into(),
        version: "v1".into(),
        api_version: "depth.example.com/v1".into(),
        kind: "Blob".into(),
        plural: "blobs".into(),
    }
}

fn assert_too_deep(res: &crate::common::RawResponse, what: &str) {
    assert_eq!(res.code, 422, "{what}: {}", res.text);
    assert_eq!(res.json["kind"], "Status", "{what}: {}", res.text);
    assert_eq!(res.json["reason"], "Invalid", "{what}: {}", res.text);
    assert!(res.text.contains("nesting depth exceeds the maximum of 100"), "{what}: {}", res.text);
    if what != "json patch" && what != "json patch move" {
        // The client's field, not the managedFields mirroring it.
        assert_eq!(res.json["details"]["causes"][0]["field"], "spec", "{what}: {}", res.text);
    }
}

#[tokio::test]
async fn every_write_path_refuses_an_object_nested_too_deep() {
    let env = env().await;
    within("install Blob", env.install_crds([blob_crd()])).await.expect("install Blob CRD");
    let client = client_without_retry(&env).await;

    // Create: a body the request parser accepts (under serde_json's 128 levels) whose
    // managedFields would nest past what the server can parse back.
    let res = raw(&client, "POST", BLOBS, Some(JSON), blob("deep", nested(122))).await;
    assert_too_deep(&res, "create");
    assert_eq!(raw(&client, "GET", &format!("{BLOBS}/deep"), None, vec![]).await.code, 404);

    let res = raw(&client, "POST", BLOBS, Some(JSON), blob("b", json!({"x": 1}))).await;
    assert_eq!(res.code, 201, "{}", res.text);
    let path = format!("{BLOBS}/b");

    // Update.
    let res = raw(&client, "PUT", &path, Some(JSON), blob("b", nested(122))).await;
    assert_too_deep(&res, "update");
    // Merge patch.
    let merge = serde_json::to_vec(&json!({"spec": nested(122)})).expect("encodes");
    let res = raw(&client, "PATCH", &path, Some("application/merge-patch+json"), merge).await;
    assert_too_deep(&res, "merge patch");
    // Server-side apply (a JSON body is valid YAML).
    let res = raw(
        &client,
        "PATCH",
        &format!("{path}?fieldManager=t"),
        Some("application/apply-patch+yaml"),
        blob("b", nested(122)),
    )
    .await;
    assert_too_deep(&res, "apply");
    // JSON patch: each operation is small, together they nest 2 x 90 levels (~2 KB).
    let ops = json!([
        {"op": "add", "path": "/spec/a", "value": nested(90)},
        {"op": "add", "path": deep_path("/spec/a", 89), "value": nested(90)},
    ]);
    let res =
        raw(&client, "PATCH", &path, Some("application/json-patch+json"), serde_json::to_vec(&ops).expect("encodes"))
            .await;
    assert_too_deep(&res, "json patch");
    // JSON patch: moves under long paths, each within the limit, that together nest deeper.
    let mut ops = vec![json!({"op": "add", "path": "/spec/m", "value": nested(60)})];
    ops.push(json!({"op": "add", "path": "/spec/n", "value": nested(60)}));
    ops.push(json!({"op": "move", "from": "/spec/m", "path": deep_path("/spec/n", 59)}));
    let res =
        raw(&client, "PATCH", &path, Some("application/json-patch+json"), serde_json::to_vec(&ops).expect("encodes"))
            .await;
    assert_too_deep(&res, "json patch move");
    // Nesting within the patch limit, past the stored limit once managedFields are added.
    let ops = json!([{"op": "add", "path": "/spec/a", "value": nested(97)}]);
    let res =
        raw(&client, "PATCH", &path, Some("application/json-patch+json"), serde_json::to_vec(&ops).expect("encodes"))
            .await;
    assert_too_deep(&res, "json patch with managed fields");

    // The object is untouched and every read path still works.
    let blobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &blob_resource());
    let got = blobs.get("b").await.expect("get");
    assert_eq!(got.data["spec"], json!({"x": 1}));
    assert_eq!(blobs.list(&ListParams::default()).await.expect("list").items.len(), 1);
    blobs.delete("b", &DeleteParams::default()).await.expect("delete");
}

#[tokio::test]
async fn an_object_at_the_limit_is_served_by_every_read_path() {
    let env = env().await;
    within("install Blob", env.install_crds([blob_crd()])).await.expect("install Blob CRD");
    let client = client_without_retry(&env).await;
    // Deep, but with its managedFields within the limit.
    let res = raw(&client, "POST", BLOBS, Some(JSON), blob("ok", nested(90))).await;
    assert_eq!(res.code, 201, "{}", res.text);
    let blobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &blob_resource());
    assert_eq!(blobs.get("ok").await.expect("get").data["spec"], nested(90));
    assert_eq!(blobs.list(&ListParams::default()).await.expect("list").items.len(), 1);
    let watch =
        raw(&client, "GET", &format!("{BLOBS}?watch=true&resourceVersion=1&timeoutSeconds=1"), None, vec![]).await;
    assert_eq!(watch.code, 200, "{}", watch.text);
    let first = watch.text.lines().next().expect("an event");
    let event: Value = serde_json::from_str(first).expect("the event parses");
    assert_eq!(event["object"]["metadata"]["name"], "ok");
    blobs.delete("ok", &DeleteParams::default()).await.expect("delete");
}

#[tokio::test]
async fn a_durable_server_starts_over_unreadable_rows_and_quarantines_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = ServerConfig::durable(dir.path());
    let server = within("first start", ApiServer::start(cfg.clone())).await.expect("first start");
    let client = client_for(&server).await;
    let res = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(JSON),
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"good"}}"#.to_vec(),
    )
    .await;
    assert_eq!(res.code, 201, "{}", res.text);
    within("shutdown", server.shutdown()).await;

    // Rows an older server (or a damaged disk) left behind: too deep to parse, not JSON,
    // not an object; one of them a CRD.
    let too_deep = serde_json::to_string(&nested(300)).expect("encodes");
    {
        let db = rusqlite::Connection::open(dir.path().join("state.db")).expect("open the database");
        for (resource, namespace, name, value) in [
            ("/configmaps", "default", "deep", too_deep.as_str()),
            ("/configmaps", "default", "garbage", "{not json"),
            ("/configmaps", "default", "number", "42"),
            ("apiextensions.k8s.io/customresourcedefinitions", "", "deep.example.com", too_deep.as_str()),
        ] {
            db.execute(
                "INSERT INTO objects (resource, namespace, name, rev, value) VALUES (?1, ?2, ?3, 1, ?4)",
                rusqlite::params![resource, namespace, name, value.as_bytes()],
            )
            .expect("insert a corrupt row");
        }
    }

    let server = within("restart", ApiServer::start(cfg)).await.expect("the server starts over corrupt rows");
    let client = client_for(&server).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    assert_eq!(raw(&client, "GET", &format!("{cms}/good"), None, vec![]).await.code, 200);
    let list = raw(&client, "GET", cms, None, vec![]).await;
    assert_eq!(list.code, 200, "{}", list.text);
    let names: Vec<&str> =
        list.json["items"].as_array().expect("items").iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    assert_eq!(names, ["good"]);
    for name in ["deep", "garbage", "number"] {
        assert_eq!(raw(&client, "GET", &format!("{cms}/{name}"), None, vec![]).await.code, 404, "{name} quarantined");
    }
    // A quarantined name can be written again.
    let res = raw(
        &client,
        "POST",
        cms,
        Some(JSON),
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"}}"#.to_vec(),
    )
    .await;
    assert_eq!(res.code, 201, "{}", res.text);
    server.shutdown().await;
}

/// Found by the request fuzzer: a YAML apply patch nested as deep as the YAML parser
/// allows overflowed the request's stack and aborted the server.
#[tokio::test]
async fn a_deeply_nested_yaml_body_is_refused_without_killing_the_server() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    for levels in [60, 300] {
        let body = format!("{}\n", "- ".repeat(levels));
        let path = "/api/v1/namespaces/default/secrets/deep?fieldManager=fuzz";
        let answer = raw(&client, "PATCH", path, Some("application/apply-patch+yaml"), body.into_bytes()).await;
        assert_eq!(answer.code, 400, "{}", answer.text);
    }
    let health = raw(&client, "GET", "/healthz", None, Vec::new()).await;
    assert_eq!(health.code, 200);
}
