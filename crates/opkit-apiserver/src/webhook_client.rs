//! The API server's client of the webhooks its configuration names: admission webhooks
//! (`admissionregistration.k8s.io`) and CRD conversion webhooks (`apiextensions.k8s.io`),
//! as kube-apiserver's `webhook` client package calls them.
//!
//! A `clientConfig` names a URL or a Service. A Service is resolved through its
//! Endpoints to one address, as kube's endpoint service resolver does (there is no
//! kube-proxy in front of cluster IPs here), and TLS is verified against `caBundle` for
//! the name `<service>.<namespace>.svc` as Go's crypto/x509 verifies it (the shared
//! `CaBundleVerifier` of `opkit_apimachinery::aggregation`, which accepts the usual
//! self-signed `CA:TRUE` certificate given as its own bundle). Only addresses on this machine are ever
//! reached: loopback, or the address of a pod the local kubelet runs for real (its
//! container IDs start with `opkit://`); a simulated pod's address leads nowhere.
//!
//! Clients are kept per endpoint and CA, so a webhook's connections are reused.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{EndpointAddress, Endpoints, Pod, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::WebhookClientConfig as ConversionClientConfig;
use opkit_apimachinery::aggregation::verifier::go_tls_message;
use opkit_apimachinery::aggregation::{Backend, service_endpoint};
use parking_lot::Mutex;
use serde_json::Value;

use crate::registry::conversion::{ConversionFuture, ConversionWebhooks};
use crate::registry::view::StoreView;
use crate::storage::ResourceId;

/// The container ID prefix of containers the local kubelet runs as real processes
/// (opkit-controllers' `REAL_CONTAINER_ID_PREFIX`; the API server does not depend on it).
const REAL_CONTAINER_ID_PREFIX: &str = "opkit://";

/// A Service a webhook is served by (`clientConfig.service`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ServiceReference {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub name: String,
    /// The URL path requests are sent to (`/` when absent).
    pub path: Option<String>,
    /// The Service's port (443 when absent).
    pub port: i32,
}

/// Where a webhook is served and how its certificate is verified (the common shape of
/// `admissionregistration.k8s.io/v1` and `apiextensions.k8s.io/v1` `WebhookClientConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ClientConfig {
    /// `url`: `https://host:port/path`.
    pub url: Option<String>,
    /// `service`.
    pub service: Option<ServiceReference>,
    /// `caBundle` (PEM). Without it kube trusts the system roots, which no local
    /// webhook's certificate chains to, so the call fails verification.
    pub ca_bundle: Option<Vec<u8>>,
}

impl From<&k8s_openapi::api::admissionregistration::v1::WebhookClientConfig> for ClientConfig {
    fn from(c: &k8s_openapi::api::admissionregistration::v1::WebhookClientConfig) -> ClientConfig {
        ClientConfig {
            url: c.url.clone(),
            service: c.service.as_ref().map(|s| ServiceReference {
                namespace: s.namespace.clone(),
                name: s.name.clone(),
                path: s.path.clone(),
                port: s.port.unwrap_or(443),
            }),
            ca_bundle: c.ca_bundle.as_ref().map(|b| b.0.clone()),
        }
    }
}

impl From<&k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::WebhookClientConfig> for ClientConfig {
    fn from(
        c: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::WebhookClientConfig,
    ) -> ClientConfig {
        ClientConfig {
            url: c.url.clone(),
            service: c.service.as_ref().map(|s| ServiceReference {
                namespace: s.namespace.clone(),
                name: s.name.clone(),
                path: s.path.clone(),
                port: s.port.unwrap_or(443),
            }),
            ca_bundle: c.ca_bundle.as_ref().map(|b| b.0.clone()),
        }
    }
}

/// Why a webhook call failed, worded as kube-apiserver's client words it (admission and
/// conversion wrap these messages in their own).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum CallError {
    /// The `clientConfig` names nothing that can be reached (no such Service, no
    /// endpoints, an address off this machine, a malformed URL).
    #[error("{0}")]
    Unreachable(String),
    /// No answer within the webhook's timeout.
    #[error("Post \"{url}\": context deadline exceeded")]
    Timeout {
        /// The URL called.
        url: String,
    },
    /// The connection or the TLS handshake failed, or the answer was not HTTP.
    #[error("Post \"{url}\": {message}")]
    Transport {
        /// The URL called.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The webhook answered with a status other than 200.
    #[error("the server responded with the status code {code} but did not return more information")]
    Status {
        /// The HTTP status.
        code: u16,
    },
    /// The webhook's answer is not JSON.
    #[error("{0}")]
    Decode(String),
}

impl CallError {
    /// Whether the call gave up on its timeout.
    pub(crate) fn is_timeout(&self) -> bool {
        matches!(self, CallError::Timeout { .. })
    }
}

/// What a webhook client is kept by: the endpoint's address, the name its certificate
/// must carry, and the CA bundle it is verified against.
type ClientKey = (String, String, Option<Vec<u8>>);

/// The clients of webhook endpoints, one per [`ClientKey`], kept for the server's life so
/// connections are reused.
#[derive(Default)]
pub(crate) struct WebhookClients {
    clients: Mutex<HashMap<ClientKey, kube::Client>>,
}

/// One resolved call: the endpoint, the path and the URL kube would print.
struct Resolved {
    backend: Backend,
    path: String,
    url: String,
}

impl WebhookClients {
    /// POSTs `body` (an AdmissionReview or ConversionReview) to the webhook `config`
    /// names and returns its JSON answer, giving up after `timeout`.
    pub(crate) async fn call(
        &self,
        view: &StoreView<'_>,
        config: &ClientConfig,
        body: &Value,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let resolved = resolve(view, config, timeout).await?;
        let client = self.client(&resolved.backend, timeout).await?;
        let path = format!("{}?timeout={}s", resolved.path, timeout.as_secs().max(1));
        let bytes = serde_json::to_vec(body).map_err(|e| CallError::Decode(e.to_string()))?;
        let request = http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(bytes)
            .map_err(|e| CallError::Unreachable(e.to_string()))?;
        let url = resolved.url.clone();
        let sent = tokio::time::timeout(timeout, client.send(request.map(kube::client::Body::from))).await;
        let response = match sent {
            Err(_) => return Err(CallError::Timeout { url }),
            Ok(Err(e)) => {
                return Err(CallError::Transport { url, message: transport_message(&e, &resolved.backend.address) });
            }
            Ok(Ok(r)) => r,
        };
        let code = response.status().as_u16();
        let collected = tokio::time::timeout(timeout, http_body_util::BodyExt::collect(response.into_body())).await;
        let data = match collected {
            Err(_) => return Err(CallError::Timeout { url }),
            Ok(Err(e)) => return Err(CallError::Transport { url, message: e.to_string() }),
            Ok(Ok(c)) => c.to_bytes(),
        };
        if code != 200 {
            return Err(CallError::Status { code });
        }
        serde_json::from_slice(&data).map_err(|e| CallError::Decode(format!("the server's answer is not JSON: {e}")))
    }

    /// The cached client of `backend`, made on first use.
    async fn client(&self, backend: &Backend, timeout: Duration) -> Result<kube::Client, CallError> {
        let key = (backend.address.clone(), backend.server_name.clone(), backend.ca_bundle.clone());
        if let Some(client) = self.clients.lock().get(&key) {
            return Ok(client.clone());
        }
        let client = backend
            .client(Some(timeout.max(Duration::from_secs(30))))
            .await
            .map_err(|e| CallError::Unreachable(e.to_string()))?;
        self.clients.lock().insert(key, client.clone());
        Ok(client)
    }
}

/// Where `config` points: a URL's host and port (on this machine only), or the
/// Service's endpoint.
async fn resolve(view: &StoreView<'_>, config: &ClientConfig, timeout: Duration) -> Result<Resolved, CallError> {
    let ca_bundle = config.ca_bundle.clone().filter(|b| !b.is_empty());
    if let Some(url) = &config.url {
        let uri: http::Uri = url.parse().map_err(|e| CallError::Unreachable(format!("parse {url:?}: {e}")))?;
        if uri.scheme_str() != Some("https") {
            return Err(CallError::Unreachable(format!("webhook URL {url:?} is not https")));
        }
        let host = uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_string();
        let port = uri.port_u16().unwrap_or(443);
        let local = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
        if !local && !is_real_pod_ip(view, &host) {
            return Err(CallError::Unreachable(format!(
                "Post \"{url}\": the local control plane sends no traffic off this machine, and {host} is neither loopback nor a pod it runs"
            )));
        }
        let address = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
        let path = uri.path_and_query().map(|p| p.to_string()).unwrap_or_else(|| "/".into());
        let backend = Backend { address, server_name: host, ca_bundle, insecure: false };
        // Errors name the URL with its timeout, as Go's client prints the request's URL.
        let separator = if uri.query().is_some() { '&' } else { '?' };
        let url = format!("{url}{separator}timeout={}s", timeout.as_secs().max(1));
        return Ok(Resolved { backend, path, url });
    }
    let Some(svc) = &config.service else {
        return Err(CallError::Unreachable("the webhook's clientConfig names neither a url nor a service".into()));
    };
    let path = svc.path.clone().filter(|p| !p.is_empty()).unwrap_or_else(|| "/".into());
    let server_name = format!("{}.{}.svc", svc.name, svc.namespace);
    let url = format!("https://{server_name}:{}{path}?timeout={}s", svc.port, timeout.as_secs().max(1));
    let key = (svc.namespace.clone(), svc.name.clone());
    let service: Option<Service> = view.read_typed(ResourceId::new("", "services"), &key).await;
    if service.is_none() {
        return Err(CallError::Unreachable(format!("service \"{}\" not found", svc.name)));
    }
    let endpoints: Option<Endpoints> = view.read_typed(ResourceId::new("", "endpoints"), &key).await;
    let (address, port) = service_endpoint(&svc.namespace, &svc.name, svc.port, service.as_ref(), endpoints.as_ref())
        .map_err(|why| match why.reason {
        "MissingEndpoints" => {
            CallError::Unreachable(format!("Post \"{url}\": no endpoints available for service \"{}\"", svc.name))
        }
        _ => CallError::Unreachable(format!("Post \"{url}\": {}", why.message)),
    })?;
    if !is_reachable(view, &address).await {
        return Err(CallError::Unreachable(format!(
            "Post \"{url}\": the local control plane sends no traffic off this machine, and {} is the address of a simulated pod",
            address.ip
        )));
    }
    let host = &address.ip;
    let address = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    let backend = Backend { address, server_name, ca_bundle, insecure: false };
    Ok(Resolved { backend, path, url })
}

/// Whether an endpoint address is on this machine: loopback, or a real pod's.
async fn is_reachable(view: &StoreView<'_>, address: &EndpointAddress) -> bool {
    if address.ip.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()) {
        return true;
    }
    let Some(target) = address.target_ref.as_ref().filter(|r| r.kind.as_deref() == Some("Pod")) else {
        return false;
    };
    let key = (target.namespace.clone().unwrap_or_default(), target.name.clone().unwrap_or_default());
    let pod: Option<Pod> = view.read_typed(ResourceId::new("", "pods"), &key).await;
    pod.as_ref().is_some_and(|p| runs_for_real(p) && pod_has_ip(p, &address.ip))
}

/// Whether `ip` is the address of a pod the local kubelet runs for real.
fn is_real_pod_ip(view: &StoreView<'_>, ip: &str) -> bool {
    if ip.parse::<IpAddr>().is_err() {
        return false;
    }
    let pods = view.values(&ResourceId::new("", "pods"));
    pods.iter()
        .filter_map(|(_, bytes)| serde_json::from_slice::<Pod>(bytes).ok())
        .any(|p| runs_for_real(&p) && pod_has_ip(&p, ip))
}

impl ConversionWebhooks for WebhookClients {
    fn call<'a>(
        &'a self,
        view: StoreView<'a>,
        config: Option<&'a ConversionClientConfig>,
        review: &'a Value,
        timeout: Duration,
    ) -> ConversionFuture<'a> {
        Box::pin(async move {
            let config = match config {
                Some(c) => ClientConfig::from(c),
                None => ClientConfig { url: None, service: None, ca_bundle: None },
            };
            WebhookClients::call(self, &view, &config, review, timeout).await.map_err(|e| e.to_string())
        })
    }
}

/// A failed send worded as Go's client words the common cases (`dial tcp ADDR: connect:
/// connection refused`, a refused certificate), else the innermost cause.
pub(crate) fn transport_message(error: &kube::Error, address: &str) -> String {
    let mut innermost: &dyn std::error::Error = error;
    while let Some(source) = innermost.source() {
        if let Some(message) = tls_error(source).and_then(go_tls_message) {
            return message;
        }
        if let Some(io) = source.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => {
                    return format!("dial tcp {address}: connect: connection refused");
                }
                std::io::ErrorKind::ConnectionReset => return format!("read tcp {address}: connection reset by peer"),
                _ => {}
            }
        }
        innermost = source;
    }
    innermost.to_string()
}

/// The TLS error `error` is or wraps: io errors keep theirs inside (`get_ref`), not as
/// their `source`, and may be nested.
fn tls_error<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut current: &(dyn std::error::Error + 'static) = error;
    loop {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        let inner = current.downcast_ref::<std::io::Error>()?.get_ref()?;
        current = inner;
    }
}

/// Whether every container of `pod` runs as a real process.
fn runs_for_real(pod: &Pod) -> bool {
    let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.as_ref());
    statuses.is_some_and(|s| {
        !s.is_empty()
            && s.iter().all(|c| c.container_id.as_deref().is_some_and(|id| id.starts_with(REAL_CONTAINER_ID_PREFIX)))
    })
}

/// Whether `ip` is one of `pod`'s addresses.
fn pod_has_ip(pod: &Pod, ip: &str) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|s| s.pod_ip.as_deref()) == Some(ip)
        || status.and_then(|s| s.pod_ips.as_ref()).is_some_and(|ips| ips.iter().any(|p| p.ip == ip))
}
