//! Authentication: bearer tokens mapped to users. Every request carries a [`UserInfo`],
//! so that authorization (RBAC) can be added in front of the registry later.

use std::collections::HashMap;

/// Who a request comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// User name, e.g. `admin`.
    pub name: String,
    /// Groups, e.g. `system:masters`.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The cluster administrator: user `admin` in `system:masters`.
    pub fn admin() -> UserInfo {
        UserInfo { name: "admin".into(), groups: vec!["system:masters".into(), "system:authenticated".into()] }
    }
}

/// Maps bearer tokens to users.
#[derive(Debug, Clone, Default)]
pub struct TokenAuthenticator {
    tokens: HashMap<String, UserInfo>,
}

impl TokenAuthenticator {
    /// An authenticator that knows one admin token.
    pub fn with_admin(token: &str) -> Self {
        let mut tokens = HashMap::new();
        tokens.insert(token.to_string(), UserInfo::admin());
        TokenAuthenticator { tokens }
    }

    /// The user of an `Authorization` header value, if it holds a known bearer token.
    pub fn authenticate(&self, authorization: Option<&str>) -> Option<UserInfo> {
        let value = authorization?;
        let token = value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer "))?.trim();
        self.tokens.get(token).cloned()
    }
}

/// A random token, 32 URL-safe characters.
pub fn random_token() -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut rng = rand::rng();
    (0..32).map(|_| CHARS[rng.random_range(0..CHARS.len())] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens() {
        let a = TokenAuthenticator::with_admin("secret");
        assert_eq!(a.authenticate(Some("Bearer secret")), Some(UserInfo::admin()));
        assert_eq!(a.authenticate(Some("Bearer nope")), None);
        assert_eq!(a.authenticate(Some("Basic secret")), None);
        assert_eq!(a.authenticate(None), None);
        assert_eq!(random_token().len(), 32);
    }
}
