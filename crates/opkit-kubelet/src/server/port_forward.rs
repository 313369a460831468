//! The kubelet's `portForward` endpoint (`/portForward/{namespace}/{pod}`): over a SPDY/3.1
//! session (`portforward.k8s.io`) the client opens, for each connection it forwards, an
//! error stream and a data stream carrying the same `port` and `requestID` headers; the
//! data stream is joined to a TCP connection to the pod's port, and a failure is
//! reported on the error stream in the kubelet's words. In a pod's network namespace the
//! connection is made from inside it to `127.0.0.1`, as containerd's port-forward dials
//! `localhost` in the sandbox: a server listening on the pod's loopback only is reached.
//!
//! Over a WebSocket (`v4.channel.k8s.io`, the ports in the `port` query, as other clients
//! than kubectl use it) each port gets a data channel (2n) and an error channel (2n+1), each
//! opened with the port as a little-endian u16. kubectl 1.30+ first tries the
//! PortForwardWebsockets tunnel (`SPDY/3.1+portforward.k8s.io` over a WebSocket, which
//! kube-apiserver terminates itself); it names no port, so it is refused as the kubelet
//! refuses it (`400`), and kubectl falls back to SPDY.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::stream::spdy::{self, IncomingStream, RST_CANCEL, Session};
use super::stream::websocket::{ChannelConnection, Handshake};
use super::stream::{OutputSink, Refusal, go_error_text, is_websocket_request, query_pairs};

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

/// The WebSocket subprotocols of port-forward (`""`: the client named none).
const WEBSOCKET_PROTOCOLS: [&str; 3] = ["v4.channel.k8s.io", "v4.base64.channel.k8s.io", ""];

/// Where forwarded connections go: a pod's IP, or its network namespace.
#[derive(Debug, Clone)]
pub struct ForwardTarget {
    /// The pod's IP (dialled from the kubelet's namespace when there is no `netns`).
    pub ip: IpAddr,
    /// The pod's network namespace (`/proc/<pid>/ns/net`); `None` on the host network.
    pub netns: Option<PathBuf>,
}

/// How long dialling a port inside a pod's namespace may take (the loopback answers at
/// once; this bounds a namespace whose stack is gone).
const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

impl ForwardTarget {
    /// The address port `port` is dialled at (as error messages name it).
    fn address(&self, port: u16) -> SocketAddr {
        match self.netns {
            Some(_) => SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            None => SocketAddr::new(self.ip, port),
        }
    }

    /// A connection to `port`: made inside the pod's network namespace when it has one.
    async fn dial(&self, port: u16) -> std::io::Result<TcpStream> {
        let address = self.address(port);
        match &self.netns {
            None => TcpStream::connect(address).await,
            Some(netns) => TcpStream::from_std(dial_inside(netns.clone(), address).await?),
        }
    }
}

/// Connects to `address` from inside the network namespace `netns`. A socket belongs to
/// the namespace it was made in, so a short-lived thread enters the namespace (only that
/// thread moves), connects, and hands the connection back.
#[cfg(target_os = "linux")]
async fn dial_inside(netns: PathBuf, address: SocketAddr) -> std::io::Result<std::net::TcpStream> {
    use std::os::fd::AsFd;
    let namespace = std::fs::File::open(&netns)?;
    let (reply, answer) = tokio::sync::oneshot::channel();
    std::thread::Builder::new().name("kubelet-port-forward".into()).spawn(move || {
        let connect = || -> std::io::Result<std::net::TcpStream> {
            rustix::thread::move_into_link_name_space(
                namespace.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )?;
            let stream = std::net::TcpStream::connect_timeout(&address, DIAL_TIMEOUT)?;
            stream.set_nonblocking(true)?;
            Ok(stream)
        };
        let _ = reply.send(connect());
    })?;
    answer.await.map_err(|_| std::io::Error::other("the port-forward dialling thread ended"))?
}

/// Network namespaces are Linux's.
#[cfg(not(target_os = "linux"))]
async fn dial_inside(_netns: PathBuf, _address: SocketAddr) -> std::io::Result<std::net::TcpStream> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "network namespaces need Linux"))
}

/// Serves a port-forward request: answers `101 Switching Protocols` and forwards in the
/// background — each stream pair a SPDY client opens, or each port of the `port` query
/// over WebSocket — to `pod_ip`; or answers a `metav1.Status` failure (`400` for a request
/// that is no upgrade or a WebSocket without ports, `403` when no protocol is shared). The
/// body is [`http_body_util::Full`]: empty on success, the Status JSON on failure.
pub async fn serve(req: Request<Incoming>, pod_ip: IpAddr) -> Response<http_body_util::Full<Bytes>> {
    serve_in(req, ForwardTarget { ip: pod_ip, netns: None }).await
}

/// Serves a port-forward request as [`serve`] does, to `target` (inside its network
/// namespace when it has one).
pub async fn serve_in(mut req: Request<Incoming>, target: ForwardTarget) -> Response<http_body_util::Full<Bytes>> {
    let target = Arc::new(target);
    let pod = pod_full_name(req.uri().path());
    if is_websocket_request(req.headers()) {
        let ports = match websocket_ports(req.uri()) {
            Ok(ports) => ports,
            Err(refusal) => return refusal.into_response(),
        };
        let handshake = match Handshake::negotiate(req.headers(), &WEBSOCKET_PROTOCOLS) {
            Ok(handshake) => handshake,
            Err(refusal) => return refusal.into_response(),
        };
        let on_upgrade = hyper::upgrade::on(&mut req);
        let handshake_protocol = handshake.protocol.clone();
        tokio::spawn(async move {
            let Ok(upgraded) = on_upgrade.await else { return };
            forward_websocket(upgraded, &handshake_protocol, target, &pod, &ports).await;
        });
        return handshake.switching_protocols();
    }
    if let Err(refusal) = spdy::negotiate(req.headers(), &[PORT_FORWARD_PROTOCOL]) {
        return refusal.into_response();
    }
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else { return };
        let session = Session::start(TokioIo::new(upgraded));
        handle_streams(session, target, &pod).await;
    });
    spdy::switching_protocols(PORT_FORWARD_PROTOCOL)
}

/// The ports of a WebSocket port-forward (`port`, repeated or comma-separated), checked as
/// the kubelet's `NewV4Options` does.
fn websocket_ports(uri: &http::Uri) -> Result<Vec<u16>, Refusal> {
    let values: Vec<String> = query_pairs(uri).into_iter().filter(|(k, _)| k == "port").map(|(_, v)| v).collect();
    if values.is_empty() {
        return Err(Refusal::bad_request("query parameter \"port\" is required"));
    }
    let mut ports = Vec::new();
    for value in values {
        if value.is_empty() {
            return Err(Refusal::bad_request("query parameter \"port\" cannot be empty"));
        }
        for port in value.split(',') {
            let port: u16 =
                port.parse().map_err(|e| Refusal::bad_request(format!("unable to parse {value:?} as a port: {e}")))?;
            if port < 1 {
                return Err(Refusal::bad_request(format!("port {value:?} must be > 0")));
            }
            ports.push(port);
        }
    }
    Ok(ports)
}

/// Forwards each port over its pair of WebSocket channels until all are done.
async fn forward_websocket(
    upgraded: hyper::upgrade::Upgraded,
    protocol: &str,
    target: Arc<ForwardTarget>,
    pod: &str,
    ports: &[u16],
) {
    let data_channels: Vec<u8> = (0..ports.len()).filter_map(|i| u8::try_from(2 * i).ok()).collect();
    let mut conn = ChannelConnection::open(upgraded, protocol, &data_channels).await;
    let mut forwards = tokio::task::JoinSet::new();
    for (i, &port) in ports.iter().enumerate() {
        let (Ok(data), Ok(error)) = (u8::try_from(2 * i), u8::try_from(2 * i + 1)) else { break };
        let (data_sink, error_sink) =
            (OutputSink::WebSocket(conn.writer(data)), OutputSink::WebSocket(conn.writer(error)));
        for sink in [&data_sink, &error_sink] {
            let _ = sink.write(Bytes::copy_from_slice(&port.to_le_bytes())).await;
        }
        let Some(incoming) = conn.inputs.remove(&data) else { continue };
        let (target, pod) = (target.clone(), pod.to_owned());
        forwards.spawn(async move {
            if let Err(failure) = copy_both_ways(&target, port, incoming, &data_sink).await {
                let address = target.address(port);
                let message = format!("error forwarding port {port} to pod {pod}, uid : {}", failure.describe(address));
                let _ = error_sink.write(Bytes::from(message)).await;
            }
        });
    }
    let hung_up = conn.hung_up();
    tokio::select! {
        () = async { while forwards.join_next().await.is_some() {} } => {}
        () = hung_up.cancelled() => forwards.abort_all(),
    }
    conn.close().await;
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
async fn handle_streams(mut session: Session, target: Arc<ForwardTarget>, pod: &str) {
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
            let (target, pod) = (target.clone(), pod.to_owned());
            let hung_up = session.hung_up();
            tokio::spawn(async move {
                // A forward ends with the session: nobody would read what the pod sends.
                tokio::select! {
                    () = forward(&target, port, &pod, error, data) => {}
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

/// Joins the data stream to a TCP connection to `port` of `target`. As the kubelet does, a
/// failure is written on the error stream and both streams end, except when the pod reset
/// the connection or stopped reading (ECONNRESET, EPIPE): then both streams are reset.
async fn forward(target: &ForwardTarget, port: u16, pod: &str, error: IncomingStream, data: IncomingStream) {
    let IncomingStream { data: incoming, writer, .. } = data;
    let data_sink = OutputSink::Spdy(writer.clone());
    match copy_both_ways(target, port, incoming, &data_sink).await {
        Ok(()) => {}
        Err(failure) if failure.is_reset() => {
            writer.reset(RST_CANCEL).await;
            error.writer.reset(RST_CANCEL).await;
            return;
        }
        Err(failure) => {
            let message =
                format!("error forwarding port {port} to pod {pod}, uid : {}", failure.describe(target.address(port)));
            let _ = error.writer.write(Bytes::from(message)).await;
        }
    }
    writer.finish().await;
    error.writer.finish().await;
}

/// Why forwarding one connection failed.
enum Failure {
    /// The pod's port could not be reached.
    Dial(std::io::Error),
    /// Reading from the pod failed.
    Copy(std::io::Error),
}

impl Failure {
    /// The error as Go's dialer and sockets word it.
    fn describe(&self, target: SocketAddr) -> String {
        match self {
            Failure::Dial(e) => format!("dial tcp {target}: connect: {}", go_error_text(e)),
            Failure::Copy(e) => go_error_text(e),
        }
    }

    /// Whether the pod reset the connection or stopped reading it (ECONNRESET, EPIPE).
    fn is_reset(&self) -> bool {
        let (Failure::Dial(e) | Failure::Copy(e)) = self;
        matches!(e.kind(), std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset)
    }
}

/// Copies between a client's stream and a new TCP connection to `port` of `target` until
/// the pod's side ends.
async fn copy_both_ways(
    target: &ForwardTarget,
    port: u16,
    mut incoming: mpsc::Receiver<Bytes>,
    sink: &OutputSink,
) -> Result<(), Failure> {
    let connection = target.dial(port).await.map_err(Failure::Dial)?;
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
                if sink.write(Bytes::copy_from_slice(&buf[..n])).await.is_err() {
                    break Ok(());
                }
            }
            Err(e) => break Err(Failure::Copy(e)),
        }
    };
    to_pod.abort();
    result
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
