//! Sprig's crypto functions in a chart (`tests/charts/sprigcrypto`, shaped as bitnami's and
//! trust-manager's TLS templates): the chart renders, and what it prints is checked for
//! what can be checked, since keys and serials are random (the real helm's output cannot
//! be compared byte for byte): the chain verifies, the names, IPs and lifetime are those
//! asked for, and the htpasswd line and the AES round trip hold.

use std::path::Path;

use base64::Engine as _;
use opkit_helm::TemplateOptions;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer as _, X509Certificate};

fn render() -> String {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charts/sprigcrypto");
    let options = TemplateOptions { release_name: "rel".into(), namespace: "ns1".into(), ..TemplateOptions::default() };
    opkit_helm::template(&chart, &options).expect("the chart renders")
}

/// The quoted value of `key:` in the output.
fn field(out: &str, key: &str) -> String {
    let line = out.lines().find_map(|l| l.trim().strip_prefix(&format!("{key}: "))).expect(key);
    line.trim_matches('"').to_string()
}

/// The DER of the PEM certificate in base64 field `key`.
fn certificate_der(out: &str, key: &str) -> Vec<u8> {
    let pem_text = base64::engine::general_purpose::STANDARD.decode(field(out, key)).expect("base64");
    let block = pem::parse(pem_text).expect("PEM");
    assert_eq!(block.tag(), "CERTIFICATE");
    block.contents().to_vec()
}

#[test]
fn a_chart_with_a_generated_ca_renders_a_secret_whose_chain_verifies() {
    let out = render();
    let (ca_der, leaf_der) = (certificate_der(&out, "ca.crt"), certificate_der(&out, "tls.crt"));
    let (_, ca) = X509Certificate::from_der(&ca_der).expect("the CA");
    let (_, leaf) = X509Certificate::from_der(&leaf_der).expect("the leaf");
    leaf.verify_signature(Some(ca.public_key())).expect("the CA signed the leaf");
    assert!(ca.is_ca() && !leaf.is_ca());
    assert_eq!(ca.subject().to_string(), "CN=rel-ca");
    assert_eq!(leaf.subject().to_string(), "CN=rel");
    assert_eq!(leaf.issuer(), ca.subject());
    let days = (leaf.validity().not_after.timestamp() - leaf.validity().not_before.timestamp()) / 86_400;
    assert_eq!(days, 90);
    let names = &leaf.subject_alternative_name().expect("SANs").expect("present").value.general_names;
    assert!(names.contains(&GeneralName::DNSName("sprigcrypto.ns1.svc")));
    assert!(names.contains(&GeneralName::DNSName("sprigcrypto.ns1.svc.cluster.local")));
    assert!(names.contains(&GeneralName::IPAddress(&[10, 96, 0, 10])));
    let key = base64::engine::general_purpose::STANDARD.decode(field(&out, "tls.key")).expect("base64");
    assert!(String::from_utf8(key).expect("PEM").starts_with("-----BEGIN RSA PRIVATE KEY-----\n"));
}

#[test]
fn htpasswd_and_aes_hold_in_a_chart() {
    let out = render();
    let line = field(&out, "htpasswd");
    let (user, hash) = line.split_once(':').expect("user:hash");
    assert_eq!(user, "admin");
    assert!(bcrypt_verifies("s3cret", hash), "{hash}");
    assert_eq!(field(&out, "roundtrip"), "s3cret");
}

/// Whether `hash` is Go's `$2a$10$` bcrypt form of `password`.
fn bcrypt_verifies(password: &str, hash: &str) -> bool {
    hash.starts_with("$2a$10$") && bcrypt::verify(password, hash).unwrap_or(false)
}
