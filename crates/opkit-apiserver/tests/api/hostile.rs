//! Requests any client can send that used to panic the server (dropping the request with
//! no response): each must now be answered, as kube-apiserver answers it.

use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::common::{FlightTicket, client_without_retry, config_map, env, env_with_flights, flight, raw, within};

const CM: &str = "/api/v1/namespaces/default/configmaps";
const FT: &str = "/apis/flights.com/v1/namespaces/default/flighttickets";
const JSONPATCH: &str = "application/json-patch+json";

#[tokio::test]
async fn a_huge_grace_period_marks_the_pod_and_a_forced_delete_removes_it() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod).await.expect("create pod");

    let path = "/api/v1/namespaces/default/pods/p";
    let body = format!(r#"{{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":{}}}"#, i64::MAX);
    let res = raw(&client, "DELETE", path, Some("application/json"), body.into_bytes()).await;
    assert!(res.code == 200 || res.code == 202, "huge grace period delete: {} {}", res.code, res.text);
    assert!(res.json["metadata"]["deletionTimestamp"].is_string(), "pod marked: {}", res.text);

    let forced = r#"{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0}"#;
    let res = raw(&client, "DELETE", path, Some("application/json"), forced.as_bytes().to_vec()).await;
    assert_eq!(res.code, 200, "forced delete: {}", res.text);
    assert!(pods.get_opt("p").await.expect("get").is_none(), "the pod is gone");
}

#[tokio::test]
async fn a_json_patch_replacing_the_whole_object_with_a_non_object_is_invalid() {
    let env = env_with_flights().await;
    let client = client_without_retry(&env).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &config_map("c", &[("k", "v")])).await.expect("seed configmap");
    let fts: Api<FlightTicket> = Api::namespaced(client.clone(), "default");
    fts.create(&PostParams::default(), &flight("f", "A", "B", 1)).await.expect("seed flight");

    for path in [format!("{CM}/c"), format!("{FT}/f")] {
        for value in ["3", "[1,2]", "\"text\"", "null", "true"] {
            let patch = format!(r#"[{{"op":"replace","path":"","value":{value}}}]"#);
            let res = raw(&client, "PATCH", &path, Some(JSONPATCH), patch.into_bytes()).await;
            assert_eq!(res.code, 422, "{path} replaced by {value}: {}", res.text);
            assert_eq!(res.json["kind"], "Status", "{}", res.text);
            assert_eq!(res.json["reason"], "Invalid", "{}", res.text);
            assert_eq!(res.json["details"]["causes"][0]["field"], "patch", "{}", res.text);
        }
    }
    let cm = cms.get("c").await.expect("configmap still readable");
    assert_eq!(cm.data.unwrap_or_default().get("k").map(String::as_str), Some("v"), "data kept");
    let ft = fts.get("f").await.expect("flight still readable");
    assert_eq!(ft.spec.number, 1);
}

#[tokio::test]
async fn a_failing_operation_after_an_irreversible_move_answers_422() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &config_map("c", &[("a", "v")])).await.expect("seed configmap");
    let patch = r#"[{"op":"move","from":"/data/a","path":"/data"},{"op":"test","path":"/data","value":0}]"#;
    let res = raw(&client, "PATCH", &format!("{CM}/c"), Some(JSONPATCH), patch.as_bytes().to_vec()).await;
    assert_eq!(res.code, 422, "{}", res.text);
    assert_eq!(res.json["kind"], "Status", "{}", res.text);
    let cm = cms.get("c").await.expect("configmap still readable");
    assert_eq!(cm.data.unwrap_or_default().get("a").map(String::as_str), Some("v"), "data kept");
}

#[tokio::test]
async fn a_watch_with_the_largest_timeout_is_served() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    let req = http::Request::builder()
        .uri(format!("{CM}?watch=true&timeoutSeconds={}", i64::MAX))
        .body(kube::client::Body::empty())
        .expect("request builds");
    let res = within("watch response", client.send(req)).await.expect("the watch is answered");
    assert_eq!(res.status(), 200);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &config_map("seen", &[])).await.expect("create configmap");
    let mut frames = res.into_body().into_data_stream();
    let mut buffered = Vec::new();
    let event: Value = within("the ADDED event", async {
        loop {
            let chunk = frames.next().await.expect("stream open").expect("chunk");
            buffered.extend_from_slice(&chunk);
            if let Some(end) = buffered.iter().position(|b| *b == b'\n') {
                return serde_json::from_slice(&buffered[..end]).expect("event JSON");
            }
        }
    })
    .await;
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["metadata"]["name"], "seen");
}

#[tokio::test]
async fn json_patch_copies_are_bounded_as_kube_bounds_them() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let big = "x".repeat(100 * 1024);
    cms.create(&PostParams::default(), &config_map("big", &[("seed", big.as_str())])).await.expect("seed configmap");
    // 31 copies of 100 KiB add more than kube's 3 MiB of copied bytes.
    let ops: Vec<Value> =
        (0..31).map(|i| json!({"op": "copy", "from": "/data/seed", "path": format!("/data/copy-{i}")})).collect();
    let res = raw(&client, "PATCH", &format!("{CM}/big"), Some(JSONPATCH), json!(ops).to_string().into_bytes()).await;
    assert_eq!(res.code, 422, "{}", res.text);
    let message = res.json["message"].as_str().unwrap_or_default();
    assert!(message.contains("Unable to complete the copy, the accumulated size increase of copy is"), "{message}");
    assert!(message.contains("exceeding the limit 3145728"), "{message}");
    // A few copies are fine.
    let few: Vec<Value> =
        (0..3).map(|i| json!({"op": "copy", "from": "/data/seed", "path": format!("/data/copy-{i}")})).collect();
    let res = raw(&client, "PATCH", &format!("{CM}/big"), Some(JSONPATCH), json!(few).to_string().into_bytes()).await;
    assert_eq!(res.code, 200, "{}", res.text);
}

#[tokio::test]
async fn delete_options_that_are_not_an_object_are_a_bad_request() {
    // Found by the request fuzzer: a JSON array as DeleteOptions with a propagationPolicy
    // in the query panicked the handler.
    let env = env().await;
    let client = client_without_retry(&env).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &config_map("c", &[("k", "v")])).await.expect("seed configmap");
    for body in ["[1]", "\"x\"", "3"] {
        let res = raw(
            &client,
            "DELETE",
            &format!("{CM}/c?propagationPolicy=Background"),
            Some("application/json"),
            body.into(),
        )
        .await;
        assert_eq!(res.code, 400, "DeleteOptions {body}: {}", res.text);
        assert!(res.json["message"].as_str().unwrap_or_default().contains("v1.DeleteOptions"), "{}", res.text);
    }
    assert!(cms.get_opt("c").await.expect("get").is_some(), "not deleted");
}
