//! The `kubernetes` Service seen from inside a pod: a listener on the ClusterIP
//! (`10.96.0.1:443`, an address of the pod's loopback) bound *inside* the pod's network
//! namespace, whose connections are spliced to the API server's loopback address from
//! the host's namespace. TLS passes through untouched. The proxy lives as long as the
//! sandbox.
//!
//! A pod's process therefore cannot bind the wildcard address on port 443 itself (the
//! kernel refuses a wildcard bind next to a listening specific one); other ports, and
//! 443 on the pod IP, are free.

use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use rustix::thread::LinkNameSpaceType;
use tokio::net::{TcpListener, TcpStream};
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
    /// Listens on `listen` inside the namespace `netns` and forwards to `upstream`. Needs
    /// to run inside a tokio runtime, which then runs the proxy.
    pub(super) fn start(
        netns: &OwnedFd,
        listen: SocketAddr,
        upstream: SocketAddr,
    ) -> Result<ServiceProxy, NetworkError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| NetworkError::Setup(format!("the Service proxy needs a tokio runtime: {e}")))?;
        let listener = bind_inside(netns, listen)?;
        let io = |step: &str| {
            let step = format!("{step} for {listen}");
            move |source| NetworkError::Io { step, source }
        };
        listener.set_nonblocking(true).map_err(io("making the listener non-blocking"))?;
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(listener).map_err(io("registering the listener"))?
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

/// Binds a listener on `addr` inside the namespace `netns`. A socket belongs to the
/// namespace it was made in, so a short-lived thread enters the namespace (only that
/// thread moves), binds, and hands the listener back.
pub(super) fn bind_inside(netns: &OwnedFd, addr: SocketAddr) -> Result<StdTcpListener, NetworkError> {
    let io = |step: String| move |source| NetworkError::Io { step, source };
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                rustix::thread::move_into_link_name_space(netns.as_fd(), Some(LinkNameSpaceType::Network))
                    .map_err(|e| io("entering the pod's network namespace".to_string())(e.into()))?;
                StdTcpListener::bind(addr).map_err(io(format!("binding {addr} inside the pod")))
            })
            .join()
            .map_err(|_| NetworkError::Setup(format!("the thread binding {addr} inside the pod panicked")))?
    })
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
