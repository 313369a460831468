//! The aggregation layer's service resolution, shared by the API server's proxy and the
//! APIService availability controller (kube-aggregator's `ServiceResolver` and its
//! availability checks): which endpoint serves a service-backed APIService, why none
//! does (with kube's condition reasons), and a client that reaches it over TLS, verified
//! against the APIService's `caBundle` for the name `<service>.<namespace>.svc` by
//! [`verifier::CaBundleVerifier`], which webhooks use too.
//!
//! Only endpoints on this machine's loopback are ever reached: the local control plane
//! sends no traffic off the machine, and a simulated pod's address leads nowhere.

pub mod verifier;

use std::sync::Arc;
use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::{EndpointAddress, Endpoints, Service};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::client::middleware::BaseUriLayer;
use tower::Layer as _;

pub use verifier::CaBundleVerifier;

/// Why no endpoint can serve an APIService: a reason of kube's `Available` condition and
/// its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// `ServiceNotFound`, `ServicePortError`, `MissingEndpoints` or `FailedDiscoveryCheck`.
    pub reason: &'static str,
    /// What is wrong, in kube's words.
    pub message: String,
}

impl Unavailable {
    fn new(reason: &'static str, message: String) -> Unavailable {
        Unavailable { reason, message }
    }
}

/// The endpoint that serves a service-backed APIService.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    /// `ip:port` of the endpoint.
    pub address: String,
    /// The name its serving certificate must carry: `<service>.<namespace>.svc`.
    pub server_name: String,
    /// PEM CA certificates the certificate must chain to (`spec.caBundle`).
    pub ca_bundle: Option<Vec<u8>>,
    /// `spec.insecureSkipTLSVerify`.
    pub insecure: bool,
}

/// Finds the endpoint of `apiservice`'s Service, given the Service and its Endpoints as
/// stored (None when absent). Fails as kube's availability controller reports it; an
/// address off loopback is reported, never used.
pub fn resolve(
    apiservice: &APIService,
    service: Option<&Service>,
    endpoints: Option<&Endpoints>,
) -> Result<Backend, Unavailable> {
    let spec = apiservice.spec.clone().unwrap_or_default();
    let reference = spec.service.clone().unwrap_or_default();
    let (ns, name) = (reference.namespace.unwrap_or_default(), reference.name.unwrap_or_default());
    let port = reference.port.unwrap_or(443);
    let (address, endpoint_port) = service_endpoint(&ns, &name, port, service, endpoints)?;
    let ip = address.ip;
    if !ip.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()) {
        let path = format!("/apis/{}/{}", spec.group.unwrap_or_default(), spec.version.unwrap_or_default());
        let message = format!(
            "failing or missing response from https://{ip}:{endpoint_port}{path}: the local control plane sends no traffic off this machine, and {ip} is not a loopback address (a simulated pod's address)"
        );
        return Err(Unavailable::new("FailedDiscoveryCheck", message));
    }
    Ok(Backend {
        address: format!("{ip}:{endpoint_port}"),
        server_name: format!("{name}.{ns}.svc"),
        ca_bundle: spec.ca_bundle.map(|b| b.0),
        insecure: spec.insecure_skip_tls_verify.unwrap_or(false),
    })
}

/// The first ready address (and its port) behind `port` of the Service `namespace/name`,
/// given the Service and its Endpoints as stored (None when absent), as kube's endpoint
/// service resolver finds it for aggregated APIs and webhooks. Fails with kube's
/// `Available` condition reasons (`ServiceNotFound`, `ServicePortError`,
/// `MissingEndpoints`). Whether the address can be reached is the caller's question.
pub fn service_endpoint(
    namespace: &str,
    name: &str,
    port: i32,
    service: Option<&Service>,
    endpoints: Option<&Endpoints>,
) -> Result<(EndpointAddress, i32), Unavailable> {
    let (ns, name) = (namespace, name);
    let Some(service) = service else {
        return Err(Unavailable::new("ServiceNotFound", format!("service/{name} in {ns:?} is not present")));
    };
    let ports = service.spec.as_ref().and_then(|s| s.ports.as_ref());
    let Some(service_port) = ports.and_then(|ports| ports.iter().find(|p| p.port == port)) else {
        let message = format!("service/{name} in {ns:?} is not listening on port {port}");
        return Err(Unavailable::new("ServicePortError", message));
    };
    let port_name = service_port.name.clone().unwrap_or_default();
    let Some(endpoints) = endpoints else {
        let message = format!("cannot find endpoints for service/{name} in {ns:?}");
        return Err(Unavailable::new("MissingEndpoints", message));
    };
    let address = endpoints.subsets.iter().flatten().find_map(|subset| {
        let port = subset.ports.iter().flatten().find(|p| p.name.clone().unwrap_or_default() == port_name)?;
        let address = subset.addresses.iter().flatten().next()?.clone();
        Some((address, port.port))
    });
    address.ok_or_else(|| {
        let message = format!("endpoints for service/{name} in {ns:?} have no addresses with port name {port_name:?}");
        Unavailable::new("MissingEndpoints", message)
    })
}

/// Why a client for a backend could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot reach the backend: {0}")]
pub struct BackendClientError(String);

impl Backend {
    /// A client for this backend, without credentials of its own, whose connections
    /// give up after `deadline`. Its certificate is verified by [`CaBundleVerifier`]
    /// (as kube-apiserver's Go client verifies it), or not at all when the APIService
    /// says `insecureSkipTLSVerify`.
    pub async fn client(&self, deadline: Option<Duration>) -> Result<kube::Client, BackendClientError> {
        let error = |e: &dyn std::fmt::Display| BackendClientError(e.to_string());
        let tls = if self.insecure {
            rustls::ClientConfig::builder_with_provider(verifier::crypto_provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| error(&e))?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier::SkipVerification))
                .with_no_client_auth()
        } else {
            CaBundleVerifier::new(self.ca_bundle.as_deref())
                .and_then(CaBundleVerifier::client_config)
                .map_err(|e| error(&e))?
        };
        let server_name = rustls_pki_types::ServerName::try_from(self.server_name.clone()).map_err(|e| error(&e))?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(deadline);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(server_name))
            .enable_http1()
            .wrap_connector(http);
        let base: http::Uri = format!("https://{}", self.address).parse().map_err(|e| error(&e))?;
        let hyper = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(https);
        let service = BaseUriLayer::new(base).layer(hyper);
        Ok(kube::Client::new(service, "default"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn apiservice() -> APIService {
        serde_json::from_value(json!({"metadata": {"name": "v1beta1.metrics.k8s.io"}, "spec": {
            "group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
            "service": {"namespace": "kube-system", "name": "metrics-server", "port": 443}}}))
        .expect("an APIService")
    }

    fn service(port: i32) -> Service {
        serde_json::from_value(json!({"metadata": {"name": "metrics-server"},
            "spec": {"ports": [{"name": "https", "port": port, "targetPort": 10250}]}}))
        .expect("a Service")
    }

    fn endpoints(ip: &str) -> Endpoints {
        serde_json::from_value(json!({"metadata": {"name": "metrics-server"},
            "subsets": [{"addresses": [{"ip": ip}], "ports": [{"name": "https", "port": 10250}]}]}))
        .expect("Endpoints")
    }

    #[test]
    fn each_missing_piece_has_kubes_reason() {
        let a = apiservice();
        let reason = |r: Result<Backend, Unavailable>| r.err().map(|u| u.reason);
        assert_eq!(reason(resolve(&a, None, None)), Some("ServiceNotFound"));
        assert_eq!(reason(resolve(&a, Some(&service(8443)), None)), Some("ServicePortError"));
        assert_eq!(reason(resolve(&a, Some(&service(443)), None)), Some("MissingEndpoints"));
        assert_eq!(
            reason(resolve(&a, Some(&service(443)), Some(&endpoints("10.244.0.7")))),
            Some("FailedDiscoveryCheck")
        );
        let backend = resolve(&a, Some(&service(443)), Some(&endpoints("127.0.0.1"))).expect("a loopback backend");
        assert_eq!(backend.address, "127.0.0.1:10250");
        assert_eq!(backend.server_name, "metrics-server.kube-system.svc");
    }
}
