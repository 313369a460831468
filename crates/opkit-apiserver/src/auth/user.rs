//! Who a request comes from ([`UserInfo`]) and kube's well-known user and group names.
//! A leaf: it imports nothing of the crate, so every layer (handlers, registry,
//! admission, authorization) can name a user without importing authentication.

use std::collections::BTreeMap;

use serde_json::Value;

/// The cluster administrator's user name (kubeadm's and kind's).
pub(crate) const ADMIN: &str = "kubernetes-admin";
/// The group every authenticated user is in.
pub(crate) const AUTHENTICATED: &str = "system:authenticated";
/// The group of anonymous requests.
pub(crate) const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user name of anonymous requests.
pub(crate) const ANONYMOUS: &str = "system:anonymous";
/// The group whose members are allowed everything (kube's privileged group).
pub(crate) const MASTERS: &str = "system:masters";
/// The group of every ServiceAccount.
pub(crate) const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
/// The user name prefix of ServiceAccounts.
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// Who a request comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// User name, e.g. `kubernetes-admin` or `system:serviceaccount:ns:name`.
    pub name: String,
    /// The user's uid (a ServiceAccount's uid), if known.
    pub uid: String,
    /// Groups, e.g. `system:masters`.
    pub groups: Vec<String>,
    /// Extra attributes, e.g. the credential id of a token.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The cluster administrator: `kubernetes-admin` in `system:masters`, as kind's admin.
    pub fn admin() -> UserInfo {
        UserInfo { name: ADMIN.into(), groups: vec![MASTERS.into(), AUTHENTICATED.into()], ..Default::default() }
    }

    /// The API server itself (kube's loopback user `system:apiserver`), for the objects
    /// it creates at start-up.
    pub fn apiserver() -> UserInfo {
        UserInfo {
            name: "system:apiserver".into(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
            ..Default::default()
        }
    }

    /// An anonymous request's user.
    pub fn anonymous() -> UserInfo {
        UserInfo { name: ANONYMOUS.into(), groups: vec![UNAUTHENTICATED.into()], ..Default::default() }
    }

    /// Whether this is an anonymous request.
    pub fn is_anonymous(&self) -> bool {
        self.name == ANONYMOUS
    }

    /// Whether the user is in `system:masters`.
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }

    /// The namespace and name of the ServiceAccount this user is, if it is one.
    pub fn service_account(&self) -> Option<(&str, &str)> {
        service_account_of(&self.name)
    }

    /// The user's `extra` as JSON (review APIs answer with it).
    pub fn extra_json(&self) -> Value {
        serde_json::to_value(&self.extra).unwrap_or_default()
    }

    /// The user as kube's `authentication/v1` UserInfo JSON (review APIs and audit
    /// events): `username` and `groups`, with `uid` and `extra` when set.
    pub fn to_json(&self) -> Value {
        let mut info = serde_json::json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            info["uid"] = serde_json::json!(self.uid);
        }
        if !self.extra.is_empty() {
            info["extra"] = self.extra_json();
        }
        info
    }
}

/// The namespace and name of a ServiceAccount user name (`system:serviceaccount:NS:NAME`).
pub(crate) fn service_account_of(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// The user name of ServiceAccount `name` in `namespace`.
pub(crate) fn service_account_user(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}")
}

/// The groups every ServiceAccount of `namespace` is in (without `system:authenticated`).
pub(crate) fn service_account_groups(namespace: &str) -> [String; 2] {
    [SERVICE_ACCOUNTS.to_string(), format!("{SERVICE_ACCOUNTS}:{namespace}")]
}
