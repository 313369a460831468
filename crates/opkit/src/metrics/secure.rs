//! The metrics endpoint served securely, as controller-runtime's metrics server with
//! `SecureServing` and `filters.WithAuthenticationAndAuthorization`: HTTPS (a certificate
//! directory, reloaded when its files change, or a self-signed certificate made at start),
//! and every request authenticated with a TokenReview of its bearer token and authorized
//! with a SubjectAccessReview of its verb on its non-resource path (`get` on `/metrics`).
//! Answers are cached as controller-runtime's delegating authenticator and authorizer cache
//! them: a token review for a minute, an allowed access for five minutes, a denied one for
//! thirty seconds.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::{Api, PostParams};
use opkit_serve::tls::{crypto_provider, server_config, server_config_with_resolver};
use parking_lot::Mutex;
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
    let checker = Arc::new(Checker { client, users: TtlCache::default(), decisions: TtlCache::default() });
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

/// How long a token review is kept (controller-runtime's `CacheTTL`).
const AUTHENTICATION_TTL: Duration = Duration::from_secs(60);
/// How long an allowed access is kept (`AllowCacheTTL`).
const ALLOW_TTL: Duration = Duration::from_secs(5 * 60);
/// How long a denied access is kept (`DenyCacheTTL`).
const DENY_TTL: Duration = Duration::from_secs(30);
/// At most this many answers are kept per cache; past it, expired ones are dropped, and if
/// none expired, all (random tokens must not grow it without bound).
const CACHE_ENTRIES: usize = 4096;

/// Answers of the API server, each kept until its deadline.
struct TtlCache<V> {
    entries: Mutex<HashMap<String, (Instant, V)>>,
}

impl<V> Default for TtlCache<V> {
    fn default() -> Self {
        TtlCache { entries: Mutex::new(HashMap::new()) }
    }
}

impl<V: Clone> TtlCache<V> {
    /// The answer for `key`, unless it expired by `now`.
    fn get(&self, key: &str, now: Instant) -> Option<V> {
        self.entries.lock().get(key).filter(|(until, _)| now < *until).map(|(_, v)| v.clone())
    }

    /// Keeps `value` for `key` until `until`.
    fn put(&self, key: String, value: V, now: Instant, until: Instant) {
        let mut entries = self.entries.lock();
        if entries.len() >= CACHE_ENTRIES {
            entries.retain(|_, (deadline, _)| now < *deadline);
            if entries.len() >= CACHE_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, (until, value));
    }
}

/// Asks the API server who a request is and whether it may do what it asks.
struct Checker {
    client: kube::Client,
    /// Token → the user it authenticates (`None`: not valid).
    users: TtlCache<Option<UserInfo>>,
    /// User, path and verb → allowed.
    decisions: TtlCache<bool>,
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
        let now = Instant::now();
        if let Some(user) = self.users.get(token, now) {
            return Ok(user);
        }
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.to_owned()), ..Default::default() },
            ..Default::default()
        };
        let answer = Api::<TokenReview>::all(self.client.clone()).create(&PostParams::default(), &review).await?;
        let status = answer.status.unwrap_or_default();
        let user = if status.authenticated == Some(true) { status.user } else { None };
        self.users.put(token.to_owned(), user.clone(), now, now + AUTHENTICATION_TTL);
        Ok(user)
    }

    /// Whether `user` may `verb` the non-resource URL `path` (SubjectAccessReview).
    async fn authorize(&self, user: UserInfo, path: &str, verb: &str) -> Result<bool, kube::Error> {
        let now = Instant::now();
        // serde_json keeps the fields in order, so one user always makes one key.
        let key = format!("{}\n{path}\n{verb}", serde_json::to_string(&user).unwrap_or_default());
        if let Some(allowed) = self.decisions.get(&key, now) {
            return Ok(allowed);
        }
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
        let allowed = answer.status.is_some_and(|s| s.allowed);
        self.decisions.put(key, allowed, now, now + if allowed { ALLOW_TTL } else { DENY_TTL });
        Ok(allowed)
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case), as
/// kube-apiserver's bearer token authenticator reads it.
fn bearer_token<B>(req: &Request<B>) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let mut parts = value.trim().splitn(3, ' ');
    let (scheme, token) = (parts.next()?, parts.next()?);
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// A plain-text error answer with `message`, as Go's `http.Error` writes it.
fn plain(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    crate::health::text(status, format!("{message}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_expire_at_their_deadline() {
        let cache = TtlCache::default();
        let now = Instant::now();
        cache.put("allowed".into(), true, now, now + ALLOW_TTL);
        cache.put("denied".into(), false, now, now + DENY_TTL);
        let later = now + Duration::from_secs(31);
        assert_eq!(cache.get("allowed", later), Some(true));
        assert_eq!(cache.get("denied", now), Some(false));
        assert_eq!(cache.get("denied", later), None, "a denial is asked again after 30 s");
        assert_eq!(cache.get("allowed", now + ALLOW_TTL), None);
        assert_eq!(cache.get("other", now), None);
    }

    #[test]
    fn a_full_cache_drops_expired_answers_then_everything() {
        let cache = TtlCache::default();
        let now = Instant::now();
        for i in 0..CACHE_ENTRIES {
            let until = if i % 2 == 0 { now } else { now + DENY_TTL };
            cache.put(format!("t{i}"), i, now, until);
        }
        cache.put("new".into(), 0, now, now + DENY_TTL);
        assert_eq!(cache.entries.lock().len(), CACHE_ENTRIES / 2 + 1, "expired ones dropped");
        assert_eq!(cache.get("t1", now), Some(1));
        for i in 0..CACHE_ENTRIES {
            cache.put(format!("u{i}"), i, now, now + DENY_TTL);
        }
        assert!(cache.entries.lock().len() < CACHE_ENTRIES, "none expired: all dropped");
    }

    #[test]
    fn bearer_tokens_are_read_as_kube_apiserver_reads_them() {
        let req = |value: &str| Request::get("/metrics").header("authorization", value).body(()).expect("request");
        assert_eq!(bearer_token(&req("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&req(" bearer abc def ")), Some("abc"));
        assert_eq!(bearer_token(&req("Bearer  abc")), None, "an empty token, as kube-apiserver reads it");
        assert_eq!(bearer_token(&req("Basic abc")), None);
        assert_eq!(bearer_token(&req("Bearer ")), None);
        assert_eq!(bearer_token(&Request::get("/metrics").body(()).expect("request")), None);
    }
}
