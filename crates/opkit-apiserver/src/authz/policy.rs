//! kube's bootstrap RBAC policy (`bootstrap-policy.yaml`): cluster-admin, the aggregated
//! admin/edit/view roles and the `system:` roles every user needs (discovery, basic-user,
//! public-info-viewer), with their bindings; and the roles of the cluster's own
//! components (`controller-policy.yaml`: kube-controller-manager's `system:controller:*`
//! roles bound to their ServiceAccounts, the scheduler's, the nodes'). All are created
//! at start-up when missing.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use crate::auth::user::UserInfo;
use crate::error::{ApiError, ApiResult};
use crate::registry::{Registry, WriteOptions};

const POLICY: &str = include_str!("bootstrap-policy.yaml");
const CONTROLLER_POLICY: &str = include_str!("controller-policy.yaml");
const GROUP: &str = "rbac.authorization.k8s.io";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Policy {
    cluster_roles: Vec<RoleEntry>,
    cluster_role_bindings: Vec<BindingEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RoleEntry {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    rules: Vec<PolicyRule>,
    aggregation_rule: Option<AggregationRule>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BindingEntry {
    name: String,
    role: String,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    users: Vec<String>,
    /// `namespace/name`.
    #[serde(default)]
    service_accounts: Vec<String>,
}

impl BindingEntry {
    fn subjects(self) -> Vec<Subject> {
        let named = |kind: &str, name: String| Subject {
            api_group: Some(GROUP.into()),
            kind: kind.into(),
            name,
            namespace: None,
        };
        let accounts = self.service_accounts.into_iter().map(|sa| {
            let (namespace, name) = sa.split_once('/').unwrap_or(("default", &sa));
            Subject {
                api_group: None,
                kind: "ServiceAccount".into(),
                name: name.into(),
                namespace: Some(namespace.into()),
            }
        });
        let groups = self.groups.into_iter().map(|g| named("Group", g));
        let users = self.users.into_iter().map(|u| named("User", u));
        groups.chain(users).chain(accounts).collect()
    }
}

fn meta(name: &str, mut labels: BTreeMap<String, String>) -> ObjectMeta {
    labels.insert("kubernetes.io/bootstrapping".into(), "rbac-defaults".into());
    ObjectMeta {
        name: Some(name.into()),
        labels: Some(labels),
        annotations: Some(BTreeMap::from([("rbac.authorization.kubernetes.io/autoupdate".into(), "true".into())])),
        ..Default::default()
    }
}

/// The bootstrap ClusterRoles (aggregated ones with their initial rules) and bindings.
fn objects() -> Result<(Vec<ClusterRole>, Vec<ClusterRoleBinding>), String> {
    let mut policy: Policy = serde_saphyr::from_str(POLICY).map_err(|e| format!("bootstrap policy: {e}"))?;
    let controllers: Policy =
        serde_saphyr::from_str(CONTROLLER_POLICY).map_err(|e| format!("controller policy: {e}"))?;
    policy.cluster_roles.extend(controllers.cluster_roles);
    policy.cluster_role_bindings.extend(controllers.cluster_role_bindings);
    let mut roles: Vec<ClusterRole> = policy
        .cluster_roles
        .into_iter()
        .map(|r| ClusterRole {
            metadata: meta(&r.name, r.labels),
            rules: Some(r.rules),
            aggregation_rule: r.aggregation_rule,
        })
        .collect();
    // Aggregated roles select other aggregated roles (admin ⊇ edit ⊇ view): resolve
    // until nothing changes, as the aggregation controller converges.
    loop {
        let mut changed = false;
        for i in 0..roles.len() {
            let Some(rule) = roles[i].aggregation_rule.clone() else { continue };
            let name = roles[i].metadata.name.clone().unwrap_or_default();
            let rules = opkit_apimachinery::rbac::aggregated_rules(&name, &rule, &roles);
            if roles[i].rules.as_ref() != Some(&rules) {
                roles[i].rules = Some(rules);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let bindings = policy
        .cluster_role_bindings
        .into_iter()
        .map(|b| ClusterRoleBinding {
            metadata: meta(&b.name, BTreeMap::new()),
            role_ref: RoleRef { api_group: GROUP.into(), kind: "ClusterRole".into(), name: b.role.clone() },
            subjects: Some(b.subjects()),
        })
        .collect();
    Ok((roles, bindings))
}

/// Creates the bootstrap roles and bindings that do not exist yet (an edited one is
/// left as the cluster's administrator changed it).
pub(crate) async fn bootstrap(registry: &Registry) -> ApiResult<()> {
    let (roles, bindings) = objects().map_err(ApiError::internal)?;
    let opts =
        WriteOptions { field_manager: "kube-apiserver".into(), user: UserInfo::apiserver(), ..Default::default() };
    let catalog = registry.catalog().snapshot();
    let target = |resource: &str| {
        catalog
            .lookup(GROUP, "v1", resource)
            .map(|info| registry.target(info, "v1".into(), None))
            .ok_or_else(ApiError::no_route)
    };
    let (role_target, binding_target) = (target("clusterroles")?, target("clusterrolebindings")?);
    for role in roles {
        let mut body = serde_json::to_value(&role).map_err(|e| ApiError::internal(e.to_string()))?;
        body["apiVersion"] = format!("{GROUP}/v1").into();
        body["kind"] = "ClusterRole".into();
        registry.create_if_missing(&role_target, body, &opts).await?;
    }
    for binding in bindings {
        let mut body = serde_json::to_value(&binding).map_err(|e| ApiError::internal(e.to_string()))?;
        body["apiVersion"] = format!("{GROUP}/v1").into();
        body["kind"] = "ClusterRoleBinding".into();
        registry.create_if_missing(&binding_target, body, &opts).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_parses_and_aggregates_view_into_edit_into_admin() {
        let (roles, bindings) = objects().expect("policy");
        let rules_of = |n: &str| {
            roles.iter().find(|r| r.metadata.name.as_deref() == Some(n)).and_then(|r| r.rules.clone()).expect(n)
        };
        let (view, edit, admin) = (rules_of("view"), rules_of("edit"), rules_of("admin"));
        assert_eq!(view, rules_of("system:aggregate-to-view"));
        assert!(view.iter().all(|r| edit.contains(r)) && edit.len() > view.len());
        assert!(edit.iter().all(|r| admin.contains(r)) && admin.len() > edit.len());
        assert!(bindings.iter().any(|b| b.role_ref.name == "cluster-admin"));
    }

    #[test]
    fn every_binding_names_a_role_and_controllers_are_bound_to_their_accounts() {
        let (roles, bindings) = objects().expect("policy");
        for b in &bindings {
            assert!(roles.iter().any(|r| r.metadata.name == Some(b.role_ref.name.clone())), "{}", b.role_ref.name);
        }
        let deployments = bindings
            .iter()
            .find(|b| b.role_ref.name == "system:controller:deployment-controller")
            .and_then(|b| b.subjects.clone())
            .expect("binding");
        assert_eq!(deployments[0].kind, "ServiceAccount");
        assert_eq!(
            (deployments[0].namespace.as_deref(), deployments[0].name.as_str()),
            (Some("kube-system"), "deployment-controller")
        );
    }
}
