//! The pod streaming subresources' HTTP side, as kube-apiserver proxies them to the pod's
//! kubelet: `pods/log` (GET) is forwarded to `/containerLogs/...` with kube's log options
//! and its body streamed back as it arrives (a `follow` ends when the kubelet ends or the
//! client goes away); `pods/exec`, `pods/attach` (GET and POST) and `pods/portforward`
//! are forwarded with their query (port-forward's `ports` turned into the kubelet's
//! `port`, as kube does) and upgrade headers, and on the kubelet's 101 the
//! client's upgraded connection is spliced with the kubelet's, byte for byte, both ways.
//! Any other answer of the kubelet is passed on; one that cannot be reached is kube's 500
//! with the dial error. Spliced streams end when the server stops. The checks before any of it are the registry's
//! (`registry/pod_streaming.rs`).

use std::convert::Infallible;

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderName, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;

use super::AppState;
use super::codec::Body;
use super::route::{ResourceRequest, parse_query};
use crate::error::{ApiError, ApiResult};
use crate::registry::pod_streaming::{KubeletLocation, LOG_OPTIONS, PodStream, kubelet_port_forward_query};

/// The most bytes of a kubelet's error answer read to pass it on.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// The request headers an upgrade needs at the kubelet.
fn forwarded_header(name: &HeaderName) -> bool {
    let name = name.as_str();
    matches!(name, "upgrade" | "connection" | "x-stream-protocol-version")
        || name.starts_with("sec-websocket-")
        || name == "user-agent"
}

/// The stream `req` addresses, when its resource's kind has it among the subresources a
/// kubelet serves.
pub(super) fn stream_of(state: &AppState, req: &ResourceRequest) -> Option<PodStream> {
    let sub = req.subresource.as_deref()?;
    req.name.as_ref()?;
    let info = state.registry.catalog().snapshot().lookup(&req.group, &req.version, &req.resource)?;
    let served = state.registry.strategy_for(&info).kubelet_subresources().iter().any(|s| s.name == sub);
    if served { PodStream::of(sub) } else { None }
}

/// Serves one pod streaming request.
pub(super) async fn serve(
    state: &AppState,
    kind: PodStream,
    req: &ResourceRequest,
    parts: http::request::Parts,
    body: Incoming,
) -> ApiResult<Response<Body>> {
    let resource = format!("{}/{}", req.resource, req.subresource.as_deref().unwrap_or_default());
    let allowed = match kind {
        PodStream::Log => parts.method == Method::GET,
        _ => parts.method == Method::GET || parts.method == Method::POST,
    };
    if !allowed {
        let verb = parts.method.as_str().to_ascii_lowercase();
        return Err(ApiError::method_not_supported("", &resource, &verb));
    }
    let (Some(namespace), Some(name)) = (req.namespace.as_deref(), req.name.as_deref()) else {
        return Err(ApiError::no_route());
    };
    let query = parse_query(parts.uri.query());
    // The kubelet's query: kube's `streamParams` of the decoded options. Port-forward's
    // `ports` becomes the kubelet's `port`; exec and attach keep the client's names.
    let kubelet_query = match kind {
        PodStream::PortForward => kubelet_port_forward_query(parts.uri.query())?,
        _ => parts.uri.query().map(str::to_owned),
    };
    let Some(location) = state.registry.pod_stream_location(kind, namespace, name, &query).await? else {
        return Ok(plain_text(StatusCode::OK, Bytes::new()));
    };
    match kind {
        PodStream::Log => logs(state, location, &query).await,
        _ => upgrade(state, location, kubelet_query, Request::from_parts(parts, body)).await,
    }
}

/// Forwards a log request and streams the kubelet's answer back.
async fn logs(
    state: &AppState,
    location: KubeletLocation,
    query: &std::collections::HashMap<String, String>,
) -> ApiResult<Response<Body>> {
    let forwarded: Vec<String> = LOG_OPTIONS
        .iter()
        .filter_map(|key| {
            let value = query.get(*key).filter(|v| !v.is_empty())?;
            let encoded = percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC);
            Some(format!("{key}={encoded}"))
        })
        .collect();
    let mut uri = location.path.clone();
    if !forwarded.is_empty() {
        uri.push('?');
        uri.push_str(&forwarded.join("&"));
    }
    let request = Request::get(&uri)
        .header(header::HOST, &location.address)
        .body(Empty::new())
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let response =
        state.kubelet.send(&location.address, request).await.map_err(|e| ApiError::internal_raw(e.to_string()))?;
    if !response.status().is_success() {
        return Ok(kubelet_error(response).await);
    }
    let mut answer = stream_back(response);
    answer.headers_mut().entry(header::CONTENT_TYPE).or_insert(http::HeaderValue::from_static("text/plain"));
    Ok(answer)
}

/// Forwards an exec, attach or port-forward request; on the kubelet's 101 answers 101
/// and splices the two upgraded connections.
async fn upgrade(
    state: &AppState,
    location: KubeletLocation,
    query: Option<String>,
    mut client: Request<Incoming>,
) -> ApiResult<Response<Body>> {
    let mut uri = location.path.clone();
    if let Some(query) = query {
        uri.push('?');
        uri.push_str(&query);
    }
    let mut request =
        Request::builder().method(client.method().clone()).uri(&uri).header(header::HOST, &location.address);
    for (name, value) in client.headers() {
        if forwarded_header(name) {
            request = request.header(name, value);
        }
    }
    let request = request.body(Empty::new()).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let mut response =
        state.kubelet.send(&location.address, request).await.map_err(|e| ApiError::internal_raw(e.to_string()))?;
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        if response.status().is_success() {
            return Ok(stream_back(response));
        }
        return Ok(kubelet_error(response).await);
    }
    let client_upgrade = hyper::upgrade::on(&mut client);
    let kubelet_upgrade = hyper::upgrade::on(&mut response);
    let shutdown = state.shutdown.clone();
    tokio::spawn(shutdown.run_until_cancelled_owned(async move {
        let (client, kubelet) = match tokio::try_join!(client_upgrade, kubelet_upgrade) {
            Ok(both) => both,
            Err(e) => {
                tracing::debug!(error = %e, "a stream upgrade failed");
                return;
            }
        };
        let (mut client, mut kubelet) = (TokioIo::new(client), TokioIo::new(kubelet));
        if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut kubelet).await {
            tracing::debug!(error = %e, "a spliced stream ended");
        }
    }));
    let mut answer = Response::new(Full::new(Bytes::new()).map_err(|never| match never {}).boxed());
    *answer.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    for (name, value) in response.headers() {
        answer.headers_mut().append(name, value.clone());
    }
    Ok(answer)
}

/// The kubelet's successful answer, its body streamed as it arrives until the kubelet
/// ends it, fails, or the client goes away (dropping the body drops the connection).
fn stream_back(response: Response<Incoming>) -> Response<Body> {
    let (parts, body) = response.into_parts();
    let chunks = body
        .into_data_stream()
        .take_while(|chunk| std::future::ready(chunk.is_ok()))
        .filter_map(|chunk| std::future::ready(chunk.ok().map(|bytes| Ok::<_, Infallible>(Frame::data(bytes)))));
    let mut answer = Response::new(BodyExt::boxed(StreamBody::new(chunks)));
    *answer.status_mut() = parts.status;
    super::proxy_headers::copy_response_headers(&parts.headers, answer.headers_mut());
    answer
}

/// The kubelet's error answer: passed on as it is when its body is a Status, else a
/// Status with its code and its text (kube's generic server response).
async fn kubelet_error(response: Response<Incoming>) -> Response<Body> {
    let status = response.status();
    let limited = http_body_util::Limited::new(response.into_body(), ERROR_BODY_LIMIT);
    let body = limited.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let is_status = serde_json::from_slice::<serde_json::Value>(&body).is_ok_and(|v| v["kind"] == "Status");
    if is_status {
        let mut answer = Response::new(Full::new(body).map_err(|never| match never {}).boxed());
        *answer.status_mut() = status;
        answer.headers_mut().insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
        return answer;
    }
    let text = String::from_utf8_lossy(&body).trim().to_owned();
    super::codec::respond_error(&ApiError::from_backend(status.as_u16(), text))
}

/// A plain-text answer.
fn plain_text(status: StatusCode, body: Bytes) -> Response<Body> {
    let mut answer = Response::new(Full::new(body).map_err(|never| match never {}).boxed());
    *answer.status_mut() = status;
    answer.headers_mut().insert(header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
    answer
}
