//! The transports under the kubelet's exec, attach and port-forward endpoints, once the
//! API server has passed the HTTP upgrade through: SPDY/3.1 sessions ([`spdy`]) and the
//! `channel.k8s.io` WebSocket channel protocols ([`websocket`]), plus what both share —
//! kube's `metav1.Status` error answers, the upgrade checks, the query flags and the
//! output sinks the exec and port-forward handlers write to.

pub(crate) mod spdy;
pub(crate) mod websocket;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode, header};
use http_body_util::Full;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};

/// The body of every answer of the streaming endpoints: a `metav1.Status` on failure, empty
/// on a `101 Switching Protocols`.
pub(crate) type Body = Full<Bytes>;

/// The transport was closed: the client went away or the session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the streaming connection is closed")]
pub(crate) struct Closed;

/// A request the streaming endpoints refuse before upgrading, answered with a
/// `metav1.Status` carrying kube's code, reason and message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct Refusal {
    code: StatusCode,
    reason: &'static str,
    message: String,
    headers: Vec<(header::HeaderName, header::HeaderValue)>,
}

impl Refusal {
    /// kube's `400 BadRequest`.
    pub(crate) fn bad_request(message: impl Into<String>) -> Refusal {
        Refusal { code: StatusCode::BAD_REQUEST, reason: "BadRequest", message: message.into(), headers: Vec::new() }
    }

    /// kube's `403 Forbidden`.
    pub(crate) fn forbidden(message: impl Into<String>) -> Refusal {
        Refusal { code: StatusCode::FORBIDDEN, reason: "Forbidden", message: message.into(), headers: Vec::new() }
    }

    /// Adds a response header (skipped when `value` is not a valid header value).
    pub(crate) fn with_header(mut self, name: header::HeaderName, value: &str) -> Refusal {
        if let Ok(value) = header::HeaderValue::from_str(value) {
            self.headers.push((name, value));
        }
        self
    }

    /// The answer.
    pub(crate) fn into_response(self) -> Response<Body> {
        let status = super::failure_status(self.code, self.reason, &self.message);
        let mut response = Response::new(Full::new(super::status_json(&status)));
        *response.status_mut() = self.code;
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
        for (name, value) in self.headers {
            headers.append(name, value);
        }
        response
    }
}

/// The `metav1.Status` an exec reports on its error stream when the command could not run
/// (kube's `apierrors.NewInternalError`).
pub(crate) fn internal_error_status(message: &str) -> Status {
    Status {
        code: Some(500),
        message: Some(format!("Internal error occurred: {message}")),
        reason: Some("InternalError".to_owned()),
        status: Some("Failure".to_owned()),
        details: Some(StatusDetails {
            causes: Some(vec![StatusCause { message: Some(message.to_owned()), ..StatusCause::default() }]),
            ..StatusDetails::default()
        }),
        ..Status::default()
    }
}

/// An I/O error as Go words a system call's error (`connection refused`).
pub(crate) fn go_error_text(error: &std::io::Error) -> String {
    let text = error.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Whether a header holding comma-separated tokens (`Connection`, `Upgrade`) names `token`.
pub(crate) fn header_has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// The values of a header that may repeat and hold comma-separated lists, in order (as
/// kube's `commaSeparatedHeaderValues`).
pub(crate) fn comma_separated_values(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether the request asks for a WebSocket (kube's `wsstream.IsWebSocketRequest`).
pub(crate) fn is_websocket_request(headers: &HeaderMap) -> bool {
    headers.get(header::UPGRADE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
        && header_has_token(headers, header::CONNECTION, "upgrade")
}

/// The query's `(name, value)` pairs, percent-decoded, in order.
pub(crate) fn query_pairs(uri: &http::Uri) -> Vec<(String, String)> {
    form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes()).into_owned().collect()
}

/// A boolean query flag: kube-apiserver sends `1` to the kubelet, kubectl sends `true` (Go's
/// `strconv.ParseBool` spellings are accepted).
pub(crate) fn query_flag(pairs: &[(String, String)], name: &str) -> bool {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .is_some_and(|(_, v)| matches!(v.as_str(), "1" | "t" | "T" | "true" | "TRUE" | "True"))
}

/// Where one outgoing stream of a session writes: a SPDY stream or a WebSocket channel.
#[derive(Clone)]
pub(crate) enum OutputSink {
    /// A SPDY stream the client opened.
    Spdy(spdy::StreamWriter),
    /// A channel of a WebSocket channel protocol.
    WebSocket(websocket::ChannelWriter),
}

impl OutputSink {
    /// Sends `data` on the stream.
    pub(crate) async fn write(&self, data: Bytes) -> Result<(), Closed> {
        match self {
            OutputSink::Spdy(w) => w.write(data).await,
            OutputSink::WebSocket(w) => w.write(data).await,
        }
    }

    /// Ends the stream's outgoing half (a SPDY FIN; WebSocket channels end with the socket).
    pub(crate) async fn finish(&self) {
        match self {
            OutputSink::Spdy(w) => w.finish().await,
            OutputSink::WebSocket(_) => {}
        }
    }
}
