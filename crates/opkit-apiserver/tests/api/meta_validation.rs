//! Validation kube-apiserver does that the server once skipped, each answered with kube's
//! 422, message and field: ConfigMaps and Secrets over 1 MiB of data, empty
//! `ownerReferences` entries, finalizer names that are not qualified names, and admission
//! webhooks whose `timeoutSeconds` is outside 1–30.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::common::{RawResponse, client_without_retry, env, raw};

const JSON: &str = "application/json";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const SECRETS: &str = "/api/v1/namespaces/default/secrets";
const MIB: usize = 1024 * 1024;

/// The response's causes as (field, message) pairs.
fn causes(res: &RawResponse) -> Vec<(String, String)> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    res.json["details"]["causes"]
        .as_array()
        .map_or_else(Vec::new, |c| c.iter().map(|c| (text(&c["field"]), text(&c["message"]))).collect())
}

/// Asserts a 422 Invalid whose message is `message` and whose causes are `expected`.
fn assert_invalid(res: &RawResponse, message: &str, expected: &[(&str, &str)]) {
    assert_eq!(res.code, 422, "{}", res.text);
    assert_eq!(res.json["reason"], "Invalid", "{}", res.text);
    assert_eq!(res.json["message"], message, "{}", res.text);
    let expected: Vec<(String, String)> = expected.iter().map(|(f, m)| (f.to_string(), m.to_string())).collect();
    assert_eq!(causes(res), expected, "{}", res.text);
}

fn body(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).expect("json")
}

#[tokio::test]
async fn config_maps_and_secrets_hold_at_most_one_mebibyte_of_data() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    let half = "x".repeat(MIB / 2);
    let big = json!({"metadata": {"name": "big"}, "data": {"a": half, "b": half, "c": "!"}});
    let res = raw(&client, "POST", CONFIGMAPS, Some(JSON), body(big)).await;
    let too_long = "Too long: may not be more than 1048576 bytes";
    assert_invalid(&res, &format!("ConfigMap \"big\" is invalid: []: {too_long}"), &[("[]", too_long)]);
    // Text and binary data count together.
    let binary = base64::engine::general_purpose::STANDARD.encode(vec![7u8; MIB / 2]);
    let mixed = json!({"metadata": {"name": "mixed"}, "data": {"a": half}, "binaryData": {"b": binary, "c": "IQ=="}});
    let res = raw(&client, "POST", CONFIGMAPS, Some(JSON), body(mixed)).await;
    assert_eq!(res.code, 422, "{}", res.text);
    // Exactly 1 MiB is allowed.
    let fits = json!({"metadata": {"name": "fits"}, "data": {"a": half, "b": half}});
    let res = raw(&client, "POST", CONFIGMAPS, Some(JSON), body(fits)).await;
    assert_eq!(res.code, 201, "{}", res.text);

    // A Secret's limit is on the decoded bytes of `data`, stringData included.
    let encoded = base64::engine::general_purpose::STANDARD.encode(vec![1u8; MIB]);
    let secret = json!({"metadata": {"name": "big"}, "data": {"a": encoded}, "stringData": {"b": "!"}});
    let res = raw(&client, "POST", SECRETS, Some(JSON), body(secret)).await;
    assert_invalid(&res, &format!("Secret \"big\" is invalid: data: {too_long}"), &[("data", too_long)]);
    let secret = json!({"metadata": {"name": "fits"}, "data": {"a": encoded}});
    let res = raw(&client, "POST", SECRETS, Some(JSON), body(secret)).await;
    assert_eq!(res.code, 201, "{}", res.text);
}

#[tokio::test]
async fn owner_references_name_their_owner_completely() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    let cm = json!({"metadata": {"name": "owned", "ownerReferences": [{}]}});
    let res = raw(&client, "POST", CONFIGMAPS, Some(JSON), body(cm)).await;
    let expected = [
        ("metadata.ownerReferences.apiVersion", "Invalid value: \"\": version must not be empty"),
        ("metadata.ownerReferences.kind", "Invalid value: \"\": must not be empty"),
        ("metadata.ownerReferences.name", "Invalid value: \"\": must not be empty"),
        ("metadata.ownerReferences.uid", "Invalid value: \"\": must not be empty"),
    ];
    let message = format!(
        "ConfigMap \"owned\" is invalid: [{}]",
        expected.iter().map(|(f, m)| format!("{f}: {m}")).collect::<Vec<_>>().join(", ")
    );
    assert_invalid(&res, &message, &expected);
    // A group with no version is no version.
    let cm = json!({"metadata": {"name": "owned", "ownerReferences": [
        {"apiVersion": "apps/", "kind": "Deployment", "name": "d", "uid": "u"}]}});
    let res = raw(&client, "POST", CONFIGMAPS, Some(JSON), body(cm)).await;
    let only = [("metadata.ownerReferences.apiVersion", "Invalid value: \"apps/\": version must not be empty")];
    assert_invalid(&res, &format!("ConfigMap \"owned\" is invalid: {}: {}", only[0].0, only[0].1), &only);
    let cm = json!({"metadata": {"name": "owned", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "u"}]}});
    assert_eq!(raw(&client, "POST", CONFIGMAPS, Some(JSON), body(cm)).await.code, 201);
}

#[tokio::test]
async fn finalizer_names_are_qualified_names() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    let cm = json!({"metadata": {"name": "f", "finalizers": ["example.com/ok", "not a name!"]}});
    let res = raw(&client, "POST", CONFIGMAPS, Some(JSON), body(cm)).await;
    let detail = "Invalid value: \"not a name!\": name part must consist of alphanumeric characters, '-', '_' or '.', \
        and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', \
        regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    assert_invalid(
        &res,
        &format!("ConfigMap \"f\" is invalid: metadata.finalizers: {detail}"),
        &[("metadata.finalizers", detail)],
    );
    let cm = json!({"metadata": {"name": "f", "finalizers": ["orphan", "foregroundDeletion"]}});
    let res = raw(&client, "POST", CONFIGMAPS, Some(JSON), body(cm)).await;
    let both = "Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: finalizer orphan and foregroundDeletion cannot be both set";
    assert_invalid(
        &res,
        &format!("ConfigMap \"f\" is invalid: metadata.finalizers: {both}"),
        &[("metadata.finalizers", both)],
    );
    let cm = json!({"metadata": {"name": "f", "finalizers": ["example.com/ok", "kubernetes"]}});
    assert_eq!(raw(&client, "POST", CONFIGMAPS, Some(JSON), body(cm)).await.code, 201);
}

#[tokio::test]
async fn webhook_timeouts_are_between_one_and_thirty_seconds() {
    let env = env().await;
    let client = client_without_retry(&env).await;
    for (kind, plural) in [
        ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
        ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
    ] {
        let path = format!("/apis/admissionregistration.k8s.io/v1/{plural}");
        let config = |timeout: i64| {
            body(json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                "metadata": {"name": "hooks"},
                "webhooks": [{
                    "name": "a.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                    "clientConfig": {"url": "https://127.0.0.1:1/hook"}, "timeoutSeconds": timeout,
                }],
            }))
        };
        for timeout in [0, 31] {
            let res = raw(&client, "POST", &path, Some(JSON), config(timeout)).await;
            let detail = format!("Invalid value: {timeout}: the timeout value must be between 1 and 30 seconds");
            let field = "webhooks[0].timeoutSeconds";
            assert_invalid(
                &res,
                &format!("{kind}.admissionregistration.k8s.io \"hooks\" is invalid: {field}: {detail}"),
                &[(field, &detail)],
            );
        }
        assert_eq!(raw(&client, "POST", &path, Some(JSON), config(30)).await.code, 201, "{kind}");
    }
}
