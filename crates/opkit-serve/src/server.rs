//! [`Server`]: the accept loop. Each accepted connection gets its own task: an optional TLS
//! handshake bounded by a timeout, then hyper-util's auto builder serving HTTP/1.1 (with a
//! header-read timeout and upgrades) or HTTP/2. A watchdog per connection closes it when no
//! request is in flight for too long, as Go's `http.Server` does with `ReadHeaderTimeout` and
//! `IdleTimeout`: before its first request (a client that connects, or finishes TLS, and
//! sends nothing) after the header-read timeout, and between requests (idle keep-alive and
//! HTTP/2 connections) after the idle timeout. On shutdown the listener closes, connections
//! are asked to finish their in-flight requests and close, and whatever is still open after
//! the grace period is aborted.

use std::error::Error as StdError;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::Service;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls_pki_types::CertificateDer;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::backoff::{AcceptBackoff, is_connection_error};

/// How long a client may take to complete the TLS handshake.
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to send its first request's headers once connected (and an
/// HTTP/1 client each request's headers, which also bounds how long a kept-alive HTTP/1
/// connection may sit idle): kube-apiserver's `ReadHeaderTimeout`.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);
/// How long a connection may stay open with no request in flight after its last one ended:
/// kube-apiserver's `IdleTimeout`. Bounds idle HTTP/2 connections, which answering pings
/// would otherwise keep open for good.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// How long an idle connection being closed may take to say goodbye (HTTP/2's GOAWAY and
/// ping) before it is cut.
const IDLE_CLOSE_GRACE: Duration = Duration::from_secs(1);
/// How often an idle HTTP/2 connection is pinged.
pub(crate) const HTTP2_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// How long a ping may go unanswered before its HTTP/2 connection is closed.
pub(crate) const HTTP2_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(20);
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
    idle_timeout: Option<Duration>,
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
            .field("idle_timeout", &self.idle_timeout)
            .field("max_connections", &self.max_connections)
            .field("shutdown_grace", &self.shutdown_grace)
            .finish()
    }
}

impl Server {
    /// Plain HTTP on `listener` with the default timeouts ([`DEFAULT_TLS_HANDSHAKE_TIMEOUT`],
    /// [`DEFAULT_HEADER_READ_TIMEOUT`], [`DEFAULT_IDLE_TIMEOUT`]), no connection cap and a
    /// [`DEFAULT_SHUTDOWN_GRACE`].
    pub fn new(listener: TcpListener) -> Self {
        Server {
            listener,
            tls: None,
            tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            header_read_timeout: Some(DEFAULT_HEADER_READ_TIMEOUT),
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
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

    /// Closes connections that have not sent their first request's headers within `timeout`
    /// of being accepted (or of finishing TLS), and HTTP/1 connections that take longer than
    /// that to send any request's headers (`None`: never).
    pub fn header_read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// Closes connections (HTTP/1 kept alive, HTTP/2) that have had no request in flight for
    /// `timeout` since their last one ended (`None`: never).
    pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.idle_timeout = timeout;
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
            header_read_timeout: self.header_read_timeout,
            idle_timeout: self.idle_timeout,
            http: http_builder(self.header_read_timeout),
            closed: Arc::new(Notify::new()),
        });
        tokio::spawn(crate::memory_return::return_freed_memory(connection.closed.clone(), shutdown.clone()));
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
                    connections.spawn(async move {
                        let closed = conn.closed.clone();
                        serve_connection(stream, peer, conn, service, stop, permit).await;
                        closed.notify_one();
                    });
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
    header_read_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    http: auto::Builder<TokioExecutor>,
    /// Told as each connection ends, so their freed memory is returned to the system.
    closed: Arc<Notify>,
}

/// The most an HTTP/1.1 connection buffers, each way (hyper's default is ~400 KB): a
/// streamed response (a watch) whose client reads slowly waits for the socket instead of
/// filling a buffer per connection, and request heads up to this size are read.
const HTTP1_MAX_BUF: usize = 64 * 1024;
/// The most a TLS connection holds encrypted and not yet taken by the socket (rustls's
/// default is 64 KiB): one full record, as Go's TLS writes.
const TLS_SEND_BUF: usize = 16 * 1024 + 256;
/// The most an HTTP/2 stream buffers for sending (h2's default is ~400 KB).
const HTTP2_MAX_SEND_BUF: usize = 64 * 1024;

/// HTTP/1.1 (with the header-read timeout) and HTTP/2, both on tokio's timer.
fn http_builder(header_read_timeout: Option<Duration>) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(header_read_timeout).max_buf_size(HTTP1_MAX_BUF);
    // HTTP/2 has no header-read timeout: pings find peers that went away, the connection's
    // idle watchdog closes those that stay but send nothing.
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(HTTP2_KEEP_ALIVE_INTERVAL))
        .keep_alive_timeout(HTTP2_KEEP_ALIVE_TIMEOUT)
        .max_send_buf_size(HTTP2_MAX_SEND_BUF);
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
        let service = WithConnectionInfo::new(service, peer, None);
        return serve_http(stream, peer, &settings, service, shutdown).await;
    };
    let handshake = tokio::select! {
        () = shutdown.cancelled() => return,
        handshake = tokio::time::timeout(settings.tls_handshake_timeout, acceptor.accept(stream)) => handshake,
    };
    match handshake {
        Ok(Ok(mut tls)) => {
            tls.get_mut().1.set_buffer_limit(Some(TLS_SEND_BUF));
            let certificates =
                tls.get_ref().1.peer_certificates().map(|chain| PeerCertificates(Arc::new(chain.to_vec())));
            let service = WithConnectionInfo::new(service, peer, certificates);
            serve_http(tls, peer, &settings, service, shutdown).await
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
/// the client presented any) to each request before passing it on, and counts the
/// connection's requests in flight (until their response bodies end) for its idle watchdog.
struct WithConnectionInfo<S> {
    inner: S,
    peer: SocketAddr,
    certificates: Option<PeerCertificates>,
    in_flight: Arc<watch::Sender<usize>>,
}

impl<S> WithConnectionInfo<S> {
    fn new(inner: S, peer: SocketAddr, certificates: Option<PeerCertificates>) -> Self {
        WithConnectionInfo { inner, peer, certificates, in_flight: Arc::new(watch::Sender::new(0)) }
    }
}

impl<S, B> Service<Request<Incoming>> for WithConnectionInfo<S>
where
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<InFlightBody<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn call(&self, mut request: Request<Incoming>) -> Self::Future {
        let guard = InFlight::enter(self.in_flight.clone());
        request.extensions_mut().insert(RemoteAddr(self.peer));
        if let Some(certificates) = &self.certificates {
            request.extensions_mut().insert(certificates.clone());
        }
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| InFlightBody { body, _in_flight: guard }))
        })
    }
}

/// One request in flight on a connection: counted from the moment the service is called
/// until the response body is dropped (sent in full, or the connection closed).
struct InFlight(Arc<watch::Sender<usize>>);

impl InFlight {
    fn enter(count: Arc<watch::Sender<usize>>) -> Self {
        count.send_modify(|n| *n += 1);
        InFlight(count)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

pin_project_lite::pin_project! {
    /// A response body that keeps its request counted as in flight while it lives.
    struct InFlightBody<B> {
        #[pin]
        body: B,
        _in_flight: InFlight,
    }
}

impl<B: http_body::Body> http_body::Body for InFlightBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Resolves once the connection has had no request in flight for its timeout: the
/// header-read timeout before its first request, the idle timeout after (a `None` timeout:
/// never).
async fn idle(in_flight: &watch::Sender<usize>, header_read_timeout: Option<Duration>, idle_timeout: Option<Duration>) {
    let mut count = in_flight.subscribe();
    let mut timeout = header_read_timeout;
    loop {
        if count.wait_for(|n| *n == 0).await.is_err() {
            return std::future::pending().await;
        }
        let Some(limit) = timeout else {
            return std::future::pending().await;
        };
        tokio::select! {
            () = tokio::time::sleep(limit) => return,
            _ = count.changed() => {}
        }
        timeout = idle_timeout;
    }
}

/// Serves HTTP on an established stream until the client closes it, its idle watchdog
/// fires or shutdown asks it to close; in the last two cases in-flight requests may finish.
async fn serve_http<I, S, B>(
    io: I,
    peer: SocketAddr,
    settings: &ConnectionSettings,
    service: WithConnectionInfo<S>,
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
    let in_flight = service.in_flight.clone();
    let watchdog = idle(&in_flight, settings.header_read_timeout, settings.idle_timeout);
    let conn = settings.http.serve_connection_with_upgrades(TokioIo::new(io), service);
    let mut conn = std::pin::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = watchdog => {
            tracing::debug!(%peer, "closing a connection with no request in flight");
            conn.as_mut().graceful_shutdown();
            match tokio::time::timeout(IDLE_CLOSE_GRACE, conn.as_mut()).await {
                Ok(result) => result,
                Err(_) => Ok(()),
            }
        }
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}
