//! The discovery GET the availability controller sends to an aggregated API server: one
//! request over TLS with a deadline, through a kube client built for that backend (so
//! kube's TLS setup reads the CA bundle and checks the Service's DNS name).

use std::time::Duration;

use base64::Engine as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

/// How long a discovery check may take, as kube-aggregator's 5 s.
const DEADLINE: Duration = Duration::from_secs(5);

/// Where and how to reach a backend.
pub(super) struct Target {
    /// `ip:port` of an endpoint.
    pub(super) address: String,
    /// The name its certificate must carry (`<service>.<namespace>.svc`).
    pub(super) server_name: String,
    /// PEM CA certificates (`spec.caBundle`, decoded).
    pub(super) ca_bundle: Option<Vec<u8>>,
    /// `spec.insecureSkipTLSVerify`.
    pub(super) insecure: bool,
}

/// GETs `path` from the backend; any answer other than a success is the error.
pub(super) async fn get(target: &Target, path: &str) -> Result<(), String> {
    let ca = target.ca_bundle.as_ref().map(|pem| base64::engine::general_purpose::STANDARD.encode(pem));
    let kubeconfig: Kubeconfig = serde_json::from_value(json!({
        "clusters": [{"name": "backend", "cluster": {
            "server": format!("https://{}", target.address),
            "certificate-authority-data": ca,
            "insecure-skip-tls-verify": target.insecure.then_some(true),
            "tls-server-name": (!target.insecure).then(|| target.server_name.clone()),
        }}],
        "users": [{"name": "aggregator", "user": {}}],
        "contexts": [{"name": "backend", "context": {"cluster": "backend", "user": "aggregator"}}],
        "current-context": "backend",
    }))
    .map_err(|e| e.to_string())?;
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    config.connect_timeout = Some(DEADLINE);
    config.read_timeout = Some(DEADLINE);
    let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
    let request = http::Request::get(path).body(Vec::new()).map_err(|e| e.to_string())?;
    match tokio::time::timeout(DEADLINE, client.request_text(request)).await {
        Err(_) => Err(format!("no answer within {DEADLINE:?}")),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(_)) => Ok(()),
    }
}
