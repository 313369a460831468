//! An APIService whose backend does not answer is noticed, as kube-aggregator's
//! discovery manager makes it noticed: aggregated discovery still lists its group with
//! the version marked `freshness: Stale` (and no resources), the legacy `/apis` still
//! lists it, and `/apis/<group>/<version>` answers 503. kubectl therefore fails
//! `api-resources` with `unable to retrieve the complete list of server APIs`.

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::{env, raw, within};
use crate::pod_streaming::run_kubectl;

const GROUP_VERSION: &str = "metrics.example.com/v1beta1";

/// An APIService for [`GROUP_VERSION`] backed by a Service with no endpoints, reported
/// unavailable as kube's availability controller reports it.
async fn dead_apiservice(env: &opkit_testenv::TestEnv) {
    let service: Service = serde_json::from_value(json!({"metadata": {"name": "metrics", "namespace": "default"},
        "spec": {"ports": [{"port": 443, "targetPort": 6443}]}}))
    .expect("service");
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    within("service", services.create(&PostParams::default(), &service)).await.expect("create service");
    let apiservice: APIService = serde_json::from_value(json!({"metadata": {"name": "v1beta1.metrics.example.com"},
        "spec": {"group": "metrics.example.com", "version": "v1beta1", "groupPriorityMinimum": 100,
            "versionPriority": 100, "insecureSkipTLSVerify": true,
            "service": {"namespace": "default", "name": "metrics", "port": 443}}}))
    .expect("apiservice");
    let apiservices: Api<APIService> = Api::all(env.client());
    within("apiservice", apiservices.create(&PostParams::default(), &apiservice)).await.expect("create apiservice");
    let status = json!({"status": {"conditions": [{"type": "Available", "status": "False",
        "reason": "MissingEndpoints", "message": "endpoints for service/metrics in \"default\" have no addresses",
        "lastTransitionTime": "2024-01-01T00:00:00Z"}]}});
    within(
        "apiservice status",
        apiservices.patch_status("v1beta1.metrics.example.com", &PatchParams::default(), &Patch::Merge(&status)),
    )
    .await
    .expect("apiservice status");
}

/// `/apis` as aggregated discovery (`apidiscovery.k8s.io/v2`).
async fn aggregated_apis(env: &opkit_testenv::TestEnv) -> Value {
    let request = http::Request::get("/apis")
        .header(http::header::ACCEPT, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
        .body(kube::client::Body::empty())
        .expect("request");
    let response = within("GET /apis", env.client().send(request)).await.expect("GET /apis");
    let body = within("the body", response.into_body().collect()).await.expect("body").to_bytes();
    serde_json::from_slice(&body).expect("an APIGroupDiscoveryList")
}

#[tokio::test]
async fn a_dead_apiservice_is_stale_in_aggregated_discovery_and_503_below() {
    let env = env().await;
    dead_apiservice(&env).await;

    let list = aggregated_apis(&env).await;
    let items = list["items"].as_array().expect("items");
    let group = items.iter().find(|i| i["metadata"]["name"] == "metrics.example.com").expect("the group is listed");
    assert_eq!(group["versions"], json!([{"version": "v1beta1", "freshness": "Stale"}]));
    assert!(
        items
            .iter()
            .filter(|i| i["metadata"]["name"] != "metrics.example.com")
            .all(|i| i["versions"].as_array().is_some_and(|vs| vs.iter().all(|v| v["freshness"] == "Current"))),
        "every other group is current"
    );

    let legacy = raw(&env.client(), "GET", "/apis", None, vec![]).await;
    let groups = legacy.json["groups"].as_array().expect("groups");
    assert!(groups.iter().any(|g| g["name"] == "metrics.example.com"), "{}", legacy.text);
    // kube-rs retries a 503, so kubectl asks for the group/version.
    let (ok, _, stderr) = run_kubectl("1.33", &env, &["get", "--raw", &format!("/apis/{GROUP_VERSION}")]).await;
    assert!(!ok);
    assert!(stderr.starts_with("Error from server (ServiceUnavailable)"), "{stderr}");
}
