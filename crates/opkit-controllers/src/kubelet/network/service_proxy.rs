//! The `kubernetes` Service seen from a pod: the ClusterIP (`10.96.0.1`) is an address of
//! the host end of every pod's veth pair, so a pod's connection to `10.96.0.1:443` goes
//! out through its default route and arrives on the host on that pod's own host end.
//! There a listener bound to that one interface (`SO_BINDTODEVICE`: listeners on
//! different interfaces do not clash, so every pod of every cluster on the host has its
//! own) splices each connection to its cluster's API server. TLS passes through
//! untouched. The proxy lives as long as the sandbox.
//!
//! Nothing listens inside the pod, so the pod's own processes keep every port, 443 on
//! the wildcard address included, as with kube-proxy's NAT. While pods run, 10.96.0.1 is
//! an address of the host, where nothing else answers it.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::{AbortHandle, JoinSet};

use super::NetworkError;

/// How long the accept loop waits after an accept error (e.g. out of descriptors).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// A running proxy; dropping it stops the listener and cuts its connections.
#[derive(Debug)]
pub(super) struct ServiceProxy {
    task: AbortHandle,
}

impl ServiceProxy {
    /// Listens on `listen` for connections arriving on the interface `device` and
    /// forwards them to `upstream`. Needs to run inside a tokio runtime, which then runs
    /// the proxy.
    pub(super) fn start(device: &str, listen: SocketAddr, upstream: SocketAddr) -> Result<ServiceProxy, NetworkError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| NetworkError::Setup(format!("the Service proxy needs a tokio runtime: {e}")))?;
        let listener = {
            let _entered = runtime.enter();
            listen_on_device(device, listen)?
        };
        let task = runtime.spawn(serve(listener, upstream)).abort_handle();
        Ok(ServiceProxy { task })
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
        let step = format!("{step} for the kubernetes Service on {device}");
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
fn listen_on_device(device: &str, addr: SocketAddr) -> Result<TcpListener, NetworkError> {
    bind_on_device(device, addr)?
        .listen(1024)
        .map_err(|source| NetworkError::Io { step: format!("listening on {addr} on {device}"), source })
}

/// Accepts connections and splices each to `upstream` until aborted; aborting drops the
/// set of connections, which cuts them.
async fn serve(listener: TcpListener, upstream: SocketAddr) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((inbound, _)) => {
                    connections.spawn(splice(inbound, upstream));
                }
                Err(e) => {
                    tracing::debug!(error = %e, "accepting on the kubernetes Service proxy");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Copies bytes both ways between a pod's connection and the API server.
async fn splice(mut inbound: TcpStream, upstream: SocketAddr) {
    let mut outbound = match TcpStream::connect(upstream).await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(%upstream, error = %e, "connecting the kubernetes Service proxy to the API server");
            return;
        }
    };
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    if let Err(e) = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await {
        tracing::trace!(error = %e, "kubernetes Service proxy connection ended");
    }
}
