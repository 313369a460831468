//! Hostile CEL: an expression nested deeper than cel-go's 250 levels is a compile error
//! wherever the server takes CEL (a CRD's validation rules, an admission webhook's
//! matchConditions), never a stack overflow that aborts the server; a deep expression
//! within the limit is evaluated.

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::{config_map, env, expect_status, within};

fn crd(rule: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {"name": "deeps.depth.example.com"},
        "spec": {"group": "depth.example.com", "scope": "Namespaced",
            "names": {"plural": "deeps", "kind": "Deep"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                    "properties": {"a": {"type": "integer"}},
                    "x-kubernetes-validations": [{"rule": rule}]}}}}}]},
    }))
    .expect("a CRD")
}

#[tokio::test]
async fn a_crd_rule_nested_too_deep_is_refused_and_the_server_lives() {
    let env = env().await;
    let api: Api<CustomResourceDefinition> = Api::all(env.client());
    let deep = format!("self.a{} > 0", " + 1".repeat(3000));
    let status = expect_status(api.create(&PostParams::default(), &crd(&deep)).await, 422, "Invalid");
    assert!(status.message.contains("max recursion depth exceeded"), "{}", status.message);
    // A deep rule within the limit compiles and runs.
    let within_limit = format!("self.a{} > 0", " + 1".repeat(200));
    within("create", api.create(&PostParams::default(), &crd(&within_limit))).await.expect("a CRD within the limit");
    within("list", api.list(&Default::default())).await.expect("the server still answers");
}

#[tokio::test]
async fn a_webhook_match_condition_nested_too_deep_follows_the_failure_policy() {
    let env = env().await;
    let deep = format!("object.metadata.name == 'x'{}", " && true".repeat(3000));
    let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": "deep"},
        "webhooks": [{"name": "deep.test.opkit.dev",
            "clientConfig": {"url": "https://127.0.0.1:1/never"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "matchConditions": [{"name": "deep", "expression": deep}],
            "failurePolicy": "Ignore", "sideEffects": "None", "admissionReviewVersions": ["v1"]}],
    }))
    .expect("a configuration");
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(env.client());
    within("create", configs.create(&PostParams::default(), &config)).await.expect("stored");
    let cms = Api::namespaced(env.client(), "default");
    within("create", cms.create(&PostParams::default(), &config_map("admitted", &[]))).await.expect("Ignore admits");
}
