//! How the control plane verifies the serving certificate of a backend it calls (an
//! admission or conversion webhook, an aggregated API server): against the `caBundle`
//! it was given, as kube-apiserver's Go `crypto/x509` does.
//!
//! webpki, which rustls uses, refuses a leaf certificate that says `CA:TRUE`
//! (`CaUsedAsEndEntity`). That is what `openssl req -x509 …` makes by default, and the
//! usual self-signed webhook certificate is given as its own `caBundle`; Go accepts it.
//! [`CaBundleVerifier`] hands every other certificate to webpki unchanged, and checks a
//! `CA:TRUE` leaf as Go does: it must be valid now, carry the server name, allow server
//! authentication when it names its uses, and either be one of the bundle's certificates
//! itself or be signed by one (directly or through the intermediates the server sent).
//! The handshake signature is checked against the leaf's key in every case.

use std::sync::{Arc, OnceLock};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, Error, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use x509_parser::certificate::X509Certificate;
use x509_parser::time::ASN1Time;

/// How many certificates a chain from a `CA:TRUE` leaf to the bundle may have in between.
const MAX_INTERMEDIATES: usize = 8;

/// Why a [`CaBundleVerifier`] could not be made.
#[derive(Debug, thiserror::Error)]
pub enum VerifierError {
    /// The `caBundle` is not PEM certificates, or a certificate in it cannot be used.
    #[error("the caBundle is not a valid PEM certificate bundle: {0}")]
    InvalidBundle(String),
    /// There is no certificate to trust: an empty bundle, or no system roots.
    #[error("no certificate to verify the server against: {0}")]
    NoRoots(String),
}

/// A server certificate verifier that trusts one CA bundle as Go's `crypto/x509` does
/// (see the module documentation): webpki's checks, and a self-signed or CA-signed leaf
/// with `CA:TRUE` accepted.
#[derive(Debug)]
pub struct CaBundleVerifier {
    /// webpki's verifier over the same roots, for every leaf that is not a CA.
    webpki: Arc<WebPkiServerVerifier>,
    /// The trusted certificates (the bundle's, or the system's), DER.
    anchors: Vec<CertificateDer<'static>>,
}

/// The crypto provider every backend client uses.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())).clone()
}

impl CaBundleVerifier {
    /// A verifier trusting the PEM certificates of `ca_bundle`, or the system's roots
    /// when there is none (as Go's client does without `caData`).
    pub fn new(ca_bundle: Option<&[u8]>) -> Result<CaBundleVerifier, VerifierError> {
        let anchors = match ca_bundle.filter(|b| !b.is_empty()) {
            Some(pem) => {
                let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(pem).collect();
                let certs = certs.map_err(|e| VerifierError::InvalidBundle(e.to_string()))?;
                if certs.is_empty() {
                    return Err(VerifierError::InvalidBundle("it holds no CERTIFICATE block".into()));
                }
                certs
            }
            None => system_roots()?,
        };
        let mut roots = RootCertStore::empty();
        for cert in &anchors {
            roots.add(cert.clone()).map_err(|e| VerifierError::InvalidBundle(e.to_string()))?;
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), crypto_provider())
            .build()
            .map_err(|e| VerifierError::NoRoots(e.to_string()))?;
        Ok(CaBundleVerifier { webpki, anchors })
    }

    /// A rustls client configuration verifying servers with this verifier, without a
    /// client certificate.
    pub fn client_config(self) -> Result<rustls::ClientConfig, VerifierError> {
        let config = rustls::ClientConfig::builder_with_provider(crypto_provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| VerifierError::InvalidBundle(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(self))
            .with_no_client_auth();
        Ok(config)
    }

    /// Go's checks of a leaf that says `CA:TRUE`: validity, name, extended key usage, and
    /// a chain of signatures to one of the anchors (or the leaf being one).
    fn verify_ca_leaf(
        &self,
        end_entity: &CertificateDer<'_>,
        leaf: &X509Certificate<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> Result<(), Error> {
        let at = asn1_time(now)?;
        check_validity(leaf, at)?;
        rustls::client::verify_server_name(&ParsedCertificate::try_from(end_entity)?, server_name)?;
        if let Ok(Some(eku)) = leaf.extended_key_usage()
            && !eku.value.server_auth
            && !eku.value.any
        {
            return Err(Error::InvalidCertificate(CertificateError::InvalidPurpose));
        }
        if self.anchors.iter().any(|a| a.as_ref() == end_entity.as_ref()) {
            return Ok(());
        }
        let anchors: Vec<X509Certificate<'_>> = self.anchors.iter().filter_map(|a| parse(a).ok()).collect();
        let intermediates: Vec<X509Certificate<'_>> = intermediates.iter().filter_map(|c| parse(c).ok()).collect();
        let mut current = leaf;
        for _ in 0..=MAX_INTERMEDIATES {
            let signed_by = |issuer: &X509Certificate<'_>| {
                issuer.subject().as_raw() == current.issuer().as_raw()
                    && current.verify_signature(Some(issuer.public_key())).is_ok()
            };
            if anchors.iter().any(|a| signed_by(a) && a.validity().is_valid_at(at)) {
                return Ok(());
            }
            let next = intermediates.iter().find(|i| i.is_ca() && i.validity().is_valid_at(at) && signed_by(i));
            match next {
                Some(next) => current = next,
                None => break,
            }
        }
        Err(Error::InvalidCertificate(CertificateError::UnknownIssuer))
    }
}

impl ServerCertVerifier for CaBundleVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match parse(end_entity) {
            Ok(leaf) if leaf.is_ca() => {
                self.verify_ca_leaf(end_entity, &leaf, intermediates, server_name, now)?;
                Ok(ServerCertVerified::assertion())
            }
            _ => self.webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// A verifier that accepts any certificate, for `insecureSkipTLSVerify: true`. The
/// handshake signature is still checked against the presented key.
#[derive(Debug)]
pub struct SkipVerification;

impl ServerCertVerifier for SkipVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let algorithms = &crypto_provider().signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let algorithms = &crypto_provider().signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        crypto_provider().signature_verification_algorithms.supported_schemes()
    }
}

/// A failed certificate verification in the words of Go's TLS client
/// (`tls: failed to verify certificate: x509: …`), which kube-apiserver prints when a
/// webhook's or aggregated API's certificate is refused; None for other TLS errors.
pub fn go_tls_message(error: &Error) -> Option<String> {
    let Error::InvalidCertificate(why) = error else { return None };
    let x509 = match why {
        CertificateError::UnknownIssuer => "certificate signed by unknown authority".to_owned(),
        CertificateError::NotValidForNameContext { expected, presented } => {
            let expected = match expected {
                ServerName::DnsName(name) => name.as_ref().to_owned(),
                ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
                other => format!("{other:?}"),
            };
            let names: Vec<&str> = presented.iter().map(|n| presented_name(n)).collect();
            match names.as_slice() {
                [] => "certificate is not valid for any names, but wanted to match ".to_owned() + &expected,
                names => format!("certificate is valid for {}, not {expected}", names.join(", ")),
            }
        }
        CertificateError::NotValidForName => "certificate is not valid for the requested name".to_owned(),
        CertificateError::Expired
        | CertificateError::ExpiredContext { .. }
        | CertificateError::NotValidYet
        | CertificateError::NotValidYetContext { .. } => "certificate has expired or is not yet valid".to_owned(),
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            "certificate specifies an incompatible key usage".to_owned()
        }
        CertificateError::BadSignature => "certificate signature is invalid".to_owned(),
        other => format!("{other:?}"),
    };
    Some(format!("tls: failed to verify certificate: x509: {x509}"))
}

/// A name webpki reports a certificate presents (`DnsName("a.b")`, `IpAddress(10.0.0.1)`)
/// as the bare name Go prints.
fn presented_name(name: &str) -> &str {
    let inner = name
        .strip_prefix("DnsName(")
        .or_else(|| name.strip_prefix("IpAddress("))
        .and_then(|n| n.strip_suffix(')'))
        .unwrap_or(name);
    inner.trim_matches('"')
}

/// The system's trusted roots, read once.
fn system_roots() -> Result<Vec<CertificateDer<'static>>, VerifierError> {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    let roots = ROOTS.get_or_init(|| rustls_native_certs::load_native_certs().certs);
    if roots.is_empty() {
        return Err(VerifierError::NoRoots("no caBundle was given and the system has no trusted roots".into()));
    }
    Ok(roots.clone())
}

fn parse<'a>(der: &'a CertificateDer<'_>) -> Result<X509Certificate<'a>, Error> {
    x509_parser::parse_x509_certificate(der.as_ref())
        .map(|(_, cert)| cert)
        .map_err(|_| Error::InvalidCertificate(CertificateError::BadEncoding))
}

fn asn1_time(now: UnixTime) -> Result<ASN1Time, Error> {
    let secs = i64::try_from(now.as_secs()).map_err(|_| Error::General("the clock is out of range".into()))?;
    ASN1Time::from_timestamp(secs).map_err(|_| Error::General("the clock is out of range".into()))
}

fn check_validity(cert: &X509Certificate<'_>, at: ASN1Time) -> Result<(), Error> {
    let validity = cert.validity();
    if at < validity.not_before {
        return Err(Error::InvalidCertificate(CertificateError::NotValidYet));
    }
    if at > validity.not_after {
        return Err(Error::InvalidCertificate(CertificateError::Expired));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};

    /// A certificate as `openssl req -x509 -addext subjectAltName=…` makes it: self-signed,
    /// `CA:TRUE`, the given SAN.
    fn self_signed_ca(name: &str) -> (rcgen::Certificate, KeyPair) {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(vec![name.to_owned()]).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        (params.self_signed(&key).expect("cert"), key)
    }

    fn verify(verifier: &CaBundleVerifier, leaf: &CertificateDer<'_>, name: &str) -> Result<(), Error> {
        let name = ServerName::try_from(name.to_owned()).expect("name");
        verifier.verify_server_cert(leaf, &[], &name, &[], UnixTime::now()).map(|_| ())
    }

    #[test]
    fn a_self_signed_ca_leaf_is_trusted_as_its_own_bundle_for_its_names_only() {
        let (cert, _) = self_signed_ca("svc.ns.svc");
        let verifier = CaBundleVerifier::new(Some(cert.pem().as_bytes())).expect("verifier");
        assert_eq!(verify(&verifier, cert.der(), "svc.ns.svc"), Ok(()));
        let wrong = verify(&verifier, cert.der(), "other.ns.svc").expect_err("another name");
        assert!(
            matches!(wrong, Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })),
            "{wrong:?}"
        );
        let (other, _) = self_signed_ca("svc.ns.svc");
        let stranger = CaBundleVerifier::new(Some(other.pem().as_bytes())).expect("verifier");
        assert_eq!(
            verify(&stranger, cert.der(), "svc.ns.svc"),
            Err(Error::InvalidCertificate(CertificateError::UnknownIssuer))
        );
    }

    #[test]
    fn a_ca_leaf_signed_by_the_bundle_is_trusted_and_an_ordinary_leaf_goes_to_webpki() {
        let (ca, ca_key) = self_signed_ca("my CA");
        let issuer = Issuer::from_ca_cert_der(ca.der(), ca_key).expect("issuer");
        let verifier = CaBundleVerifier::new(Some(ca.pem().as_bytes())).expect("verifier");
        for is_ca in [IsCa::Ca(BasicConstraints::Unconstrained), IsCa::ExplicitNoCa] {
            let mut params = CertificateParams::new(vec!["svc.ns.svc".to_owned()]).expect("params");
            params.subject_alt_names.push(SanType::IpAddress("127.0.0.1".parse().expect("ip")));
            params.is_ca = is_ca;
            let leaf = params.signed_by(&KeyPair::generate().expect("key"), &issuer).expect("leaf");
            assert_eq!(verify(&verifier, leaf.der(), "svc.ns.svc"), Ok(()));
            assert_eq!(verify(&verifier, leaf.der(), "127.0.0.1"), Ok(()));
            assert!(verify(&verifier, leaf.der(), "elsewhere.ns.svc").is_err());
        }
    }

    #[test]
    fn an_expired_ca_leaf_is_refused() {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(vec!["svc.ns.svc".to_owned()]).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        let cert = params.self_signed(&key).expect("cert");
        let verifier = CaBundleVerifier::new(Some(cert.pem().as_bytes())).expect("verifier");
        assert_eq!(
            verify(&verifier, cert.der(), "svc.ns.svc"),
            Err(Error::InvalidCertificate(CertificateError::Expired))
        );
    }

    #[test]
    fn refusals_are_worded_as_gos_tls_client_words_them() {
        let (cert, _) = self_signed_ca("svc.ns.svc");
        let verifier = CaBundleVerifier::new(Some(cert.pem().as_bytes())).expect("verifier");
        let wrong = verify(&verifier, cert.der(), "other.ns.svc").expect_err("another name");
        assert_eq!(
            go_tls_message(&wrong).as_deref(),
            Some("tls: failed to verify certificate: x509: certificate is valid for svc.ns.svc, not other.ns.svc")
        );
        assert_eq!(
            go_tls_message(&Error::InvalidCertificate(CertificateError::UnknownIssuer)).as_deref(),
            Some("tls: failed to verify certificate: x509: certificate signed by unknown authority")
        );
        assert_eq!(go_tls_message(&Error::HandshakeNotComplete), None);
    }

    #[test]
    fn a_bundle_without_certificates_is_refused() {
        assert!(matches!(CaBundleVerifier::new(Some(b"not pem")), Err(VerifierError::InvalidBundle(_))));
    }
}
