//! Certificates and rustls configurations for serving: [`DevCa`], a self-signed ECDSA P-256
//! certificate authority generated with rcgen (or loaded from its PEM files), valid for
//! [`CA_VALIDITY`], that issues [`IssuedCert`]s valid for [`LEAF_VALIDITY`] (as kubeadm
//! and kind issue them), serving certificates for DNS names and IP addresses and client
//! certificates for a user and its groups (all PEM), and certificates as a
//! [`CertificateRequest`] asks (self-signed or CA-signed); what a certificate says
//! ([`not_after`], [`CertificateSubject`]); and [`server_config`] /
//! [`server_config_with_resolver`], rustls server configurations on the ring provider
//! offering `h2` and `http/1.1`, optionally verifying client certificates against a CA.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair};
use rustls::crypto::CryptoProvider;
use rustls::server::{ResolvesServerCert, WebPkiClientVerifier};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why generating a certificate failed (rcgen's error).
pub use rcgen::Error as CertGenError;
/// The key usages and extended key usages a signed request may be given.
pub use rcgen::{ExtendedKeyUsagePurpose, KeyUsagePurpose};

/// How long the certificates a [`DevCa`] issues (serving and client) are valid: a year, as
/// kubeadm and kind issue them.
pub const LEAF_VALIDITY: Duration = Duration::from_secs(365 * 24 * 60 * 60);
/// How long a generated [`DevCa`] is valid: ten years, as kubeadm's CA.
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);
/// How far before its issue a certificate's validity starts, for clocks slightly behind
/// (kubeadm's `CertificateBackdate`).
const BACKDATE: Duration = Duration::from_secs(5 * 60);

/// Sets `params`' validity to start now (less [`BACKDATE`]) and last `lifetime`.
fn set_validity(params: &mut CertificateParams, lifetime: Duration) {
    let now = SystemTime::now();
    params.not_before = time::OffsetDateTime::from(now.checked_sub(BACKDATE).unwrap_or(now));
    params.not_after = time::OffsetDateTime::from(now + lifetime);
}

/// The end of validity (`notAfter`) of the first certificate in `cert_pem`; `None` when
/// it does not parse.
pub fn not_after(cert_pem: &str) -> Option<SystemTime> {
    let pem = x509_parser::pem::Pem::iter_from_buffer(cert_pem.as_bytes()).next()?.ok()?;
    let (_, cert) = x509_parser::parse_x509_certificate(&pem.contents).ok()?;
    let seconds = u64::try_from(cert.validity().not_after.timestamp()).ok()?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(seconds))
}

/// The subject of a client certificate as Kubernetes reads it: the common name (CN) is the
/// user, each organization (O) a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateSubject {
    /// The common name.
    pub common_name: String,
    /// The organizations, in order.
    pub organizations: Vec<String>,
}

impl CertificateSubject {
    /// The subject of the certificate `der`; `None` when it does not parse.
    pub fn of_der(der: &[u8]) -> Option<CertificateSubject> {
        let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = certificate.subject();
        let common_name = subject.iter_common_name().next().and_then(|cn| cn.as_str().ok()).unwrap_or_default();
        let organizations = subject.iter_organization().filter_map(|o| o.as_str().ok()).map(String::from).collect();
        Some(CertificateSubject { common_name: common_name.to_owned(), organizations })
    }
}

/// Errors turning PEM material into a rustls configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// The certificate PEM holds no certificate or does not parse.
    #[error("serving certificate is not a valid PEM certificate chain: {0}")]
    Certificate(String),
    /// The key PEM does not hold a private key.
    #[error("serving key is not a valid PEM private key: {0}")]
    Key(String),
    /// The client CA PEM holds no usable certificate.
    #[error("client CA is not a valid PEM certificate: {0}")]
    ClientCa(String),
    /// rustls rejected the configuration (e.g. the key does not match the certificate).
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A development certificate authority: its certificate (PEM) and the key it signs with.
pub struct DevCa {
    cert_pem: String,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl fmt::Debug for DevCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DevCa").field("cert_pem", &self.cert_pem).finish_non_exhaustive()
    }
}

impl DevCa {
    /// Generates a fresh self-signed CA named `common_name` (ECDSA P-256, unconstrained,
    /// key usages certificate and CRL signing), valid for [`CA_VALIDITY`].
    pub fn generate(common_name: &str) -> Result<Self, CertGenError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        set_validity(&mut params, CA_VALIDITY);
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let cert = params.self_signed(&key)?;
        Ok(DevCa { cert_pem: cert.pem(), key_pem: key.serialize_pem(), issuer: Issuer::new(params, key) })
    }

    /// A CA from its certificate and private key (PEM), as [`Self::cert_pem`] and
    /// [`Self::key_pem`] saved them: a CA kept in a data directory across restarts.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, CertGenError> {
        let key = KeyPair::from_pem(key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)?;
        Ok(DevCa { cert_pem: cert_pem.to_owned(), key_pem: key_pem.to_owned(), issuer })
    }

    /// The CA certificate (PEM) clients trust.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA's private key (PKCS#8 PEM), to save next to [`Self::cert_pem`].
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// Issues a server certificate named `common_name` for `hosts` (DNS names or IP addresses,
    /// as subject alternative names), with a fresh ECDSA P-256 key, extended key usage
    /// `serverAuth` and the CA's key identifier, valid for [`LEAF_VALIDITY`].
    pub fn issue_serving_cert(&self, common_name: &str, hosts: &[String]) -> Result<IssuedCert, CertGenError> {
        let mut params = CertificateParams::new(hosts.to_vec())?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params, &[(DnType::CommonName, common_name)])
    }

    /// Issues a client certificate for user `common_name` in group `organization` (the
    /// subject's CN and O, which Kubernetes reads as the user name and a group; rcgen
    /// keeps one value per attribute type), with a fresh ECDSA P-256 key and extended
    /// key usage `clientAuth`, valid for [`LEAF_VALIDITY`].
    pub fn issue_client_cert(&self, common_name: &str, organization: &str) -> Result<IssuedCert, CertGenError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(params, &[(DnType::OrganizationName, organization), (DnType::CommonName, common_name)])
    }

    /// Signs `params` (names and extended key usages set) for `subject`, with a fresh key,
    /// the usages of a TLS leaf, the CA's key identifier and a validity of
    /// [`LEAF_VALIDITY`].
    fn issue(&self, mut params: CertificateParams, subject: &[(DnType, &str)]) -> Result<IssuedCert, CertGenError> {
        let key = KeyPair::generate()?;
        set_validity(&mut params, LEAF_VALIDITY);
        params.distinguished_name = DistinguishedName::new();
        for (kind, value) in subject {
            params.distinguished_name.push(kind.clone(), *value);
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(IssuedCert { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }
}

/// What a signer grants a certificate signing request: its usages and validity.
#[derive(Debug, Clone)]
pub struct Grant {
    /// Key usages.
    pub key_usages: Vec<KeyUsagePurpose>,
    /// Extended key usages.
    pub extended_key_usages: Vec<ExtendedKeyUsagePurpose>,
    /// Start of validity.
    pub not_before: std::time::SystemTime,
    /// End of validity.
    pub not_after: std::time::SystemTime,
}

impl DevCa {
    /// Signs a PKCS#10 certificate signing request (PEM, its signature verified) as a
    /// Kubernetes signer does: the request's subject and subject alternative names with
    /// the public key it proves, never a CA, with the usages and validity of `grant`
    /// (not past the CA's own). Returns the certificate (PEM).
    pub fn sign_request(&self, csr_pem: &str, grant: &Grant) -> Result<String, CertGenError> {
        let mut request = rcgen::CertificateSigningRequestParams::from_pem(csr_pem)?;
        let params = &mut request.params;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = grant.key_usages.clone();
        params.extended_key_usages = grant.extended_key_usages.clone();
        params.not_before = time::OffsetDateTime::from(grant.not_before);
        params.not_after = time::OffsetDateTime::from(grant.not_after);
        params.use_authority_key_identifier_extension = true;
        Ok(request.signed_by(&self.issuer)?.pem())
    }
}

/// What a certificate is issued for, as a cert-manager `Certificate` asks: a subject
/// common name, DNS names and IP addresses (subject alternative names), whether it is a
/// CA, and its validity. Leaves get the usages of a TLS server and client.
#[derive(Debug, Clone)]
pub struct CertificateRequest {
    /// The subject's common name, if any.
    pub common_name: Option<String>,
    /// DNS names and IP addresses.
    pub hosts: Vec<String>,
    /// Whether the certificate may sign others.
    pub is_ca: bool,
    /// Start of validity.
    pub not_before: std::time::SystemTime,
    /// End of validity.
    pub not_after: std::time::SystemTime,
}

impl CertificateRequest {
    /// The rcgen parameters of this request.
    fn params(&self) -> Result<CertificateParams, CertGenError> {
        let mut params = CertificateParams::new(self.hosts.clone())?;
        params.distinguished_name = DistinguishedName::new();
        if let Some(cn) = &self.common_name {
            params.distinguished_name.push(DnType::CommonName, cn.as_str());
        }
        params.not_before = time::OffsetDateTime::from(self.not_before);
        params.not_after = time::OffsetDateTime::from(self.not_after);
        if self.is_ca {
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.key_usages =
                vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        } else {
            params.is_ca = IsCa::ExplicitNoCa;
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        }
        Ok(params)
    }

    /// A certificate signed by its own fresh ECDSA P-256 key (cert-manager's
    /// `selfSigned` issuer): it is its own CA bundle.
    pub fn self_signed(&self) -> Result<IssuedCert, CertGenError> {
        let key = KeyPair::generate()?;
        let cert = self.params()?.self_signed(&key)?;
        Ok(IssuedCert { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }
}

impl DevCa {
    /// Issues the certificate `request` asks for, with a fresh ECDSA P-256 key and the
    /// CA's key identifier (cert-manager's `ca` issuer).
    pub fn issue_requested(&self, request: &CertificateRequest) -> Result<IssuedCert, CertGenError> {
        let key = KeyPair::generate()?;
        let mut params = request.params()?;
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(IssuedCert { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }
}

/// A certificate the CA issued and its private key, both PEM.
#[derive(Clone)]
pub struct IssuedCert {
    /// The certificate.
    pub cert_pem: String,
    /// The private key (PKCS#8).
    pub key_pem: String,
}

impl fmt::Debug for IssuedCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedCert").field("cert_pem", &self.cert_pem).field("key_pem", &"<redacted>").finish()
    }
}

/// The crypto provider every configuration here uses (ring).
pub fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server configuration for one certificate chain and key (PEM).
pub fn server_config(cert_pem: &str, key_pem: &str) -> Result<Arc<rustls::ServerConfig>, TlsConfigError> {
    let (chain, key) = chain_and_key(cert_pem, key_pem)?;
    let config = rustls::ServerConfig::builder_with_provider(crypto_provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    Ok(with_http_alpn(config))
}

/// [`server_config`] that also asks clients for a certificate and verifies one, when
/// offered, against `client_ca_pem`, as kube-apiserver's `--client-ca-file` does.
/// Clients without a certificate still connect (they may authenticate otherwise); a
/// client whose certificate the CA did not sign fails the handshake. The verified chain
/// reaches each request as [`crate::PeerCertificates`].
pub fn server_config_with_client_ca(
    cert_pem: &str,
    key_pem: &str,
    client_ca_pem: &str,
) -> Result<Arc<rustls::ServerConfig>, TlsConfigError> {
    let (chain, key) = chain_and_key(cert_pem, key_pem)?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        let ca = ca.map_err(|e| TlsConfigError::ClientCa(e.to_string()))?;
        roots.add(ca).map_err(|e| TlsConfigError::ClientCa(e.to_string()))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), crypto_provider())
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsConfigError::ClientCa(e.to_string()))?;
    let config = rustls::ServerConfig::builder_with_provider(crypto_provider())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)?;
    Ok(with_http_alpn(config))
}

/// Parses a PEM certificate chain (at least one certificate) and private key.
fn chain_and_key(
    cert_pem: &str,
    key_pem: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsConfigError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsConfigError::Certificate(e.to_string()))?;
    if chain.is_empty() {
        return Err(TlsConfigError::Certificate("no CERTIFICATE block".to_owned()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| TlsConfigError::Key(e.to_string()))?;
    Ok((chain, key))
}

/// A server configuration whose certificate `resolver` picks per handshake (e.g. one that
/// reloads rotated files). `provider` must be the one the resolver's keys were loaded with.
pub fn server_config_with_resolver(
    resolver: Arc<dyn ResolvesServerCert>,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<rustls::ServerConfig>, TlsConfigError> {
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    Ok(with_http_alpn(config))
}

/// Offers HTTP/2 first, then HTTP/1.1.
fn with_http_alpn(mut config: rustls::ServerConfig) -> Arc<rustls::ServerConfig> {
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_certificate_loads_and_names_its_hosts() {
        let ca = DevCa::generate("test CA").expect("ca");
        let hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        let cert = ca.issue_serving_cert("localhost", &hosts).expect("cert");
        let config = server_config(&cert.cert_pem, &cert.key_pem).expect("rustls accepts it");
        assert_eq!(config.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(!format!("{cert:?}").contains("PRIVATE KEY"));
    }

    #[test]
    fn mismatched_or_garbage_material_is_rejected() {
        let ca = DevCa::generate("test CA").expect("ca");
        let a = ca.issue_serving_cert("a", &["a.test".to_owned()]).expect("a");
        let b = ca.issue_serving_cert("b", &["b.test".to_owned()]).expect("b");
        assert!(matches!(server_config(&a.cert_pem, &b.key_pem), Err(TlsConfigError::Rustls(_))));
        assert!(matches!(server_config("nope", &a.key_pem), Err(TlsConfigError::Certificate(_))));
        assert!(matches!(server_config(&a.cert_pem, "nope"), Err(TlsConfigError::Key(_))));
    }

    /// Whether `when` lies within a minute of `now + lifetime`.
    fn about(when: SystemTime, lifetime: Duration) -> bool {
        let expected = SystemTime::now() + lifetime;
        let gap = match expected.duration_since(when) {
            Ok(gap) => gap,
            Err(e) => e.duration(),
        };
        gap < Duration::from_secs(60)
    }

    #[test]
    fn the_ca_lasts_ten_years_and_what_it_issues_one() {
        let ca = DevCa::generate("test CA").expect("ca");
        let ca_end = not_after(ca.cert_pem()).expect("the CA parses");
        assert!(about(ca_end, CA_VALIDITY), "CA valid until {ca_end:?}");
        let serving = ca.issue_serving_cert("localhost", &["localhost".to_owned()]).expect("serving");
        let client = ca.issue_client_cert("jane", "dev").expect("client");
        for cert in [&serving, &client] {
            let end = not_after(&cert.cert_pem).expect("the certificate parses");
            assert!(about(end, LEAF_VALIDITY), "valid until {end:?}");
        }
        assert_eq!(not_after("not a certificate"), None);
    }

    #[test]
    fn a_client_certificate_names_its_user_and_group() {
        let ca = DevCa::generate("test CA").expect("ca");
        let client = ca.issue_client_cert("jane", "dev").expect("client");
        let der = CertificateDer::from_pem_slice(client.cert_pem.as_bytes()).expect("pem");
        let subject = CertificateSubject::of_der(&der).expect("parses");
        assert_eq!(subject, CertificateSubject { common_name: "jane".into(), organizations: vec!["dev".into()] });
        assert_eq!(CertificateSubject::of_der(b"garbage"), None);
    }
}
