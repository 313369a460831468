//! TLS material: a CA and a serving certificate for 127.0.0.1/localhost generated with
//! rcgen, persisted in the data directory and reused on restart; and the rustls config.

use std::path::Path;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Errors while creating or loading certificates.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// Generating a certificate failed.
    #[error("generating certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A stored PEM file did not parse.
    #[error("{0}: not a valid PEM file")]
    Pem(String),
    /// rustls rejected the certificate or key.
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
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
    /// Generates a fresh CA and serving certificate for 127.0.0.1, ::1 and localhost.
    pub fn generate() -> Result<TlsMaterial, CertError> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.distinguished_name.push(DnType::CommonName, "opkit-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default.svc".to_string(),
        ])?;
        params.distinguished_name.push(DnType::CommonName, "opkit-apiserver");
        let cert = params.signed_by(&key, &issuer)?;
        Ok(TlsMaterial { ca_pem: ca_cert.pem(), cert_pem: cert.pem(), key_pem: key.serialize_pem() })
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
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let m = TlsMaterial::generate()?;
        write_private(&key, &m.key_pem).map_err(io(&key))?;
        std::fs::write(&crt, &m.cert_pem).map_err(io(&crt))?;
        std::fs::write(&ca, &m.ca_pem).map_err(io(&ca))?;
        Ok(m)
    }

    /// A rustls server config offering HTTP/2 and HTTP/1.1.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, CertError> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|_| CertError::Pem("serving certificate".into()))?;
        let key =
            PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).map_err(|_| CertError::Pem("serving key".into()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(cfg))
    }
}

fn write_private(path: &Path, data: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    f.write_all(data.as_bytes())
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
