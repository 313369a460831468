//! Webhooks served with the certificates people make: `openssl req -x509 -newkey rsa:2048
//! -nodes -subj /CN=svc -addext subjectAltName=DNS:<svc>.<ns>.svc` gives a self-signed
//! certificate with `CA:TRUE`, used as its own `caBundle`. kube-apiserver (Go's
//! crypto/x509) calls such a webhook and honours its answer; a certificate for another
//! name, or one the `caBundle` does not vouch for, is still refused with Go's words. The
//! same holds for an aggregated API server (an APIService's `caBundle`).

use base64::Engine;
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Service};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, Patch, PatchParams, PostParams};
use opkit_testenv::TestEnv;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use serde_json::json;

use crate::admission_webhooks::{TestWebhook, allow_or_deny, hook, validating};
use crate::common::{config_map, env, expect_status, raw, within};
use crate::pod_streaming::run_kubectl;

/// A self-signed `CA:TRUE` certificate for `dns_name`, as the openssl command above makes
/// it: (certificate PEM, key PEM).
fn openssl_style_certificate(dns_name: &str) -> (String, String) {
    let key = KeyPair::generate().expect("a key");
    let mut params = CertificateParams::new(vec![dns_name.to_owned()]).expect("params");
    params.distinguished_name.push(DnType::CommonName, "svc");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).expect("a certificate");
    (cert.pem(), key.serialize_pem())
}

/// Serves `webhook` behind the Service `hooks` in `default` (Endpoints on 127.0.0.1) and
/// registers a validating webhook that calls its `/deny` with `ca_bundle`.
async fn register(env: &TestEnv, webhook: &TestWebhook, ca_bundle: &str) {
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let service: Service = serde_json::from_value(json!({"metadata": {"name": "hooks"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": webhook.port}]}}))
    .expect("service");
    within("service", services.create(&PostParams::default(), &service)).await.expect("create service");
    let endpoints: Api<Endpoints> = Api::namespaced(env.client(), "default");
    let ep: Endpoints = serde_json::from_value(json!({"metadata": {"name": "hooks"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": webhook.port}]}]}))
    .expect("endpoints");
    within("endpoints", endpoints.create(&PostParams::default(), &ep)).await.expect("create endpoints");
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_bundle);
    let by_service = json!({"service": {"namespace": "default", "name": "hooks", "path": "/deny", "port": 443},
        "caBundle": ca});
    validating(&env.client(), "certs", vec![hook("certs.test.opkit.dev", by_service, json!({}))]).await;
}

async fn create(env: &TestEnv, name: &str) -> Result<ConfigMap, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    within("create configmap", api.create(&PostParams::default(), &config_map(name, &[]))).await
}

#[tokio::test]
async fn a_self_signed_ca_certificate_given_as_its_own_ca_bundle_is_trusted() {
    let env = env().await;
    let (cert, key) = openssl_style_certificate("hooks.default.svc");
    let webhook = TestWebhook::serve(&cert, &key, &cert, allow_or_deny).await;
    register(&env, &webhook, &cert).await;

    let (ok, _, stderr) = run_kubectl("1.33", &env, &["create", "configmap", "refused", "--from-literal=a=b"]).await;
    assert!(!ok);
    assert_eq!(
        stderr.trim(),
        "error: failed to create configmap: admission webhook \"certs.test.opkit.dev\" denied the request: no thanks"
    );
    assert_eq!(webhook.calls("/deny").len(), 1, "the webhook was called and its denial honoured");
}

#[tokio::test]
async fn a_ca_certificate_for_another_name_is_refused() {
    let env = env().await;
    let (cert, key) = openssl_style_certificate("elsewhere.default.svc");
    let webhook = TestWebhook::serve(&cert, &key, &cert, allow_or_deny).await;
    register(&env, &webhook, &cert).await;

    let status = expect_status(create(&env, "x").await, 500, "InternalError");
    assert!(
        status.message.ends_with(
            "tls: failed to verify certificate: x509: certificate is valid for elsewhere.default.svc, not hooks.default.svc"
        ),
        "{}",
        status.message
    );
    assert!(webhook.calls("/deny").is_empty());
}

#[tokio::test]
async fn a_ca_certificate_the_bundle_does_not_vouch_for_is_refused() {
    let env = env().await;
    let (cert, key) = openssl_style_certificate("hooks.default.svc");
    let (stranger, _) = openssl_style_certificate("hooks.default.svc");
    let webhook = TestWebhook::serve(&cert, &key, &stranger, allow_or_deny).await;
    register(&env, &webhook, &stranger).await;

    let status = expect_status(create(&env, "x").await, 500, "InternalError");
    assert!(
        status.message.ends_with("tls: failed to verify certificate: x509: certificate signed by unknown authority"),
        "{}",
        status.message
    );
    assert!(webhook.calls("/deny").is_empty());
}

/// Serves `backend` as the aggregated group/version `metrics.example.com/v1beta1` behind
/// the Service `metrics` in `default`, verified against `ca_bundle`, reported available.
async fn register_apiservice(env: &TestEnv, backend: &TestWebhook, ca_bundle: &str) {
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let service: Service = serde_json::from_value(json!({"metadata": {"name": "metrics"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": backend.port}]}}))
    .expect("service");
    within("service", services.create(&PostParams::default(), &service)).await.expect("create service");
    let endpoints: Api<Endpoints> = Api::namespaced(env.client(), "default");
    let ep: Endpoints = serde_json::from_value(json!({"metadata": {"name": "metrics"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": backend.port}]}]}))
    .expect("endpoints");
    within("endpoints", endpoints.create(&PostParams::default(), &ep)).await.expect("create endpoints");
    let apiservices: Api<APIService> = Api::all(env.client());
    let apiservice: APIService = serde_json::from_value(json!({"metadata": {"name": "v1beta1.metrics.example.com"},
        "spec": {"group": "metrics.example.com", "version": "v1beta1", "groupPriorityMinimum": 100,
            "versionPriority": 100, "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_bundle),
            "service": {"namespace": "default", "name": "metrics", "port": 443}}}))
    .expect("apiservice");
    within("apiservice", apiservices.create(&PostParams::default(), &apiservice)).await.expect("create apiservice");
    let status = json!({"status": {"conditions": [{"type": "Available", "status": "True", "reason": "Passed",
        "message": "all checks passed", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}});
    within(
        "apiservice status",
        apiservices.patch_status("v1beta1.metrics.example.com", &PatchParams::default(), &Patch::Merge(&status)),
    )
    .await
    .expect("apiservice status");
}

#[tokio::test]
async fn an_aggregated_api_served_with_a_self_signed_ca_certificate_is_proxied_to() {
    let env = env().await;
    let (cert, key) = openssl_style_certificate("metrics.default.svc");
    let backend = TestWebhook::serve(&cert, &key, &cert, allow_or_deny).await;
    register_apiservice(&env, &backend, &cert).await;

    let r = raw(&env.client(), "GET", "/apis/metrics.example.com/v1beta1", None, vec![]).await;
    assert_eq!(r.code, 200, "{}", r.text);
    assert_eq!(backend.calls("/apis/metrics.example.com/v1beta1").len(), 1);
}

#[tokio::test]
async fn an_aggregated_api_whose_certificate_the_bundle_does_not_vouch_for_is_a_503() {
    let env = env().await;
    let (cert, key) = openssl_style_certificate("metrics.default.svc");
    let (stranger, _) = openssl_style_certificate("metrics.default.svc");
    let backend = TestWebhook::serve(&cert, &key, &stranger, allow_or_deny).await;
    register_apiservice(&env, &backend, &stranger).await;

    // kube-rs retries a 503, so kubectl asks.
    let (ok, _, stderr) = run_kubectl("1.33", &env, &["get", "--raw", "/apis/metrics.example.com/v1beta1"]).await;
    assert!(!ok);
    assert!(stderr.contains("x509: certificate signed by unknown authority"), "{stderr}");
    assert!(backend.calls("/apis/metrics.example.com/v1beta1").is_empty());
}
