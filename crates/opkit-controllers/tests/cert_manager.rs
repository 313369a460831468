//! The cert-manager stand-in end to end, with the objects kubebuilder's and
//! operator-sdk's `config/certmanager/` and `config/default` write: a self-signed
//! Issuer, a Certificate for the webhook Service, and webhook configurations and a CRD
//! annotated `cert-manager.io/inject-ca-from`. The Secret gets a certificate a TLS
//! client accepts for the Service's name when it trusts the injected bundle; a deleted
//! Secret is issued again and the new bundle injected; a `ca` issuer signs with its CA.

use crate::common;

use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::wait::Condition;
use opkit_testenv::TestEnv;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use serde_json::json;

use common::{Error, kubectl, wait};

const SERVICE_NAME: &str = "webhook-service.default.svc";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("cert-manager.io", "v1", kind), plural)
}

async fn create(api: &Api<DynamicObject>, body: serde_json::Value) -> Result<(), Error> {
    api.create(&PostParams::default(), &serde_json::from_value(body)?).await?;
    Ok(())
}

fn data(secret: &Secret, key: &str) -> Vec<u8> {
    secret.data.as_ref().and_then(|d| d.get(key)).map(|b| b.0.clone()).unwrap_or_default()
}

/// Whether a Secret holds a key pair and a CA (issued, as cert-manager writes it).
fn issued() -> impl Condition<Secret> {
    |s: Option<&Secret>| s.is_some_and(|s| ["tls.crt", "tls.key", "ca.crt"].iter().all(|k| !data(s, k).is_empty()))
}

/// Whether the Secret's certificate is trusted for `name` by a client whose only root
/// is `ca_pem`, as the API server's webhook client trusts an injected `caBundle`.
fn verifies(cert_pem: &[u8], ca_pem: &[u8], name: &str) -> Result<(), Error> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(ca?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build()?;
    let leaf = CertificateDer::from_pem_slice(cert_pem)?;
    verifier.verify_server_cert(&leaf, &[], &ServerName::try_from(name.to_string())?, &[], UnixTime::now())?;
    Ok(())
}

fn webhook_configuration(name: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": name, "annotations": {"cert-manager.io/inject-ca-from": "default/serving-cert"}},
        "webhooks": [{
            "name": "vthing.example.com",
            "clientConfig": {"service": {"namespace": "default", "name": "webhook-service", "path": "/validate"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["things"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    })
}

#[tokio::test]
async fn the_scaffolds_certificate_is_issued_and_its_ca_injected_and_reissued() -> Result<(), Error> {
    let env = TestEnv::builder().cert_manager().start().await?;
    let client = env.client();
    let issuers = Api::<DynamicObject>::namespaced_with(client.clone(), "default", &resource("Issuer", "issuers"));
    let certificates =
        Api::<DynamicObject>::namespaced_with(client.clone(), "default", &resource("Certificate", "certificates"));
    create(
        &issuers,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
        "metadata": {"name": "selfsigned-issuer"}, "spec": {"selfSigned": {}}}),
    )
    .await?;
    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "serving-cert"},
        "spec": {"dnsNames": [SERVICE_NAME, "webhook-service.default.svc.cluster.local"],
                 "issuerRef": {"kind": "Issuer", "name": "selfsigned-issuer"},
                 "secretName": "webhook-server-cert"}}),
    )
    .await?;

    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret = wait(&secrets, "webhook-server-cert", issued()).await?;
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let annotations = secret.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get("cert-manager.io/certificate-name").map(String::as_str), Some("serving-cert"));
    verifies(&data(&secret, "tls.crt"), &data(&secret, "ca.crt"), SERVICE_NAME)?;
    assert!(verifies(&data(&secret, "tls.crt"), &data(&secret, "ca.crt"), "elsewhere.default.svc").is_err());

    let ready = |o: Option<&DynamicObject>| {
        o.is_some_and(|o| {
            o.data["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
        })
    };
    let certificate = wait(&certificates, "serving-cert", ready).await?;
    assert!(certificate.data["status"]["notAfter"].is_string(), "{:?}", certificate.data["status"]);
    wait(&issuers, "selfsigned-issuer", ready).await?;
    let listed = kubectl(&env, &["get", "certificates", "-n", "default"]).await?;
    assert!(listed.contains("serving-cert") && listed.contains("True"), "{listed}");

    // The webhook configurations and the CRD the scaffold annotates get the bundle.
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    validating.create(&PostParams::default(), &serde_json::from_value(webhook_configuration("validating"))?).await?;
    mutating.create(&PostParams::default(), &serde_json::from_value(webhook_configuration("mutating"))?).await?;
    let ca = data(&secret, "ca.crt");
    let bundle_is = |ca: Vec<u8>| {
        move |c: Option<&ValidatingWebhookConfiguration>| {
            c.is_some_and(|c| {
                c.webhooks.iter().flatten().all(|w| w.client_config.ca_bundle.as_ref().map(|b| &b.0) == Some(&ca))
            })
        }
    };
    wait(&validating, "validating", bundle_is(ca.clone())).await?;
    let ca_for_mutating = ca.clone();
    wait(&mutating, "mutating", move |c: Option<&MutatingWebhookConfiguration>| {
        c.is_some_and(|c| {
            c.webhooks
                .iter()
                .flatten()
                .all(|w| w.client_config.ca_bundle.as_ref().map(|b| &b.0) == Some(&ca_for_mutating))
        })
    })
    .await?;

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = json!({
        "metadata": {"name": "things.example.com", "annotations": {"cert-manager.io/inject-ca-from": "default/serving-cert"}},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing", "listKind": "ThingList"},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                {"name": "v2", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
                "service": {"namespace": "default", "name": "webhook-service", "path": "/convert"}}}},
        },
    });
    crds.create(&PostParams::default(), &serde_json::from_value(crd)?).await?;
    let ca_for_crd = ca.clone();
    wait(&crds, "things.example.com", move |c: Option<&CustomResourceDefinition>| {
        let config = c.and_then(|c| c.spec.conversion.as_ref()?.webhook.as_ref()?.client_config.clone());
        config.and_then(|c| c.ca_bundle).is_some_and(|b| b.0 == ca_for_crd)
    })
    .await?;

    // A deleted Secret is issued again, and the new bundle follows.
    secrets.delete("webhook-server-cert", &DeleteParams::default()).await?;
    let old_cert = data(&secret, "tls.crt");
    let reissued = wait(&secrets, "webhook-server-cert", move |s: Option<&Secret>| {
        s.is_some_and(|s| !data(s, "tls.crt").is_empty() && data(s, "tls.crt") != old_cert)
    })
    .await?;
    verifies(&data(&reissued, "tls.crt"), &data(&reissued, "ca.crt"), SERVICE_NAME)?;
    wait(&validating, "validating", bundle_is(data(&reissued, "ca.crt"))).await?;
    Ok(())
}

#[tokio::test]
async fn a_ca_issuer_signs_with_its_ca_and_an_unknown_issuer_is_reported() -> Result<(), Error> {
    let env = TestEnv::builder().cert_manager().start().await?;
    let client = env.client();
    let root = opkit_serve::tls::DevCa::generate("team root")?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "root-ca"},
                "type": "kubernetes.io/tls",
                "stringData": {"tls.crt": root.cert_pem(), "tls.key": root.key_pem()},
            }))?,
        )
        .await?;
    let issuers = Api::<DynamicObject>::namespaced_with(client.clone(), "default", &resource("Issuer", "issuers"));
    let certificates =
        Api::<DynamicObject>::namespaced_with(client.clone(), "default", &resource("Certificate", "certificates"));
    create(
        &issuers,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
        "metadata": {"name": "team-ca"}, "spec": {"ca": {"secretName": "root-ca"}}}),
    )
    .await?;
    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "api"},
        "spec": {"dnsNames": ["api.default.svc"], "duration": "24h",
                 "issuerRef": {"name": "team-ca"}, "secretName": "api-tls"}}),
    )
    .await?;
    let secret = wait(&secrets, "api-tls", issued()).await?;
    assert_eq!(data(&secret, "ca.crt"), root.cert_pem().as_bytes());
    verifies(&data(&secret, "tls.crt"), root.cert_pem().as_bytes(), "api.default.svc")?;

    create(
        &certificates,
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "orphan"},
        "spec": {"dnsNames": ["x.default.svc"], "issuerRef": {"name": "missing"}, "secretName": "orphan-tls"}}),
    )
    .await?;
    let reported = wait(&certificates, "orphan", |o: Option<&DynamicObject>| {
        o.is_some_and(|o| {
            o.data["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["status"] == "False"))
        })
    })
    .await?;
    let message = reported.data["status"]["conditions"][0]["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("\"missing\" not found"), "{message}");
    assert!(secrets.get_opt("orphan-tls").await?.is_none());
    Ok(())
}
