//! An aggregated API server stand-in for the aggregation tests: HTTPS on 127.0.0.1 with a
//! certificate for `backend.kube-system.svc` from a CA made for the test. It serves the
//! group `metrics.example.com/v1` with one namespaced resource, `widgets` (and
//! `widgets/status`); a list of widgets holds one widget named after the caller's
//! `X-Remote-User`, annotated with its `X-Remote-Group`s and whether an
//! `Authorization` header reached the backend.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use opkit_serve::tls::DevCa;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::Error;

fn answer(req: &hyper::Request<hyper::body::Incoming>) -> Value {
    let header = |name: &str| -> Vec<String> {
        req.headers().get_all(name).iter().filter_map(|v| v.to_str().ok().map(String::from)).collect()
    };
    if req.uri().path().ends_with("/widgets") {
        let user = header("x-remote-user").join(",");
        return json!({"kind": "WidgetList", "apiVersion": "metrics.example.com/v1", "metadata": {}, "items": [{
        "kind": "Widget", "apiVersion": "metrics.example.com/v1",
        "metadata": {"name": format!("for-{user}"), "namespace": "default", "annotations": {
            "groups": header("x-remote-group").join(","),
            "authorization-forwarded": (!header("authorization").is_empty()).to_string(),
        }}}]});
    }
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "metrics.example.com/v1", "resources": [
        {"name": "widgets", "singularName": "widget", "namespaced": true, "kind": "Widget", "verbs": ["get", "list"]},
        {"name": "widgets/status", "singularName": "", "namespaced": true, "kind": "Widget", "verbs": ["get"]},
    ]})
}

/// The APIService `v1.metrics.example.com`, served by the Service `kube-system/backend`
/// on port 443, whose certificate `ca_pem` verifies.
pub(crate) fn backend_apiservice(ca_pem: &str) -> Result<APIService, Error> {
    use base64::Engine as _;
    Ok(serde_json::from_value(json!({
        "metadata": {"name": "v1.metrics.example.com"},
        "spec": {"group": "metrics.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 100,
            "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem),
            "service": {"namespace": "kube-system", "name": "backend", "port": 443}}
    }))?)
}

/// Starts the backend until `stop`; returns its address and its CA (PEM).
pub(crate) async fn backend(stop: CancellationToken) -> Result<(SocketAddr, String), Error> {
    let ca = DevCa::generate("backend-ca")?;
    let cert = ca.issue_serving_cert("backend", &["backend.kube-system.svc".to_string()])?;
    let tls = opkit_serve::tls::server_config(&cert.cert_pem, &cert.key_pem)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let server = opkit_serve::Server::new(listener).tls(tls);
    let addr = server.local_addr()?;
    let service = hyper::service::service_fn(move |req| {
        let body = answer(&req).to_string();
        async move {
            let mut res = hyper::Response::new(Full::new(Bytes::from(body)));
            res.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("application/json"));
            Ok::<_, Infallible>(res)
        }
    });
    tokio::spawn(server.serve(service, stop));
    Ok((addr, ca.cert_pem().to_string()))
}
