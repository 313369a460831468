//! Escalation prevention (kube's RBAC registry): a user may only create or change a role
//! that grants what they already hold, unless they may `escalate` it, and may only bind a
//! role whose rules they hold, unless they may `bind` it. `system:masters` may do both.

use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::Value;

use super::{Action, ResourceAttributes, rules};
use crate::auth::user::UserInfo;
use crate::error::{ApiError, ApiResult};
use crate::registry::view::StoreView;

const GROUP: &str = "rbac.authorization.k8s.io";

fn policy_rules(value: &Value) -> Vec<PolicyRule> {
    serde_json::from_value(value.clone()).unwrap_or_default()
}

fn name_of(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or_default()
}

fn namespace_of(obj: &Value) -> &str {
    obj["metadata"]["namespace"].as_str().unwrap_or_default()
}

/// Whether the authorizer lets `user` use `verb` on the role `resource`/`name`.
fn may(view: &StoreView<'_>, user: &UserInfo, verb: &str, resource: &str, namespace: &str, name: &str) -> bool {
    let attributes = ResourceAttributes {
        namespace: namespace.into(),
        group: GROUP.into(),
        version: "v1".into(),
        resource: resource.into(),
        name: name.into(),
        ..Default::default()
    };
    view.authorize(user, &Action::resource(verb, attributes)).allowed
}

/// Refuses `wanted` unless `user` holds all of it in `namespace`.
fn confirm_held(
    view: &StoreView<'_>,
    user: &UserInfo,
    namespace: &str,
    wanted: &[PolicyRule],
    (resource, name): (&str, &str),
) -> ApiResult<()> {
    let (held, errors) = view.rules_for(user, namespace);
    let missing = rules::uncovered(&held, wanted);
    if missing.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = missing.iter().map(rules::compact).collect();
    let groups: Vec<String> = user.groups.iter().map(|g| format!("{g:?}")).collect();
    let mut why = format!(
        "user {:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        groups.join(" "),
        listed.join("\n")
    );
    if !errors.is_empty() {
        why.push_str(&format!("; resolution errors: [{}]", errors.join(", ")));
    }
    Err(ApiError::forbidden_object(GROUP, resource, name, &why))
}

/// A Role or ClusterRole (`resource`) written by `user`.
pub(crate) fn check_role(
    view: &StoreView<'_>,
    user: &UserInfo,
    resource: &str,
    obj: &Value,
    old: Option<&Value>,
) -> ApiResult<()> {
    let (name, namespace) = (name_of(obj), namespace_of(obj));
    if user.is_master() || may(view, user, "escalate", resource, namespace, name) {
        return Ok(());
    }
    if !obj["aggregationRule"].is_null() {
        let full = [
            PolicyRule {
                api_groups: Some(vec!["*".into()]),
                resources: Some(vec!["*".into()]),
                verbs: vec!["*".into()],
                ..Default::default()
            },
            PolicyRule { non_resource_urls: Some(vec!["*".into()]), verbs: vec!["*".into()], ..Default::default() },
        ];
        if confirm_held(view, user, "", &full, (resource, name)).is_err() {
            return Err(ApiError::forbidden_object(
                GROUP,
                resource,
                name,
                "must have cluster-admin privileges to use the aggregationRule",
            ));
        }
        return Ok(());
    }
    if old.is_some_and(|o| o["rules"] == obj["rules"]) {
        return Ok(());
    }
    confirm_held(view, user, namespace, &policy_rules(&obj["rules"]), (resource, name))
}

/// A RoleBinding or ClusterRoleBinding (`resource`) written by `user`.
pub(crate) fn check_binding(view: &StoreView<'_>, user: &UserInfo, resource: &str, obj: &Value) -> ApiResult<()> {
    let (name, namespace) = (name_of(obj), namespace_of(obj));
    let role_kind = obj["roleRef"]["kind"].as_str().unwrap_or_default();
    let role_name = obj["roleRef"]["name"].as_str().unwrap_or_default();
    let role_resource = if role_kind == "Role" { "roles" } else { "clusterroles" };
    if user.is_master() || may(view, user, "bind", role_resource, namespace, role_name) {
        return Ok(());
    }
    let role_namespace = if role_kind == "Role" { namespace } else { "" };
    let Some(wanted) = view.role_rules(role_kind, role_namespace, role_name) else {
        let missing = format!("{}.{GROUP} {role_name:?} not found", role_kind.to_lowercase());
        return Err(ApiError::forbidden_object(GROUP, resource, name, &missing));
    };
    confirm_held(view, user, namespace, &wanted, (resource, name))
}
