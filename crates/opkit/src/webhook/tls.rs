//! TLS for the webhook server: a rustls certificate resolver that re-reads `tls.crt`/`tls.key`
//! whenever they change (checked on every handshake, so a rotated Secret takes effect on the next
//! connection), and [`DevCerts`], a development CA plus serving certificate (opkit-serve's
//! [`DevCa`]) written into the certificate directory.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use opkit_serve::files::FileAccess;
use opkit_serve::tls::{DevCa, crypto_provider, server_config_with_resolver};
use parking_lot::RwLock;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::WebhookError;

/// File name of the serving certificate (PEM chain) in the certificate directory.
pub const CERT_FILE: &str = "tls.crt";
/// File name of the serving key (PEM) in the certificate directory.
pub const KEY_FILE: &str = "tls.key";
/// File name of the development CA certificate written by [`DevCerts`].
pub const CA_FILE: &str = "ca.crt";

/// The files' bytes and the key parsed from them.
struct Loaded {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    key: Arc<CertifiedKey>,
}

/// Serves the certificate in `cert_path`/`key_path`, reloading it when the files' contents change.
pub(crate) struct CertReloader {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Loaded>,
}

impl fmt::Debug for CertReloader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertReloader")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, WebhookError> {
    fs::read(path).map_err(|source| WebhookError::Io { path: path.to_owned(), source })
}

/// Parses a PEM certificate chain and PEM private key into a rustls `CertifiedKey`.
fn parse(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, WebhookError> {
    let invalid = |path: &Path, message: String| WebhookError::InvalidCert { path: path.to_owned(), message };
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(cert_path, e.to_string()))?;
    if chain.is_empty() {
        return Err(invalid(cert_path, "no CERTIFICATE block".to_owned()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| invalid(key_path, e.to_string()))?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| invalid(key_path, e.to_string()))
}

impl CertReloader {
    /// Loads the pair once; fails if it is missing or invalid.
    pub(crate) fn new(
        cert_path: PathBuf,
        key_path: PathBuf,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, WebhookError> {
        let cert_pem = read(&cert_path)?;
        let key_pem = read(&key_path)?;
        let key = parse(&cert_pem, &key_pem, &cert_path, &key_path, &provider)?;
        Ok(CertReloader {
            cert_path,
            key_path,
            provider,
            current: RwLock::new(Loaded { cert_pem, key_pem, key: Arc::new(key) }),
        })
    }

    /// Re-reads the files and swaps in the new pair if they changed and parse (a half-written or
    /// mismatched pair keeps the previous one). Returns the pair to serve.
    pub(crate) fn refresh(&self) -> Arc<CertifiedKey> {
        let (cert_pem, key_pem) = match (read(&self.cert_path), read(&self.key_path)) {
            (Ok(c), Ok(k)) => (c, k),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "webhook certificate unreadable; keeping the old one");
                return self.current.read().key.clone();
            }
        };
        {
            let cur = self.current.read();
            if cur.cert_pem == cert_pem && cur.key_pem == key_pem {
                return cur.key.clone();
            }
        }
        match parse(&cert_pem, &key_pem, &self.cert_path, &self.key_path, &self.provider) {
            Ok(key) => {
                let key = Arc::new(key);
                *self.current.write() = Loaded { cert_pem, key_pem, key: key.clone() };
                tracing::info!(path = %self.cert_path.display(), "reloaded webhook certificate");
                key
            }
            Err(e) => {
                tracing::warn!(error = %e, "new webhook certificate invalid; keeping the old one");
                self.current.read().key.clone()
            }
        }
    }
}

impl ResolvesServerCert for CertReloader {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.refresh())
    }
}

/// Builds the rustls server config (ring provider, ALPN `h2` and `http/1.1`) serving the
/// certificate in `cert_dir`, reloaded when it changes.
pub(crate) fn server_config(cert_dir: &Path) -> Result<(Arc<rustls::ServerConfig>, Arc<CertReloader>), WebhookError> {
    let provider = crypto_provider();
    let reloader = Arc::new(CertReloader::new(cert_dir.join(CERT_FILE), cert_dir.join(KEY_FILE), provider.clone())?);
    let config = server_config_with_resolver(reloader.clone(), provider).map_err(|e| match e {
        opkit_serve::tls::TlsConfigError::Rustls(e) => WebhookError::Tls(e),
        other => WebhookError::InvalidCert { path: cert_dir.join(CERT_FILE), message: other.to_string() },
    })?;
    Ok((config, reloader))
}

/// A development CA and a serving certificate it signed, all PEM.
#[derive(Clone)]
pub struct DevCerts {
    /// CA certificate (use it as the webhook configuration's `caBundle`).
    pub ca_pem: String,
    /// Serving certificate.
    pub cert_pem: String,
    /// Serving certificate's private key (PKCS#8).
    pub key_pem: String,
}

impl fmt::Debug for DevCerts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DevCerts")
            .field("ca_pem", &self.ca_pem)
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

impl DevCerts {
    /// Generates a fresh ECDSA P-256 CA and a serving certificate for `hosts` (DNS names or IP
    /// addresses; `localhost`, `127.0.0.1` and `::1` when empty).
    pub fn generate(hosts: &[String]) -> Result<Self, WebhookError> {
        let hosts: Vec<String> =
            if hosts.is_empty() { vec!["localhost".into(), "127.0.0.1".into(), "::1".into()] } else { hosts.to_vec() };
        let ca = DevCa::generate("opkit webhook development CA")?;
        let serving = ca.issue_serving_cert(&hosts[0], &hosts)?;
        Ok(DevCerts { ca_pem: ca.cert_pem().to_owned(), cert_pem: serving.cert_pem, key_pem: serving.key_pem })
    }

    /// Writes `ca.crt`, `tls.crt` and `tls.key` (mode 0600) into `dir`, creating it. Each file is
    /// replaced atomically (written aside, then renamed).
    pub fn write(&self, dir: &Path) -> Result<(), WebhookError> {
        fs::create_dir_all(dir).map_err(|source| WebhookError::Io { path: dir.to_owned(), source })?;
        write_atomic(&dir.join(CA_FILE), self.ca_pem.as_bytes(), false)?;
        write_atomic(&dir.join(KEY_FILE), self.key_pem.as_bytes(), true)?;
        write_atomic(&dir.join(CERT_FILE), self.cert_pem.as_bytes(), false)
    }

    /// Generates and writes certificates into `dir` unless `tls.crt` and `tls.key` already exist
    /// there. Returns whether it generated new ones.
    pub fn ensure(dir: &Path, hosts: &[String]) -> Result<bool, WebhookError> {
        if dir.join(CERT_FILE).is_file() && dir.join(KEY_FILE).is_file() {
            return Ok(false);
        }
        Self::generate(hosts)?.write(dir)?;
        Ok(true)
    }
}

fn write_atomic(path: &Path, data: &[u8], secret: bool) -> Result<(), WebhookError> {
    let access = if secret { FileAccess::Private } else { FileAccess::Public };
    opkit_serve::files::write_atomic(path, data, access)
        .map_err(|e| WebhookError::Io { path: e.path, source: e.source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_certs_load_and_reload_on_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(DevCerts::ensure(dir.path(), &[]).expect("generate"));
        assert!(!DevCerts::ensure(dir.path(), &[]).expect("exists"));
        assert!(dir.path().join(CA_FILE).is_file());
        let (_, reloader) = server_config(dir.path()).expect("config");
        let first = reloader.refresh();
        assert!(Arc::ptr_eq(&first, &reloader.refresh()), "unchanged files reuse the key");

        // A garbage key keeps the old pair.
        fs::write(dir.path().join(KEY_FILE), b"junk").expect("write");
        assert_eq!(reloader.refresh().cert, first.cert);

        let next = DevCerts::generate(&["example.test".into()]).expect("generate");
        next.write(dir.path()).expect("write");
        let reloaded = reloader.refresh();
        assert_ne!(reloaded.cert, first.cert);
        let want = CertificateDer::from_pem_slice(next.cert_pem.as_bytes()).expect("pem");
        assert_eq!(reloaded.cert[0], want);
    }

    #[test]
    fn missing_or_invalid_files_are_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(matches!(server_config(dir.path()), Err(WebhookError::Io { .. })));
        fs::write(dir.path().join(CERT_FILE), b"nope").expect("write");
        fs::write(dir.path().join(KEY_FILE), b"nope").expect("write");
        assert!(matches!(server_config(dir.path()), Err(WebhookError::InvalidCert { .. })));
    }
}
