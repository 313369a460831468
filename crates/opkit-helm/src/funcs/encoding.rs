//! Sprig's encodings (`strings.go`'s `base64encode`, ...): `b64enc`/`b64dec` and
//! `b32enc`/`b32dec` (standard alphabets, padded). A value that does not decode gives the
//! decoder's message as the result, as Sprig does.

use base64::Engine as _;

use super::{ANY, Args, Func, FuncResult, func};
use crate::template::Exec;
use crate::value::Value;

/// Sprig's encoding functions.
pub(super) const FUNCS: &[Func] = &[
    func("b64enc", 0, ANY, b64enc),
    func("b64dec", 0, ANY, b64dec),
    func("b32enc", 0, ANY, b32enc),
    func("b32dec", 0, ANY, b32dec),
];

fn b64enc(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(base64::engine::general_purpose::STANDARD.encode(a.str(0))))
}

fn b64dec(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(match base64::engine::general_purpose::STANDARD.decode(a.str(0)) {
        Ok(b) => Value::str(String::from_utf8_lossy(&b).into_owned()),
        Err(e) => Value::str(e.to_string()),
    })
}

fn b32enc(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(base32_encode(a.str(0).as_bytes())))
}

fn b32dec(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(match base32_decode(&a.str(0)) {
        Some(b) => Value::str(String::from_utf8_lossy(&b).into_owned()),
        None => Value::str("illegal base32 data"),
    })
}

const BASE32: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// Base32 (RFC 4648, padded), as Go's `base32.StdEncoding`.
fn base32_encode(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let bits = buf.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        let chars = (chunk.len() * 8).div_ceil(5);
        for i in 0..8 {
            if i < chars {
                out.push(BASE32[((bits >> (35 - i * 5)) & 31) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Base32 decoding; `None` on bad input.
fn base32_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (mut acc, mut nbits) = (0u64, 0u32);
    for c in text.trim_end_matches('=').bytes() {
        let v = BASE32.iter().position(|b| *b == c)? as u64;
        acc = (acc << 5) | v;
        nbits += 5;
        if nbits >= 8 {
            nbits -= 8;
            out.push((acc >> nbits) as u8);
            acc &= (1 << nbits) - 1;
        }
    }
    Some(out)
}
