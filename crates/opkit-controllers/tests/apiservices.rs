//! The APIService availability controller against a real opkit API server: a
//! service-backed APIService is unavailable with kube's reasons until its Service has an
//! endpoint that answers the group/version's discovery over TLS, verified against the
//! APIService's `caBundle` for the name `<service>.<namespace>.svc`. The backend is a
//! small HTTPS server on 127.0.0.1 with a certificate from a CA made for the test.

use crate::common;

use base64::Engine as _;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, Patch, PatchParams, PostParams};
use opkit_serve::tls::DevCa;
use opkit_testenv::TestEnv;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use common::backend::{backend, backend_apiservice};
use common::{Error, kubectl, wait};

fn reason_is(reason: &'static str) -> impl Fn(Option<&APIService>) -> bool {
    move |a| {
        let conditions = a.and_then(|a| a.status.as_ref()).and_then(|s| s.conditions.clone()).unwrap_or_default();
        conditions.iter().any(|c| c.type_ == "Available" && c.reason.as_deref() == Some(reason))
    }
}

fn message_of(a: &APIService) -> String {
    let conditions = a.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    conditions.into_iter().find(|c| c.type_ == "Available").and_then(|c| c.message).unwrap_or_default()
}

#[tokio::test]
async fn availability_follows_the_service_its_endpoints_and_discovery() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let stop = CancellationToken::new();
    let (addr, ca_pem) = backend(stop.clone()).await?;

    let apiservices: Api<APIService> = Api::all(env.client());
    let apiservice = backend_apiservice(&ca_pem)?;
    apiservices.create(&PostParams::default(), &apiservice).await?;
    let a = wait(&apiservices, "v1.metrics.example.com", reason_is("ServiceNotFound")).await?;
    assert_eq!(message_of(&a), "service/backend in \"kube-system\" is not present");

    let services: Api<Service> = Api::namespaced(env.client(), "kube-system");
    let service: Service = serde_json::from_value(json!({"metadata": {"name": "backend"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 6443}]}}))?;
    services.create(&PostParams::default(), &service).await?;
    let a = wait(&apiservices, "v1.metrics.example.com", reason_is("MissingEndpoints")).await?;
    assert_eq!(message_of(&a), "cannot find endpoints for service/backend in \"kube-system\"");

    // A simulated pod's address: reported unreachable, and never contacted.
    let endpoints: Api<Endpoints> = Api::namespaced(env.client(), "kube-system");
    let simulated: Endpoints = serde_json::from_value(json!({"metadata": {"name": "backend"},
        "subsets": [{"addresses": [{"ip": "10.244.9.9"}], "ports": [{"name": "https", "port": 6443}]}]}))?;
    endpoints.create(&PostParams::default(), &simulated).await?;
    let a = wait(&apiservices, "v1.metrics.example.com", reason_is("FailedDiscoveryCheck")).await?;
    assert!(message_of(&a).contains("10.244.9.9 is not a loopback address"), "{}", message_of(&a));

    // An endpoint where nothing listens: the discovery check fails.
    let unreachable =
        json!({"subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": 1}]}]});
    endpoints.patch("backend", &PatchParams::default(), &Patch::Merge(&unreachable)).await?;
    let is_refused = |a: Option<&APIService>| a.is_some_and(|a| message_of(a).contains("https://127.0.0.1:1/"));
    wait(&apiservices, "v1.metrics.example.com", is_refused).await?;
    let a = wait(&apiservices, "v1.metrics.example.com", reason_is("FailedDiscoveryCheck")).await?;
    let message = message_of(&a);
    assert!(
        message.starts_with("failing or missing response from https://127.0.0.1:1/apis/metrics.example.com/v1"),
        "{message}"
    );

    // The endpoint becomes the backend, whose certificate the caBundle verifies.
    let to_backend =
        json!({"subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": addr.port()}]}]});
    endpoints.patch("backend", &PatchParams::default(), &Patch::Merge(&to_backend)).await?;
    let a = wait(&apiservices, "v1.metrics.example.com", reason_is("Passed")).await?;
    assert_eq!(message_of(&a), "all checks passed");

    let table = kubectl(&env, &["get", "apiservices", "--no-headers"]).await?;
    let row = |name: &str| table.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_default().to_string();
    assert!(row("v1.apps").contains("Local") && row("v1.apps").contains("True"), "{table}");
    assert!(row("v1.metrics.example.com").contains("kube-system/backend"), "{table}");
    assert!(row("v1.metrics.example.com").contains("True"), "{table}");

    // Without the right CA the certificate is refused.
    let wrong_ca = DevCa::generate("other-ca")?;
    let patch = json!({"spec": {"caBundle": base64::engine::general_purpose::STANDARD.encode(wrong_ca.cert_pem())}});
    apiservices.patch("v1.metrics.example.com", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    wait(&apiservices, "v1.metrics.example.com", reason_is("FailedDiscoveryCheck")).await?;
    stop.cancel();
    Ok(())
}
