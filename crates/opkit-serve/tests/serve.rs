//! The accept loop over real sockets: TLS handshake timeout, header-read timeout, graceful
//! shutdown (in-flight requests finish, the grace bounds how long), the connection cap, and
//! HTTPS with the development CA over HTTP/1.1 and HTTP/2.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use opkit_serve::Server;
use opkit_serve::tls::{DevCa, server_config};
use rustls_pki_types::ServerName;
use rustls_pki_types::pem::PemObject;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Upper bound for anything a test waits for.
const WAIT: Duration = Duration::from_secs(10);

async fn listener() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    (listener, addr)
}

/// Answers `ok`; `/slow` first reports on `entered` and waits for a permit from `release`.
#[derive(Clone)]
struct TestService {
    entered: mpsc::UnboundedSender<()>,
    release: Arc<Semaphore>,
}

impl TestService {
    fn new() -> (Self, mpsc::UnboundedReceiver<()>, Arc<Semaphore>) {
        let (entered, rx) = mpsc::unbounded_channel();
        let release = Arc::new(Semaphore::new(0));
        (TestService { entered, release: release.clone() }, rx, release)
    }
}

impl hyper::service::Service<Request<Incoming>> for TestService {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::pin::Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            if req.uri().path() == "/slow" {
                let _ = this.entered.send(());
                this.release.acquire().await.expect("semaphore open").forget();
            }
            Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))
        })
    }
}

/// A raw HTTP/1.1 request on an open stream; returns the whole response once the server closes.
async fn request(stream: &mut TcpStream, path: &str) -> String {
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.expect("write");
    let mut raw = String::new();
    tokio::time::timeout(WAIT, stream.read_to_string(&mut raw)).await.expect("response in time").expect("read");
    raw
}

/// Waits until the peer closes `stream` (EOF or reset); panics after [`WAIT`].
async fn closed_by_server(stream: &mut TcpStream) {
    let mut buf = [0u8; 64];
    loop {
        match tokio::time::timeout(WAIT, stream.read(&mut buf)).await.expect("server closed the connection") {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

async fn wait_refused(addr: SocketAddr) {
    tokio::time::timeout(WAIT, async {
        while TcpStream::connect(addr).await.is_ok() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("listener closed");
}

async fn finished(server: JoinHandle<()>) {
    tokio::time::timeout(WAIT, server).await.expect("serve returned").expect("server task");
}

#[tokio::test]
async fn tls_handshake_timeout_closes_a_silent_client() {
    let ca = DevCa::generate("test CA").expect("ca");
    let cert = ca.issue_serving_cert("localhost", &["localhost".to_owned()]).expect("cert");
    let (listener, addr) = listener().await;
    let stop = CancellationToken::new();
    let timeout = Duration::from_millis(300);
    let (service, _, _) = TestService::new();
    let server = Server::new(listener)
        .tls(server_config(&cert.cert_pem, &cert.key_pem).expect("config"))
        .tls_handshake_timeout(timeout)
        .header_read_timeout(None);
    let task = tokio::spawn(server.serve(service, stop.clone()));

    let started = Instant::now();
    let mut silent = TcpStream::connect(addr).await.expect("connect");
    closed_by_server(&mut silent).await;
    assert!(started.elapsed() >= timeout, "closed after {:?}, before the handshake timeout", started.elapsed());

    stop.cancel();
    finished(task).await;
}

#[tokio::test]
async fn header_read_timeout_closes_a_client_that_stalls_mid_request() {
    let (listener, addr) = listener().await;
    let stop = CancellationToken::new();
    let timeout = Duration::from_millis(300);
    let (service, _, _) = TestService::new();
    let task = tokio::spawn(Server::new(listener).header_read_timeout(Some(timeout)).serve(service, stop.clone()));

    let started = Instant::now();
    let mut stalled = TcpStream::connect(addr).await.expect("connect");
    stalled.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").await.expect("write");
    closed_by_server(&mut stalled).await;
    assert!(started.elapsed() >= timeout, "closed after {:?}", started.elapsed());

    stop.cancel();
    finished(task).await;
}

#[tokio::test]
async fn shutdown_lets_in_flight_requests_finish_and_refuses_new_connections() {
    let (listener, addr) = listener().await;
    let stop = CancellationToken::new();
    let (service, mut entered, release) = TestService::new();
    let task = tokio::spawn(Server::new(listener).shutdown_grace(None).serve(service, stop.clone()));

    let mut client = TcpStream::connect(addr).await.expect("connect");
    let in_flight = tokio::spawn(async move { request(&mut client, "/slow").await });
    tokio::time::timeout(WAIT, entered.recv()).await.expect("handler entered").expect("channel open");

    stop.cancel();
    wait_refused(addr).await;
    assert!(!task.is_finished(), "serve returned while a request was in flight");
    release.add_permits(1);

    let response = tokio::time::timeout(WAIT, in_flight).await.expect("response").expect("client task");
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    assert!(response.ends_with("ok"), "{response}");
    finished(task).await;
}

#[tokio::test]
async fn shutdown_aborts_connections_still_open_after_the_grace() {
    let (listener, addr) = listener().await;
    let stop = CancellationToken::new();
    let (service, mut entered, _release) = TestService::new();
    let grace = Duration::from_millis(200);
    let task = tokio::spawn(Server::new(listener).shutdown_grace(Some(grace)).serve(service, stop.clone()));

    let mut client = TcpStream::connect(addr).await.expect("connect");
    client.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
    tokio::time::timeout(WAIT, entered.recv()).await.expect("handler entered").expect("channel open");

    let stopped = Instant::now();
    stop.cancel();
    finished(task).await;
    assert!(stopped.elapsed() >= grace, "returned after {:?}, before the grace", stopped.elapsed());
    // The handler never answered: the connection was cut without a response.
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(WAIT, client.read_to_end(&mut rest)).await.expect("connection closed");
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
}

#[tokio::test]
async fn connection_cap_defers_clients_until_a_slot_frees() {
    let (listener, addr) = listener().await;
    let stop = CancellationToken::new();
    let (service, mut entered, release) = TestService::new();
    let task = tokio::spawn(Server::new(listener).max_connections(1).serve(service, stop.clone()));

    let mut first = TcpStream::connect(addr).await.expect("connect");
    let first = tokio::spawn(async move { request(&mut first, "/slow").await });
    tokio::time::timeout(WAIT, entered.recv()).await.expect("first handler entered").expect("channel open");

    // The second client connects (listen backlog) but is not served while the first holds the slot.
    let mut second = TcpStream::connect(addr).await.expect("connect");
    let second = tokio::spawn(async move { request(&mut second, "/slow").await });
    let early = tokio::time::timeout(Duration::from_millis(300), entered.recv()).await;
    assert!(early.is_err(), "a second connection was served beyond the cap");

    release.add_permits(2);
    let first = tokio::time::timeout(WAIT, first).await.expect("first response").expect("task");
    assert!(first.starts_with("HTTP/1.1 200 OK"), "{first}");
    tokio::time::timeout(WAIT, entered.recv()).await.expect("second handler entered").expect("channel open");
    let second = tokio::time::timeout(WAIT, second).await.expect("second response").expect("task");
    assert!(second.starts_with("HTTP/1.1 200 OK"), "{second}");

    stop.cancel();
    finished(task).await;
}

#[tokio::test]
async fn https_serves_http1_and_http2_with_the_dev_ca() {
    let ca = DevCa::generate("test CA").expect("ca");
    let cert = ca.issue_serving_cert("localhost", &["localhost".to_owned(), "127.0.0.1".to_owned()]).expect("cert");
    let (listener, addr) = listener().await;
    let stop = CancellationToken::new();
    let (service, _, _) = TestService::new();
    let server = Server::new(listener).tls(server_config(&cert.cert_pem, &cert.key_pem).expect("config"));
    let task = tokio::spawn(server.serve(service, stop.clone()));

    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls_pki_types::CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).expect("pem")).expect("root");
    for alpn in [&b"http/1.1"[..], b"h2"] {
        let mut config = rustls::ClientConfig::builder_with_provider(opkit_serve::tls::crypto_provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
        config.alpn_protocols = vec![alpn.to_vec()];
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let name = ServerName::try_from("localhost").expect("name");
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.expect("handshake");
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(alpn));
        let req = Request::get("https://localhost/").body(Full::new(Bytes::new())).expect("request");
        let resp = if alpn == b"h2" {
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await.expect("h2");
            tokio::spawn(conn);
            sender.send_request(req).await.expect("response")
        } else {
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.expect("h1");
            tokio::spawn(conn);
            sender.send_request(req).await.expect("response")
        };
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.into_body().collect().await.expect("body").to_bytes(), "ok");
    }

    stop.cancel();
    finished(task).await;
}

/// One HTTPS GET over HTTP/1.1 trusting `ca`, presenting `client` (certificate, key) if
/// given; the body, or the error that ended the exchange.
async fn get_with_client_cert(addr: SocketAddr, ca: &DevCa, client: Option<(&str, &str)>) -> Result<String, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls_pki_types::CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).expect("pem")).expect("root");
    let builder = rustls::ClientConfig::builder_with_provider(opkit_serve::tls::crypto_provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => {
            let chain = vec![rustls_pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).expect("cert")];
            let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key");
            builder.with_client_auth_cert(chain, key).expect("client auth")
        }
        None => builder.with_no_client_auth(),
    };
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from("localhost").expect("name");
    let exchange = async {
        let tls =
            tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.map_err(|e| e.to_string())?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let req = Request::get("https://localhost/").body(Full::new(Bytes::new())).expect("request");
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let body = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok(String::from_utf8_lossy(&body).into_owned())
    };
    tokio::time::timeout(WAIT, exchange).await.expect("exchange finished")
}

#[tokio::test]
async fn client_certificates_are_verified_and_reach_the_service() {
    let ca = DevCa::generate("test CA").expect("ca");
    let cert = ca.issue_serving_cert("localhost", &["localhost".to_owned()]).expect("cert");
    let config =
        opkit_serve::tls::server_config_with_client_ca(&cert.cert_pem, &cert.key_pem, ca.cert_pem()).expect("config");
    let (listener, addr) = listener().await;
    let stop = CancellationToken::new();
    let service = hyper::service::service_fn(|req: Request<Incoming>| async move {
        let seen = match req.extensions().get::<opkit_serve::PeerCertificates>() {
            Some(chain) => format!("{} certificate(s)", chain.0.len()),
            None => "none".to_owned(),
        };
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(seen))))
    });
    let task = tokio::spawn(Server::new(listener).tls(config).serve(service, stop.clone()));

    let client = ca.issue_client_cert("jane", "dev").expect("client cert");
    let presented = get_with_client_cert(addr, &ca, Some((&client.cert_pem, &client.key_pem))).await;
    assert_eq!(presented.as_deref(), Ok("1 certificate(s)"));
    assert_eq!(get_with_client_cert(addr, &ca, None).await.as_deref(), Ok("none"));
    let stranger = DevCa::generate("another CA").expect("ca").issue_client_cert("mallory", "dev").expect("cert");
    let refused = get_with_client_cert(addr, &ca, Some((&stranger.cert_pem, &stranger.key_pem))).await;
    assert!(refused.is_err(), "a certificate from another CA was accepted: {refused:?}");

    stop.cancel();
    finished(task).await;
}

/// Raises this process's soft file-descriptor limit to at least `wanted` (within the hard
/// limit), so that a flood of connections with both ends in this process fits.
fn raise_descriptor_limit(wanted: u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|current| current < wanted) {
        limit.current = Some(limit.maximum.map_or(wanted, |max| max.min(wanted)));
        setrlimit(Resource::Nofile, limit).expect("raising RLIMIT_NOFILE");
    }
}

/// A TLS client trusting `ca` and offering `alpn`.
fn tls_connector(ca: &DevCa, alpn: &[u8]) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls_pki_types::CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).expect("pem")).expect("root");
    let mut config = rustls::ClientConfig::builder_with_provider(opkit_serve::tls::crypto_provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// One HTTPS GET of `path` over HTTP/1.1 on a new connection; the status, or the error.
async fn https_get(addr: SocketAddr, connector: &tokio_rustls::TlsConnector, path: &str) -> Result<u16, String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = ServerName::try_from("localhost").expect("name");
    let tls = connector.connect(name, tcp).await.map_err(|e| e.to_string())?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let req = Request::get(format!("https://localhost{path}")).body(Full::new(Bytes::new())).expect("request");
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    Ok(resp.status().as_u16())
}

/// Waits until the server closes a TLS stream (EOF or error); false if it is still open at
/// `deadline`.
async fn tls_closed_by(
    stream: &mut tokio_rustls::client::TlsStream<TcpStream>,
    deadline: tokio::time::Instant,
) -> bool {
    let mut buf = [0u8; 64];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_silent_tls_connections_is_closed_and_healthz_keeps_answering() {
    const SILENT: usize = 1_000;
    // Both ends of every connection live in this process, plus the checks' and the runtime's.
    raise_descriptor_limit(2 * SILENT as u64 + 256);
    let ca = DevCa::generate("test CA").expect("ca");
    let cert = ca.issue_serving_cert("localhost", &["localhost".to_owned()]).expect("cert");
    let (listener, addr) = listener().await;
    let stop = CancellationToken::new();
    let header_timeout = Duration::from_secs(2);
    let (service, _, _) = TestService::new();
    // The cap is what the flood fills: only closing silent connections frees slots for others.
    let server = Server::new(listener)
        .tls(server_config(&cert.cert_pem, &cert.key_pem).expect("config"))
        .header_read_timeout(Some(header_timeout))
        .max_connections(SILENT);
    let task = tokio::spawn(server.serve(service, stop.clone()));

    // Health checks on new connections run throughout the flood, each answered in time.
    let checking = CancellationToken::new();
    let checker = {
        let connector = tls_connector(&ca, b"http/1.1");
        let checking = checking.clone();
        tokio::spawn(async move {
            let mut answered = 0usize;
            while !checking.is_cancelled() {
                let status = tokio::time::timeout(WAIT, https_get(addr, &connector, "/healthz"))
                    .await
                    .unwrap_or_else(|_| panic!("/healthz unanswered for {WAIT:?} after {answered} answers"));
                assert_eq!(status, Ok(200), "/healthz after {answered} answers");
                answered += 1;
            }
            answered
        })
    };

    let mut flood = Vec::with_capacity(SILENT);
    let connector = tls_connector(&ca, b"h2");
    for i in 0..SILENT {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let name = ServerName::try_from("localhost").expect("name");
        let tls = tokio::time::timeout(WAIT, connector.connect(name, tcp))
            .await
            .unwrap_or_else(|_| panic!("TLS handshake {i} in time"))
            .expect("handshake");
        flood.push(tls);
    }
    // Every silent connection is closed by the server within the header timeout (the deadline
    // leaves room for a loaded machine).
    let deadline = tokio::time::Instant::now() + header_timeout + WAIT;
    let closed = futures_closed(flood, deadline).await;
    assert_eq!(closed, SILENT, "silent connections closed by the server before the deadline");

    checking.cancel();
    let answered = tokio::time::timeout(WAIT, checker).await.expect("checker finished").expect("checker task");
    assert!(answered > 0, "no health check completed");
    stop.cancel();
    finished(task).await;
}

/// How many of `streams` the server closes before `deadline`.
async fn futures_closed(
    streams: Vec<tokio_rustls::client::TlsStream<TcpStream>>,
    deadline: tokio::time::Instant,
) -> usize {
    let mut waits = tokio::task::JoinSet::new();
    for mut stream in streams {
        waits.spawn(async move { tls_closed_by(&mut stream, deadline).await });
    }
    let mut closed = 0;
    while let Some(result) = waits.join_next().await {
        closed += usize::from(result.expect("wait task"));
    }
    closed
}

#[tokio::test]
async fn a_silent_plain_http_connection_is_closed_after_the_header_timeout() {
    let (listener, addr) = listener().await;
    let stop = CancellationToken::new();
    let (service, _, _) = TestService::new();
    let server = Server::new(listener).header_read_timeout(Some(Duration::from_millis(300)));
    let task = tokio::spawn(server.serve(service, stop.clone()));

    let mut silent = TcpStream::connect(addr).await.expect("connect");
    closed_by_server(&mut silent).await;

    stop.cancel();
    finished(task).await;
}

#[tokio::test]
async fn an_idle_http2_connection_is_closed_after_the_idle_timeout_but_not_during_a_request() {
    let ca = DevCa::generate("test CA").expect("ca");
    let cert = ca.issue_serving_cert("localhost", &["localhost".to_owned()]).expect("cert");
    let (listener, addr) = listener().await;
    let stop = CancellationToken::new();
    let idle = Duration::from_millis(300);
    let (service, mut entered, release) = TestService::new();
    let server = Server::new(listener)
        .tls(server_config(&cert.cert_pem, &cert.key_pem).expect("config"))
        .idle_timeout(Some(idle));
    let task = tokio::spawn(server.serve(service, stop.clone()));

    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from("localhost").expect("name");
    let tls = tls_connector(&ca, b"h2").connect(name, tcp).await.expect("handshake");
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await.expect("h2");
    let conn = tokio::spawn(conn);
    // A request outlasting the idle timeout is not cut: the connection is busy, not idle.
    let slow = sender.send_request(Request::get("https://localhost/slow").body(Full::new(Bytes::new())).expect("req"));
    let slow = tokio::spawn(slow);
    tokio::time::timeout(WAIT, entered.recv()).await.expect("handler entered").expect("channel open");
    let started = Instant::now();
    tokio::time::timeout(WAIT, async {
        while started.elapsed() < 3 * idle {
            tokio::task::yield_now().await;
            tokio::time::sleep(idle / 10).await;
        }
    })
    .await
    .expect("waited");
    release.add_permits(1);
    let resp = tokio::time::timeout(WAIT, slow).await.expect("response").expect("task").expect("slow response");
    assert_eq!(resp.status(), 200);
    // Then, idle, the server closes the connection.
    let ended = tokio::time::timeout(WAIT, conn).await.expect("the server closed the idle HTTP/2 connection");
    ended.expect("client connection task").expect("clean close");

    stop.cancel();
    finished(task).await;
}
