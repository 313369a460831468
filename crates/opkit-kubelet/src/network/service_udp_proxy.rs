//! A UDP Service port seen from a pod: a socket bound to `ClusterIP:port` on the pod's
//! host end only (`SO_BINDTODEVICE`, as the TCP listeners of [`super::service_proxy`]),
//! and a session per client (the pod's address and port), as kube-proxy's conntrack entry
//! is one. A client's first datagram picks a ready endpoint at random and opens a socket
//! connected to it; the client's datagrams go out on it, and the endpoint's replies come
//! back to the client from `ClusterIP:port`, so the client sees the Service answer. A
//! session ends after [`SESSION_IDLE`] without a datagram either way (conntrack's UDP
//! timeout), or at the next datagram once its endpoint is no longer ready (kube-proxy
//! clears the conntrack entries of a removed endpoint), which then picks another. A port
//! without ready endpoints has no socket, so the kernel answers ICMP port unreachable, as
//! kube-proxy's REJECT rule does.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::net::UdpSocket;
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::Instant;

use super::NetworkError;
use super::service_proxy::Upstream;
use super::service_table::ServicePort;

/// How long a session lives without a datagram either way (conntrack's
/// `nf_conntrack_udp_timeout` is 30 s).
const SESSION_IDLE: Duration = Duration::from_secs(30);
/// The largest datagram relayed (a UDP payload's limit).
const MAX_DATAGRAM: usize = 65_535;
/// How long the receive loop waits after a receive error.
const RECEIVE_BACKOFF: Duration = Duration::from_millis(100);

/// A UDP socket bound to `addr` on the interface `device` only (inside a runtime); the
/// cluster DNS binds its own with it too.
pub(super) fn bind_on_device(device: &str, addr: SocketAddr) -> Result<UdpSocket, NetworkError> {
    use socket2::{Domain, Protocol, Socket, Type};
    let io = |step: &str| {
        let step = format!("{step} for a UDP Service port on {device}");
        move |source| NetworkError::Io { step, source }
    };
    let domain = if addr.is_ipv4() { Domain::IPV4 } else { Domain::IPV6 };
    let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP)).map_err(io("making a socket"))?;
    socket.set_reuse_address(true).map_err(io("setting SO_REUSEADDR"))?;
    socket.bind_device(Some(device.as_bytes())).map_err(io("binding to the interface"))?;
    socket.set_nonblocking(true).map_err(io("making the socket non-blocking"))?;
    socket.bind(&addr.into()).map_err(io(&format!("binding {addr}")))?;
    UdpSocket::from_std(socket.into()).map_err(io("registering the socket"))
}

/// One client's session: the socket connected to its endpoint and the task relaying the
/// endpoint's replies.
struct Session {
    endpoint: SocketAddr,
    outbound: Arc<UdpSocket>,
    last_datagram: Arc<Mutex<Instant>>,
    replies: AbortHandle,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.replies.abort();
    }
}

/// Relays the datagrams that arrive at `service` on `socket` until aborted; aborting
/// drops the sessions, which ends them.
pub(super) async fn serve(socket: UdpSocket, service: ServicePort, upstream: Upstream) {
    let socket = Arc::new(socket);
    let mut sessions: HashMap<SocketAddr, Session> = HashMap::new();
    let mut ended: JoinSet<SocketAddr> = JoinSet::new();
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        tokio::select! {
            received = socket.recv_from(&mut buf) => match received {
                Ok((len, client)) => {
                    let Some(session) = session_for(&mut sessions, &mut ended, &socket, client, service, &upstream).await
                    else {
                        continue;
                    };
                    *session.last_datagram.lock() = Instant::now();
                    if let Err(e) = session.outbound.send(&buf[..len]).await {
                        tracing::debug!(endpoint = %session.endpoint, error = %e, "relaying a datagram to an endpoint");
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "receiving on a UDP Service port");
                    tokio::time::sleep(RECEIVE_BACKOFF).await;
                }
            },
            Some(Ok(client)) = ended.join_next(), if !ended.is_empty() => {
                if sessions.get(&client).is_some_and(|s| s.replies.is_finished()) {
                    sessions.remove(&client);
                }
            }
        }
    }
}

/// `client`'s session, a new one when it has none, its last one ended or its endpoint
/// is no longer ready; `None` when the port has no ready endpoint (the datagram is
/// dropped) or no socket can be opened to the one picked.
async fn session_for<'a>(
    sessions: &'a mut HashMap<SocketAddr, Session>,
    ended: &mut JoinSet<SocketAddr>,
    socket: &Arc<UdpSocket>,
    client: SocketAddr,
    service: ServicePort,
    upstream: &Upstream,
) -> Option<&'a Session> {
    let current =
        sessions.get(&client).is_some_and(|s| !s.replies.is_finished() && upstream.is_ready(service, s.endpoint));
    if !current {
        sessions.remove(&client);
        let endpoint = upstream.pick(service)?;
        let outbound = match connect(endpoint).await {
            Ok(outbound) => Arc::new(outbound),
            Err(e) => {
                tracing::debug!(%endpoint, error = %e, "opening a UDP session to an endpoint");
                return None;
            }
        };
        let last_datagram = Arc::new(Mutex::new(Instant::now()));
        let relay = relay_replies(outbound.clone(), socket.clone(), client, last_datagram.clone());
        let replies = ended.spawn(async move {
            relay.await;
            client
        });
        sessions.insert(client, Session { endpoint, outbound, last_datagram, replies });
    }
    sessions.get(&client)
}

/// A socket of the host's own, connected to `endpoint` (the pod IPs are reachable from
/// the host through the veth routes).
async fn connect(endpoint: SocketAddr) -> std::io::Result<UdpSocket> {
    let outbound = UdpSocket::bind(if endpoint.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }).await?;
    outbound.connect(endpoint).await?;
    Ok(outbound)
}

/// Sends the endpoint's replies to `client` from the Service port's socket until the
/// session has been idle for [`SESSION_IDLE`].
async fn relay_replies(
    outbound: Arc<UdpSocket>,
    service_socket: Arc<UdpSocket>,
    client: SocketAddr,
    last_datagram: Arc<Mutex<Instant>>,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let idle_until = *last_datagram.lock() + SESSION_IDLE;
        tokio::select! {
            received = outbound.recv(&mut buf) => match received {
                Ok(len) => {
                    *last_datagram.lock() = Instant::now();
                    if let Err(e) = service_socket.send_to(&buf[..len], client).await {
                        tracing::debug!(%client, error = %e, "relaying a reply to a pod");
                    }
                }
                // An endpoint that answers ICMP port unreachable: the next datagram
                // tries again, as a client of a real Service sees it.
                Err(e) => tracing::trace!(%client, error = %e, "receiving an endpoint's reply"),
            },
            () = tokio::time::sleep_until(idle_until) => {
                if Instant::now() >= *last_datagram.lock() + SESSION_IDLE {
                    return;
                }
            }
        }
    }
}
