//! Built-in objects are validated as kube-apiserver validates them: a body that cannot
//! decode into the Go type is a 400 naming the field as Go's decoder does, and kube's
//! field rules (container names here) are 422s. Before, such objects were stored and typed
//! clients could then not read them.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::{client_without_retry, env, raw};

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
const JSON: &str = "application/json";

fn deployment(replicas: serde_json::Value) -> Vec<u8> {
    let body = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}},
                         "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
    });
    serde_json::to_vec(&body).expect("json")
}

#[tokio::test]
async fn values_that_do_not_decode_into_the_go_type_are_bad_requests() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    let cases = [
        (json!("3"), "cannot unmarshal string into Go struct field Deployment.spec.replicas of type int32"),
        (
            json!(1_u64 << 40),
            "cannot unmarshal number 1099511627776 into Go struct field Deployment.spec.replicas of type int32",
        ),
        (json!(2.5), "cannot unmarshal number 2.5 into Go struct field Deployment.spec.replicas of type int32"),
        (json!(true), "cannot unmarshal bool into Go struct field Deployment.spec.replicas of type int32"),
    ];
    for (replicas, message) in cases {
        let res = raw(&client, "POST", DEPLOYMENTS, Some(JSON), deployment(replicas.clone())).await;
        assert_eq!(res.code, 400, "replicas {replicas}: {}", res.text);
        assert_eq!(res.json["reason"], "BadRequest", "{}", res.text);
        let text = res.json["message"].as_str().unwrap_or_default();
        assert!(text.starts_with("Deployment in version \"v1\" cannot be handled as a Deployment: "), "{text}");
        assert!(text.ends_with(message), "replicas {replicas}: {text}");
    }
    let res = raw(&client, "POST", DEPLOYMENTS, Some(JSON), deployment(json!(3))).await;
    assert_eq!(res.code, 201, "a valid deployment: {}", res.text);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    assert_eq!(deployments.get("d").await.expect("typed read").spec.and_then(|s| s.replicas), Some(3));

    // A patch cannot sneak the bad value in either.
    let patch = br#"{"spec":{"replicas":"4"}}"#.to_vec();
    let res = raw(&client, "PATCH", &format!("{DEPLOYMENTS}/d"), Some("application/merge-patch+json"), patch).await;
    assert_eq!(res.code, 400, "patched replicas as a string: {}", res.text);
    assert_eq!(deployments.get("d").await.expect("typed read").spec.and_then(|s| s.replicas), Some(3));
}

#[tokio::test]
async fn config_map_values_must_be_strings_and_secret_data_base64() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": 5}});
    let res = raw(&client, "POST", "/api/v1/namespaces/default/configmaps", Some(JSON), cm.to_string().into()).await;
    assert_eq!(res.code, 400, "{}", res.text);
    let text = res.json["message"].as_str().unwrap_or_default();
    assert!(text.ends_with("cannot unmarshal number into Go struct field ConfigMap.data.n of type string"), "{text}");

    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "not base64!"}});
    let res = raw(&client, "POST", "/api/v1/namespaces/default/secrets", Some(JSON), secret.to_string().into()).await;
    assert_eq!(res.code, 400, "{}", res.text);
    assert_eq!(
        res.json["message"],
        "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 3",
        "{}",
        res.text
    );

    // Well-formed values still pass, and typed clients read them back.
    let ok = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "aGk="}});
    let res = raw(&client, "POST", "/api/v1/namespaces/default/secrets", Some(JSON), ok.to_string().into()).await;
    assert_eq!(res.code, 201, "{}", res.text);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let data = secrets.get("s").await.expect("typed read").data.unwrap_or_default();
    assert_eq!(data.get("k").map(|b| b.0.as_slice()), Some(&b"hi"[..]));
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    assert!(cms.get_opt("c").await.expect("get").is_none(), "the bad ConfigMap was not stored");
}

#[tokio::test]
async fn container_names_follow_kubes_rules_in_pods_and_templates() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "Bad Name", "image": "busybox"}, {"name": "ok", "image": "busybox"},
                                {"name": "ok", "image": "busybox"}],
                 "initContainers": [{"name": "ok", "image": "busybox"}]},
    });
    let res = raw(&client, "POST", "/api/v1/namespaces/default/pods", Some(JSON), pod.to_string().into()).await;
    assert_eq!(res.code, 422, "{}", res.text);
    let causes = res.json["details"]["causes"].as_array().cloned().unwrap_or_default();
    let find = |field: &str| causes.iter().find(|c| c["field"] == field).cloned().unwrap_or_default();
    let bad = find("spec.containers[0].name");
    assert_eq!(bad["reason"], "FieldValueInvalid", "{}", res.text);
    assert!(
        bad["message"].as_str().unwrap_or_default().starts_with(
            "Invalid value: \"Bad Name\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'"
        ),
        "{}",
        res.text
    );
    assert_eq!(find("spec.containers[2].name")["reason"], "FieldValueDuplicate", "{}", res.text);
    assert_eq!(find("spec.initContainers[0].name")["reason"], "FieldValueDuplicate", "{}", res.text);

    let mut body: serde_json::Value = serde_json::from_slice(&deployment(json!(1))).expect("json");
    body["spec"]["template"]["spec"]["containers"][0]["name"] = json!("Under_score");
    let res = raw(&client, "POST", DEPLOYMENTS, Some(JSON), body.to_string().into()).await;
    assert_eq!(res.code, 422, "{}", res.text);
    assert_eq!(res.json["details"]["causes"][0]["field"], "spec.template.spec.containers[0].name", "{}", res.text);

    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    body["spec"]["template"]["spec"]["containers"][0]["name"] = json!("fine-name");
    let good: Deployment = serde_json::from_value(body).expect("typed");
    deployments.create(&PostParams::default(), &good).await.expect("a valid container name");
}

#[tokio::test]
async fn statefulset_mounts_may_name_their_claim_templates() {
    // Real charts (alertmanager, redis) mount a volume that only a claim template defines.
    let env = env().await;
    let client = client_without_retry(&env).await;
    let sts = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}, "serviceName": "db",
                 "template": {"metadata": {"labels": {"app": "db"}},
                              "spec": {"containers": [{"name": "db", "image": "i",
                                                       "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
                 "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                           "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]},
    });
    let path = "/apis/apps/v1/namespaces/default/statefulsets";
    let res = raw(&client, "POST", path, Some(JSON), sts.to_string().into_bytes()).await;
    assert_eq!(res.code, 201, "{}", res.text);
    let mut missing = sts.clone();
    missing["metadata"]["name"] = json!("db2");
    missing["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] = json!("other");
    let res = raw(&client, "POST", path, Some(JSON), missing.to_string().into_bytes()).await;
    assert_eq!(res.code, 422, "a mount naming nothing: {}", res.text);
}
