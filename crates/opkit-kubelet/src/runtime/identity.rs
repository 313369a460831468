//! A real pod's identity: its ServiceAccount token (a TokenRequest bound to the pod,
//! refreshed as the kubelet refreshes projected tokens), `ca.crt` and `namespace` in
//! `<pod dir>/serviceaccount/`, and `<pod dir>/kubeconfig` naming them, so in-cluster
//! clients (and `KUBECONFIG` users) in the pod act as its ServiceAccount.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, PostParams};
use opkit_serve::files::{FileAccess, write_atomic};
use serde_json::json;

/// The lifetime the kubelet asks for a projected token (kube's default 3607 s).
pub(crate) const TOKEN_SECONDS: i64 = 3607;

/// Errors projecting a pod's identity.
#[derive(Debug, thiserror::Error)]
pub(crate) enum IdentityError {
    /// The TokenRequest failed (e.g. the ServiceAccount does not exist).
    #[error("requesting the ServiceAccount token: {0}")]
    Token(#[from] kube::Error),
    /// Writing a file failed.
    #[error("{0}")]
    Write(#[from] opkit_serve::files::WriteError),
}

/// Where a pod's projected identity lives.
#[derive(Debug, Clone)]
pub(crate) struct IdentityFiles {
    /// `<pod dir>/serviceaccount`.
    pub dir: PathBuf,
    /// `<pod dir>/kubeconfig`.
    pub kubeconfig: PathBuf,
}

impl IdentityFiles {
    /// The files of the pod whose directory is `pod_dir`.
    pub(crate) fn new(pod_dir: &Path) -> IdentityFiles {
        IdentityFiles { dir: pod_dir.join("serviceaccount"), kubeconfig: pod_dir.join("kubeconfig") }
    }
}

/// Whether `pod` gets a ServiceAccount token (`automountServiceAccountToken`, default
/// true).
pub(crate) fn automounts(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.automount_service_account_token) != Some(false)
}

/// When a token issued for `ttl` is refreshed: at 80% of its life, as the kubelet's
/// token manager does.
pub(crate) fn refresh_after(ttl: Duration) -> Duration {
    ttl.mul_f64(0.8)
}

/// Requests a token for `pod`'s ServiceAccount bound to the pod and writes it; returns
/// its lifetime.
pub(crate) async fn write_token(
    client: &kube::Client,
    pod: &Pod,
    files: &IdentityFiles,
) -> Result<Duration, IdentityError> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let sa = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".to_string());
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(TOKEN_SECONDS),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
        },
        ..Default::default()
    };
    let issued = Api::<ServiceAccount>::namespaced(client.clone(), &ns)
        .create_token_request(&sa, &PostParams::default(), &request)
        .await?;
    let token = issued.status.map(|s| s.token).unwrap_or_default();
    let path = files.dir.join("token");
    write_atomic(&path, token.as_bytes(), FileAccess::Private)?;
    // kube's projected token is 0644: a container running as another user than root
    // reads it (inside its own root; on the host the pod directory is the kubelet's).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
            .map_err(|source| opkit_serve::files::WriteError { path: path.clone(), source })?;
    }
    let ttl = issued.spec.expiration_seconds.unwrap_or(TOKEN_SECONDS).max(60);
    Ok(Duration::from_secs(ttl.unsigned_abs()))
}

/// Writes `ca.crt`, `namespace` and the kubeconfig (server `https://<api_server>`).
pub(crate) fn write_static(
    pod: &Pod,
    files: &IdentityFiles,
    root_ca_pem: &str,
    api_server: SocketAddr,
) -> Result<(), IdentityError> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    write_atomic(&files.dir.join("ca.crt"), root_ca_pem.as_bytes(), FileAccess::Public)?;
    write_atomic(&files.dir.join("namespace"), ns.as_bytes(), FileAccess::Public)?;
    let sa = pod.spec.as_ref().and_then(|s| s.service_account_name.clone()).unwrap_or_else(|| "default".into());
    // JSON is YAML: every kubeconfig reader takes it.
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "opkit", "cluster": {
            "server": format!("https://{api_server}"),
            "certificate-authority": files.dir.join("ca.crt"),
        }}],
        "users": [{"name": sa, "user": {"tokenFile": files.dir.join("token")}}],
        "contexts": [{"name": "opkit", "context": {"cluster": "opkit", "user": sa, "namespace": ns}}],
        "current-context": "opkit",
    });
    let bytes = serde_json::to_vec_pretty(&kubeconfig).unwrap_or_default();
    write_atomic(&files.kubeconfig, &bytes, FileAccess::Private)?;
    Ok(())
}
