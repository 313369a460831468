//! TLS material: a CA and a serving certificate for 127.0.0.1/localhost generated with
//! opkit-serve's development CA, persisted in the data directory and reused on restart; and the rustls config.

use std::path::Path;
use std::sync::Arc;

use opkit_serve::files::{FileAccess, write_atomic};
use opkit_serve::tls::{CertGenError, DevCa, TlsConfigError};

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

/// A CA and the serving certificate it signed, all as PEM.
#[derive(Clone, Debug)]
pub struct TlsMaterial {
    /// The CA certificate clients trust (goes into the kubeconfig).
    pub ca_pem: String,
    /// The serving certificate chain.
    pub cert_pem: String,
    /// The serving key.
    pub key_pem: String,
}

impl TlsMaterial {
    /// Generates a fresh CA and serving certificate for 127.0.0.1, ::1, localhost and the
    /// in-cluster `kubernetes` names.
    pub fn generate() -> Result<TlsMaterial, CertError> {
        let ca = DevCa::generate("opkit-ca")?;
        let hosts = ["localhost", "127.0.0.1", "::1", "kubernetes", "kubernetes.default.svc"].map(String::from);
        let serving = ca.issue_serving_cert("opkit-apiserver", &hosts)?;
        Ok(TlsMaterial { ca_pem: ca.cert_pem().to_owned(), cert_pem: serving.cert_pem, key_pem: serving.key_pem })
    }

    /// Loads `ca.crt`, `apiserver.crt` and `apiserver.key` from `dir`, generating and
    /// saving them first if any is missing.
    pub fn load_or_generate(dir: &Path) -> Result<TlsMaterial, CertError> {
        fn io(p: &Path) -> impl FnOnce(std::io::Error) -> CertError + '_ {
            move |source| CertError::Io { path: p.display().to_string(), source }
        }
        let (ca, crt, key) = (dir.join("ca.crt"), dir.join("apiserver.crt"), dir.join("apiserver.key"));
        if ca.exists() && crt.exists() && key.exists() {
            return Ok(TlsMaterial {
                ca_pem: std::fs::read_to_string(&ca).map_err(io(&ca))?,
                cert_pem: std::fs::read_to_string(&crt).map_err(io(&crt))?,
                key_pem: std::fs::read_to_string(&key).map_err(io(&key))?,
            });
        }
        let m = TlsMaterial::generate()?;
        for (path, pem, access) in [
            (&key, &m.key_pem, FileAccess::Private),
            (&crt, &m.cert_pem, FileAccess::Public),
            (&ca, &m.ca_pem, FileAccess::Public),
        ] {
            write_atomic(path, pem.as_bytes(), access)
                .map_err(|e| CertError::Io { path: e.path.display().to_string(), source: e.source })?;
        }
        Ok(m)
    }

    /// A rustls server config offering HTTP/2 and HTTP/1.1.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, CertError> {
        Ok(opkit_serve::tls::server_config(&self.cert_pem, &self.key_pem)?)
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
    }
}
