//! The secure metrics endpoint (`--metrics-secure`) against an in-process control plane:
//! the manager runs as a ServiceAccount with kubebuilder's metrics-auth-role, a scraper's
//! ServiceAccount token bound to the metrics-reader role gets the metrics over HTTPS, any
//! other token gets 403, and no (or a bad) token 401, as controller-runtime's
//! `WithAuthenticationAndAuthorization` answers.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use common::{env_without_root_ca, eventually};
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use opkit::metrics::secure::SecureServing;
use opkit::webhook::DevCerts;
use opkit::{Manager, ManagerOptions};
use opkit_testenv::TestEnv;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

/// The manager's ServiceAccount may review tokens and access (config/rbac/metrics_auth_role);
/// monitoring/prometheus may `get` /metrics (metrics_reader_role), monitoring/stranger nothing.
const RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: metrics-auth-role
rules:
- apiGroups: [authentication.k8s.io]
  resources: [tokenreviews]
  verbs: [create]
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: metrics-auth-rolebinding
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: metrics-auth-role}
subjects:
- {kind: ServiceAccount, name: controller-manager, namespace: op-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: metrics-reader
rules:
- nonResourceURLs: [/metrics]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: prometheus-metrics-reader
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: metrics-reader}
subjects:
- {kind: ServiceAccount, name: prometheus, namespace: monitoring}
"#;

/// How the test client checks the server's certificate.
enum Trust {
    /// The CA that signed it (a certificate directory's).
    Ca(String),
    /// Anything, as a ServiceMonitor with `insecureSkipVerify` (a self-signed certificate).
    Any,
}

/// Accepts every server certificate, still checking the handshake's signatures.
#[derive(Debug)]
struct AcceptAny(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// GET `path` over HTTPS (HTTP/1.1) with an optional bearer token: status and body.
async fn get(addr: SocketAddr, trust: &Trust, path: &str, token: Option<&str>) -> (u16, String) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("versions");
    let mut config = match trust {
        Trust::Ca(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                roots.add(cert.expect("ca pem")).expect("add root");
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        Trust::Any => {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(AcceptAny(provider))).with_no_client_auth()
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(addr).await.expect("tcp connect");
    let name = ServerName::try_from("localhost").expect("name");
    let tls = TlsConnector::from(Arc::new(config)).connect(name, tcp).await.expect("tls handshake");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.expect("handshake");
    tokio::spawn(conn);
    let mut req = Request::get(format!("https://localhost:{}{path}", addr.port()));
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    let resp = sender.send_request(req.body(Empty::<Bytes>::new()).expect("request")).await.expect("response");
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Starts a manager serving secure metrics as op-system/controller-manager; returns its
/// metrics address.
async fn start_manager(env: &TestEnv, serving: SecureServing, stop: &CancellationToken) -> SocketAddr {
    let client = env.service_account_client("op-system", "controller-manager").await.expect("operator client");
    let opts = ManagerOptions {
        metrics_addr: Some("127.0.0.1:0".parse().expect("addr")),
        metrics_secure: Some(serving),
        ..Default::default()
    };
    let mgr = Manager::new(client, opts);
    // A controller's metric families, as a manager with a controller has.
    mgr.metrics().controller("widgets");
    let handle = mgr.clone();
    tokio::spawn(mgr.run_until(stop.clone()));
    eventually("the metrics endpoint to be bound", || async { handle.bound_addresses().0 }).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_authorized_tokens_get_the_metrics() {
    let env = env_without_root_ca().await;
    env.apply_yaml(RBAC).await.expect("rbac");
    let reader = env.service_account_token("monitoring", "prometheus").await.expect("reader token");
    let stranger = env.service_account_token("monitoring", "stranger").await.expect("stranger token");
    let stop = CancellationToken::new();
    let _stop_on_exit = stop.clone().drop_guard();

    // A certificate directory (cert-manager's Secret in a cluster).
    let certs = tempfile::tempdir().expect("tempdir");
    let dev = DevCerts::generate(&[]).expect("certs");
    dev.write(certs.path()).expect("write certs");
    let serving = SecureServing { cert_dir: Some(certs.path().to_path_buf()), ..Default::default() };
    let addr = start_manager(&env, serving, &stop).await;
    let trust = Trust::Ca(dev.ca_pem.clone());

    let (status, body) = get(addr, &trust, "/metrics", Some(&reader)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("controller_runtime_reconcile_total{controller=\"widgets\",result=\"success\"} 0"), "{body}");

    let (status, body) = get(addr, &trust, "/metrics", Some(&stranger)).await;
    assert_eq!(
        (status, body.as_str()),
        (403, "Authorization denied for user system:serviceaccount:monitoring:stranger\n")
    );
    // The reader may get /metrics only: other paths are denied before they are looked up.
    let (status, _) = get(addr, &trust, "/debug", Some(&reader)).await;
    assert_eq!(status, 403);

    let (status, body) = get(addr, &trust, "/metrics", None).await;
    assert_eq!((status, body.as_str()), (401, "Unauthorized\n"));
    let (status, body) = get(addr, &trust, "/metrics", Some("not-a-token")).await;
    assert_eq!((status, body.as_str()), (401, "Unauthorized\n"));

    // Without a certificate directory: a self-signed certificate, as scrapers with
    // `insecureSkipVerify` accept.
    let addr = start_manager(&env, SecureServing::default(), &stop).await;
    let (status, body) = get(addr, &Trust::Any, "/metrics", Some(&reader)).await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = get(addr, &Trust::Any, "/metrics", Some(&stranger)).await;
    assert_eq!(status, 403);
}
