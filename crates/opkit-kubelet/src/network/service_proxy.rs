//! The Services seen from a pod, through a userspace proxy per pod: each Service's
//! ClusterIP is an address of the host end of every pod's veth pair, so a pod's
//! connection to `ClusterIP:port` goes out through its default route and arrives on the
//! host on that pod's own host end. There a listener bound to that one interface
//! (`SO_BINDTODEVICE`: listeners on different interfaces do not clash, so every pod of
//! every cluster on the host has its own, even when two clusters' Services share a
//! ClusterIP) splices each connection to an endpoint: the `kubernetes` Service's to its
//! cluster's API server (TLS passes through untouched), every other Service port's to a
//! ready endpoint picked at random from the latest [`ServiceTable`] at its target port
//! (the pod IPs are reachable from the host through the veth routes). UDP ports are
//! served alike, by sessions per client ([`super::service_udp_proxy`]). A port without
//! ready endpoints has no listener ([`super::service_ports`]), so the kernel refuses
//! its connections, as kube-proxy's REJECT rule does; one accepted as its last endpoint
//! goes, or whose endpoint cannot be reached, is reset.
//!
//! Why userspace, where kube-proxy writes iptables or nftables rules: no `iptables` or
//! `nft` binary (or netfilter module) is needed, nothing host-wide is written that two
//! clusters on the same host would fight over, and each listener lives and dies with its
//! sandbox. The cost is a copy of every byte through the kubelet's process.
//!
//! Nothing listens inside the pod, so the pod's own processes keep every port, as with
//! kube-proxy's NAT. While pods run, the ClusterIPs are addresses of the host, where
//! nothing else answers them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::{AbortHandle, JoinSet};

use super::NetworkError;
use super::service_table::{Protocol, ServicePort, ServiceTable};
use super::service_udp_proxy;
use super::service_watch::Tables;

/// How long the accept loop waits after an accept error (e.g. out of descriptors).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// How long a connection to an endpoint may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a proxy's connections go.
#[derive(Debug, Clone)]
pub(super) enum Upstream {
    /// Always this address (the `kubernetes` Service: the API server).
    Fixed(SocketAddr),
    /// A ready endpoint of the Service port the listener serves, from the latest table.
    Endpoints(Tables),
}

impl Upstream {
    /// The endpoint for a new connection (or UDP session) to `service`, `None` when it
    /// has none ready.
    pub(super) fn pick(&self, service: ServicePort) -> Option<SocketAddr> {
        match self {
            Upstream::Fixed(addr) => Some(*addr),
            Upstream::Endpoints(tables) => {
                let table: Option<Arc<ServiceTable>> = tables.borrow().clone();
                let ready = table.as_deref()?.endpoints(service)?;
                (!ready.is_empty()).then(|| ready[rand::random_range(0..ready.len())])
            }
        }
    }

    /// Whether `endpoint` is still a ready endpoint of `service`.
    pub(super) fn is_ready(&self, service: ServicePort, endpoint: SocketAddr) -> bool {
        match self {
            Upstream::Fixed(addr) => *addr == endpoint,
            Upstream::Endpoints(tables) => {
                let table: Option<Arc<ServiceTable>> = tables.borrow().clone();
                table.as_deref().and_then(|t| t.endpoints(service)).is_some_and(|ready| ready.contains(&endpoint))
            }
        }
    }
}

/// A running proxy; dropping it stops the listener and cuts its connections (or UDP
/// sessions).
#[derive(Debug)]
pub(super) struct ServiceProxy {
    task: AbortHandle,
}

impl ServiceProxy {
    /// Serves the Service port `listen` to what arrives on the interface `device` and
    /// forwards it to `upstream`: connections for a TCP port, datagrams for a UDP one.
    /// Needs to run inside a tokio runtime, which then runs the proxy.
    pub(super) fn start(device: &str, listen: ServicePort, upstream: Upstream) -> Result<ServiceProxy, NetworkError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| NetworkError::Setup(format!("the Service proxy needs a tokio runtime: {e}")))?;
        let _entered = runtime.enter();
        let task = match listen {
            (Protocol::Tcp, addr) => runtime.spawn(serve(listen_on_device(device, addr)?, listen, upstream)),
            (Protocol::Udp, addr) => {
                let socket = service_udp_proxy::bind_on_device(device, addr)?;
                runtime.spawn(service_udp_proxy::serve(socket, listen, upstream))
            }
        };
        Ok(ServiceProxy { task: task.abort_handle() })
    }
}

impl Drop for ServiceProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A socket bound to `addr` on the interface `device` only (not listening yet); the
/// probe binds one to check that the ClusterIP can be served.
pub(super) fn bind_on_device(device: &str, addr: SocketAddr) -> Result<TcpSocket, NetworkError> {
    let io = |step: &str| {
        let step = format!("{step} for a Service on {device}");
        move |source| NetworkError::Io { step, source }
    };
    let socket =
        if addr.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }.map_err(io("making a socket"))?;
    socket.set_reuseaddr(true).map_err(io("setting SO_REUSEADDR"))?;
    socket.bind_device(Some(device.as_bytes())).map_err(io("binding to the interface"))?;
    socket.bind(addr).map_err(io(&format!("binding {addr}")))?;
    Ok(socket)
}

/// A listener on `addr` for connections arriving on `device` (inside a runtime).
pub(super) fn listen_on_device(device: &str, addr: SocketAddr) -> Result<TcpListener, NetworkError> {
    bind_on_device(device, addr)?
        .listen(1024)
        .map_err(|source| NetworkError::Io { step: format!("listening on {addr} on {device}"), source })
}

/// Accepts connections to `service` and splices each to an endpoint of `upstream` until
/// aborted; aborting drops the set of connections, which cuts them.
async fn serve(listener: TcpListener, service: ServicePort, upstream: Upstream) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((inbound, _)) => match upstream.pick(service) {
                    Some(endpoint) => {
                        connections.spawn(splice(inbound, endpoint));
                    }
                    None => reject(inbound),
                },
                Err(e) => {
                    tracing::debug!(error = %e, "accepting on a Service proxy");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Resets a connection to a Service port without ready endpoints (`SO_LINGER` 0: the
/// close sends a RST), as kube-proxy's REJECT does.
fn reject(inbound: TcpStream) {
    if let Err(e) = inbound.set_zero_linger() {
        tracing::debug!(error = %e, "setting SO_LINGER on a rejected Service connection");
    }
}

/// Copies bytes both ways between a pod's connection and an endpoint; one that cannot be
/// reached within [`CONNECT_TIMEOUT`] (a pod gone before its endpoint) resets it.
async fn splice(mut inbound: TcpStream, upstream: SocketAddr) {
    let mut outbound = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(upstream)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(%upstream, error = %e, "connecting a Service proxy to an endpoint");
            return reject(inbound);
        }
        Err(_) => {
            tracing::debug!(%upstream, "connecting a Service proxy to an endpoint timed out");
            return reject(inbound);
        }
    };
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    if let Err(e) = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await {
        tracing::trace!(error = %e, "Service proxy connection ended");
    }
}
