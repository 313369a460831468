//! apiregistration.k8s.io APIServices: the local ones the server makes at start-up for
//! every built-in group/version, their Table, and kube's validation.

use serde_json::json;

use crate::common::{env, raw};

#[tokio::test]
async fn local_apiservices_exist_for_every_builtin_group_version() {
    let env = env().await;
    let client = env.client();
    let res = raw(&client, "GET", "/apis/apiregistration.k8s.io/v1/apiservices/v1.apps", None, vec![]).await;
    assert_eq!(res.code, 200, "{}", res.text);
    assert_eq!(res.json["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"], "onstart");
    assert_eq!(res.json["spec"]["service"], serde_json::Value::Null);
    assert_eq!(
        (res.json["spec"]["groupPriorityMinimum"].as_i64(), res.json["spec"]["versionPriority"].as_i64()),
        (Some(17800), Some(15))
    );
    let condition = &res.json["status"]["conditions"][0];
    assert_eq!(
        (condition["type"].as_str(), condition["status"].as_str(), condition["reason"].as_str()),
        (Some("Available"), Some("True"), Some("Local"))
    );
    assert_eq!(condition["message"], "Local APIServices are always available");

    let list = raw(&client, "GET", "/apis/apiregistration.k8s.io/v1/apiservices", None, vec![]).await;
    let names: Vec<&str> =
        list.json["items"].as_array().expect("items").iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    for want in
        ["v1.", "v1.apps", "v1.batch", "v1.rbac.authorization.k8s.io", "v1.apiregistration.k8s.io", "v2.autoscaling"]
    {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
}

#[tokio::test]
async fn apiservice_names_and_priorities_are_validated() {
    let env = env().await;
    let body = |name: &str, group_priority: i64| {
        serde_json::to_vec(&json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": name},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": group_priority, "versionPriority": 100,
                "insecureSkipTLSVerify": true, "service": {"namespace": "kube-system", "name": "metrics-server"}}}))
        .expect("json")
    };
    let path = "/apis/apiregistration.k8s.io/v1/apiservices";
    let res = raw(&env.client(), "POST", path, Some("application/json"), body("metrics", 100)).await;
    assert_eq!(res.code, 422, "{}", res.text);
    assert!(
        res.text.contains("must be `spec.version+\\\".\\\"+spec.group`: \\\"v1beta1.metrics.k8s.io\\\""),
        "{}",
        res.text
    );
    let res = raw(&env.client(), "POST", path, Some("application/json"), body("v1beta1.metrics.k8s.io", 0)).await;
    assert_eq!(res.code, 422, "{}", res.text);
    assert_eq!(res.json["details"]["causes"][0]["field"], "spec.groupPriorityMinimum", "{}", res.text);
    let res = raw(&env.client(), "POST", path, Some("application/json"), body("v1beta1.metrics.k8s.io", 100)).await;
    assert_eq!(res.code, 201, "{}", res.text);
    assert_eq!(res.json["status"], json!({}), "a service-backed APIService starts without conditions");
}
