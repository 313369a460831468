//! node.k8s.io RuntimeClasses are served, with kube's `handler` validation.

use serde_json::json;

use crate::common::{env, raw};

#[tokio::test]
async fn runtime_classes_are_served_and_validated() {
    let env = env().await;
    let path = "/apis/node.k8s.io/v1/runtimeclasses";
    let body = |name: &str, handler: serde_json::Value| {
        serde_json::to_vec(&json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}, "handler": handler}))
            .expect("json")
    };
    let res = raw(&env.client(), "POST", path, Some("application/json"), body("gvisor", json!("runsc"))).await;
    assert_eq!(res.code, 201, "{}", res.text);
    assert_eq!(res.json["handler"], "runsc");
    for (name, handler, field) in [("none", json!(null), "handler"), ("bad", json!("Not_A_Label"), "handler")] {
        let res = raw(&env.client(), "POST", path, Some("application/json"), body(name, handler)).await;
        assert_eq!(res.code, 422, "{}", res.text);
        assert_eq!(res.json["details"]["causes"][0]["field"], field, "{}", res.text);
    }
    let table = raw(&env.client(), "GET", path, None, vec![]).await;
    assert_eq!(table.json["items"].as_array().map(Vec::len), Some(1), "{}", table.text);
}
