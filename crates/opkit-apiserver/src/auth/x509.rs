//! Client-certificate authentication, as kube-apiserver's `--client-ca-file` does it: the
//! TLS layer has already verified the chain against the server's CA, so the leaf's
//! subject names the user (CN) and its groups (each O), and its SHA-256 is the
//! credential id.

use std::collections::BTreeMap;

use super::{AUTHENTICATED, UserInfo};

/// The `extra` key kube-apiserver records a credential's id under.
pub(crate) const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

/// The user a verified client certificate (DER) names; `None` when it does not parse
/// or has no common name, so the request's other credentials decide (as kube's union
/// authenticator moves on).
pub(crate) fn user_of_certificate(der: &[u8]) -> Option<UserInfo> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = certificate.subject();
    let name = subject.iter_common_name().next()?.as_str().ok()?.to_string();
    if name.is_empty() {
        return None;
    }
    let mut groups: Vec<String> =
        subject.iter_organization().filter_map(|o| o.as_str().ok()).map(String::from).collect();
    groups.push(AUTHENTICATED.to_string());
    let fingerprint = ring::digest::digest(&ring::digest::SHA256, der);
    let hex: String = fingerprint.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let extra = BTreeMap::from([(CREDENTIAL_ID.to_string(), vec![format!("X509SHA256={hex}")])]);
    Some(UserInfo { name, uid: String::new(), groups, extra })
}

#[cfg(test)]
mod tests {
    use super::*;
    use opkit_serve::tls::DevCa;
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;

    fn der_of(pem: &str) -> Vec<u8> {
        CertificateDer::from_pem_slice(pem.as_bytes()).expect("pem").to_vec()
    }

    #[test]
    fn the_subject_names_the_user_and_groups() {
        let ca = DevCa::generate("ca").expect("ca");
        let cert = ca.issue_client_cert("jane", "dev").expect("cert");
        let user = user_of_certificate(&der_of(&cert.cert_pem)).expect("a user");
        assert_eq!(user.name, "jane");
        assert_eq!(user.groups, ["dev", AUTHENTICATED]);
        let id = &user.extra[CREDENTIAL_ID][0];
        assert!(id.starts_with("X509SHA256=") && id.len() == "X509SHA256=".len() + 64, "{id}");
    }

    #[test]
    fn garbage_and_nameless_certificates_name_nobody() {
        assert!(user_of_certificate(b"not a certificate").is_none());
        let ca = DevCa::generate("ca").expect("ca");
        let cert = ca.issue_client_cert("", "dev").expect("cert");
        assert!(user_of_certificate(&der_of(&cert.cert_pem)).is_none());
    }
}
