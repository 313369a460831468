//! TLS material: a CA and a serving certificate for 127.0.0.1/localhost generated with
//! opkit-serve's development CA, persisted in the data directory and reused on restart;
//! the admin's client certificate (CN `kubernetes-admin`, O `system:masters`, as kind and
//! envtest write it) issued by that CA at each start; and the rustls config, which
//! verifies client certificates against the same CA.

use std::path::Path;
use std::sync::Arc;

use crate::auth::{ADMIN, MASTERS};
use opkit_serve::files::{FileAccess, write_atomic};
use opkit_serve::tls::{CertGenError, DevCa, IssuedCert, TlsConfigError};

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
pub struct TlsMaterial {
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
    /// Generates a fresh CA and serving certificate for 127.0.0.1, ::1, localhost and the
    /// in-cluster `kubernetes` names.
    pub fn generate() -> Result<TlsMaterial, CertError> {
        let ca = DevCa::generate("opkit-ca")?;
        let hosts = ["localhost", "127.0.0.1", "::1", "kubernetes", "kubernetes.default.svc"].map(String::from);
        let serving = ca.issue_serving_cert("opkit-apiserver", &hosts)?;
        let admin = ca.issue_client_cert(ADMIN, MASTERS)?;
        Ok(TlsMaterial {
            ca_pem: ca.cert_pem().to_owned(),
            ca_key_pem: ca.key_pem().to_owned(),
            cert_pem: serving.cert_pem,
            key_pem: serving.key_pem,
            admin,
        })
    }

    /// Loads `ca.crt`, `ca.key`, `apiserver.crt` and `apiserver.key` from `dir` and issues
    /// a fresh admin client certificate; generates and saves all four first if any is
    /// missing (a directory from before the CA key was kept gets a new CA).
    pub fn load_or_generate(dir: &Path) -> Result<TlsMaterial, CertError> {
        fn io(p: &Path) -> impl FnOnce(std::io::Error) -> CertError + '_ {
            move |source| CertError::Io { path: p.display().to_string(), source }
        }
        let (ca, ca_key, crt, key) =
            (dir.join("ca.crt"), dir.join("ca.key"), dir.join("apiserver.crt"), dir.join("apiserver.key"));
        if [&ca, &ca_key, &crt, &key].iter().all(|p| p.exists()) {
            let ca_pem = std::fs::read_to_string(&ca).map_err(io(&ca))?;
            let ca_key_pem = std::fs::read_to_string(&ca_key).map_err(io(&ca_key))?;
            let admin = DevCa::from_pem(&ca_pem, &ca_key_pem)?.issue_client_cert(ADMIN, MASTERS)?;
            return Ok(TlsMaterial {
                ca_pem,
                ca_key_pem,
                cert_pem: std::fs::read_to_string(&crt).map_err(io(&crt))?,
                key_pem: std::fs::read_to_string(&key).map_err(io(&key))?,
                admin,
            });
        }
        let m = TlsMaterial::generate()?;
        for (path, pem, access) in [
            (&ca_key, &m.ca_key_pem, FileAccess::Private),
            (&key, &m.key_pem, FileAccess::Private),
            (&crt, &m.cert_pem, FileAccess::Public),
            (&ca, &m.ca_pem, FileAccess::Public),
        ] {
            write_atomic(path, pem.as_bytes(), access)
                .map_err(|e| CertError::Io { path: e.path.display().to_string(), source: e.source })?;
        }
        Ok(m)
    }

    /// A rustls server config offering HTTP/2 and HTTP/1.1 that verifies the client
    /// certificates clients offer against the CA (clients without one still connect).
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, CertError> {
        Ok(opkit_serve::tls::server_config_with_client_ca(&self.cert_pem, &self.key_pem, &self.ca_pem)?)
    }
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
    }
}
