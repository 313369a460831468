//! Schema validation reports every violation of a custom resource at once, with kube's
//! messages, not only the first.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::json;

use crate::common::{env, raw, within};

fn memcached_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "memcacheds.cache.example.com"},
        "spec": {
            "group": "cache.example.com",
            "names": {"plural": "memcacheds", "singular": "memcached", "kind": "Memcached", "listKind": "MemcachedList"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer", "minimum": 1},
                        "color": {"type": "string", "enum": ["red", "blue"]},
                        "tier": {"type": "string", "maxLength": 3}
                    }}}}}
            }]
        }
    }))
    .expect("CRD")
}

#[tokio::test]
async fn every_schema_violation_is_a_cause() {
    let env = env().await;
    within("install Memcached", env.install_crds([memcached_crd()])).await.expect("install CRD");
    let body = json!({"apiVersion": "cache.example.com/v1", "kind": "Memcached", "metadata": {"name": "x"},
        "spec": {"size": 0, "color": "green", "tier": "gold"}});
    let res = raw(
        &env.client(),
        "POST",
        "/apis/cache.example.com/v1/namespaces/default/memcacheds",
        Some("application/json"),
        serde_json::to_vec(&body).expect("json"),
    )
    .await;
    assert_eq!(res.code, 422, "{}", res.text);
    let mut causes: Vec<(String, String)> = res.json["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| (c["field"].as_str().unwrap_or_default().into(), c["reason"].as_str().unwrap_or_default().into()))
        .collect();
    causes.sort();
    assert_eq!(
        causes,
        [
            ("spec.color".to_string(), "FieldValueNotSupported".to_string()),
            ("spec.size".into(), "FieldValueInvalid".into()),
            ("spec.tier".into(), "FieldValueTooLong".into()),
        ],
        "{}",
        res.text
    );
    let message = res.json["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("Memcached.cache.example.com \"x\" is invalid: ["), "{message}");
    for part in [
        "spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\"",
        "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
        "spec.tier: Too long: may not be more than 3 bytes",
    ] {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
}
