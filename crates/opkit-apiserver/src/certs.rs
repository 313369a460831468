//! TLS material: a CA and a serving certificate for 127.0.0.1/localhost and the in-cluster
//! names of the `kubernetes` Service, generated with opkit-serve's development CA,
//! persisted in the data directory and reused on restart (a stored serving certificate
//! that lacks one of those names, or has less than [`RENEW_BEFORE`] of validity left, is
//! replaced by one the same CA signs); the CA is valid for ten years and every certificate
//! it issues for one, as kubeadm and kind issue them; the admin's client
//! certificate (CN `kubernetes-admin`, O `system:masters`, as kind and envtest write it)
//! and the client certificate the server presents to kubelets (kube-apiserver's
//! `--kubelet-client-certificate`) issued by that CA at each start; and the rustls
//! config, which verifies client certificates against the same CA.

use std::path::Path;
use std::sync::Arc;

use crate::auth::{ADMIN, MASTERS};
use opkit_serve::files::{FileAccess, write_atomic};
use opkit_serve::tls::{CertGenError, DevCa, IssuedCert, TlsConfigError};

/// The common name of the client certificate the server presents to kubelets, as
/// kubeadm names kube-apiserver's `--kubelet-client-certificate`.
pub(crate) const KUBELET_CLIENT: &str = "kube-apiserver-kubelet-client";

/// A stored serving certificate with less validity left than this is renewed at start
/// (kubeadm renews certificates on upgrade when they are this close to expiring).
pub(crate) const RENEW_BEFORE: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 60 * 60);

/// The names and addresses the serving certificate carries: loopback, and the
/// `kubernetes` Service's cluster IP and DNS names, as kube-apiserver's self-signed
/// certificate does.
pub(crate) const SERVING_HOSTS: [&str; 8] = [
    "localhost",
    "127.0.0.1",
    "::1",
    crate::kubernetes_service::CLUSTER_IP,
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// Errors while creating or loading certificates.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// Generating a certificate failed.
    #[error("generating certificate: {0}")]
    Generate(#[from] CertGenError),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The stored certificate or key is unusable.
    #[error(transparent)]
    Tls(#[from] TlsConfigError),
}

/// A CA, the serving certificate it signed and the admin client certificate, all as PEM.
#[derive(Clone)]
pub(crate) struct TlsMaterial {
    /// The CA certificate clients trust (goes into the kubeconfig); it also signs the
    /// client certificates the server accepts.
    pub ca_pem: String,
    /// The CA's private key.
    pub ca_key_pem: String,
    /// The serving certificate chain.
    pub cert_pem: String,
    /// The serving key.
    pub key_pem: String,
    /// The admin's client certificate and key.
    pub admin: IssuedCert,
    /// The client certificate and key the server presents to kubelets.
    pub kubelet_client: IssuedCert,
}

impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("ca_pem", &self.ca_pem)
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

impl TlsMaterial {
    /// Generates a fresh CA and a serving certificate for [`SERVING_HOSTS`].
    pub(crate) fn generate() -> Result<TlsMaterial, CertError> {
        let ca = DevCa::generate("opkit-ca")?;
        let serving = issue_serving(&ca)?;
        TlsMaterial::with_clients(&ca, serving)
    }

    /// The material of `ca` and its `serving` certificate, with fresh client certificates.
    fn with_clients(ca: &DevCa, serving: IssuedCert) -> Result<TlsMaterial, CertError> {
        Ok(TlsMaterial {
            ca_pem: ca.cert_pem().to_owned(),
            ca_key_pem: ca.key_pem().to_owned(),
            cert_pem: serving.cert_pem,
            key_pem: serving.key_pem,
            admin: ca.issue_client_cert(ADMIN, MASTERS)?,
            kubelet_client: ca.issue_client_cert(KUBELET_CLIENT, MASTERS)?,
        })
    }

    /// Loads `ca.crt`, `ca.key`, `apiserver.crt` and `apiserver.key` from `dir` and issues
    /// fresh client certificates; generates and saves all four first if any is missing (a
    /// directory from before the CA key was kept gets a new CA). A stored serving
    /// certificate that lacks one of [`SERVING_HOSTS`], or expires within [`RENEW_BEFORE`],
    /// is replaced by one the same CA signs.
    pub(crate) fn load_or_generate(dir: &Path) -> Result<TlsMaterial, CertError> {
        fn io(p: &Path) -> impl FnOnce(std::io::Error) -> CertError + '_ {
            move |source| CertError::Io { path: p.display().to_string(), source }
        }
        let (ca, ca_key, crt, key) =
            (dir.join("ca.crt"), dir.join("ca.key"), dir.join("apiserver.crt"), dir.join("apiserver.key"));
        if [&ca, &ca_key, &crt, &key].iter().all(|p| p.exists()) {
            let ca_pem = std::fs::read_to_string(&ca).map_err(io(&ca))?;
            let ca_key_pem = std::fs::read_to_string(&ca_key).map_err(io(&ca_key))?;
            let dev_ca = DevCa::from_pem(&ca_pem, &ca_key_pem)?;
            let cert_pem = std::fs::read_to_string(&crt).map_err(io(&crt))?;
            if expires_within(&ca_pem, RENEW_BEFORE) {
                tracing::warn!(ca = %ca.display(), "the cluster CA expires within 30 days (or has); certificates it signs stop being trusted then");
            }
            let serving = if names_every_serving_host(&cert_pem) && !expires_within(&cert_pem, RENEW_BEFORE) {
                IssuedCert { cert_pem, key_pem: std::fs::read_to_string(&key).map_err(io(&key))? }
            } else {
                let serving = issue_serving(&dev_ca)?;
                save(&[(&key, &serving.key_pem, FileAccess::Private), (&crt, &serving.cert_pem, FileAccess::Public)])?;
                serving
            };
            return TlsMaterial::with_clients(&dev_ca, serving);
        }
        let m = TlsMaterial::generate()?;
        save(&[
            (&ca_key, &m.ca_key_pem, FileAccess::Private),
            (&key, &m.key_pem, FileAccess::Private),
            (&crt, &m.cert_pem, FileAccess::Public),
            (&ca, &m.ca_pem, FileAccess::Public),
        ])?;
        Ok(m)
    }

    /// A rustls server config offering HTTP/2 and HTTP/1.1 that verifies the client
    /// certificates clients offer against the CA (clients without one still connect).
    pub(crate) fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, CertError> {
        Ok(opkit_serve::tls::server_config_with_client_ca(&self.cert_pem, &self.key_pem, &self.ca_pem)?)
    }
}

/// A serving certificate for [`SERVING_HOSTS`], signed by `ca`.
fn issue_serving(ca: &DevCa) -> Result<IssuedCert, CertError> {
    Ok(ca.issue_serving_cert("opkit-apiserver", &SERVING_HOSTS.map(String::from))?)
}

/// Writes each PEM to its file, atomically, in order.
fn save(files: &[(&Path, &String, FileAccess)]) -> Result<(), CertError> {
    for (path, pem, access) in files {
        write_atomic(path, pem.as_bytes(), *access)
            .map_err(|e| CertError::Io { path: e.path.display().to_string(), source: e.source })?;
    }
    Ok(())
}

/// Whether the first certificate of `cert_pem` expires within `window` from now, or has
/// expired (true when it does not parse).
fn expires_within(cert_pem: &str, window: std::time::Duration) -> bool {
    opkit_serve::tls::not_after(cert_pem).is_none_or(|end| end < std::time::SystemTime::now() + window)
}

/// Whether the first certificate of `cert_pem` names every one of [`SERVING_HOSTS`] in its
/// subject alternative names (false when it does not parse).
fn names_every_serving_host(cert_pem: &str) -> bool {
    use x509_parser::extensions::GeneralName;
    let Some(Ok(pem)) = x509_parser::pem::Pem::iter_from_buffer(cert_pem.as_bytes()).next() else { return false };
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(&pem.contents) else { return false };
    let Ok(Some(san)) = cert.subject_alternative_name() else { return false };
    let mut named: Vec<String> = Vec::new();
    for name in &san.value.general_names {
        match name {
            GeneralName::DNSName(dns) => named.push((*dns).to_owned()),
            GeneralName::IPAddress(bytes) => {
                let ip = match bytes.len() {
                    4 => <[u8; 4]>::try_from(*bytes).ok().map(|b| std::net::IpAddr::from(b).to_string()),
                    16 => <[u8; 16]>::try_from(*bytes).ok().map(|b| std::net::IpAddr::from(b).to_string()),
                    _ => None,
                };
                named.extend(ip);
            }
            _ => {}
        }
    }
    SERVING_HOSTS.iter().all(|host| named.iter().any(|n| n == host))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_material_loads_into_rustls_and_persists() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = TlsMaterial::load_or_generate(dir.path()).expect("generate");
        a.server_config().expect("rustls accepts it");
        let b = TlsMaterial::load_or_generate(dir.path()).expect("load");
        assert_eq!(a.ca_pem, b.ca_pem);
        assert_eq!(a.key_pem, b.key_pem);
        assert_eq!(a.ca_key_pem, b.ca_key_pem);
        assert_ne!(a.admin.cert_pem, b.admin.cert_pem, "a fresh admin certificate at each start");
        assert!(names_every_serving_host(&a.cert_pem));
    }

    #[test]
    fn a_stored_certificate_without_the_service_names_is_reissued_by_the_same_ca() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = TlsMaterial::load_or_generate(dir.path()).expect("generate");
        let ca = DevCa::from_pem(&a.ca_pem, &a.ca_key_pem).expect("ca");
        let old = ca.issue_serving_cert("opkit-apiserver", &["localhost".to_owned()]).expect("old cert");
        std::fs::write(dir.path().join("apiserver.crt"), &old.cert_pem).expect("write crt");
        std::fs::write(dir.path().join("apiserver.key"), &old.key_pem).expect("write key");
        assert!(!names_every_serving_host(&old.cert_pem));
        let b = TlsMaterial::load_or_generate(dir.path()).expect("load");
        assert_eq!(a.ca_pem, b.ca_pem, "the same CA");
        assert_ne!(b.cert_pem, old.cert_pem);
        assert!(names_every_serving_host(&b.cert_pem));
        b.server_config().expect("rustls accepts the new pair");
        let stored = std::fs::read_to_string(dir.path().join("apiserver.crt")).expect("read crt");
        assert_eq!(stored, b.cert_pem, "the new certificate is saved");
    }

    /// How long from now until the first certificate of `pem` expires (zero if it has).
    fn left(pem: &str) -> std::time::Duration {
        let end = opkit_serve::tls::not_after(pem).expect("the certificate parses");
        end.duration_since(std::time::SystemTime::now()).unwrap_or_default()
    }

    const DAY: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

    #[test]
    fn the_ca_lasts_ten_years_and_the_certificates_it_issues_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let m = TlsMaterial::load_or_generate(dir.path()).expect("generate");
        let ca = left(&m.ca_pem);
        assert!(ca > 3649 * DAY && ca <= 3650 * DAY, "the CA is valid for {} days", ca.as_secs() / 86400);
        for (what, pem) in
            [("serving", &m.cert_pem), ("admin", &m.admin.cert_pem), ("kubelet client", &m.kubelet_client.cert_pem)]
        {
            let leaf = left(pem);
            assert!(
                leaf > 364 * DAY && leaf <= 365 * DAY,
                "the {what} certificate is valid for {} days",
                leaf.as_secs() / 86400
            );
        }
    }

    #[test]
    fn a_stored_serving_certificate_close_to_expiry_or_expired_is_renewed_at_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = TlsMaterial::load_or_generate(dir.path()).expect("generate");
        let ca = DevCa::from_pem(&a.ca_pem, &a.ca_key_pem).expect("ca");
        let now = std::time::SystemTime::now();
        for not_after in [now + 10 * DAY, now - DAY] {
            let request = opkit_serve::tls::CertificateRequest {
                common_name: Some("opkit-apiserver".into()),
                hosts: SERVING_HOSTS.map(String::from).to_vec(),
                is_ca: false,
                not_before: now - 30 * DAY,
                not_after,
            };
            let old = ca.issue_requested(&request).expect("old cert");
            std::fs::write(dir.path().join("apiserver.crt"), &old.cert_pem).expect("write crt");
            std::fs::write(dir.path().join("apiserver.key"), &old.key_pem).expect("write key");
            let b = TlsMaterial::load_or_generate(dir.path()).expect("load");
            assert_eq!(a.ca_pem, b.ca_pem, "the same CA");
            assert_ne!(b.cert_pem, old.cert_pem, "renewed");
            assert!(left(&b.cert_pem) > 364 * DAY);
            let stored = std::fs::read_to_string(dir.path().join("apiserver.crt")).expect("read crt");
            assert_eq!(stored, b.cert_pem, "the renewed certificate is saved");
        }
        // One with most of its year left is kept.
        let c = TlsMaterial::load_or_generate(dir.path()).expect("load");
        let d = TlsMaterial::load_or_generate(dir.path()).expect("load");
        assert_eq!(c.cert_pem, d.cert_pem);
    }
}
