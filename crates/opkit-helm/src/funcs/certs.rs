//! Sprig's certificates and keys (`crypto.go`): `genPrivateKey`, `genCA`,
//! `genSelfSignedCert`, `genSignedCert` and their `WithKey` forms, and `buildCustomCert`.
//!
//! As in Sprig: new certificate keys are RSA 2048 (`genPrivateKey "rsa"` makes 4096), keys
//! are PEM `RSA PRIVATE KEY` (PKCS#1), `EC PRIVATE KEY` (SEC1, P-256) or `PRIVATE KEY`
//! (PKCS#8, Ed25519); certificates are valid from now for the given days, carry the common
//! name, the DNS names and IPs given, a random 128-bit serial, digital signature and key
//! encipherment (and certificate signing for a CA) and server and client auth. The result is
//! a value with `.Cert` and `.Key`, the PEM texts. DSA keys are not supported.

use std::collections::BTreeMap;
use std::net::IpAddr;

use base64::Engine as _;
use p256::elliptic_curve::Generate as _;
use p256::pkcs8::{DecodePrivateKey as _, EncodePrivateKey as _};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, SerialNumber,
};
use rsa::pkcs1::{DecodeRsaPrivateKey as _, EncodeRsaPrivateKey as _};

use super::crypto::random_fill;
use super::{Args, Func, FuncError, FuncResult, func};
use crate::template::Exec;
use crate::value::Value;

/// Sprig's certificate and key functions.
pub(super) const FUNCS: &[Func] = &[
    func("genPrivateKey", 1, 1, gen_private_key),
    func("genCA", 2, 2, gen_ca),
    func("genCAWithKey", 3, 3, gen_ca_with_key),
    func("genSelfSignedCert", 4, 4, gen_self_signed_cert),
    func("genSelfSignedCertWithKey", 5, 5, gen_self_signed_cert_with_key),
    func("genSignedCert", 5, 5, gen_signed_cert),
    func("genSignedCertWithKey", 6, 6, gen_signed_cert_with_key),
    func("buildCustomCert", 2, 2, build_custom_cert),
];

/// The bits of the RSA keys Sprig makes for certificates.
const CERT_RSA_BITS: usize = 2048;
/// The bits of the RSA keys Sprig's `genPrivateKey` makes.
const PRIVATE_KEY_RSA_BITS: usize = 4096;
/// The DER of a PKCS#8 Ed25519 key as Go writes it, before the 32-byte seed.
const ED25519_PKCS8_PREFIX: [u8; 16] =
    [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20];

/// A private key of a kind Sprig reads and writes.
enum PrivateKey {
    Rsa(Box<rsa::PrivateKey>),
    Ecdsa(p256::SecretKey),
    /// The PKCS#8 DER (Go's form: no public key).
    Ed25519(Vec<u8>),
}

impl PrivateKey {
    fn rsa(bits: usize) -> Result<PrivateKey, String> {
        rsa::PrivateKey::new(&mut getrandom::SysRng, bits)
            .map(|k| PrivateKey::Rsa(Box::new(k)))
            .map_err(|e| format!("error generating rsa key: {e}"))
    }

    fn ed25519() -> Result<PrivateKey, String> {
        let rng = ring::rand::SystemRandom::new();
        let doc = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).map_err(|e| e.to_string())?;
        // ring's document is PKCS#8 v2: the seed is at bytes 16..48, the public key after it.
        let seed = doc.as_ref().get(16..48).ok_or("unexpected Ed25519 key document")?;
        Ok(PrivateKey::Ed25519([&ED25519_PKCS8_PREFIX[..], seed].concat()))
    }

    /// Sprig's `parsePrivateKeyPEM`: the first PEM block, by its type.
    fn from_pem(text: &str) -> Result<PrivateKey, String> {
        let block = pem::parse(text).map_err(|_| "no PEM data in input".to_string())?;
        let der = block.contents();
        match block.tag() {
            "PRIVATE KEY" => Self::from_pkcs8(der).map_err(|e| format!("decoding PEM as PKCS#8: {e}")),
            "RSA PRIVATE KEY" => rsa::PrivateKey::from_pkcs1_der(der)
                .map(|k| PrivateKey::Rsa(Box::new(k)))
                .map_err(|e| format!("parsing RSA private key from PEM: {e}")),
            "EC PRIVATE KEY" => p256::SecretKey::from_sec1_der(der)
                .map(PrivateKey::Ecdsa)
                .map_err(|e| format!("parsing EC private key from PEM: {e} (opkit reads P-256 keys)")),
            "DSA PRIVATE KEY" => Err("DSA keys are not supported by opkit's renderer".into()),
            t if t.ends_with(" PRIVATE KEY") => Err(format!("invalid private key type {t}")),
            t => Err(format!("no private key data in PEM block of type {t}")),
        }
    }

    fn from_pkcs8(der: &[u8]) -> Result<PrivateKey, String> {
        if let Ok(k) = rsa::PrivateKey::from_pkcs8_der(der) {
            return Ok(PrivateKey::Rsa(Box::new(k)));
        }
        if let Ok(k) = p256::SecretKey::from_pkcs8_der(der) {
            return Ok(PrivateKey::Ecdsa(k));
        }
        ring::signature::Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)
            .map(|_| PrivateKey::Ed25519(der.to_vec()))
            .map_err(|_| "not an RSA, P-256 or Ed25519 key".to_string())
    }

    /// Sprig's `pemBlockForKey`.
    fn to_pem(&self) -> Result<String, String> {
        let err = |e: &dyn std::fmt::Display| format!("error pem-encoding key: {e}");
        match self {
            PrivateKey::Rsa(k) => Ok(k.to_pkcs1_pem(rsa::pkcs1::LineEnding::LF).map_err(|e| err(&e))?.to_string()),
            PrivateKey::Ecdsa(k) => Ok(k.to_sec1_pem(p256::pkcs8::LineEnding::LF).map_err(|e| err(&e))?.to_string()),
            PrivateKey::Ed25519(der) => Ok(pem_block("PRIVATE KEY", der.clone())),
        }
    }

    /// The key as rcgen signs with it.
    fn key_pair(&self) -> Result<KeyPair, String> {
        let err = |e: &dyn std::fmt::Display| format!("error using the private key: {e}");
        let (der, alg) = match self {
            PrivateKey::Rsa(k) => (k.to_pkcs8_der().map_err(|e| err(&e))?.as_bytes().to_vec(), &rcgen::PKCS_RSA_SHA256),
            PrivateKey::Ecdsa(k) => {
                (k.to_pkcs8_der().map_err(|e| err(&e))?.as_bytes().to_vec(), &rcgen::PKCS_ECDSA_P256_SHA256)
            }
            PrivateKey::Ed25519(der) => (der.clone(), &rcgen::PKCS_ED25519),
        };
        KeyPair::from_pkcs8_der_and_sign_algo(&der.into(), alg).map_err(|e| err(&e))
    }
}

/// PEM text of one block, as Go's `pem.Encode` writes it.
fn pem_block(tag: &str, der: Vec<u8>) -> String {
    let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
    pem::encode_config(&pem::Pem::new(tag, der), config)
}

fn gen_private_key(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let kind = a.str(0);
    let key = match kind.as_str() {
        "" | "rsa" => PrivateKey::rsa(PRIVATE_KEY_RSA_BITS),
        "ecdsa" => Ok(PrivateKey::Ecdsa(p256::SecretKey::generate())),
        "ed25519" => PrivateKey::ed25519(),
        "dsa" => return Err("DSA keys are not supported by opkit's renderer".into()),
        other => return Ok(Value::str(format!("Unknown type {other}"))),
    };
    let pem = key.and_then(|k| k.to_pem()).map_err(|e| format!("failed to generate private key: {e}"))?;
    Ok(Value::str(pem))
}

/// What a certificate is for: its subject, names, lifetime and whether it is a CA.
struct CertRequest {
    cn: String,
    ips: Vec<IpAddr>,
    dns_names: Vec<String>,
    days: i64,
    is_ca: bool,
}

impl CertRequest {
    /// Reads `cn`, `ips`, `dnsNames`, `days` from the arguments, as the certificate
    /// functions other than `genCA` take them.
    fn from_args(a: &Args<'_>) -> Result<CertRequest, FuncError> {
        Ok(CertRequest {
            cn: a.str(0),
            ips: ip_list(a.get(1))?,
            dns_names: dns_list(a.get(2))?,
            days: a.int(3),
            is_ca: false,
        })
    }

    fn ca(a: &Args<'_>) -> CertRequest {
        CertRequest { cn: a.str(0), ips: Vec::new(), dns_names: Vec::new(), days: a.int(1), is_ca: true }
    }

    /// Sprig's `getBaseCertTemplate`, with a CA's overrides.
    fn params(&self) -> Result<CertificateParams, FuncError> {
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, self.cn.as_str());
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now;
        params.not_after = now
            .checked_add(time::Duration::days(self.days))
            .ok_or_else(|| format!("{} days of validity is out of range", self.days))?;
        let mut serial = [0u8; 16];
        random_fill(&mut serial)?;
        serial[0] &= 0x7f;
        params.serial_number = Some(SerialNumber::from_slice(&serial));
        for name in &self.dns_names {
            let name = name.as_str().try_into().map_err(|e| format!("error processing alternate dns name: {e}"))?;
            params.subject_alt_names.push(SanType::DnsName(name));
        }
        params.subject_alt_names.extend(self.ips.iter().map(|ip| SanType::IpAddress(*ip)));
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        if self.is_ca {
            params.key_usages.push(KeyUsagePurpose::KeyCertSign);
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        } else {
            params.is_ca = IsCa::ExplicitNoCa;
        }
        Ok(params)
    }

    /// The certificate signed by its own key.
    fn self_signed(&self, key: PrivateKey) -> FuncResult {
        let pair = key.key_pair()?;
        let cert = self.params()?.self_signed(&pair).map_err(|e| format!("error creating certificate: {e}"))?;
        certificate(cert.pem(), key.to_pem()?)
    }

    /// The certificate for `key`, signed by the CA `ca` (a value with `.Cert` and `.Key`).
    fn signed_by(&self, key: PrivateKey, ca: &Value) -> FuncResult {
        let (ca_cert, ca_key) = ca_parts(ca)?;
        if pem::parse(&ca_cert).is_err() {
            return Err("unable to decode certificate".into());
        }
        let signer = PrivateKey::from_pem(&ca_key).map_err(|e| format!("error parsing private key: {e}"))?;
        let issuer = Issuer::from_ca_cert_pem(&ca_cert, signer.key_pair()?)
            .map_err(|e| format!("error parsing certificate: {e}"))?;
        let pair = key.key_pair()?;
        let cert = self.params()?.signed_by(&pair, &issuer).map_err(|e| format!("error creating certificate: {e}"))?;
        certificate(cert.pem(), key.to_pem()?)
    }
}

/// Sprig's `certificate`: `.Cert` and `.Key`.
fn certificate(cert: String, key: String) -> FuncResult {
    Ok(Value::map(BTreeMap::from([("Cert".to_string(), Value::str(cert)), ("Key".to_string(), Value::str(key))])))
}

/// The `.Cert` and `.Key` of a certificate value.
fn ca_parts(ca: &Value) -> Result<(String, String), FuncError> {
    let Value::Map(m) = ca else {
        return Err(format!("wrong type for value; expected sprig.certificate; got {}", ca.type_name()).into());
    };
    let m = m.borrow();
    let field = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string).unwrap_or_default();
    Ok((field("Cert"), field("Key")))
}

/// The items of a list argument (nil is none).
fn list_items(v: &Value, what: &str) -> Result<Vec<Value>, FuncError> {
    match v {
        Value::Nil => Ok(Vec::new()),
        Value::List(l) => Ok(l.as_ref().clone()),
        other => {
            Err(format!("wrong type for value; expected []interface {{}} for {what}; got {}", other.type_name()).into())
        }
    }
}

/// Sprig's `getNetIPs`.
fn ip_list(v: &Value) -> Result<Vec<IpAddr>, FuncError> {
    list_items(v, "ips")?
        .iter()
        .map(|ip| {
            let Value::Str(s) = ip else {
                return Err(format!("error parsing ip: {} is not a string", super::strval(ip)).into());
            };
            s.parse().map_err(|_| format!("error parsing ip: {s}").into())
        })
        .collect()
}

/// Sprig's `getAlternateDNSStrs`.
fn dns_list(v: &Value) -> Result<Vec<String>, FuncError> {
    list_items(v, "alternate dns names")?
        .iter()
        .map(|name| match name {
            Value::Str(s) => Ok(s.to_string()),
            other => {
                Err(format!("error processing alternate dns name: {} is not a string", super::strval(other)).into())
            }
        })
        .collect()
}

fn key_arg(a: &Args<'_>, i: usize) -> Result<PrivateKey, FuncError> {
    PrivateKey::from_pem(&a.str(i)).map_err(|e| format!("parsing private key: {e}").into())
}

fn gen_ca(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    CertRequest::ca(&a).self_signed(PrivateKey::rsa(CERT_RSA_BITS)?)
}

fn gen_ca_with_key(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    CertRequest::ca(&a).self_signed(key_arg(&a, 2)?)
}

fn gen_self_signed_cert(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    CertRequest::from_args(&a)?.self_signed(PrivateKey::rsa(CERT_RSA_BITS)?)
}

fn gen_self_signed_cert_with_key(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    CertRequest::from_args(&a)?.self_signed(key_arg(&a, 4)?)
}

fn gen_signed_cert(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    CertRequest::from_args(&a)?.signed_by(PrivateKey::rsa(CERT_RSA_BITS)?, a.get(4))
}

fn gen_signed_cert_with_key(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    CertRequest::from_args(&a)?.signed_by(key_arg(&a, 5)?, a.get(4))
}

/// `buildCustomCert BASE64CERT BASE64KEY`: a certificate value from existing PEM texts,
/// checked as Sprig checks them.
fn build_custom_cert(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let b64 = base64::engine::general_purpose::STANDARD;
    let cert = b64.decode(a.str(0)).map_err(|_| "unable to decode base64 certificate")?;
    let key = b64.decode(a.str(1)).map_err(|_| "unable to decode base64 private key")?;
    let (cert, key) = (String::from_utf8_lossy(&cert).into_owned(), String::from_utf8_lossy(&key).into_owned());
    let block = pem::parse(&cert).map_err(|_| "unable to decode certificate")?;
    x509_parser::parse_x509_certificate(block.contents())
        .map_err(|e| format!("error parsing certificate: decodedCert.Bytes: {e}"))?;
    PrivateKey::from_pem(&key).map_err(|e| format!("error parsing private key: {e}"))?;
    certificate(cert, key)
}

#[cfg(test)]
mod tests {
    use x509_parser::extensions::GeneralName;
    use x509_parser::prelude::{FromDer as _, X509Certificate};
    use x509_parser::public_key::PublicKey;

    use super::*;
    use crate::funcs::tests::{render, run};

    /// The `.Cert` and `.Key` of a call's result.
    fn generate(name: &str, args: Vec<Value>) -> (String, String) {
        let value = run(name, args).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        ca_parts(&value).expect("a certificate value")
    }

    fn der_of(pem_text: &str, tag: &str) -> Vec<u8> {
        let block = pem::parse(pem_text).expect("PEM");
        assert_eq!(block.tag(), tag);
        assert!(pem_text.ends_with("-----\n"), "one block, ending in a newline");
        block.contents().to_vec()
    }

    fn cn<'a>(cert: &'a X509Certificate<'_>) -> &'a str {
        cert.subject().iter_common_name().next().and_then(|c| c.as_str().ok()).expect("a CN")
    }

    fn lifetime_days(cert: &X509Certificate<'_>) -> i64 {
        (cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp()) / 86_400
    }

    fn list(items: &[&str]) -> Value {
        Value::list(items.iter().map(|s| Value::str(*s)).collect())
    }

    #[test]
    fn gen_ca_is_a_self_signed_rsa_2048_ca() {
        let (cert_pem, key_pem) = generate("genCA", vec![Value::str("my-ca"), Value::int(365)]);
        let der = der_of(&cert_pem, "CERTIFICATE");
        let (_, cert) = X509Certificate::from_der(&der).expect("X.509");
        assert_eq!(cn(&cert), "my-ca");
        assert_eq!(cert.issuer(), cert.subject());
        assert!(cert.is_ca());
        assert!(cert.key_usage().expect("key usage").expect("present").value.key_cert_sign());
        cert.verify_signature(None).expect("signed by itself");
        assert_eq!(lifetime_days(&cert), 365);
        let Ok(PublicKey::RSA(rsa)) = cert.public_key().parsed() else { panic!("an RSA key") };
        assert_eq!(rsa.key_size(), 2048);
        der_of(&key_pem, "RSA PRIVATE KEY");
        let key = rsa::PrivateKey::from_pkcs1_pem(&key_pem).expect("PKCS#1");
        let ours = rsa::pkcs8::EncodePublicKey::to_public_key_der(&key.to_public_key()).expect("SPKI");
        assert_eq!(ours.as_bytes(), cert.public_key().raw, "the key is the certificate's");
    }

    #[test]
    fn gen_signed_cert_verifies_against_its_ca_with_names_and_ips() {
        let ca = run("genCA", vec![Value::str("the-ca"), Value::int(10)]).expect("a CA");
        let (ca_pem, _) = ca_parts(&ca).expect("CA parts");
        let args =
            vec![Value::str("svc"), list(&["10.0.0.1", "::1"]), list(&["svc.ns", "svc.ns.svc"]), Value::int(30), ca];
        let (cert_pem, key_pem) = generate("genSignedCert", args);
        let (ca_der, der) = (der_of(&ca_pem, "CERTIFICATE"), der_of(&cert_pem, "CERTIFICATE"));
        let ((_, ca_cert), (_, cert)) =
            (X509Certificate::from_der(&ca_der).expect("CA"), X509Certificate::from_der(&der).expect("leaf"));
        cert.verify_signature(Some(ca_cert.public_key())).expect("signed by the CA");
        assert!(cert.verify_signature(None).is_err(), "not self-signed");
        assert_eq!(cert.issuer(), ca_cert.subject());
        assert_eq!(cn(&cert), "svc");
        assert!(!cert.is_ca());
        assert_eq!(lifetime_days(&cert), 30);
        let eku = cert.extended_key_usage().expect("EKU").expect("present").value;
        assert!(eku.server_auth && eku.client_auth);
        let names = &cert.subject_alternative_name().expect("SANs").expect("present").value.general_names;
        let dns: Vec<&str> =
            names.iter().filter_map(|n| if let GeneralName::DNSName(d) = n { Some(*d) } else { None }).collect();
        let ips: Vec<&[u8]> =
            names.iter().filter_map(|n| if let GeneralName::IPAddress(i) = n { Some(*i) } else { None }).collect();
        assert_eq!(dns, ["svc.ns", "svc.ns.svc"]);
        assert_eq!(ips, [&[10, 0, 0, 1][..], &std::net::Ipv6Addr::LOCALHOST.octets()[..]]);
        der_of(&key_pem, "RSA PRIVATE KEY");
        let (other, _) = generate("genCA", vec![Value::str("other"), Value::int(1)]);
        let other_der = der_of(&other, "CERTIFICATE");
        let (_, other) = X509Certificate::from_der(&other_der).expect("CA");
        assert!(cert.verify_signature(Some(other.public_key())).is_err(), "another CA did not sign it");
    }

    #[test]
    fn ecdsa_and_ed25519_keys_make_and_sign_certificates() {
        for (kind, tag) in [("ecdsa", "EC PRIVATE KEY"), ("ed25519", "PRIVATE KEY")] {
            let Ok(Value::Str(key)) = run("genPrivateKey", vec![Value::str(kind)]) else { panic!("{kind} key") };
            der_of(&key, tag);
            let args = vec![Value::str(kind), Value::Nil, Value::Nil, Value::int(2), Value::str(&*key)];
            let (cert_pem, key_pem) = generate("genSelfSignedCertWithKey", args);
            assert_eq!(key_pem, *key, "the key given is the key returned");
            let der = der_of(&cert_pem, "CERTIFICATE");
            let (_, cert) = X509Certificate::from_der(&der).expect("X.509");
            cert.verify_signature(None).expect("self-signed");
            assert!(!cert.is_ca());
            let ca = run("genCAWithKey", vec![Value::str("ca"), Value::int(1), Value::str(&*key)]).expect("CA");
            let args = vec![Value::str("leaf"), Value::Nil, list(&["x"]), Value::int(1), ca.clone(), Value::str(&*key)];
            let (leaf_pem, _) = generate("genSignedCertWithKey", args);
            let (ca_pem, _) = ca_parts(&ca).expect("CA parts");
            let (ca_der, leaf_der) = (der_of(&ca_pem, "CERTIFICATE"), der_of(&leaf_pem, "CERTIFICATE"));
            let (_, ca_cert) = X509Certificate::from_der(&ca_der).expect("CA");
            let (_, leaf) = X509Certificate::from_der(&leaf_der).expect("leaf");
            leaf.verify_signature(Some(ca_cert.public_key())).expect("signed by the CA");
        }
    }

    #[test]
    fn gen_private_key_rsa_is_4096_bits_pkcs1() {
        let Ok(Value::Str(key)) = run("genPrivateKey", vec![Value::str("rsa")]) else { panic!("rsa key") };
        der_of(&key, "RSA PRIVATE KEY");
        let key = rsa::PrivateKey::from_pkcs1_pem(&key).expect("PKCS#1");
        assert_eq!(rsa::traits::PublicKeyParts::size(&key) * 8, 4096);
    }

    #[test]
    fn bad_keys_types_and_names_are_errors() {
        let err = |name: &str, args: Vec<Value>| match run(name, args) {
            Err(FuncError::Message(m)) => m,
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(err("genPrivateKey", vec![Value::str("dsa")]), "DSA keys are not supported by opkit's renderer");
        assert_eq!(run("genPrivateKey", vec![Value::str("x")]).expect("a value").as_str(), Some("Unknown type x"));
        let garbage = vec![Value::str("ca"), Value::int(1), Value::str("not a key")];
        assert_eq!(err("genCAWithKey", garbage), "parsing private key: no PEM data in input");
        let not_string = vec![Value::str("c"), Value::list(vec![Value::int(1)]), Value::Nil, Value::int(1)];
        assert_eq!(err("genSelfSignedCert", not_string), "error parsing ip: 1 is not a string");
        let bad_ip = vec![Value::str("c"), list(&["nope"]), Value::Nil, Value::int(1)];
        assert_eq!(err("genSelfSignedCert", bad_ip), "error parsing ip: nope");
        let no_ca = vec![Value::str("c"), Value::Nil, Value::Nil, Value::int(1), Value::str("x")];
        assert!(err("genSignedCert", no_ca).starts_with("wrong type for value"));
    }

    #[test]
    fn a_template_pipes_generated_certificates_to_b64enc() {
        let source = r#"{{- $ca := genCA "ca" 10 -}}
{{- $c := genSignedCert "svc" nil (list "svc.ns") 10 $ca -}}
{{ $ca.Cert | b64enc }}|{{ $c.Cert | b64enc }}|{{ $c.Key | b64enc }}|{{ (buildCustomCert ($c.Cert | b64enc) ($c.Key | b64enc)).Cert | b64enc }}"#;
        let out = render(source).expect("renders");
        let b64 = base64::engine::general_purpose::STANDARD;
        let parts: Vec<String> =
            out.split('|').map(|p| String::from_utf8(b64.decode(p).expect("base64")).expect("UTF-8")).collect();
        let [ca_pem, cert_pem, key_pem, rebuilt] = parts.as_slice() else { panic!("four parts: {out}") };
        assert_eq!(rebuilt, cert_pem, "buildCustomCert keeps the certificate");
        der_of(key_pem, "RSA PRIVATE KEY");
        let (ca_der, der) = (der_of(ca_pem, "CERTIFICATE"), der_of(cert_pem, "CERTIFICATE"));
        let (_, ca) = X509Certificate::from_der(&ca_der).expect("CA");
        let (_, cert) = X509Certificate::from_der(&der).expect("leaf");
        cert.verify_signature(Some(ca.public_key())).expect("signed by the CA");
        let bad = render(r#"{{ buildCustomCert "bm90IGEgY2VydA==" "eA==" }}"#).expect_err("not a certificate");
        assert!(bad.to_string().ends_with("error calling buildCustomCert: unable to decode certificate"), "{bad}");
    }
}
