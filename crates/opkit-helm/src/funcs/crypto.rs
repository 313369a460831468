//! Sprig's hashes, passwords and secrets (`crypto.go`, except certificates and keys, which
//! are in [`certs`](super::certs)): `sha1sum`/`sha256sum`/`sha512sum`/`adler32sum`,
//! `bcrypt`, `htpasswd`, `derivePassword` (the Master Password algorithm),
//! `encryptAES`/`decryptAES` (AES-256-CBC), `randBytes` and `uuidv4`.
//!
//! Where Sprig returns a failure as the result string (`bcrypt`, `htpasswd`,
//! `derivePassword`), these do too; where Go would panic, these fail the call.

use aes::cipher::block_padding::{NoPadding, Pkcs7};
use aes::cipher::{BlockDecryptMut as _, BlockEncryptMut as _, KeyIvInit as _};
use base64::Engine as _;
use ring::rand::SecureRandom as _;

use super::strings::pseudo_random;
use super::{ANY, Args, Func, FuncError, FuncResult, func, hex};
use crate::template::Exec;
use crate::value::Value;

/// Sprig's crypto functions, certificates and keys aside.
pub(super) const FUNCS: &[Func] = &[
    func("sha1sum", 0, ANY, sha1sum),
    func("sha256sum", 0, ANY, sha256sum),
    func("sha512sum", 1, 1, sha512sum),
    func("adler32sum", 0, ANY, adler32sum),
    func("bcrypt", 1, 1, bcrypt),
    func("htpasswd", 2, 3, htpasswd),
    func("derivePassword", 5, 5, derive_password),
    func("encryptAES", 2, 2, encrypt_aes),
    func("decryptAES", 2, 2, decrypt_aes),
    func("randBytes", 1, 1, rand_bytes),
    func("uuidv4", 0, ANY, uuidv4),
];

/// Go's `bcrypt.DefaultCost`.
const BCRYPT_COST: u32 = 10;

fn digest(alg: &'static ring::digest::Algorithm, data: &str) -> String {
    hex(ring::digest::digest(alg, data.as_bytes()).as_ref())
}

fn sha1sum(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &a.str(0))))
}

fn sha256sum(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(digest(&ring::digest::SHA256, &a.str(0))))
}

fn sha512sum(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(digest(&ring::digest::SHA512, &a.str(0))))
}

fn adler32sum(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (mut x, mut y) = (1u32, 0u32);
    for b in a.str(0).bytes() {
        x = (x + u32::from(b)) % 65521;
        y = (y + x) % 65521;
    }
    Ok(Value::str(((y << 16) | x).to_string()))
}

/// A bcrypt hash in Go's `$2a$10$...` form, or Sprig's message when hashing fails.
fn bcrypt_hash(password: &str) -> String {
    match ::bcrypt::hash_with_result(password, BCRYPT_COST) {
        Ok(parts) => parts.format_for_version(::bcrypt::Version::TwoA),
        Err(e) => format!("failed to encrypt string with bcrypt: {e}"),
    }
}

fn bcrypt(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(bcrypt_hash(&a.str(0))))
}

/// `htpasswd USER PASSWORD [ALGORITHM]`: an htpasswd line, bcrypt unless the algorithm is
/// `sha` (Sprig 3.3, which Helm ships, takes two arguments; later Sprig takes the third).
fn htpasswd(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (user, password) = (a.str(0), a.str(1));
    if user.contains(':') {
        return Ok(Value::str(format!("invalid username: {user}")));
    }
    let hash = if a.str(2) == "sha" {
        let sum = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, password.as_bytes());
        format!("{{SHA}}{}", base64::engine::general_purpose::STANDARD.encode(sum))
    } else {
        bcrypt_hash(&password)
    };
    Ok(Value::str(format!("{user}:{hash}")))
}

/// The templates of each Master Password type; one is picked by the seed's first byte.
fn password_templates(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "maximum" => &["anoxxxxxxxxxxxxxxxxx", "axxxxxxxxxxxxxxxxxno"],
        "long" => &[
            "CvcvnoCvcvCvcv",
            "CvcvCvcvnoCvcv",
            "CvcvCvcvCvcvno",
            "CvccnoCvcvCvcv",
            "CvccCvcvnoCvcv",
            "CvccCvcvCvcvno",
            "CvcvnoCvccCvcv",
            "CvcvCvccnoCvcv",
            "CvcvCvccCvcvno",
            "CvcvnoCvcvCvcc",
            "CvcvCvcvnoCvcc",
            "CvcvCvcvCvccno",
            "CvccnoCvccCvcv",
            "CvccCvccnoCvcv",
            "CvccCvccCvcvno",
            "CvcvnoCvccCvcc",
            "CvcvCvccnoCvcc",
            "CvcvCvccCvccno",
            "CvccnoCvcvCvcc",
            "CvccCvcvnoCvcc",
            "CvccCvcvCvccno",
        ],
        "medium" => &["CvcnoCvc", "CvcCvcno"],
        "short" => &["Cvcn"],
        "basic" => &["aaanaaan", "aannaaan", "aaannaaa"],
        "pin" => &["nnnn"],
        _ => return None,
    })
}

/// The characters a template letter stands for.
fn template_characters(class: u8) -> &'static [u8] {
    match class {
        b'V' => b"AEIOU",
        b'C' => b"BCDFGHJKLMNPQRSTVWXYZ",
        b'v' => b"aeiou",
        b'c' => b"bcdfghjklmnpqrstvwxyz",
        b'A' => b"AEIOUBCDFGHJKLMNPQRSTVWXYZ",
        b'a' => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz",
        b'n' => b"0123456789",
        b'o' => b"@&%?,=[]_:-+*$#!'^~;()/.",
        _ => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz0123456789!@#$%^&*()",
    }
}

const MASTER_PASSWORD_SEED: &[u8] = b"com.lyndir.masterpassword";

/// The seed bytes followed by a length-prefixed (big-endian u32) `text`.
fn scoped(text: &str) -> Vec<u8> {
    let mut out = MASTER_PASSWORD_SEED.to_vec();
    out.extend_from_slice(&(text.len() as u32).to_be_bytes());
    out.extend_from_slice(text.as_bytes());
    out
}

/// `derivePassword COUNTER TYPE PASSWORD USER SITE`: the Master Password algorithm.
fn derive_password(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let counter = u32::try_from(a.int(0)).map_err(|_| format!("counter {} does not fit in uint32", a.int(0)))?;
    let kind = a.str(1);
    let Some(templates) = password_templates(&kind) else {
        return Ok(Value::str(format!("cannot find password template {kind}")));
    };
    let key = master_key(&a.str(2), &a.str(3))?;
    Ok(Value::str(site_password(&key, templates, &a.str(4), counter)))
}

/// The user's master key: scrypt (N=32768, r=8, p=2, 64 bytes) of the password, salted
/// with the user's scope.
fn master_key(password: &str, user: &str) -> Result<[u8; 64], FuncError> {
    let mut key = [0u8; 64];
    let params = scrypt::Params::new(15, 8, 2).map_err(|e| format!("failed to derive password: {e}"))?;
    scrypt::scrypt(password.as_bytes(), &scoped(user), &params, &mut key)
        .map_err(|e| format!("failed to derive password: {e}"))?;
    Ok(key)
}

/// The site's password: HMAC-SHA256 of the site's scope and counter picks a template and
/// then each character.
fn site_password(key: &[u8], templates: &[&str], site: &str, counter: u32) -> String {
    let mut message = scoped(site);
    message.extend_from_slice(&counter.to_be_bytes());
    let seed = ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key), &message);
    let seed = seed.as_ref();
    let template = templates[usize::from(seed[0]) % templates.len()];
    template
        .bytes()
        .enumerate()
        .map(|(i, class)| {
            let chars = template_characters(class);
            chars[usize::from(seed[i + 1]) % chars.len()] as char
        })
        .collect()
}

/// Sprig's AES key: the password's bytes in 32 zero bytes (cut at 32).
fn aes_key(password: &str) -> [u8; 32] {
    let mut key = [0u8; 32];
    let bytes = password.as_bytes();
    let n = bytes.len().min(32);
    key[..n].copy_from_slice(&bytes[..n]);
    key
}

type Aes256CbcEnc = cbc::Encryptor<aes::Aes256>;
type Aes256CbcDec = cbc::Decryptor<aes::Aes256>;

/// `encryptAES PASSWORD TEXT`: base64 of a random IV and the AES-256-CBC, PKCS#7-padded
/// ciphertext.
fn encrypt_aes(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let plaintext = a.str(1);
    if plaintext.is_empty() {
        return Ok(Value::str(""));
    }
    let mut iv = [0u8; 16];
    random_fill(&mut iv)?;
    let cipher = Aes256CbcEnc::new(&aes_key(&a.str(0)).into(), &iv.into());
    let mut out = iv.to_vec();
    out.extend(cipher.encrypt_padded_vec_mut::<Pkcs7>(plaintext.as_bytes()));
    Ok(Value::str(base64::engine::general_purpose::STANDARD.encode(out)))
}

/// `decryptAES PASSWORD BASE64`: the inverse of `encryptAES`. As in Sprig, the padding is
/// cut by its last byte without further checks.
fn decrypt_aes(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let text = a.str(1);
    if text.is_empty() {
        return Ok(Value::str(""));
    }
    let crypt = base64::engine::general_purpose::STANDARD.decode(&text).map_err(|e| e.to_string())?;
    if crypt.len() < 32 || crypt.len() % 16 != 0 {
        return Err("crypto/cipher: input not full blocks".into());
    }
    let (iv, body) = crypt.split_at(16);
    let iv: [u8; 16] = iv.try_into().map_err(|_| "crypto/cipher: input not full blocks")?;
    let cipher = Aes256CbcDec::new(&aes_key(&a.str(0)).into(), &iv.into());
    let plain = cipher.decrypt_padded_vec_mut::<NoPadding>(body).map_err(|e| e.to_string())?;
    let pad = usize::from(plain[plain.len() - 1]);
    let kept = plain.len().checked_sub(pad).ok_or_else(|| {
        FuncError::Message(format!("runtime error: slice bounds out of range [:{}]", plain.len() as i64 - pad as i64))
    })?;
    Ok(Value::str(String::from_utf8_lossy(&plain[..kept]).into_owned()))
}

/// Fills `buf` from the system's secure random source.
pub(super) fn random_fill(buf: &mut [u8]) -> Result<(), FuncError> {
    ring::rand::SystemRandom::new().fill(buf).map_err(|_| "the system random source failed".into())
}

fn rand_bytes(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let count = usize::try_from(a.int(0)).map_err(|_| "runtime error: makeslice: len out of range")?;
    let mut buf = vec![0u8; count];
    random_fill(&mut buf)?;
    Ok(Value::str(base64::engine::general_purpose::STANDARD.encode(buf)))
}

fn uuidv4(_: &mut Exec<'_>, _: Args<'_>) -> FuncResult {
    let h = pseudo_random(32, b"0123456789abcdef");
    Ok(Value::str(format!("{}-{}-4{}-a{}-{}", &h[..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])))
}

#[cfg(test)]
mod tests {
    use crate::funcs::tests::{render, run};
    use crate::value::Value;

    fn text(name: &str, args: Vec<Value>) -> String {
        match run(name, args) {
            Ok(Value::Str(s)) => s.to_string(),
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn hashes_match_sprigs_vectors() {
        let abc = || vec![Value::str("abc")];
        assert_eq!(text("sha1sum", abc()), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(text("sha256sum", abc()), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(
            text("sha512sum", abc()),
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
        );
        assert_eq!(text("adler32sum", abc()), "38600999");
    }

    #[test]
    fn derive_password_matches_sprigs_vectors() {
        let args = vec![
            Value::int(1),
            Value::str("long"),
            Value::str("password"),
            Value::str("user"),
            Value::str("example.com"),
        ];
        assert_eq!(text("derivePassword", args), "ZedaFaxcZaso9*");
        // The other vectors of Sprig's crypto_test.go, from one master key (scrypt is slow
        // in a debug build).
        let key = super::master_key("password", "user").expect("a key");
        for (counter, kind, want) in [
            (2, "long", "Fovi2@JifpTupx"),
            (1, "maximum", "pf4zS1LjCg&LjhsZ7T2~"),
            (1, "medium", "ZedJuz8$"),
            (1, "basic", "pIS54PLs"),
            (1, "short", "Zed5"),
            (1, "pin", "6685"),
        ] {
            let templates = super::password_templates(kind).expect("a template");
            assert_eq!(super::site_password(&key, templates, "example.com", counter), want, "{counter} {kind}");
        }
        let args = vec![Value::int(1), Value::str("nosuch"), Value::str("p"), Value::str("u"), Value::str("s")];
        assert_eq!(text("derivePassword", args), "cannot find password template nosuch");
    }

    #[test]
    fn aes_round_trips_and_reads_what_sprig_writes() {
        let out = render(r#"{{ "plaintext" | encryptAES "secretkey" | decryptAES "secretkey" }}"#).expect("renders");
        assert_eq!(out, "plaintext");
        // Sprig's output for IV 00..0f: base64(IV || AES-256-CBC("secretkey" zero-padded to 32 bytes)).
        let sprig = "AAECAwQFBgcICQoLDA0OD4aChIkqfhLglmmHSXlA6r0=";
        assert_eq!(text("decryptAES", vec![Value::str("secretkey"), Value::str(sprig)]), "plaintext");
        let wrong_key = run("decryptAES", vec![Value::str("otherkey"), Value::str(sprig)]);
        assert!(!matches!(wrong_key, Ok(Value::Str(s)) if &*s == "plaintext"), "another key does not decrypt it");
        let a = text("encryptAES", vec![Value::str("k"), Value::str("same")]);
        let b = text("encryptAES", vec![Value::str("k"), Value::str("same")]);
        assert_ne!(a, b, "a random IV each time");
        assert_eq!(a.len(), 44, "16 bytes of IV and one block, in base64");
        assert_eq!(text("encryptAES", vec![Value::str("k"), Value::str("")]), "");
        assert_eq!(text("decryptAES", vec![Value::str("k"), Value::str("")]), "");
        assert!(run("decryptAES", vec![Value::str("k"), Value::str("AAEC")]).is_err(), "shorter than a block");
        assert!(run("decryptAES", vec![Value::str("k"), Value::str("%%%")]).is_err(), "not base64");
    }

    #[test]
    fn bcrypt_and_htpasswd_verify() {
        let hash = text("bcrypt", vec![Value::str("abc")]);
        assert!(hash.starts_with("$2a$10$"), "{hash}");
        assert!(::bcrypt::verify("abc", &hash).expect("a bcrypt hash"));
        assert!(!::bcrypt::verify("abd", &hash).expect("a bcrypt hash"));
        let line = text("htpasswd", vec![Value::str("myUser"), Value::str("myPassword")]);
        let (user, hash) = line.split_once(':').expect("user:hash");
        assert_eq!(user, "myUser");
        assert!(::bcrypt::verify("myPassword", hash).expect("a bcrypt hash"));
        let sha = text("htpasswd", vec![Value::str("mySahUser"), Value::str("myShaPassword"), Value::str("sha")]);
        assert_eq!(sha, "mySahUser:{SHA}2C1bZDUdiuMgec/S9ra/kXN8r6E=");
        assert_eq!(text("htpasswd", vec![Value::str("a:b"), Value::str("p")]), "invalid username: a:b");
    }

    #[test]
    fn random_bytes_and_ints() {
        use base64::Engine as _;
        let b = text("randBytes", vec![Value::int(12)]);
        assert_eq!(base64::engine::general_purpose::STANDARD.decode(b).expect("base64").len(), 12);
        for _ in 0..20 {
            let Ok(Value::Int(i, _)) = run("randInt", vec![Value::int(3), Value::int(6)]) else { panic!("randInt") };
            assert!((3..6).contains(&i), "{i}");
        }
        assert!(run("randInt", vec![Value::int(3), Value::int(3)]).is_err());
        assert!(run("randBytes", vec![Value::int(-1)]).is_err());
    }
}
