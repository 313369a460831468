//! The aggregation layer end to end: once a service-backed APIService is available, its
//! group appears in discovery (`/apis`, `/apis/{group}` and aggregated discovery, so
//! kubectl finds its resources) and requests for it are proxied to the backend with the
//! caller's identity in `X-Remote-User`/`X-Remote-Group` and without its credentials;
//! while it is unavailable, those requests answer 503.

use crate::common;

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, Patch, PatchParams, PostParams};
use opkit_testenv::TestEnv;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use common::backend::{backend, backend_apiservice};
use common::{Error, kubectl, wait};

fn available(a: Option<&APIService>) -> bool {
    let conditions = a.and_then(|a| a.status.as_ref()).and_then(|s| s.conditions.clone()).unwrap_or_default();
    conditions.iter().any(|c| c.type_ == "Available" && c.status == "True")
}

#[tokio::test]
async fn an_available_apiservice_is_discovered_and_proxied() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let stop = CancellationToken::new();
    let (addr, ca_pem) = backend(stop.clone()).await?;

    let services: Api<Service> = Api::namespaced(env.client(), "kube-system");
    let service: Service = serde_json::from_value(json!({"metadata": {"name": "backend"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 6443}]}}))?;
    services.create(&PostParams::default(), &service).await?;
    let endpoints: Api<Endpoints> = Api::namespaced(env.client(), "kube-system");
    let nothing_listens: Endpoints = serde_json::from_value(json!({"metadata": {"name": "backend"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": 1}]}]}))?;
    endpoints.create(&PostParams::default(), &nothing_listens).await?;
    let apiservices: Api<APIService> = Api::all(env.client());
    let apiservice = backend_apiservice(&ca_pem)?;
    apiservices.create(&PostParams::default(), &apiservice).await?;

    // Unavailable: listed in /apis, as kube does, but its requests answer 503.
    let groups = kubectl(&env, &["get", "--raw", "/apis"]).await?;
    assert!(groups.contains("\"name\":\"metrics.example.com\""), "{groups}");
    let refused = kubectl(&env, &["get", "--raw", "/apis/metrics.example.com/v1/namespaces/default/widgets"]).await;
    let refused = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(refused.contains("ServiceUnavailable") || refused.contains("service unavailable"), "{refused}");

    let to_backend =
        json!({"subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": addr.port()}]}]});
    endpoints.patch("backend", &PatchParams::default(), &Patch::Merge(&to_backend)).await?;
    wait(&apiservices, "v1.metrics.example.com", available).await?;

    let group = kubectl(&env, &["get", "--raw", "/apis/metrics.example.com"]).await?;
    let group: serde_json::Value = serde_json::from_str(&group)?;
    assert_eq!(group["kind"], "APIGroup");
    assert_eq!(group["preferredVersion"]["groupVersion"], "metrics.example.com/v1");
    let resources = kubectl(&env, &["api-resources", "--api-group", "metrics.example.com", "--no-headers"]).await?;
    assert!(resources.starts_with("widgets "), "{resources}");

    // kubectl finds the resource by aggregated discovery and the request is proxied with
    // the caller's identity, not its credentials.
    let listed = kubectl(&env, &["get", "widgets", "-o", "json"]).await?;
    let listed: serde_json::Value = serde_json::from_str(&listed)?;
    let widget = &listed["items"][0]["metadata"];
    assert_eq!(widget["name"], "for-kubernetes-admin", "{listed}");
    assert!(widget["annotations"]["groups"].as_str().is_some_and(|g| g.contains("system:masters")), "{listed}");
    assert_eq!(widget["annotations"]["authorization-forwarded"], "false");
    stop.cancel();
    Ok(())
}
