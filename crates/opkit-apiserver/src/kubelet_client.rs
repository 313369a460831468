//! The API server's client of kubelets, as kube-apiserver's `--kubelet-client-certificate`
//! and `--kubelet-certificate-authority` make it: HTTPS over HTTP/1.1 (so that exec,
//! attach and port-forward can upgrade), the kubelet's serving certificate verified
//! against the cluster CA, and the API server's own client certificate presented.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use opkit_serve::tls::{IssuedCert, TlsConfigError, crypto_provider};

/// How long reaching a kubelet (TCP and TLS) may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a request could not reach a kubelet, worded as Go's `net/http` client words it
/// (kube-apiserver's messages carry that text).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct KubeletDialError(String);

/// A TLS client for kubelets.
#[derive(Clone)]
pub(crate) struct KubeletClient {
    tls: TlsConnector,
}

impl KubeletClient {
    /// A client trusting `ca_pem` and presenting `client` (certificate and key, PEM).
    pub(crate) fn new(ca_pem: &str, client: &IssuedCert) -> Result<KubeletClient, TlsConfigError> {
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            let ca = ca.map_err(|e| TlsConfigError::ClientCa(e.to_string()))?;
            roots.add(ca).map_err(|e| TlsConfigError::ClientCa(e.to_string()))?;
        }
        let chain = CertificateDer::pem_slice_iter(client.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsConfigError::Certificate(e.to_string()))?;
        let key =
            PrivateKeyDer::from_pem_slice(client.key_pem.as_bytes()).map_err(|e| TlsConfigError::Key(e.to_string()))?;
        let mut config = rustls::ClientConfig::builder_with_provider(crypto_provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(KubeletClient { tls: TlsConnector::from(Arc::new(config)) })
    }

    /// Sends `request` (its URI a path and query) to the kubelet at `address`
    /// (`host:port`) on a connection of its own, which lives as long as the response (and
    /// its upgrade) is used.
    pub(crate) async fn send(
        &self,
        address: &str,
        request: Request<Empty<Bytes>>,
    ) -> Result<Response<Incoming>, KubeletDialError> {
        let url = format!("https://{address}{}", request.uri());
        let verb = title_case(request.method().as_str());
        let failed = |why: String| KubeletDialError(format!("{verb} \"{url}\": {why}"));
        let (host, _) = address.rsplit_once(':').ok_or_else(|| failed(format!("address {address}: missing port")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let server_name = ServerName::try_from(host.to_owned()).map_err(|e| failed(e.to_string()))?;
        let dial = async {
            let tcp = TcpStream::connect(address).await.map_err(|e| failed(dial_error(address, &e)))?;
            let tls = self.tls.connect(server_name, tcp).await.map_err(|e| failed(format!("tls: {e}")))?;
            Ok::<_, KubeletDialError>(tls)
        };
        let tls = tokio::time::timeout(DIAL_TIMEOUT, dial)
            .await
            .map_err(|_| failed(format!("dial tcp {address}: i/o timeout")))??;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| failed(e.to_string()))?;
        tokio::spawn(async move {
            if let Err(e) = connection.with_upgrades().await {
                tracing::debug!(error = %e, "kubelet connection ended");
            }
        });
        sender.send_request(request).await.map_err(|e| failed(e.to_string()))
    }
}

/// `GET` as Go's client names the method in its errors (`Get "https://..."`).
fn title_case(method: &str) -> String {
    let lower = method.to_ascii_lowercase();
    let mut chars = lower.chars();
    chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}

/// A failed TCP connect in Go's words: `dial tcp 127.0.0.1:1: connect: connection refused`.
fn dial_error(address: &str, e: &std::io::Error) -> String {
    let why = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_owned(),
        std::io::ErrorKind::TimedOut => "i/o timeout".to_owned(),
        _ => format!("connect: {e}"),
    };
    format!("dial tcp {address}: {why}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_worded_as_gos_client() {
        assert_eq!(title_case("GET"), "Get");
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(dial_error("127.0.0.1:1", &refused), "dial tcp 127.0.0.1:1: connect: connection refused");
    }
}
