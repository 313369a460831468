//! Content negotiation: decoding request bodies (JSON, YAML, patch types) and encoding
//! responses (JSON, YAML, Table, watch streams), plus the response builders.

use std::convert::Infallible;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::registry::PatchType;

/// The response body type of every handler.
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// The largest request body accepted, as kube-apiserver's 3 MiB limit.
pub(crate) const MAX_BODY: usize = 3 * 1024 * 1024;

/// How a response should be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// `application/json`
    Json,
    /// `application/yaml`
    Yaml,
    /// `meta.k8s.io/v1` Table, JSON-encoded
    Table,
    /// `meta.k8s.io/v1` PartialObjectMetadata (lists: PartialObjectMetadataList),
    /// JSON-encoded: objects' metadata alone, for metadata-only clients and informers.
    Metadata,
}

fn media_types(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The parameters of one media range, e.g. `as=Table;g=meta.k8s.io;v=v1`.
pub(crate) fn media_param<'a>(media: &'a str, key: &str) -> Option<&'a str> {
    media.split(';').skip(1).filter_map(|p| p.trim().split_once('=')).find(|(k, _)| *k == key).map(|(_, v)| v)
}

fn media_base(media: &str) -> &str {
    media.split(';').next().unwrap_or_default().trim()
}

/// Picks the response encoding from Accept. Errors with 406 when only unsupported types
/// are acceptable.
pub(crate) fn negotiate(headers: &HeaderMap) -> ApiResult<Output> {
    let types = media_types(headers);
    if types.is_empty() {
        return Ok(Output::Json);
    }
    for t in &types {
        let base = media_base(t);
        match (base, media_param(t, "as")) {
            ("application/json", Some("Table"))
                if media_param(t, "g") == Some("meta.k8s.io")
                    && matches!(media_param(t, "v"), Some("v1" | "v1beta1")) =>
            {
                return Ok(Output::Table);
            }
            ("application/json", Some("PartialObjectMetadata" | "PartialObjectMetadataList"))
                if media_param(t, "g") == Some("meta.k8s.io")
                    && matches!(media_param(t, "v"), Some("v1" | "v1beta1")) =>
            {
                return Ok(Output::Metadata);
            }
            ("application/json" | "*/*" | "application/*", None) => return Ok(Output::Json),
            ("application/yaml", None) => return Ok(Output::Yaml),
            _ => {}
        }
    }
    Err(ApiError::not_acceptable(format!(
        "only the following media types are accepted: application/json, application/yaml; got {}",
        types.join(", ")
    )))
}

/// The aggregated-discovery version asked for (`v2` or `v2beta1`), if any.
pub(crate) fn aggregated_discovery(headers: &HeaderMap) -> Option<&'static str> {
    for t in media_types(headers) {
        if media_param(&t, "g") == Some("apidiscovery.k8s.io") && media_param(&t, "as") == Some("APIGroupDiscoveryList")
        {
            match media_param(&t, "v") {
                Some("v2") => return Some("v2"),
                Some("v2beta1") => return Some("v2beta1"),
                _ => {}
            }
        }
        let base = media_base(&t);
        if base == "application/json" && media_param(&t, "as").is_none() {
            return None;
        }
    }
    None
}

/// Whether Accept asks for the protobuf OpenAPI v2 document.
pub(crate) fn wants_openapi_protobuf(headers: &HeaderMap) -> bool {
    media_types(headers).iter().any(|t| media_base(t).starts_with("application/com.github.proto-openapi.spec.v2"))
}

/// Reads the body, refusing more than [`MAX_BODY`] bytes with 413, and a client that
/// takes longer than `timeout` to send it with 504 (kube's request timeout).
pub(crate) async fn read_body(body: hyper::body::Incoming, timeout: std::time::Duration) -> ApiResult<Bytes> {
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    let Ok(collected) = tokio::time::timeout(timeout, limited.collect()).await else {
        return Err(ApiError::timeout(format!(
            "Timeout: request did not complete within the allotted timeout of {}s",
            timeout.as_secs()
        )));
    };
    match collected {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
                Err(ApiError::too_large(MAX_BODY))
            } else {
                Err(ApiError::bad_request(format!("reading request body: {e}")))
            }
        }
    }
}

/// Decodes an object body as JSON or YAML according to Content-Type.
pub(crate) fn decode_object(headers: &HeaderMap, body: &[u8]) -> ApiResult<Value> {
    let ct = content_type(headers);
    match ct.as_str() {
        "" | "application/json" | "*/*" => parse_json_or_yaml(body, false),
        "application/yaml" | "application/x-yaml" | "text/yaml" => parse_json_or_yaml(body, true),
        "application/vnd.kubernetes.protobuf" => crate::protobuf::decode_object(body).map_err(|e| {
            ApiError::bad_request(format!("the body of the request is not a valid Kubernetes protobuf object: {e}"))
        }),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

/// The patch type of a PATCH request's Content-Type.
pub(crate) fn patch_type(headers: &HeaderMap) -> ApiResult<PatchType> {
    match content_type(headers).as_str() {
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
        "application/apply-patch+yaml" | "application/apply-patch+cbor" => Ok(PatchType::Apply),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

/// Decodes a patch body.
pub(crate) fn decode_patch(kind: PatchType, body: &[u8]) -> ApiResult<Value> {
    let v = parse_json_or_yaml(body, kind == PatchType::Apply)?;
    match kind {
        PatchType::Json if !v.is_array() => Err(ApiError::bad_request("json patch must be an array of operations")),
        PatchType::Merge | PatchType::Strategic | PatchType::Apply if !v.is_object() => {
            Err(ApiError::bad_request("patch body must be a JSON object"))
        }
        _ => Ok(v),
    }
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| media_base(v).to_ascii_lowercase())
        .unwrap_or_default()
}

fn parse_json_or_yaml(body: &[u8], yaml_first: bool) -> ApiResult<Value> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    let json = || serde_json::from_slice::<Value>(body);
    if !yaml_first {
        return json().map_err(|e| ApiError::bad_request(format!("the body of the request is not valid JSON: {e}")));
    }
    match json() {
        Ok(v) => Ok(v),
        // The YAML parser recurses once per level with large frames (its budget allows 64
        // levels), which on a request's stack, under the handler's futures, can overflow
        // it and abort the server: YAML bodies are parsed on a stack of their own.
        Err(_) => stacker::grow(YAML_STACK, || serde_saphyr::from_slice::<Value>(body))
            .map_err(|e| ApiError::bad_request(format!("the body of the request is not valid YAML: {e}"))),
    }
}

/// The stack a YAML request body is parsed on.
const YAML_STACK: usize = 16 << 20;

fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed()
}

/// A response with a JSON or YAML encoded value.
pub(crate) fn respond(code: u16, value: &Value, output: Output, warnings: &[String]) -> Response<Body> {
    let (bytes, ct) = match output {
        Output::Yaml => match serde_saphyr::to_string(value) {
            Ok(yaml) => (Bytes::from(yaml), "application/yaml"),
            Err(e) => return respond_error(&ApiError::internal(format!("encoding the response as YAML: {e}"))),
        },
        _ => (Bytes::from(value.to_string()), "application/json"),
    };
    let mut r = Response::new(full(bytes));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    for w in warnings {
        let text = format!("299 - {}", serde_json::Value::String(w.clone()));
        if let Ok(v) = HeaderValue::from_str(&text) {
            r.headers_mut().append("Warning", v);
        }
    }
    r
}

/// A JSON response with a custom Content-Type.
pub(crate) fn respond_typed(value: &Value, content_type: &str) -> Response<Body> {
    let mut r = Response::new(full(value.to_string()));
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

/// A raw response.
pub(crate) fn respond_bytes(bytes: impl Into<Bytes>, content_type: &'static str) -> Response<Body> {
    let mut r = Response::new(full(bytes));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// A `metav1.Status` error response.
pub(crate) fn respond_error(e: &ApiError) -> Response<Body> {
    let mut r = Response::new(full(crate::json::to_vec(&e.to_status())));
    *r.status_mut() = e.status_code();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(v) = e.details.retry_after.and_then(|a| HeaderValue::from_str(&a.to_string()).ok()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// A streaming response (watches).
pub(crate) fn respond_stream(body: Body, content_type: &'static str) -> Response<Body> {
    let mut r = Response::new(body);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(accept: &str) -> HeaderMap {
        let mut m = HeaderMap::new();
        m.insert(header::ACCEPT, HeaderValue::from_str(accept).expect("header"));
        m
    }

    #[test]
    fn negotiation() {
        assert_eq!(negotiate(&HeaderMap::new()).ok(), Some(Output::Json));
        let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate(&h(table)).ok(), Some(Output::Table));
        assert_eq!(negotiate(&h("application/yaml")).ok(), Some(Output::Yaml));
        assert_eq!(negotiate(&h("application/vnd.kubernetes.protobuf")).err().map(|e| e.code), Some(406));
        let disc = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(aggregated_discovery(&h(disc)), Some("v2"));
        assert_eq!(aggregated_discovery(&h("application/json")), None);
    }

    #[test]
    fn bodies() {
        let mut m = HeaderMap::new();
        m.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/yaml"));
        let v = decode_object(&m, b"kind: ConfigMap\ndata:\n  a: b\n").expect("yaml");
        assert_eq!(v["data"]["a"], "b");
        assert_eq!(decode_object(&HeaderMap::new(), b"{bad").err().map(|e| e.code), Some(400));
        assert_eq!(decode_patch(PatchType::Json, b"{}").err().map(|e| e.code), Some(400));
    }
}
