//! The kubelet's `portForward` endpoint (`/portForward/{namespace}/{pod}`): over a SPDY/3.1
//! session (`portforward.k8s.io`) the client opens, for each connection it forwards, an
//! error stream and a data stream carrying the same `port` and `requestID` headers; the
//! data stream is joined to a TCP connection to the pod's IP and port, and a failure is
//! reported on the error stream in the kubelet's words.
//!
//! kubectl 1.30+ first tries the PortForwardWebsockets tunnel (`SPDY/3.1+portforward.k8s.io`
//! over a WebSocket); it is refused as a kubelet without that feature refuses it, with a
//! `403`, and kubectl falls back to SPDY.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::stream::is_websocket_request;
use super::stream::spdy::{self, IncomingStream, RST_CANCEL, Session};
use super::stream::websocket::Handshake;

/// The port-forward protocol spoken over SPDY.
const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";
/// How long the client has to open both streams of a forwarded connection.
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

/// The error and data streams of one forwarded connection, as they arrive.
struct StreamPair {
    port: u16,
    error: Option<IncomingStream>,
    data: Option<IncomingStream>,
    deadline: Instant,
}

/// What the error stream carries when forwarding fails (the kubelet's
/// `portForwardErrResponse`).
#[derive(serde::Serialize)]
struct ForwardError {
    #[serde(rename = "closeConnection", skip_serializing_if = "std::ops::Not::not")]
    close_connection: bool,
    message: String,
}

/// Serves a port-forward request: answers `101 Switching Protocols` and forwards each
/// stream pair the client opens to `pod_ip` in the background, or answers a `metav1.Status`
/// failure (`400` for a request that is no SPDY upgrade, `403` when no protocol is shared,
/// including the WebSocket tunnel). The body is [`http_body_util::Full`]: empty on success,
/// the Status JSON on failure.
pub async fn serve(mut req: Request<Incoming>, pod_ip: IpAddr) -> Response<http_body_util::Full<Bytes>> {
    if is_websocket_request(req.headers()) {
        // No WebSocket protocol is served: this answers the PortForwardWebsockets tunnel as a
        // kubelet without the feature does, and kubectl falls back to SPDY.
        return match Handshake::negotiate(req.headers(), &[]) {
            Ok(handshake) => handshake.switching_protocols(),
            Err(refusal) => refusal.into_response(),
        };
    }
    if let Err(refusal) = spdy::negotiate(req.headers(), &[PORT_FORWARD_PROTOCOL]) {
        return refusal.into_response();
    }
    let pod = pod_full_name(req.uri().path());
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else { return };
        let session = Session::start(TokioIo::new(upgraded));
        handle_streams(session, pod_ip, &pod).await;
    });
    spdy::switching_protocols(PORT_FORWARD_PROTOCOL)
}

/// The pod as the kubelet names it in errors (`name_namespace`), from the kubelet's
/// `/portForward/{namespace}/{pod}` (or the API server's `.../namespaces/{namespace}/pods/{pod}/portforward`).
fn pod_full_name(path: &str) -> String {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let after = |name: &str| segments.iter().position(|s| *s == name).and_then(|i| segments.get(i + 1)).copied();
    let found = match after("portForward") {
        Some(namespace) => after(namespace).map(|pod| (namespace, pod)),
        None => after("namespaces").zip(after("pods")),
    };
    match found {
        Some((namespace, pod)) => format!("{pod}_{namespace}"),
        None => path.to_owned(),
    }
}

/// Pairs the client's streams by request id and forwards each complete pair, until the
/// client hangs up.
async fn handle_streams(mut session: Session, pod_ip: IpAddr, pod: &str) {
    let mut pairs: HashMap<String, StreamPair> = HashMap::new();
    loop {
        let next_deadline = pairs.values().map(|p| p.deadline).min();
        let stream = tokio::select! {
            stream = session.incoming.recv() => stream,
            () = sleep_until(next_deadline) => {
                let now = Instant::now();
                let expired: Vec<String> =
                    pairs.iter().filter(|(_, p)| p.deadline <= now).map(|(id, _)| id.clone()).collect();
                for id in expired {
                    if let Some(pair) = pairs.remove(&id)
                        && let Some(error) = &pair.error
                    {
                        let message = format!("(conn=spdy, request={id}) timed out waiting for streams");
                        let _ = error.writer.write(Bytes::from(message)).await;
                        error.writer.finish().await;
                    }
                }
                continue;
            }
        };
        let Some(stream) = stream else { break };
        let (port, kind) = match validate(&stream) {
            Ok(valid) => valid,
            Err(message) => {
                tracing::debug!(%message, "port-forward: stream refused");
                stream.writer.reset(RST_CANCEL).await;
                continue;
            }
        };
        if stream.writer.reply().await.is_err() {
            break;
        }
        let request_id = request_id(&stream, kind);
        let pair = pairs.entry(request_id.clone()).or_insert_with(|| StreamPair {
            port,
            error: None,
            data: None,
            deadline: Instant::now() + STREAM_CREATION_TIMEOUT,
        });
        let slot = if kind == StreamKind::Error { &mut pair.error } else { &mut pair.data };
        if slot.is_some() {
            let which = if kind == StreamKind::Error { "error" } else { "data" };
            if let Some(error) = &pair.error {
                let message =
                    format!("error processing stream for request {request_id}: {which} stream already assigned");
                let _ = error.writer.write(Bytes::from(message)).await;
            }
            continue;
        }
        *slot = Some(stream);
        if pair.error.is_some()
            && pair.data.is_some()
            && let Some(StreamPair { port, error: Some(error), data: Some(data), .. }) = pairs.remove(&request_id)
        {
            let pod = pod.to_owned();
            let hung_up = session.hung_up();
            tokio::spawn(async move {
                // A forward ends with the session: nobody would read what the pod sends.
                tokio::select! {
                    () = forward(SocketAddr::new(pod_ip, port), &pod, error, data) => {}
                    () = hung_up.cancelled() => {}
                }
            });
        }
    }
    session.close().await;
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// The two stream types of a forwarded connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamKind {
    Error,
    Data,
}

/// Checks a new stream's `port` and `streamType` headers as the kubelet does.
fn validate(stream: &IncomingStream) -> Result<(u16, StreamKind), String> {
    let port = stream.header("port").unwrap_or_default();
    if port.is_empty() {
        return Err("\"port\" header is required".to_owned());
    }
    let port: u16 = port.parse().map_err(|e| format!("unable to parse {port:?} as a port: {e}"))?;
    if port < 1 {
        return Err(format!("port \"{port}\" must be > 0"));
    }
    match stream.header("streamtype").unwrap_or_default() {
        "" => Err("\"streamType\" header is required".to_owned()),
        "error" => Ok((port, StreamKind::Error)),
        "data" => Ok((port, StreamKind::Data)),
        other => Err(format!("invalid stream type {other:?}")),
    }
}

/// The request id pairing a stream; old clients send none, and their pairs are guessed
/// from consecutive stream ids, as the kubelet does.
fn request_id(stream: &IncomingStream, kind: StreamKind) -> String {
    match stream.header("requestid") {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => match kind {
            StreamKind::Error => stream.id().to_string(),
            StreamKind::Data => stream.id().saturating_sub(2).to_string(),
        },
    }
}

/// Joins the data stream to a TCP connection to `target`; a failure goes to the error
/// stream. Both streams end when forwarding does.
async fn forward(target: SocketAddr, pod: &str, error: IncomingStream, data: IncomingStream) {
    if let Err(failure) = copy_both_ways(target, data).await {
        let (e, cause) = match &failure {
            Failure::Dial(e) => (e, format!("dial tcp {target}: connect: {}", go_error_text(e))),
            Failure::Copy(e) => (e, go_error_text(e)),
        };
        let close_connection =
            !matches!(e.kind(), std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset);
        let report = ForwardError {
            close_connection,
            message: format!("error forwarding port {} to pod {pod}, uid : {cause}", target.port()),
        };
        if let Ok(mut json) = serde_json::to_vec(&report) {
            json.push(b'\n');
            let _ = error.writer.write(Bytes::from(json)).await;
        }
    }
    error.writer.finish().await;
}

/// Why forwarding one connection failed.
enum Failure {
    /// The pod's port could not be reached.
    Dial(std::io::Error),
    /// Reading from the pod failed.
    Copy(std::io::Error),
}

/// Copies between the data stream and a new TCP connection until the pod's side ends.
async fn copy_both_ways(target: SocketAddr, data: IncomingStream) -> Result<(), Failure> {
    let IncomingStream { data: mut incoming, writer, .. } = data;
    let connection = match TcpStream::connect(target).await {
        Ok(connection) => connection,
        Err(e) => {
            writer.finish().await;
            return Err(Failure::Dial(e));
        }
    };
    let (mut read, mut write) = connection.into_split();
    let to_pod = tokio::spawn(async move {
        while let Some(chunk) = incoming.recv().await {
            write.write_all(&chunk).await?;
        }
        write.shutdown().await
    });
    let mut buf = vec![0u8; 32 << 10];
    let result = loop {
        match read.read(&mut buf).await {
            Ok(0) => break Ok(()),
            Ok(n) => {
                if writer.write(Bytes::copy_from_slice(&buf[..n])).await.is_err() {
                    break Ok(());
                }
            }
            Err(e) => break Err(Failure::Copy(e)),
        }
    };
    writer.finish().await;
    to_pod.abort();
    result
}

/// An I/O error as Go words a system call's error (`connection refused`).
fn go_error_text(error: &std::io::Error) -> String {
    let text = error.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::pod_full_name;

    #[test]
    fn pods_are_named_as_the_kubelet_names_them() {
        assert_eq!(pod_full_name("/portForward/default/web"), "web_default");
        assert_eq!(pod_full_name("/api/v1/namespaces/team/pods/db/portforward"), "db_team");
    }
}
