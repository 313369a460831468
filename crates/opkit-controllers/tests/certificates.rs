//! The certificate signing controller end to end, as the Kubernetes docs' "issue a
//! certificate for a user" walkthrough: a user makes a key and a certificate request,
//! an admin creates the CertificateSigningRequest and approves it, the signer issues a
//! client certificate from the cluster CA for the requested duration, and the user
//! authenticates to the API server with it as the request's CN and O. Requests for other
//! signers, denied ones and ones asking for usages a client certificate cannot have are
//! not issued.

use crate::common;

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions};
use kube::{Client, Config};
use opkit_testenv::TestEnv;
use secrecy::SecretString;
use serde_json::json;

use common::{Error, wait};

/// A fresh key (PEM) and a certificate request for user `cn` in group `o` (PEM).
fn key_and_request(cn: &str, o: &str) -> Result<(String, String), Error> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    params.distinguished_name.push(rcgen::DnType::OrganizationName, o);
    let request = params.serialize_request(&key)?.pem()?;
    Ok((key.serialize_pem(), request))
}

fn csr(name: &str, request: &str, signer: &str, usages: &[&str]) -> Result<CertificateSigningRequest, Error> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"request": base64::engine::general_purpose::STANDARD.encode(request), "signerName": signer,
            "usages": usages, "expirationSeconds": 3600}
    }))?)
}

async fn set_condition(api: &Api<CertificateSigningRequest>, name: &str, kind: &str) -> Result<(), Error> {
    let approval = json!({"status": {"conditions": [{"type": kind, "status": "True", "reason": "Test", "message": "by the test"}]}});
    api.patch_approval(name, &PatchParams::default(), &Patch::Merge(&approval)).await?;
    Ok(())
}

fn certificate(csr: &CertificateSigningRequest) -> Option<&[u8]> {
    csr.status.as_ref().and_then(|s| s.certificate.as_ref()).map(|c| c.0.as_slice())
}

fn has_condition(csr: &CertificateSigningRequest, kind: &str) -> bool {
    csr.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| cs.iter().any(|c| c.type_ == kind))
}

/// A client authenticating with `cert_pem` and `key_pem` only.
async fn client_with_certificate(env: &TestEnv, cert_pem: &[u8], key_pem: &str) -> Result<Client, Error> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut config =
        Config::from_custom_kubeconfig(env.server().kubeconfig("opkit"), &KubeConfigOptions::default()).await?;
    config.auth_info = AuthInfo {
        client_certificate_data: Some(b64.encode(cert_pem)),
        client_key_data: Some(SecretString::from(b64.encode(key_pem))),
        ..Default::default()
    };
    config.default_retry = false;
    Ok(Client::try_from(config)?)
}

#[tokio::test]
async fn an_approved_request_gets_a_client_certificate_that_authenticates_as_its_subject() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let api: Api<CertificateSigningRequest> = Api::all(env.client());
    let (key, request) = key_and_request("alice", "developers")?;
    api.create(
        &PostParams::default(),
        &csr("alice", &request, "kubernetes.io/kube-apiserver-client", &["client auth"])?,
    )
    .await?;
    set_condition(&api, "alice", "Approved").await?;
    let issued = wait(&api, "alice", |c: Option<&CertificateSigningRequest>| c.and_then(certificate).is_some()).await?;
    let cert_pem = certificate(&issued).ok_or("no certificate")?.to_vec();

    // Valid for the requested hour (from a 5-minute backdate).
    let (_, pem) = x509_parser::pem::parse_x509_pem(&cert_pem)?;
    let parsed = pem.parse_x509()?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;
    let not_after = parsed.validity().not_after.timestamp();
    assert!((not_after - now - 3600).abs() < 120, "not after {not_after}, now {now}");
    assert!(parsed.validity().not_before.timestamp() <= now - 240);
    assert!(parsed.extended_key_usage()?.is_some_and(|e| e.value.client_auth && !e.value.server_auth));

    // The user authenticates with it as alice in developers.
    let user = client_with_certificate(&env, &cert_pem, &key).await?;
    let review =
        Api::<SelfSubjectReview>::all(user).create(&PostParams::default(), &SelfSubjectReview::default()).await?;
    let info = review.status.and_then(|s| s.user_info).ok_or("no user info")?;
    assert_eq!(info.username.as_deref(), Some("alice"));
    assert!(info.groups.as_ref().is_some_and(|g| g.iter().any(|g| g == "developers")), "{:?}", info.groups);
    Ok(())
}

#[tokio::test]
async fn denied_foreign_and_server_usage_requests_are_not_issued() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let api: Api<CertificateSigningRequest> = Api::all(env.client());
    let (_, request) = key_and_request("bob", "dev")?;
    let client = "kubernetes.io/kube-apiserver-client";
    api.create(&PostParams::default(), &csr("denied", &request, client, &["client auth"])?).await?;
    api.create(&PostParams::default(), &csr("foreign", &request, "example.com/other", &["client auth"])?).await?;
    api.create(&PostParams::default(), &csr("serving", &request, client, &["server auth"])?).await?;
    api.create(&PostParams::default(), &csr("marker", &request, client, &["client auth"])?).await?;
    set_condition(&api, "denied", "Denied").await?;
    set_condition(&api, "foreign", "Approved").await?;
    set_condition(&api, "serving", "Approved").await?;

    // A request the signer cannot honour fails with kube's reason.
    let failed =
        wait(&api, "serving", |c: Option<&CertificateSigningRequest>| c.is_some_and(|c| has_condition(c, "Failed")))
            .await?;
    let condition =
        failed.status.and_then(|s| s.conditions).into_iter().flatten().find(|c| c.type_ == "Failed").ok_or("Failed")?;
    assert_eq!(condition.reason.as_deref(), Some("SignerValidationFailure"));
    assert_eq!(condition.message.as_deref(), Some("invalid usage for client certificate: server auth"));

    // The signer has handled every earlier request once a later one is issued.
    set_condition(&api, "marker", "Approved").await?;
    wait(&api, "marker", |c: Option<&CertificateSigningRequest>| c.and_then(certificate).is_some()).await?;
    for name in ["denied", "foreign"] {
        let csr = api.get(name).await?;
        assert!(certificate(&csr).is_none(), "{name} was issued");
        assert!(!has_condition(&csr, "Failed"), "{name} failed");
    }
    Ok(())
}
