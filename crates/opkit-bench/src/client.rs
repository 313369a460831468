//! A minimal HTTP/1.1 client on hyper: one connection per load worker, over TLS (for the
//! API server, trusting its CA and sending its bearer token) or plain TCP (for etcd's
//! JSON gateway). Only loopback addresses are accepted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

use crate::BenchError;

/// How long connecting (TCP plus TLS handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request may take (response head and, for [`Conn::send`], the body).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Where requests go: a loopback address, optionally TLS with a bearer token.
#[derive(Clone)]
pub struct Endpoint {
    addr: SocketAddr,
    tls: Option<tokio_rustls::TlsConnector>,
    token: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("addr", &self.addr).field("tls", &self.tls.is_some()).finish()
    }
}

fn loopback(addr: SocketAddr) -> Result<SocketAddr, BenchError> {
    if addr.ip().is_loopback() {
        Ok(addr)
    } else {
        Err(BenchError::Setup(format!("refusing to send load to non-loopback address {addr}")))
    }
}

/// Parses `https://127.0.0.1:PORT` or `http://127.0.0.1:PORT` into a socket address.
pub fn parse_url_addr(url: &str) -> Result<SocketAddr, BenchError> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| BenchError::Setup(format!("unsupported URL {url}")))?;
    let hostport = rest.split('/').next().unwrap_or_default();
    let addr: SocketAddr = hostport.parse().map_err(|_| BenchError::Setup(format!("URL {url} is not IP:PORT")))?;
    loopback(addr)
}

impl Endpoint {
    /// A plain-HTTP endpoint (etcd's gateway).
    pub fn plain(addr: SocketAddr) -> Result<Endpoint, BenchError> {
        Ok(Endpoint { addr: loopback(addr)?, tls: None, token: None })
    }

    /// An HTTPS endpoint trusting `ca_pem` and authenticating with `token`.
    pub fn tls(addr: SocketAddr, ca_pem: &str, token: &str) -> Result<Endpoint, BenchError> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| BenchError::Setup(format!("CA PEM: {e}")))?;
            roots.add(cert).map_err(|e| BenchError::Setup(format!("CA certificate: {e}")))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| BenchError::Setup(format!("TLS: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Endpoint {
            addr: loopback(addr)?,
            tls: Some(tokio_rustls::TlsConnector::from(Arc::new(cfg))),
            token: Some(token.to_string()),
        })
    }

    /// Builds a request for `path` with the Host, Authorization and Content-Type headers set.
    pub fn request(&self, method: Method, path: &str, body: Bytes) -> Request<Full<Bytes>> {
        let mut b = Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, self.addr.to_string())
            .header(http::header::ACCEPT, "application/json");
        if let Some(t) = &self.token {
            b = b.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
        }
        if !body.is_empty() {
            b = b.header(http::header::CONTENT_TYPE, "application/json");
        }
        // Every part above is a valid header value or path; fall back to an empty GET
        // rather than panic if a caller passes a malformed path.
        b.body(Full::new(body)).unwrap_or_else(|_| Request::new(Full::new(Bytes::new())))
    }

    /// Opens one connection.
    pub async fn connect(&self) -> Result<Conn, BenchError> {
        let fut = async {
            let tcp = TcpStream::connect(self.addr).await?;
            tcp.set_nodelay(true)?;
            let sender = match &self.tls {
                Some(tls) => {
                    let name = ServerName::IpAddress(self.addr.ip().into());
                    let stream = tls.connect(name, tcp).await?;
                    let (sender, conn) = http1::handshake(TokioIo::new(stream)).await.map_err(BenchError::http)?;
                    tokio::spawn(conn);
                    sender
                }
                None => {
                    let (sender, conn) = http1::handshake(TokioIo::new(tcp)).await.map_err(BenchError::http)?;
                    tokio::spawn(conn);
                    sender
                }
            };
            Ok::<_, BenchError>(sender)
        };
        let sender = tokio::time::timeout(CONNECT_TIMEOUT, fut)
            .await
            .map_err(|_| BenchError::Setup(format!("connecting to {} timed out", self.addr)))??;
        Ok(Conn { sender })
    }
}

/// One HTTP/1.1 connection; requests on it are sequential.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
}

impl Conn {
    /// Sends a request and returns the response head with its still-streaming body.
    /// Fails with [`BenchError::Timeout`] after [`REQUEST_TIMEOUT`]; the connection is
    /// then unusable.
    pub async fn send_streaming(&mut self, req: Request<Full<Bytes>>) -> Result<http::Response<Incoming>, BenchError> {
        let fut = async {
            self.sender.ready().await.map_err(BenchError::http)?;
            self.sender.send_request(req).await.map_err(BenchError::http)
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut).await.map_err(|_| BenchError::Timeout(REQUEST_TIMEOUT))?
    }

    /// Sends a request and reads the whole response body, within [`REQUEST_TIMEOUT`];
    /// after a timeout the connection is unusable.
    pub async fn send(&mut self, req: Request<Full<Bytes>>) -> Result<(StatusCode, Bytes), BenchError> {
        let fut = async {
            self.sender.ready().await.map_err(BenchError::http)?;
            let resp = self.sender.send_request(req).await.map_err(BenchError::http)?;
            let status = resp.status();
            let body = resp.into_body().collect().await.map_err(BenchError::http)?.to_bytes();
            Ok((status, body))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut).await.map_err(|_| BenchError::Timeout(REQUEST_TIMEOUT))?
    }

    /// Whether the connection can still carry requests.
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }
}

/// Sends one request on a fresh connection and fails unless the status is 2xx.
pub async fn call(ep: &Endpoint, method: Method, path: &str, body: Bytes) -> Result<Bytes, BenchError> {
    let mut c = ep.connect().await?;
    let (status, body) = c.send(ep.request(method.clone(), path, body)).await?;
    if !status.is_success() {
        return Err(BenchError::Status {
            what: format!("{method} {path}"),
            status: status.as_u16(),
            body: snippet(&body),
        });
    }
    Ok(body)
}

/// Opens a watch (or any streaming GET) on a fresh connection and fails unless the
/// response head is 2xx; the connection is returned with the response, whose body streams.
pub async fn open_stream(ep: &Endpoint, path: &str) -> Result<(Conn, http::Response<Incoming>), BenchError> {
    let mut conn = ep.connect().await?;
    let resp = conn.send_streaming(ep.request(Method::GET, path, Bytes::new())).await?;
    if !resp.status().is_success() {
        return Err(BenchError::Status {
            what: format!("GET {path}"),
            status: resp.status().as_u16(),
            body: String::new(),
        });
    }
    Ok((conn, resp))
}

/// The first 300 bytes of a body, for error messages.
pub fn snippet(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned()
}

/// Percent-encodes a query parameter value (everything but RFC 3986 unreserved bytes).
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_must_be_loopback() {
        assert_eq!(parse_url_addr("https://127.0.0.1:6443").ok(), Some("127.0.0.1:6443".parse().unwrap()));
        assert_eq!(parse_url_addr("http://[::1]:80/x").ok(), Some("[::1]:80".parse().unwrap()));
        assert!(parse_url_addr("https://10.0.0.1:6443").is_err());
        assert!(parse_url_addr("https://localhost:6443").is_err());
        assert!(parse_url_addr("ftp://127.0.0.1:1").is_err());
        assert!(Endpoint::plain("192.168.1.1:2379".parse().unwrap()).is_err());
    }

    #[test]
    fn requests_carry_headers() {
        let ep = Endpoint::plain("127.0.0.1:2379".parse().unwrap()).unwrap();
        let r = ep.request(Method::POST, "/v3/kv/put", Bytes::from_static(b"{}"));
        assert_eq!(r.headers()[http::header::HOST], "127.0.0.1:2379");
        assert_eq!(r.headers()[http::header::CONTENT_TYPE], "application/json");
        assert!(r.headers().get(http::header::AUTHORIZATION).is_none());
    }
}
