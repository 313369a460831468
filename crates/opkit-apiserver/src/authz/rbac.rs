//! The RBAC authorizer: an index of Roles, ClusterRoles and their bindings by subject,
//! rebuilt only when one of the four resources is written (so a request costs a few map
//! lookups, not a scan of every binding), and kube's rule resolution over it.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use parking_lot::RwLock;
use serde::de::DeserializeOwned;

use super::{Action, Decision, Object, rules};
use crate::auth::user::UserInfo;
use crate::storage::{ResourceId, Revision, Store};

const GROUP: &str = "rbac.authorization.k8s.io";

/// Who a binding names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum SubjectKey {
    User(String),
    Group(String),
    ServiceAccount(String, String),
}

/// A binding of one subject to a role, with kube's description of it for reasons.
struct Grant {
    /// The reason of a decision this grant allows: `RBAC: allowed by ` and kube's
    /// description (`ClusterRoleBinding "b" of ClusterRole "r" to User "u"`), made once
    /// with the index.
    allowed_reason: Arc<str>,
    /// The role's kind (`Role` or `ClusterRole`) and name.
    role: RoleRef,
    /// The binding's namespace ("" for a ClusterRoleBinding).
    namespace: String,
}

impl Grant {
    fn new(description: &str, role: RoleRef, namespace: String) -> Grant {
        Grant { allowed_reason: format!("RBAC: allowed by {description}").into(), role, namespace }
    }
}

/// Grants by subject, looked up by borrowed names (no key is built per request).
#[derive(Default)]
struct Subjects {
    users: HashMap<String, Vec<Arc<Grant>>>,
    groups: HashMap<String, Vec<Arc<Grant>>>,
    /// By the ServiceAccount's namespace, then its name.
    service_accounts: HashMap<String, HashMap<String, Vec<Arc<Grant>>>>,
}

impl Subjects {
    fn add(&mut self, key: SubjectKey, grant: Arc<Grant>) {
        let list = match key {
            SubjectKey::User(name) => self.users.entry(name).or_default(),
            SubjectKey::Group(name) => self.groups.entry(name).or_default(),
            SubjectKey::ServiceAccount(ns, name) => {
                self.service_accounts.entry(ns).or_default().entry(name).or_default()
            }
        };
        list.push(grant);
    }

    /// The grants naming `user`, its groups or (for a ServiceAccount's user) its
    /// ServiceAccount, in that order.
    fn of<'a>(&'a self, user: &'a UserInfo) -> impl Iterator<Item = &'a Arc<Grant>> + 'a {
        let by_user = self.users.get(&user.name).into_iter().flatten();
        let by_groups = user.groups.iter().flat_map(|g| self.groups.get(g)).flatten();
        let by_sa = user
            .service_account()
            .and_then(|(ns, name)| self.service_accounts.get(ns).and_then(|m| m.get(name)))
            .into_iter()
            .flatten();
        by_user.chain(by_groups).chain(by_sa)
    }
}

#[derive(Default)]
struct Index {
    cluster_roles: HashMap<String, Arc<[PolicyRule]>>,
    /// Roles by namespace, then name.
    roles: HashMap<String, HashMap<String, Arc<[PolicyRule]>>>,
    cluster_grants: Subjects,
    /// RoleBindings' grants by the binding's namespace.
    namespaced_grants: HashMap<String, Subjects>,
}

type Generation = [Revision; 4];

/// The RBAC authorizer with its cached index.
#[derive(Default)]
pub(crate) struct RbacAuthorizer {
    cache: RwLock<Option<(Generation, Arc<Index>)>>,
}

/// The four RBAC resources, made once.
fn resources() -> &'static [ResourceId; 4] {
    static RESOURCES: std::sync::LazyLock<[ResourceId; 4]> = std::sync::LazyLock::new(|| {
        ["roles", "clusterroles", "rolebindings", "clusterrolebindings"].map(|r| ResourceId::new(GROUP, r))
    });
    &RESOURCES
}

fn decode_all<T: DeserializeOwned>(store: &Store, id: &ResourceId) -> Vec<T> {
    store.values(id).into_iter().filter_map(|(_, bytes)| serde_json::from_slice(&bytes).ok()).collect()
}

fn subject_key(subject: &Subject, binding_namespace: &str) -> Option<SubjectKey> {
    match subject.kind.as_str() {
        "User" => Some(SubjectKey::User(subject.name.clone())),
        "Group" => Some(SubjectKey::Group(subject.name.clone())),
        "ServiceAccount" => {
            let ns = subject.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(binding_namespace);
            Some(SubjectKey::ServiceAccount(ns.to_string(), subject.name.clone()))
        }
        _ => None,
    }
}

fn describe_subject(subject: &Subject, binding_namespace: &str) -> String {
    if subject.kind == "ServiceAccount" {
        let ns = subject.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(binding_namespace);
        format!("{} {:?}", subject.kind, format!("{}/{ns}", subject.name))
    } else {
        format!("{} {:?}", subject.kind, subject.name)
    }
}

impl Index {
    fn build(store: &Store) -> Index {
        let [roles, cluster_roles, role_bindings, cluster_role_bindings] = resources();
        let mut index = Index::default();
        for role in decode_all::<ClusterRole>(store, cluster_roles) {
            let name = role.metadata.name.unwrap_or_default();
            index.cluster_roles.insert(name, role.rules.unwrap_or_default().into());
        }
        for role in decode_all::<Role>(store, roles) {
            let (ns, name) = (role.metadata.namespace.unwrap_or_default(), role.metadata.name.unwrap_or_default());
            index.roles.entry(ns).or_default().insert(name, role.rules.unwrap_or_default().into());
        }
        for binding in decode_all::<ClusterRoleBinding>(store, cluster_role_bindings) {
            let name = binding.metadata.name.unwrap_or_default();
            for subject in binding.subjects.iter().flatten() {
                let Some(key) = subject_key(subject, "") else { continue };
                let description = format!(
                    "ClusterRoleBinding {name:?} of {} {:?} to {}",
                    binding.role_ref.kind,
                    binding.role_ref.name,
                    describe_subject(subject, "")
                );
                let grant = Grant::new(&description, binding.role_ref.clone(), String::new());
                index.cluster_grants.add(key, Arc::new(grant));
            }
        }
        for binding in decode_all::<RoleBinding>(store, role_bindings) {
            let ns = binding.metadata.namespace.unwrap_or_default();
            let name = binding.metadata.name.unwrap_or_default();
            for subject in binding.subjects.iter().flatten() {
                let Some(key) = subject_key(subject, &ns) else { continue };
                let description = format!(
                    "RoleBinding {:?} of {} {:?} to {}",
                    format!("{name}/{ns}"),
                    binding.role_ref.kind,
                    binding.role_ref.name,
                    describe_subject(subject, &ns)
                );
                let grant = Grant::new(&description, binding.role_ref.clone(), ns.clone());
                index.namespaced_grants.entry(ns.clone()).or_default().add(key, Arc::new(grant));
            }
        }
        index
    }

    /// The rules a grant gives, or kube's error for a role that does not exist.
    fn rules_of(&self, grant: &Grant) -> Result<&[PolicyRule], String> {
        self.role(&grant.role.kind, &grant.namespace, &grant.role.name)
    }

    /// The rules of the `kind` (`Role` in `namespace`, or `ClusterRole`) called `name`,
    /// or kube's error for a role that does not exist.
    fn role(&self, kind: &str, namespace: &str, name: &str) -> Result<&[PolicyRule], String> {
        let found = match kind {
            "ClusterRole" => self.cluster_roles.get(name),
            "Role" => self.roles.get(namespace).and_then(|m| m.get(name)),
            _ => None,
        };
        found.map(|r| &r[..]).ok_or_else(|| format!("{}.{GROUP} {name:?} not found", kind.to_lowercase()))
    }

    /// Every grant that applies to `user` in `namespace` (cluster-wide ones first).
    fn grants_for<'a>(&'a self, user: &'a UserInfo, namespace: &str) -> impl Iterator<Item = &'a Arc<Grant>> + 'a {
        let namespaced = if namespace.is_empty() { None } else { self.namespaced_grants.get(namespace) };
        self.cluster_grants.of(user).chain(namespaced.into_iter().flat_map(|n| n.of(user)))
    }
}

impl RbacAuthorizer {
    fn index(&self, store: &Store) -> Arc<Index> {
        let generation: Generation = store.last_writes(resources());
        if let Some((g, index)) = self.cache.read().as_ref()
            && *g == generation
        {
            return index.clone();
        }
        let index = Arc::new(Index::build(store));
        *self.cache.write() = Some((generation, index.clone()));
        index
    }

    /// Whether RBAC allows `action` for `user`, with kube's reason.
    pub(crate) fn authorize(&self, store: &Store, user: &UserInfo, action: &Action) -> Decision {
        let index = self.index(store);
        let namespace = match &action.object {
            Object::Resource(r) => r.namespace.as_str(),
            Object::NonResource { .. } => "",
        };
        let mut errors = Vec::new();
        for grant in index.grants_for(user, namespace) {
            match index.rules_of(grant) {
                Ok(rules) if rules.iter().any(|r| rules::allows(r, action)) => {
                    return Decision { allowed: true, reason: grant.allowed_reason.clone() };
                }
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
        }
        let reason = match errors.len() {
            0 => String::new(),
            1 => format!("RBAC: {}", errors[0]),
            _ => format!("RBAC: [{}]", errors.join(", ")),
        };
        Decision { allowed: false, reason: reason.into() }
    }

    /// The rules of a Role (in `namespace`) or ClusterRole, if it exists.
    pub(crate) fn role_rules(&self, store: &Store, kind: &str, namespace: &str, name: &str) -> Option<Vec<PolicyRule>> {
        let index = self.index(store);
        index.role(kind, namespace, name).ok().map(<[_]>::to_vec)
    }

    /// Every rule `user` holds in `namespace`, and the errors resolving them.
    pub(crate) fn rules_for(&self, store: &Store, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let index = self.index(store);
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        for grant in index.grants_for(user, namespace) {
            match index.rules_of(grant) {
                Ok(r) => rules.extend(r.iter().cloned()),
                Err(e) => errors.push(e),
            }
        }
        (rules, errors)
    }
}
