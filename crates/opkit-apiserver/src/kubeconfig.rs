//! The kubeconfig clients use to reach a running server: built as kube's typed
//! [`Kubeconfig`] (one cluster, one user authenticated by a client certificate, one
//! context) and written as the YAML kubectl reads.

use std::path::Path;

use base64::Engine;
use kube::config::{AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext, Preferences};
use opkit_serve::files::{FileAccess, write_atomic};
use secrecy::SecretString;

/// A kubeconfig could not be serialized or written.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// Serializing to YAML failed.
    #[error("serializing the kubeconfig: {0}")]
    Serialize(#[from] serde_saphyr::SerializeError),
    /// Writing the file failed.
    #[error("writing {path}: {source}")]
    Write {
        /// The file (or its temporary sibling, or its directory).
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// Where the cluster is and who the client is.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint<'a> {
    /// `https://HOST:PORT`.
    pub server: &'a str,
    /// The CA certificate (PEM) that signed the serving certificate.
    pub ca_pem: &'a str,
    /// The user's client certificate (PEM).
    pub client_cert_pem: &'a str,
    /// The client certificate's private key (PEM).
    pub client_key_pem: &'a str,
}

/// A kubeconfig whose cluster and current context are both named `context`, with user
/// `<context>-admin` and namespace `default`.
pub fn build(endpoint: Endpoint<'_>, context: &str) -> Kubeconfig {
    let user = format!("{context}-admin");
    let base64 = base64::engine::general_purpose::STANDARD;
    Kubeconfig {
        api_version: Some("v1".to_string()),
        kind: Some("Config".to_string()),
        preferences: Some(Preferences::default()),
        clusters: vec![NamedCluster {
            name: context.to_string(),
            cluster: Some(Cluster {
                server: Some(endpoint.server.to_string()),
                certificate_authority_data: Some(base64.encode(endpoint.ca_pem.as_bytes())),
                ..Cluster::default()
            }),
            ..NamedCluster::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: user.clone(),
            auth_info: Some(AuthInfo {
                client_certificate_data: Some(base64.encode(endpoint.client_cert_pem.as_bytes())),
                client_key_data: Some(SecretString::from(base64.encode(endpoint.client_key_pem.as_bytes()))),
                ..AuthInfo::default()
            }),
            ..NamedAuthInfo::default()
        }],
        contexts: vec![NamedContext {
            name: context.to_string(),
            context: Some(Context {
                cluster: context.to_string(),
                user: Some(user),
                namespace: Some("default".to_string()),
                ..Context::default()
            }),
            ..NamedContext::default()
        }],
        current_context: Some(context.to_string()),
        ..Kubeconfig::default()
    }
}

/// `kubeconfig` as YAML.
pub fn to_yaml(kubeconfig: &Kubeconfig) -> Result<String, KubeconfigError> {
    Ok(serde_saphyr::to_string(kubeconfig)?)
}

/// Writes `kubeconfig` as YAML to `path` (mode 0600, atomically through a temporary
/// sibling), creating its directory.
pub fn write(kubeconfig: &Kubeconfig, path: &Path) -> Result<(), KubeconfigError> {
    let yaml = to_yaml(kubeconfig)?;
    write_atomic(path, yaml.as_bytes(), FileAccess::Private)
        .map_err(|e| KubeconfigError::Write { path: e.path.display().to_string(), source: e.source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    #[test]
    fn yaml_reads_back_as_the_same_kubeconfig() {
        let endpoint = Endpoint {
            server: "https://127.0.0.1:6443",
            ca_pem: "PEM",
            client_cert_pem: "CERT",
            client_key_pem: "KEY",
        };
        let yaml = to_yaml(&build(endpoint, "opkit")).expect("serializes");
        assert!(yaml.contains("current-context: opkit"), "{yaml}");
        assert!(yaml.contains("certificate-authority-data: UEVN"), "{yaml}");
        let back = Kubeconfig::from_yaml(&yaml).expect("kube reads it");
        assert_eq!(back.current_context.as_deref(), Some("opkit"));
        let cluster = back.clusters[0].cluster.as_ref().expect("cluster");
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        let user = back.auth_infos[0].auth_info.as_ref().expect("user");
        assert_eq!(user.client_certificate_data.as_deref(), Some("Q0VSVA=="));
        assert_eq!(user.client_key_data.as_ref().map(|k| k.expose_secret().to_string()).as_deref(), Some("S0VZ"));
        let context = back.contexts[0].context.as_ref().expect("context");
        assert_eq!((context.cluster.as_str(), context.user.as_deref()), ("opkit", Some("opkit-admin")));
        assert_eq!(context.namespace.as_deref(), Some("default"));
    }
}
