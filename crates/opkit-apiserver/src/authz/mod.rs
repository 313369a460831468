//! Authorization: whether a user may perform an action, as kube-apiserver's authorizer
//! chain answers it: `system:masters` may do everything; everyone else gets what RBAC
//! grants ([`rbac`]), from Roles and bindings in storage, with kube's bootstrap policy
//! ([`policy`]) created at start-up. [`escalation`] is kube's escalation prevention for
//! writes of roles and bindings.

pub(crate) mod attributes;
pub(crate) mod escalation;
pub(crate) mod policy;
pub(crate) mod rbac;
pub(crate) mod rules;

use crate::auth::user::UserInfo;
use crate::error::ApiError;

pub(crate) use attributes::{Action, Decision, Object, ResourceAttributes};

/// Authorizes actions: `system:masters` first, then RBAC.
#[derive(Default)]
pub struct Authorizer {
    rbac: rbac::RbacAuthorizer,
}

impl Authorizer {
    /// Whether `user` may perform `action`, reading RBAC objects through `store`.
    pub fn authorize(&self, store: &crate::storage::Store, user: &UserInfo, action: &Action) -> Decision {
        if user.is_master() {
            return Decision { allowed: true, reason: "".into() };
        }
        self.rbac.authorize(store, user, action)
    }

    /// The rules `user` holds in `namespace` ("" for cluster-wide ones only), and the
    /// errors met resolving them (kube's `RulesFor`).
    pub fn rules_for(
        &self,
        store: &crate::storage::Store,
        user: &UserInfo,
        namespace: &str,
    ) -> (Vec<k8s_openapi::api::rbac::v1::PolicyRule>, Vec<String>) {
        self.rbac.rules_for(store, user, namespace)
    }

    /// The rules of the `Role` (in `namespace`) or `ClusterRole` called `name`, if it exists.
    pub fn role_rules(
        &self,
        store: &crate::storage::Store,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Vec<k8s_openapi::api::rbac::v1::PolicyRule>> {
        self.rbac.role_rules(store, kind, namespace, name)
    }
}

/// The 403 kube-apiserver answers when `user` may not perform `action`, e.g.
/// `pods is forbidden: User "system:serviceaccount:t:op" cannot list resource "pods" in
/// API group "" in the namespace "t"`.
pub(crate) fn forbidden(user: &UserInfo, action: &Action, reason: &str) -> ApiError {
    let text = match &action.object {
        Object::NonResource { path } => format!("User {:?} cannot {} path {path:?}", user.name, action.verb),
        Object::Resource(r) => {
            let scope = if r.namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace {:?}", r.namespace)
            };
            format!(
                "User {:?} cannot {} resource {:?} in API group {:?} {scope}",
                user.name,
                action.verb,
                r.combined_resource(),
                r.group
            )
        }
    };
    let text = if reason.is_empty() { text } else { format!("{text}: {reason}") };
    match &action.object {
        Object::NonResource { .. } => ApiError::forbidden_raw(format!("forbidden: {text}")),
        Object::Resource(r) => ApiError::forbidden_object(&r.group, &r.resource, &r.name, &text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_messages_are_kubes() {
        let user = UserInfo { name: "system:serviceaccount:t:op".into(), ..Default::default() };
        let list = Action::resource(
            "list",
            ResourceAttributes { namespace: "t".into(), resource: "pods".into(), ..Default::default() },
        );
        let e = forbidden(&user, &list, "");
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            r#"pods is forbidden: User "system:serviceaccount:t:op" cannot list resource "pods" in API group "" in the namespace "t""#
        );
        let get = Action::resource(
            "get",
            ResourceAttributes {
                group: "apps".into(),
                resource: "deployments".into(),
                subresource: "scale".into(),
                name: "web".into(),
                ..Default::default()
            },
        );
        assert_eq!(
            forbidden(&user, &get, "").message,
            r#"deployments.apps "web" is forbidden: User "system:serviceaccount:t:op" cannot get resource "deployments/scale" in API group "apps" at the cluster scope"#
        );
        let path = Action { verb: "get".into(), object: Object::NonResource { path: "/metrics".into() } };
        assert_eq!(
            forbidden(&user, &path, "").message,
            r#"forbidden: User "system:serviceaccount:t:op" cannot get path "/metrics""#
        );
    }
}
