//! Authentication: who a request comes from. A client certificate the server's CA
//! signed (see [`x509`]), the admin bearer token, ServiceAccount tokens (JWTs the server
//! signed, see [`tokens`]) and anonymous requests each give a [`UserInfo`]; what that
//! user may do is the authorizer's question (`crate::authz`).

pub(crate) mod tokens;
pub(crate) mod user;
pub(crate) mod x509;

use std::collections::BTreeMap;

use crate::registry::Registry;
use crate::storage::ResourceId;
use tokens::{Claims, ISSUER, TokenError, TokenSigner};

pub(crate) use user::{
    ADMIN, ANONYMOUS, AUTHENTICATED, MASTERS, UNAUTHENTICATED, UserInfo, service_account_groups, service_account_of,
    service_account_user,
};

/// Why a request could not be authenticated (answered as 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AuthnError {
    /// Not a credential the server knows.
    #[error("invalid bearer token")]
    UnknownToken,
    /// A ServiceAccount token that does not (or no longer) verify.
    #[error(transparent)]
    Token(#[from] TokenError),
}

/// What a request presents to prove who it is.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Credentials<'a> {
    /// The `Authorization` header's value.
    pub authorization: Option<&'a str>,
    /// The DER client certificate from the TLS handshake, already verified against the
    /// server's CA.
    pub client_certificate: Option<&'a [u8]>,
}

/// How many verified tokens an [`Authenticator`] remembers (emptied when full).
const VERIFIED_CACHE: usize = 4096;

/// A ServiceAccount token whose signature verified, with the user it stands for.
struct VerifiedToken {
    claims: Claims,
    user: UserInfo,
    /// The last writes of ServiceAccounts, Pods and Secrets when the token's objects
    /// were last found alive: until one of those resources is written again, they still
    /// are.
    alive_at: parking_lot::RwLock<Option<Generation>>,
}

type Generation = [crate::storage::Revision; 3];

/// The audiences of a request's own bearer token (the server's issuer), made once.
fn default_audiences() -> &'static [String] {
    static AUDIENCES: std::sync::LazyLock<[String; 1]> = std::sync::LazyLock::new(|| [ISSUER.to_string()]);
    &*AUDIENCES
}

/// The resources a token's liveness depends on, made once.
fn liveness_resources() -> &'static [ResourceId; 3] {
    static RESOURCES: std::sync::LazyLock<[ResourceId; 3]> =
        std::sync::LazyLock::new(|| ["serviceaccounts", "pods", "secrets"].map(|r| ResourceId::new("", r)));
    &RESOURCES
}

/// Authenticates requests as kube-apiserver's union of authenticators does: a client
/// certificate, then the admin token, then ServiceAccount tokens; no credential is the
/// anonymous user.
pub(crate) struct Authenticator {
    admin_token: String,
    signer: TokenSigner,
    /// Tokens already verified: an ECDSA check costs more than the rest of a request, so
    /// it is done once per token (kube-apiserver caches token authentication for 10 s).
    /// Lifetime and audiences are checked on every use, and liveness whenever
    /// ServiceAccounts, Pods or Secrets were written since, so revocation is immediate.
    /// Read-locked on the hot path: requests with known tokens never wait on each other.
    verified: parking_lot::RwLock<std::collections::HashMap<String, std::sync::Arc<VerifiedToken>>>,
}

impl Authenticator {
    /// An authenticator for `admin_token` and the tokens `signer` issues.
    pub(crate) fn new(admin_token: &str, signer: TokenSigner) -> Authenticator {
        Authenticator { admin_token: admin_token.to_string(), signer, verified: Default::default() }
    }

    /// The ServiceAccount token signer.
    pub(crate) fn signer(&self) -> &TokenSigner {
        &self.signer
    }

    /// The user of a request's credentials: the client certificate's when it names a
    /// user, else the bearer token's; anonymous without either, an error for a bearer
    /// credential that is not valid.
    pub(crate) async fn authenticate(
        &self,
        registry: &Registry,
        credentials: Credentials<'_>,
    ) -> Result<UserInfo, AuthnError> {
        if let Some(user) = credentials.client_certificate.and_then(x509::user_of_certificate) {
            return Ok(user);
        }
        let Some(value) = credentials.authorization else {
            return Ok(UserInfo::anonymous());
        };
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .map(str::trim)
            .ok_or(AuthnError::UnknownToken)?;
        self.review_token(registry, token, default_audiences()).await
    }

    /// The user of a bearer token for `audiences` (a TokenReview's question).
    pub(crate) async fn review_token(
        &self,
        registry: &Registry,
        token: &str,
        audiences: &[String],
    ) -> Result<UserInfo, AuthnError> {
        if token == self.admin_token {
            return Ok(UserInfo::admin());
        }
        if TokenSigner::is_jwt(token) {
            return Ok(self.review(registry, token, audiences).await?);
        }
        Err(AuthnError::UnknownToken)
    }

    /// Verifies a ServiceAccount token for `audiences` (a TokenReview's question): its
    /// signature and lifetime, and that its ServiceAccount and bound object still exist.
    pub(crate) async fn review(
        &self,
        registry: &Registry,
        token: &str,
        audiences: &[String],
    ) -> Result<UserInfo, TokenError> {
        let verified = self.verified_token(token)?;
        tokens::check_claims(&verified.claims, audiences, crate::registry::now_unix())?;
        let generation = registry.store().last_writes(liveness_resources());
        if *verified.alive_at.read() != Some(generation) {
            check_not_revoked(registry, &verified.claims).await?;
            *verified.alive_at.write() = Some(generation);
        }
        Ok(verified.user.clone())
    }

    /// The token's claims and user, verifying its signature the first time it is seen.
    fn verified_token(&self, token: &str) -> Result<std::sync::Arc<VerifiedToken>, TokenError> {
        if let Some(v) = self.verified.read().get(token) {
            return Ok(v.clone());
        }
        let claims = self.signer.verify_signature(token)?;
        let user = user_of(&claims);
        let verified = std::sync::Arc::new(VerifiedToken { claims, user, alive_at: Default::default() });
        let mut cache = self.verified.write();
        if cache.len() >= VERIFIED_CACHE {
            cache.clear();
        }
        cache.insert(token.to_string(), verified.clone());
        Ok(verified)
    }
}

/// Checks that the token's ServiceAccount, and the pod or secret it is bound to, exist
/// with the uids it names.
async fn check_not_revoked(registry: &Registry, claims: &Claims) -> Result<(), TokenError> {
    let k = &claims.kubernetes;
    let mut checks = vec![("serviceaccounts", &k.serviceaccount)];
    checks.extend(k.pod.as_ref().map(|p| ("pods", p)));
    checks.extend(k.secret.as_ref().map(|s| ("secrets", s)));
    for (resource, object) in checks {
        let uid = registry
            .stored_uid(&ResourceId::new("", resource), &k.namespace, &object.name)
            .await
            .map_err(|e| TokenError::Revoked(e.message))?;
        if uid.as_deref() != Some(object.uid.as_str()) {
            let what = &resource[..resource.len() - 1];
            return Err(TokenError::Revoked(format!("{what} {}/{} has been deleted", k.namespace, object.name)));
        }
    }
    Ok(())
}

/// The user a verified token stands for.
fn user_of(claims: &Claims) -> UserInfo {
    let k = &claims.kubernetes;
    let mut groups = service_account_groups(&k.namespace).to_vec();
    groups.push(AUTHENTICATED.into());
    let mut extra = BTreeMap::new();
    extra.insert("authentication.kubernetes.io/credential-id".to_string(), vec![format!("JTI={}", claims.jti)]);
    if let Some(pod) = &k.pod {
        extra.insert("authentication.kubernetes.io/pod-name".to_string(), vec![pod.name.clone()]);
        extra.insert("authentication.kubernetes.io/pod-uid".to_string(), vec![pod.uid.clone()]);
    }
    UserInfo { name: claims.sub.clone(), uid: k.serviceaccount.uid.clone(), groups, extra }
}

/// A random token, 32 URL-safe characters.
pub(crate) fn random_token() -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut rng = rand::rng();
    (0..32).map(|_| CHARS[rng.random_range(0..CHARS.len())] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_names() {
        assert_eq!(service_account_of("system:serviceaccount:t:op"), Some(("t", "op")));
        assert_eq!(service_account_of("system:serviceaccount:t"), None);
        assert_eq!(service_account_of("system:serviceaccount:t:a:b"), None);
        assert_eq!(service_account_of("alice"), None);
        assert_eq!(service_account_user("t", "op"), "system:serviceaccount:t:op");
        assert_eq!(random_token().len(), 32);
    }
}
