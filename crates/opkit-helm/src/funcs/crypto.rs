//! Sprig's hashes and crypto (`crypto.go`): `sha1sum`, `sha256sum`, `adler32sum` and
//! `uuidv4`. Its keys, certificates, passwords and AES are not implemented yet: a template
//! that calls one fails with an error naming it.

use super::strings::pseudo_random;
use super::{ANY, Args, Func, FuncResult, func, hex, unsupported};
use crate::template::Exec;
use crate::value::Value;

/// Sprig's crypto functions.
pub(super) const FUNCS: &[Func] = &[
    func("sha1sum", 0, ANY, sha1sum),
    func("sha256sum", 0, ANY, sha256sum),
    func("adler32sum", 0, ANY, adler32sum),
    func("uuidv4", 0, ANY, uuidv4),
    func("genCA", 0, ANY, unsupported),
    func("genCAWithKey", 0, ANY, unsupported),
    func("genSelfSignedCert", 0, ANY, unsupported),
    func("genSelfSignedCertWithKey", 0, ANY, unsupported),
    func("genSignedCert", 0, ANY, unsupported),
    func("genSignedCertWithKey", 0, ANY, unsupported),
    func("genPrivateKey", 0, ANY, unsupported),
    func("derivePassword", 0, ANY, unsupported),
    func("buildCustomCert", 0, ANY, unsupported),
    func("encryptAES", 0, ANY, unsupported),
    func("decryptAES", 0, ANY, unsupported),
    func("htpasswd", 0, ANY, unsupported),
    func("randBytes", 0, ANY, unsupported),
    func("bcrypt", 0, ANY, unsupported),
];

fn digest(alg: &'static ring::digest::Algorithm, data: &str) -> String {
    hex(ring::digest::digest(alg, data.as_bytes()).as_ref())
}

fn sha1sum(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &a.str(0))))
}

fn sha256sum(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(digest(&ring::digest::SHA256, &a.str(0))))
}

fn adler32sum(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (mut x, mut y) = (1u32, 0u32);
    for b in a.str(0).bytes() {
        x = (x + u32::from(b)) % 65521;
        y = (y + x) % 65521;
    }
    Ok(Value::str(((y << 16) | x).to_string()))
}

fn uuidv4(_: &mut Exec<'_>, _: Args<'_>) -> FuncResult {
    let h = pseudo_random(32, b"0123456789abcdef");
    Ok(Value::str(format!("{}-{}-4{}-a{}-{}", &h[..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])))
}
