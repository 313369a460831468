//! [`Server`]: the accept loop. Each accepted connection gets its own task: an optional TLS
//! handshake bounded by a timeout, then hyper-util's auto builder serving HTTP/1.1 (with a
//! header-read timeout and upgrades) or HTTP/2. On shutdown the listener closes, connections
//! are asked to finish their in-flight requests and close, and whatever is still open after
//! the grace period is aborted.

use std::error::Error as StdError;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::Service;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls_pki_types::CertificateDer;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::backoff::{AcceptBackoff, is_connection_error};

/// How long a client may take to complete the TLS handshake.
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an HTTP/1 client may take to send a request's headers (also the idle time after
/// which a kept-alive HTTP/1 connection is closed).
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How often an idle HTTP/2 connection is pinged.
pub const HTTP2_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// How long a ping may go unanswered before its HTTP/2 connection is closed.
pub const HTTP2_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// How long shutdown waits for open connections to finish before aborting them.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

type BoxError = Box<dyn StdError + Send + Sync>;

/// Serves a hyper service on a bound listener until a `CancellationToken` fires.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// use std::convert::Infallible;
/// use tokio_util::sync::CancellationToken;
///
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let service = hyper::service::service_fn(|_req| async {
///     Ok::<_, Infallible>(http::Response::new(String::from("ok")))
/// });
/// let stop = CancellationToken::new();
/// let server = tokio::spawn(opkit_serve::Server::new(listener).serve(service, stop.clone()));
/// stop.cancel();
/// server.await.expect("server task");
/// # Ok(())
/// # }
/// ```
pub struct Server {
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    tls_handshake_timeout: Duration,
    header_read_timeout: Option<Duration>,
    max_connections: Option<usize>,
    shutdown_grace: Option<Duration>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.listener.local_addr().ok())
            .field("tls", &self.tls.is_some())
            .field("tls_handshake_timeout", &self.tls_handshake_timeout)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("max_connections", &self.max_connections)
            .field("shutdown_grace", &self.shutdown_grace)
            .finish()
    }
}

impl Server {
    /// Plain HTTP on `listener` with the default timeouts, no connection cap and a
    /// [`DEFAULT_SHUTDOWN_GRACE`].
    pub fn new(listener: TcpListener) -> Self {
        Server {
            listener,
            tls: None,
            tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            header_read_timeout: Some(DEFAULT_HEADER_READ_TIMEOUT),
            max_connections: None,
            shutdown_grace: Some(DEFAULT_SHUTDOWN_GRACE),
        }
    }

    /// Serves HTTPS with `config` (set its ALPN protocols to offer HTTP/2, see
    /// [`crate::tls::server_config`]).
    pub fn tls(mut self, config: Arc<rustls::ServerConfig>) -> Self {
        self.tls = Some(TlsAcceptor::from(config));
        self
    }

    /// Closes connections whose TLS handshake has not completed after `timeout`.
    pub fn tls_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.tls_handshake_timeout = timeout;
        self
    }

    /// Closes HTTP/1 connections that have not sent a request's headers within `timeout`
    /// (`None`: never).
    pub fn header_read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// Accepts at most `max` connections at a time; further clients wait in the listen backlog.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = Some(max);
        self
    }

    /// How long shutdown waits for open connections to finish before aborting them (`None`:
    /// as long as they take). Long-lived responses such as watches never finish by themselves,
    /// so servers holding them should use a short grace.
    pub fn shutdown_grace(mut self, grace: Option<Duration>) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts and serves connections until `shutdown` fires, then closes the listener, asks
    /// every connection to close after its in-flight requests, and returns once all are closed
    /// (aborting those still open after the shutdown grace).
    pub async fn serve<S, B>(self, service: S, shutdown: CancellationToken)
    where
        S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + Sync + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: http_body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<BoxError>,
    {
        let local = self.listener.local_addr().ok();
        let connection = Arc::new(ConnectionSettings {
            tls: self.tls,
            tls_handshake_timeout: self.tls_handshake_timeout,
            http: http_builder(self.header_read_timeout),
        });
        let limit = self.max_connections.map(|max| Arc::new(Semaphore::new(max)));
        let mut connections = JoinSet::new();
        let mut backoff = AcceptBackoff::new();
        loop {
            let permit = match &limit {
                Some(limit) => tokio::select! {
                    () = shutdown.cancelled() => break,
                    permit = limit.clone().acquire_owned() => Some(permit.expect("the semaphore is never closed")),
                },
                None => None,
            };
            let accepted = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = self.listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, peer)) => {
                    backoff.reset();
                    let conn = connection.clone();
                    let service = service.clone();
                    let stop = shutdown.clone();
                    connections.spawn(serve_connection(stream, peer, conn, service, stop, permit));
                    reap_finished(&mut connections);
                }
                Err(e) if is_connection_error(&e) => {
                    tracing::debug!(error = %e, addr = ?local, "a connection failed before it was accepted");
                }
                Err(e) => {
                    let delay = backoff.next_delay();
                    tracing::warn!(error = %e, addr = ?local, ?delay, "accepting connections failed; backing off");
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
        drop(self.listener);
        drain(connections, self.shutdown_grace).await;
    }
}

/// What every connection of one server shares.
struct ConnectionSettings {
    tls: Option<TlsAcceptor>,
    tls_handshake_timeout: Duration,
    http: auto::Builder<TokioExecutor>,
}

/// HTTP/1.1 (with the header-read timeout) and HTTP/2, both on tokio's timer.
fn http_builder(header_read_timeout: Option<Duration>) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
    // HTTP/2 has no header-read timeout: pings find peers that went away.
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(HTTP2_KEEP_ALIVE_INTERVAL))
        .keep_alive_timeout(HTTP2_KEEP_ALIVE_TIMEOUT);
    builder
}

/// Collects the results of connection tasks that have ended, logging panics.
fn reap_finished(connections: &mut JoinSet<()>) {
    while let Some(result) = connections.try_join_next() {
        log_join_error(result);
    }
}

fn log_join_error(result: Result<(), tokio::task::JoinError>) {
    if let Err(e) = result
        && e.is_panic()
    {
        tracing::error!(error = %e, "a connection task panicked");
    }
}

/// Waits for every connection to close, aborting those still open after `grace`.
async fn drain(mut connections: JoinSet<()>, grace: Option<Duration>) {
    let all_closed = async {
        while let Some(result) = connections.join_next().await {
            log_join_error(result);
        }
    };
    let finished = match grace {
        Some(grace) => tokio::time::timeout(grace, all_closed).await.is_ok(),
        None => {
            all_closed.await;
            true
        }
    };
    if !finished {
        tracing::debug!(open = connections.len(), "aborting connections still open after the shutdown grace");
        connections.shutdown().await;
    }
}

/// One connection: the TLS handshake (if any) under its timeout, then HTTP until the client
/// closes or shutdown asks it to close. `_permit` holds the connection's slot under the cap.
async fn serve_connection<S, B>(
    stream: TcpStream,
    peer: SocketAddr,
    settings: Arc<ConnectionSettings>,
    service: S,
    shutdown: CancellationToken,
    _permit: Option<OwnedSemaphorePermit>,
) where
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "setting TCP_NODELAY failed");
    }
    let Some(acceptor) = &settings.tls else {
        let service = WithConnectionInfo { inner: service, peer, certificates: None };
        return serve_http(stream, peer, &settings.http, service, shutdown).await;
    };
    let handshake = tokio::select! {
        () = shutdown.cancelled() => return,
        handshake = tokio::time::timeout(settings.tls_handshake_timeout, acceptor.accept(stream)) => handshake,
    };
    match handshake {
        Ok(Ok(tls)) => {
            let certificates =
                tls.get_ref().1.peer_certificates().map(|chain| PeerCertificates(Arc::new(chain.to_vec())));
            let service = WithConnectionInfo { inner: service, peer, certificates };
            serve_http(tls, peer, &settings.http, service, shutdown).await
        }
        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
    }
}

/// The certificate chain a client presented in the TLS handshake, leaf first, already
/// verified against the client CA (see [`crate::tls::server_config_with_client_ca`]).
/// Every request on that connection carries it as an extension.
#[derive(Clone, Debug)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

impl PeerCertificates {
    /// The client's own certificate.
    pub fn leaf(&self) -> Option<&CertificateDer<'static>> {
        self.0.first()
    }
}

/// The address of the client a request came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteAddr(pub SocketAddr);

/// A service that adds the connection's [`RemoteAddr`] and [`PeerCertificates`] (when
/// the client presented any) to each request before passing it on.
#[derive(Clone)]
struct WithConnectionInfo<S> {
    inner: S,
    peer: SocketAddr,
    certificates: Option<PeerCertificates>,
}

impl<S> Service<Request<Incoming>> for WithConnectionInfo<S>
where
    S: Service<Request<Incoming>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, mut request: Request<Incoming>) -> Self::Future {
        request.extensions_mut().insert(RemoteAddr(self.peer));
        if let Some(certificates) = &self.certificates {
            request.extensions_mut().insert(certificates.clone());
        }
        self.inner.call(request)
    }
}

/// Serves HTTP on an established stream; on shutdown, lets in-flight requests finish.
async fn serve_http<I, S, B>(
    io: I,
    peer: SocketAddr,
    http: &auto::Builder<TokioExecutor>,
    service: S,
    shutdown: CancellationToken,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let conn = http.serve_connection_with_upgrades(TokioIo::new(io), service);
    let mut conn = std::pin::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}
