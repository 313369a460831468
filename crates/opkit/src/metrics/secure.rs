//! The metrics endpoint served securely, as controller-runtime's metrics server with
//! `SecureServing` and `filters.WithAuthenticationAndAuthorization`: HTTPS (a certificate
//! directory, reloaded when its files change, or a self-signed certificate made at start),
//! and every request authenticated with a TokenReview of its bearer token and authorized
//! with a SubjectAccessReview of its verb on its non-resource path (`get` on `/metrics`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::{Api, PostParams};
use opkit_serve::tls::{crypto_provider, server_config, server_config_with_resolver};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::Metrics;
use crate::webhook::DevCerts;
use crate::webhook::tls::CertReloader;

/// File name of the serving certificate in the certificate directory, by default.
pub const DEFAULT_CERT_NAME: &str = "tls.crt";
/// File name of the serving key in the certificate directory, by default.
pub const DEFAULT_KEY_NAME: &str = "tls.key";

/// How the metrics endpoint is served securely (the manager's `--metrics-secure`,
/// `--metrics-cert-path`, `--metrics-cert-name` and `--metrics-cert-key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecureServing {
    /// The directory holding the certificate and key; `None`: a self-signed certificate is
    /// made at start, as controller-runtime does.
    pub cert_dir: Option<PathBuf>,
    /// The certificate's file name in `cert_dir`.
    pub cert_name: String,
    /// The key's file name in `cert_dir`.
    pub key_name: String,
}

impl Default for SecureServing {
    fn default() -> Self {
        SecureServing { cert_dir: None, cert_name: DEFAULT_CERT_NAME.into(), key_name: DEFAULT_KEY_NAME.into() }
    }
}

/// Why the secure metrics endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum SecureMetricsError {
    /// The certificate directory's pair could not be read or used.
    #[error("metrics certificate: {0}")]
    Certificate(String),
    /// The address could not be bound.
    #[error("binding the metrics endpoint {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}

/// The rustls config serving `serving`'s certificate.
fn tls_config(serving: &SecureServing) -> Result<Arc<rustls::ServerConfig>, SecureMetricsError> {
    let failed = |e: &dyn std::fmt::Display| SecureMetricsError::Certificate(e.to_string());
    match &serving.cert_dir {
        Some(dir) => {
            let provider = crypto_provider();
            let reloader =
                CertReloader::new(dir.join(&serving.cert_name), dir.join(&serving.key_name), provider.clone())
                    .map_err(|e| failed(&e))?;
            server_config_with_resolver(Arc::new(reloader), provider).map_err(|e| failed(&e))
        }
        None => {
            let certs = DevCerts::generate(&[]).map_err(|e| failed(&e))?;
            server_config(&certs.cert_pem, &certs.key_pem).map_err(|e| failed(&e))
        }
    }
}

/// Serves `metrics` at `addr` over HTTPS, each request authenticated and authorized
/// through `client`'s API server (which must let it create TokenReviews and
/// SubjectAccessReviews), until `shutdown`. Returns the bound address once listening.
pub async fn serve(
    addr: SocketAddr,
    metrics: Metrics,
    client: kube::Client,
    serving: &SecureServing,
    shutdown: CancellationToken,
) -> Result<SocketAddr, SecureMetricsError> {
    let tls = tls_config(serving)?;
    let listener = TcpListener::bind(addr).await.map_err(|source| SecureMetricsError::Bind { addr, source })?;
    let local = listener.local_addr().map_err(|source| SecureMetricsError::Bind { addr, source })?;
    let checker = Arc::new(Checker { client });
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let checker = checker.clone();
        let metrics = metrics.clone();
        async move {
            let resp = match checker.check(&req).await {
                Ok(()) => crate::health::metrics_response(&req, &metrics),
                Err(denied) => denied,
            };
            Ok::<_, Infallible>(resp)
        }
    });
    tokio::spawn(opkit_serve::Server::new(listener).tls(tls).serve(service, shutdown));
    tracing::info!(addr = %local, "serving metrics over HTTPS with authentication and authorization");
    Ok(local)
}

/// Asks the API server who a request is and whether it may do what it asks.
struct Checker {
    client: kube::Client,
}

impl Checker {
    /// `Ok` when the request's token is valid and its user may `<method>` its path; else
    /// the response to send: 401, 403, or 500 when the API server could not be asked.
    async fn check<B>(&self, req: &Request<B>) -> Result<(), Response<Full<Bytes>>> {
        let Some(token) = bearer_token(req) else {
            return Err(plain(StatusCode::UNAUTHORIZED, "Unauthorized"));
        };
        let user = match self.authenticate(token).await {
            Ok(Some(user)) => user,
            Ok(None) => return Err(plain(StatusCode::UNAUTHORIZED, "Unauthorized")),
            Err(e) => {
                tracing::error!(error = %e, "metrics: authentication failed");
                return Err(plain(StatusCode::INTERNAL_SERVER_ERROR, "Authentication failed"));
            }
        };
        let name = user.username.clone().unwrap_or_default();
        let verb = req.method().as_str().to_lowercase();
        match self.authorize(user, req.uri().path(), &verb).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(plain(StatusCode::FORBIDDEN, &format!("Authorization denied for user {name}"))),
            Err(e) => {
                tracing::error!(error = %e, user = %name, "metrics: authorization failed");
                Err(plain(StatusCode::INTERNAL_SERVER_ERROR, &format!("Authorization for user {name} failed")))
            }
        }
    }

    /// The user `token` belongs to (TokenReview), or `None` when it is not valid.
    async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, kube::Error> {
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.to_owned()), ..Default::default() },
            ..Default::default()
        };
        let answer = Api::<TokenReview>::all(self.client.clone()).create(&PostParams::default(), &review).await?;
        let status = answer.status.unwrap_or_default();
        Ok(if status.authenticated == Some(true) { status.user } else { None })
    }

    /// Whether `user` may `verb` the non-resource URL `path` (SubjectAccessReview).
    async fn authorize(&self, user: UserInfo, path: &str, verb: &str) -> Result<bool, kube::Error> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some(verb.to_owned()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer =
            Api::<SubjectAccessReview>::all(self.client.clone()).create(&PostParams::default(), &review).await?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case), as
/// kube-apiserver's bearer token authenticator reads it.
fn bearer_token<B>(req: &Request<B>) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// A plain-text error answer with `message`, as Go's `http.Error` writes it.
fn plain(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    crate::health::text(status, format!("{message}\n"))
}
