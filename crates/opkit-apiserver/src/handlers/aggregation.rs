//! The aggregation layer's HTTP side (kube-aggregator's proxy and discovery handlers): a
//! request for a group/version this server does not serve, but a service-backed
//! APIService does, is proxied to that APIService's endpoint over TLS with the caller's
//! identity in kube's front-proxy headers (`X-Remote-User`, `X-Remote-Group`); an
//! APIService that is not `Available` answers 503. Discovery lists those groups in
//! `/apis` and `/apis/{group}`, and aggregated discovery includes the resources each
//! available backend reports, or marks the version `Stale` when there are none to report.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, Request, Response};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde_json::{Value, json};
use tokio_stream::wrappers::ReceiverStream;

use super::codec::Body;
use crate::auth::user::UserInfo;
use crate::error::{ApiError, ApiResult};
use crate::registry::Registry;
use crate::registry::aggregation::is_available;

/// How long a backend may take to answer a discovery request.
const DISCOVERY_DEADLINE: Duration = Duration::from_secs(5);

fn group_version(apiservice: &APIService) -> (String, String) {
    let spec = apiservice.spec.clone().unwrap_or_default();
    (spec.group.unwrap_or_default(), spec.version.unwrap_or_default())
}

/// Proxies one request to the backend of `apiservice`.
pub(super) async fn proxy(
    registry: &Registry,
    apiservice: &APIService,
    parts: http::request::Parts,
    body: Bytes,
    user: &UserInfo,
) -> ApiResult<Response<Body>> {
    if !is_available(apiservice) {
        return Err(ApiError::unavailable("service unavailable"));
    }
    let backend = registry.aggregation_backend(apiservice).await.map_err(|why| ApiError::unavailable(why.message))?;
    let client = backend.client(None).await.map_err(|e| ApiError::unavailable(e.to_string()))?;
    let path_and_query = parts.uri.path_and_query().map_or(parts.uri.path(), |p| p.as_str());
    let mut request = Request::builder().method(parts.method.clone()).uri(path_and_query);
    for (name, value) in &parts.headers {
        if super::proxy_headers::forwards_request_header(name.as_str()) {
            request = request.header(name, value);
        }
    }
    request = request.header("x-remote-user", identity_header(&user.name)?);
    for group in &user.groups {
        request = request.header("x-remote-group", identity_header(group)?);
    }
    let request =
        request.body(kube::client::Body::from(body.to_vec())).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let response = client.send(request).await.map_err(|e| {
        let (group, version) = group_version(apiservice);
        let why = crate::webhook_client::transport_message(&e, &backend.address);
        ApiError::unavailable(format!("error trying to reach service {group}/{version}: {why}"))
    })?;
    Ok(stream_back(response))
}

fn identity_header(value: &str) -> ApiResult<HeaderValue> {
    HeaderValue::from_str(value).map_err(|_| ApiError::bad_request("a user name or group cannot be sent as a header"))
}

/// The backend's answer, its body streamed as it arrives (watches included) until the
/// backend or the client stops.
fn stream_back(response: Response<kube::client::Body>) -> Response<Body> {
    let (parts, body) = response.into_parts();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(16);
    tokio::spawn(async move {
        let mut chunks = body.into_data_stream();
        loop {
            tokio::select! {
                chunk = chunks.next() => match chunk {
                    Some(Ok(bytes)) => if tx.send(Ok(Frame::data(bytes))).await.is_err() { break },
                    _ => break,
                },
                _ = tx.closed() => break,
            }
        }
    });
    let mut answer = Response::new(BodyExt::boxed(StreamBody::new(ReceiverStream::new(rx))));
    *answer.status_mut() = parts.status;
    super::proxy_headers::copy_response_headers(&parts.headers, answer.headers_mut());
    answer
}

/// The `/apis` entries of the aggregated groups: each group with its versions, highest
/// version priority first (the preferred one).
pub(super) fn groups(registry: &Registry) -> Vec<Value> {
    let catalog = registry.catalog().snapshot();
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for apiservice in registry.aggregated_apiservices() {
        let (group, version) = group_version(&apiservice);
        if catalog.serves(&group, &version) {
            continue;
        }
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, versions)) => versions.push(version),
            None => groups.push((group, vec![version])),
        }
    }
    groups.iter().map(|(g, vs)| api_group(g, vs)).collect()
}

fn api_group(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> =
        versions.iter().map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v})).collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

/// `/apis/{group}` for an aggregated group.
pub(super) fn group(registry: &Registry, name: &str) -> Option<Value> {
    let mut group = groups(registry).into_iter().find(|g| g["name"] == name)?;
    group["kind"] = json!("APIGroup");
    group["apiVersion"] = json!("v1");
    Some(group)
}

/// The aggregated discovery entries (`apidiscovery.k8s.io` APIGroupDiscovery) of the
/// aggregated groups, as kube-aggregator's discovery manager merges them: a version whose
/// backend answers lists its resources with `freshness: Current`; one whose APIService is
/// not available, or whose backend does not answer, is still listed, without resources
/// and with `freshness: Stale`, which clients report as `stale GroupVersion discovery`.
pub(super) async fn discovery_items(registry: &Registry) -> Vec<Value> {
    let catalog = registry.catalog().snapshot();
    let mut items: Vec<Value> = Vec::new();
    for apiservice in registry.aggregated_apiservices() {
        let (group, version) = group_version(&apiservice);
        if catalog.serves(&group, &version) {
            continue;
        }
        let fetched = match is_available(&apiservice) {
            true => fetch_resource_list(registry, &apiservice).await,
            false => None,
        };
        let entry = match fetched {
            Some(list) => {
                json!({"version": version, "resources": version_discovery(&group, &version, &list), "freshness": "Current"})
            }
            None => json!({"version": version, "freshness": "Stale"}),
        };
        match items.iter_mut().find(|i| i["metadata"]["name"] == group.as_str()) {
            Some(item) => {
                if let Some(versions) = item["versions"].as_array_mut() {
                    versions.push(entry);
                }
            }
            None => items.push(json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": [entry]})),
        }
    }
    items
}

/// The backend's `APIResourceList` for the APIService's group/version.
async fn fetch_resource_list(registry: &Registry, apiservice: &APIService) -> Option<Value> {
    let backend = registry.aggregation_backend(apiservice).await.ok()?;
    let client = backend.client(Some(DISCOVERY_DEADLINE)).await.ok()?;
    let (group, version) = group_version(apiservice);
    let request = Request::get(format!("/apis/{group}/{version}")).body(Vec::new()).ok()?;
    let text = tokio::time::timeout(DISCOVERY_DEADLINE, client.request_text(request)).await.ok()?.ok()?;
    serde_json::from_str(&text).ok()
}

/// An `APIResourceList`'s resources as aggregated discovery's `APIResourceDiscovery`,
/// subresources (`widgets/status`) folded into their resource.
fn version_discovery(group: &str, version: &str, list: &Value) -> Vec<Value> {
    let resources = list["resources"].as_array().cloned().unwrap_or_default();
    let kind_of = |r: &Value| {
        json!({"group": r["group"].as_str().unwrap_or(group), "version": r["version"].as_str().unwrap_or(version),
            "kind": r["kind"]})
    };
    let mut out: Vec<Value> = Vec::new();
    for r in resources.iter().filter(|r| r["name"].as_str().is_some_and(|n| !n.contains('/'))) {
        let mut entry = json!({
            "resource": r["name"], "responseKind": kind_of(r),
            "scope": if r["namespaced"] == true { "Namespaced" } else { "Cluster" },
            "singularResource": r["singularName"], "verbs": r["verbs"],
        });
        for key in ["shortNames", "categories"] {
            if r[key].as_array().is_some_and(|a| !a.is_empty()) {
                entry[key] = r[key].clone();
            }
        }
        out.push(entry);
    }
    for r in &resources {
        let Some((parent, sub)) = r["name"].as_str().and_then(|n| n.split_once('/')) else { continue };
        if let Some(entry) = out.iter_mut().find(|e| e["resource"] == parent) {
            let subresource = json!({"subresource": sub, "responseKind": kind_of(r), "verbs": r["verbs"]});
            match entry["subresources"].as_array_mut() {
                Some(subs) => subs.push(subresource),
                None => entry["subresources"] = json!([subresource]),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_lists_become_discovery_with_subresources_folded_in() {
        let list = json!({"kind": "APIResourceList", "groupVersion": "metrics.k8s.io/v1beta1", "resources": [
            {"name": "pods", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": ["get", "list"]},
            {"name": "pods/status", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": ["get"]},
            {"name": "nodes", "singularName": "", "namespaced": false, "kind": "NodeMetrics", "verbs": ["get", "list"],
                "shortNames": ["nm"]},
        ]});
        let discovered = version_discovery("metrics.k8s.io", "v1beta1", &list);
        assert_eq!(discovered.len(), 2);
        assert_eq!(discovered[0]["scope"], "Namespaced");
        assert_eq!(
            discovered[0]["responseKind"],
            json!({"group": "metrics.k8s.io", "version": "v1beta1", "kind": "PodMetrics"})
        );
        assert_eq!(discovered[0]["subresources"][0]["subresource"], "status");
        assert_eq!(discovered[1]["scope"], "Cluster");
        assert_eq!(discovered[1]["shortNames"], json!(["nm"]));
    }
}
