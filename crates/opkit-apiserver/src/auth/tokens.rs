//! ServiceAccount tokens: JWTs with kube's claims, signed with the server's ES256 key
//! (kept in the data directory as `sa.key`), verified on every request that carries one,
//! and the JSON Web Key Set that `/openid/v1/jwks` serves.
//!
//! Written by hand over ring: the `jsonwebtoken` crate (11.x) offers only the aws-lc-rs
//! or RustCrypto backends, while ring already ships in the server through rustls; a
//! compact ES256 JWS is three base64url parts and one ECDSA signature.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use opkit_serve::files::{FileAccess, write_atomic};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The issuer (and default audience) of the tokens, as kind's clusters use.
pub(crate) const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// Errors with the signing key.
#[derive(Debug, thiserror::Error)]
pub enum TokenKeyError {
    /// The key could not be generated or parsed.
    #[error("service account signing key: {0}")]
    Key(String),
    /// Reading or writing the key file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// Why a token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TokenError {
    /// Not a JWT this server signed.
    #[error("invalid bearer token")]
    Malformed,
    /// The signature does not verify.
    #[error("invalid bearer token, signature is invalid")]
    Signature,
    /// Another issuer.
    #[error("invalid bearer token, token issuer is not trusted")]
    Issuer,
    /// Expired, or not yet valid.
    #[error("invalid bearer token, token has expired")]
    Expired,
    /// None of the token's audiences is accepted.
    #[error("invalid bearer token, token audiences {0:?} is invalid for the target audiences {1:?}")]
    Audience(Vec<String>, Vec<String>),
    /// The ServiceAccount or the object the token is bound to is gone.
    #[error("invalid bearer token, {0}")]
    Revoked(String),
}

/// A name and uid, as the `kubernetes.io` claims name an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ObjectRef {
    /// The object's name.
    pub name: String,
    /// The object's uid.
    pub uid: String,
}

/// The `kubernetes.io` private claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KubernetesClaims {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The ServiceAccount.
    pub serviceaccount: ObjectRef,
    /// The pod the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    /// The secret the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectRef>,
}

/// The claims of a ServiceAccount token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Claims {
    /// Audiences.
    pub aud: Vec<String>,
    /// Expiry, seconds since the epoch.
    pub exp: i64,
    /// Issued at.
    pub iat: i64,
    /// Issuer.
    pub iss: String,
    /// The token's id (the credential id in the user's extra).
    pub jti: String,
    /// Not before.
    pub nbf: i64,
    /// `system:serviceaccount:NS:NAME`.
    pub sub: String,
    /// The bound objects.
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
}

/// The server's token signer and verifier.
pub(crate) struct TokenSigner {
    key: EcdsaKeyPair,
    kid: String,
    rng: SystemRandom,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSigner").field("kid", &self.kid).finish_non_exhaustive()
    }
}

impl TokenSigner {
    /// A signer with a new key (kept in memory only).
    pub(crate) fn generate() -> Result<TokenSigner, TokenKeyError> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|e| TokenKeyError::Key(e.to_string()))?;
        TokenSigner::from_pkcs8(pkcs8.as_ref())
    }

    /// Loads `sa.key` (PKCS#8 DER) from `dir`, generating and saving it (0600) first if
    /// it is missing, so tokens stay valid across restarts.
    pub(crate) fn load_or_generate(dir: &Path) -> Result<TokenSigner, TokenKeyError> {
        let path = dir.join("sa.key");
        match std::fs::read(&path) {
            Ok(der) => TokenSigner::from_pkcs8(&der),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let rng = SystemRandom::new();
                let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
                    .map_err(|e| TokenKeyError::Key(e.to_string()))?;
                write_atomic(&path, pkcs8.as_ref(), FileAccess::Private)
                    .map_err(|e| TokenKeyError::Io { path: e.path.display().to_string(), source: e.source })?;
                TokenSigner::from_pkcs8(pkcs8.as_ref())
            }
            Err(source) => Err(TokenKeyError::Io { path: path.display().to_string(), source }),
        }
    }

    fn from_pkcs8(der: &[u8]) -> Result<TokenSigner, TokenKeyError> {
        let rng = SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
            .map_err(|e| TokenKeyError::Key(e.to_string()))?;
        let digest = ring::digest::digest(&ring::digest::SHA256, key.public_key().as_ref());
        let kid = URL_SAFE_NO_PAD.encode(digest.as_ref());
        Ok(TokenSigner { key, kid, rng })
    }

    /// Signs `claims` as a compact JWS.
    pub(crate) fn sign(&self, claims: &Claims) -> Result<String, TokenKeyError> {
        let header = json!({"alg": "ES256", "kid": self.kid});
        let body = serde_json::to_vec(claims).map_err(|e| TokenKeyError::Key(e.to_string()))?;
        let signing_input = format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(body));
        let sig = self.key.sign(&self.rng, signing_input.as_bytes()).map_err(|e| TokenKeyError::Key(e.to_string()))?;
        Ok(format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref())))
    }

    /// Whether `token` looks like a JWT (three dot-separated parts), so that other bearer
    /// tokens are not reported as bad JWTs.
    pub(crate) fn is_jwt(token: &str) -> bool {
        token.split('.').count() == 3
    }

    /// The claims of `token` if its signature is this signer's and its issuer the
    /// server's (its lifetime and audiences are not checked here).
    pub(crate) fn verify_signature(&self, token: &str) -> Result<Claims, TokenError> {
        let mut parts = token.split('.');
        let (Some(header), Some(body), Some(sig), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let header: Value = decode_part(header)?;
        if header["alg"] != "ES256" {
            return Err(TokenError::Malformed);
        }
        let sig = URL_SAFE_NO_PAD.decode(sig).map_err(|_| TokenError::Malformed)?;
        let signed = &token[..token.len() - token.rsplit('.').next().map_or(0, str::len) - 1];
        signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, self.key.public_key().as_ref())
            .verify(signed.as_bytes(), &sig)
            .map_err(|_| TokenError::Signature)?;
        let claims: Claims = decode_part(body)?;
        if claims.iss != ISSUER {
            return Err(TokenError::Issuer);
        }
        Ok(claims)
    }

    /// The JSON Web Key Set of the public key (`/openid/v1/jwks`).
    pub(crate) fn jwks(&self) -> Value {
        // An uncompressed P-256 point: 0x04, then x and y (32 bytes each).
        let point = self.key.public_key().as_ref();
        let (x, y) = point.get(1..).map_or((&[][..], &[][..]), |p| p.split_at(p.len() / 2));
        json!({"keys": [{
            "use": "sig", "kty": "EC", "crv": "P-256", "alg": "ES256", "kid": self.kid,
            "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y),
        }]})
    }
}

/// Checks that verified `claims` are valid at `now` (seconds since the epoch) and name
/// one of `audiences`.
pub(crate) fn check_claims(claims: &Claims, audiences: &[String], now: i64) -> Result<(), TokenError> {
    if now >= claims.exp || now < claims.nbf {
        return Err(TokenError::Expired);
    }
    if !claims.aud.iter().any(|a| audiences.contains(a)) {
        return Err(TokenError::Audience(claims.aud.clone(), audiences.to_vec()));
    }
    Ok(())
}

fn decode_part<T: serde::de::DeserializeOwned>(part: &str) -> Result<T, TokenError> {
    let bytes = URL_SAFE_NO_PAD.decode(part).map_err(|_| TokenError::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| TokenError::Malformed)
}

/// The OpenID discovery document (`/.well-known/openid-configuration`), whose `jwks_uri`
/// is on the server at `base_url`.
pub(crate) fn openid_configuration(base_url: &str) -> Value {
    json!({
        "issuer": ISSUER,
        "jwks_uri": format!("{base_url}/openid/v1/jwks"),
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The signature, issuer, validity window and audiences of `token` at `now`.
    fn verify(signer: &TokenSigner, token: &str, audiences: &[String], now: i64) -> Result<Claims, TokenError> {
        let claims = signer.verify_signature(token)?;
        check_claims(&claims, audiences, now)?;
        Ok(claims)
    }

    fn claims(exp: i64) -> Claims {
        Claims {
            aud: vec![ISSUER.into()],
            exp,
            iat: 0,
            iss: ISSUER.into(),
            jti: "j".into(),
            nbf: 0,
            sub: "system:serviceaccount:ns:op".into(),
            kubernetes: KubernetesClaims {
                namespace: "ns".into(),
                serviceaccount: ObjectRef { name: "op".into(), uid: "u".into() },
                pod: None,
                secret: None,
            },
        }
    }

    #[test]
    fn signed_tokens_verify_until_they_expire() {
        let signer = TokenSigner::generate().expect("key");
        let token = signer.sign(&claims(100)).expect("sign");
        let aud = [ISSUER.to_string()];
        assert_eq!(verify(&signer, &token, &aud, 50), Ok(claims(100)));
        assert_eq!(verify(&signer, &token, &aud, 100), Err(TokenError::Expired));
        assert!(matches!(verify(&signer, &token, &["other".into()], 50), Err(TokenError::Audience(..))));
    }

    #[test]
    fn tampered_and_foreign_tokens_fail() {
        let signer = TokenSigner::generate().expect("key");
        let other = TokenSigner::generate().expect("key");
        let aud = [ISSUER.to_string()];
        let token = other.sign(&claims(100)).expect("sign");
        assert_eq!(verify(&signer, &token, &aud, 50), Err(TokenError::Signature));
        let mut forged = claims(100);
        forged.sub = "system:serviceaccount:kube-system:admin".into();
        let mine = signer.sign(&claims(100)).expect("sign");
        let parts: Vec<&str> = mine.split('.').collect();
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).expect("json"));
        let tampered = format!("{}.{body}.{}", parts[0], parts[2]);
        assert_eq!(verify(&signer, &tampered, &aud, 50), Err(TokenError::Signature));
        assert_eq!(verify(&signer, "a.b", &aud, 50), Err(TokenError::Malformed));
        assert_eq!(verify(&signer, "a.b.c", &aud, 50), Err(TokenError::Malformed));
    }

    #[test]
    fn the_key_survives_a_restart_and_the_jwks_names_it() {
        let dir = tempfile::tempdir().expect("dir");
        let a = TokenSigner::load_or_generate(dir.path()).expect("generate");
        let b = TokenSigner::load_or_generate(dir.path()).expect("load");
        let token = a.sign(&claims(100)).expect("sign");
        assert!(verify(&b, &token, &[ISSUER.into()], 1).is_ok());
        let jwks = b.jwks();
        assert_eq!(jwks["keys"][0]["kid"], a.kid.as_str());
        assert_eq!(URL_SAFE_NO_PAD.decode(jwks["keys"][0]["x"].as_str().expect("x")).expect("b64").len(), 32);
    }
}
