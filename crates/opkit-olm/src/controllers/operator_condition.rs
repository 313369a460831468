//! The OperatorCondition controller and the `Upgradeable` check, as OLM's: a Role and a
//! RoleBinding named after the OperatorCondition (controlled by it, labelled
//! `olm.managed=true`) let the ServiceAccounts in `spec.serviceAccounts` get, update and
//! patch that one OperatorCondition; the conditions an operator reports in
//! `spec.conditions` are copied to `status.conditions`, each with the generation it was
//! copied from; a CSV that replaces another is held `Pending`
//! (`OperatorConditionNotUpgradeable`) while the replaced CSV's OperatorCondition says
//! `Upgradeable=False` — in `spec.overrides`, which win, or in `status.conditions`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use opkit::{Action, Context, ReconcileResult};
use serde_json::{Value, json};

use super::{Olm, set_condition};
use crate::types::{ClusterServiceVersion, Condition, OperatorCondition, find_condition};

/// The condition type through which an operator allows or blocks its upgrade.
pub(crate) const UPGRADEABLE: &str = "Upgradeable";
/// The CSV reason of an upgrade held by `Upgradeable=False`.
pub(crate) const REASON_NOT_UPGRADEABLE: &str = "OperatorConditionNotUpgradeable";

/// Reconciles one OperatorCondition: copies `spec.conditions` to `status.conditions`
/// (OLM's `syncOperatorConditionStatus`).
pub(crate) async fn reconcile(ctx: Context<OperatorCondition, Olm>) -> ReconcileResult {
    let Some(condition) = ctx.object.clone() else { return Ok(Action::done()) };
    for object in access_objects(&condition) {
        ctx.state.resources.apply(&ctx.client, &object, &condition.namespace().unwrap_or_default()).await?;
    }
    let generation = condition.metadata.generation.unwrap_or_default();
    let mut conditions = condition.status.clone().unwrap_or_default().conditions;
    let mut changed = false;
    for reported in &condition.spec.conditions {
        if let Some(copied) = conditions.iter().find(|c| c.type_ == reported.type_)
            && copied.status == reported.status
            && copied.observed_generation == Some(generation)
        {
            continue;
        }
        set_condition(&mut conditions, Condition { observed_generation: Some(generation), ..reported.clone() });
        changed = true;
    }
    if changed {
        let api: Api<OperatorCondition> = ctx.api();
        let patch = json!({"status": {"conditions": conditions}});
        api.patch_status(&condition.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }
    Ok(Action::done())
}

/// The label OLM puts on the objects it manages, with the value `true`.
pub(crate) const MANAGED_LABEL: &str = "olm.managed";

/// The Role and RoleBinding that give the operator's ServiceAccounts `get`, `update` and
/// `patch` on its own OperatorCondition (OLM's `ensureOperatorConditionRole` and
/// `ensureOperatorConditionRoleBinding`): both named after the OperatorCondition and
/// controlled by it. The subjects name no namespace: a RoleBinding's own is meant.
fn access_objects(condition: &OperatorCondition) -> Vec<Value> {
    let name = condition.name_any();
    let owner = opkit::owner::owner_reference(condition).ok().map(|r| OwnerReference {
        controller: Some(true),
        block_owner_deletion: Some(false),
        ..r
    });
    let metadata = json!({"name": name, "labels": {MANAGED_LABEL: "true"}, "ownerReferences": owner.into_iter().collect::<Vec<_>>()});
    let subjects: Vec<Value> = condition
        .spec
        .service_accounts
        .iter()
        .map(|account| json!({"kind": "ServiceAccount", "apiGroup": "", "name": account}))
        .collect();
    vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": metadata,
            "rules": [{"verbs": ["get", "update", "patch"], "apiGroups": ["operators.coreos.com"],
                       "resources": ["operatorconditions"], "resourceNames": [name]}],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subjects,
        }),
    ]
}

/// Why the operator of `replaced` may not be upgraded now, or `None` when it may (OLM's
/// `isOperatorUpgradeable`): an `Upgradeable` override decides; else a `False` or
/// outdated `Upgradeable` status condition blocks; no OperatorCondition allows.
pub(crate) fn not_upgradeable(
    replaced: &ClusterServiceVersion,
    condition: Option<&OperatorCondition>,
) -> Option<String> {
    let condition = condition.filter(|c| c.name_any() == replaced.name_any())?;
    if let Some(o) = find_condition(&condition.spec.overrides, UPGRADEABLE) {
        let message = o.message.as_deref().unwrap_or_default();
        return (!o.is_true()).then(|| format!("the operator is not upgradeable: {message}"));
    }
    let status = condition.status.as_ref()?;
    let c = find_condition(&status.conditions, UPGRADEABLE)?;
    if c.observed_generation.unwrap_or_default() != condition.metadata.generation.unwrap_or_default() {
        return Some(format!("the operatorcondition status {:?}={:?} is outdated", c.type_, c.status));
    }
    (c.status == "False")
        .then(|| format!("the operator is not upgradeable: {}", c.message.as_deref().unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{OperatorConditionSpec, OperatorConditionStatus};

    fn upgradeable(status: &str, message: &str, generation: i64) -> Condition {
        Condition {
            type_: UPGRADEABLE.into(),
            status: status.into(),
            reason: Some("Test".into()),
            message: Some(message.into()),
            observed_generation: Some(generation),
            ..Condition::default()
        }
    }

    fn csv() -> ClusterServiceVersion {
        let mut csv = ClusterServiceVersion::default();
        csv.metadata.name = Some("op.v1".into());
        csv
    }

    fn condition(spec: OperatorConditionSpec, status: Vec<Condition>) -> OperatorCondition {
        let mut c = OperatorCondition::new("op.v1", spec);
        c.metadata.generation = Some(2);
        c.status = Some(OperatorConditionStatus { conditions: status });
        c
    }

    #[test]
    fn no_operator_condition_allows() {
        assert_eq!(not_upgradeable(&csv(), None), None);
    }

    #[test]
    fn false_status_condition_blocks_and_override_wins() {
        let blocked = condition(OperatorConditionSpec::default(), vec![upgradeable("False", "migrating", 2)]);
        assert_eq!(
            not_upgradeable(&csv(), Some(&blocked)).as_deref(),
            Some("the operator is not upgradeable: migrating")
        );
        let spec = OperatorConditionSpec { overrides: vec![upgradeable("True", "admin", 0)], ..Default::default() };
        let overridden = condition(spec, vec![upgradeable("False", "migrating", 2)]);
        assert_eq!(not_upgradeable(&csv(), Some(&overridden)), None);
        let spec = OperatorConditionSpec { overrides: vec![upgradeable("False", "hold", 0)], ..Default::default() };
        let held = condition(spec, Vec::new());
        assert_eq!(not_upgradeable(&csv(), Some(&held)).as_deref(), Some("the operator is not upgradeable: hold"));
    }

    #[test]
    fn outdated_status_condition_blocks() {
        let outdated = condition(OperatorConditionSpec::default(), vec![upgradeable("True", "", 1)]);
        assert_eq!(
            not_upgradeable(&csv(), Some(&outdated)).as_deref(),
            Some(r#"the operatorcondition status "Upgradeable"="True" is outdated"#)
        );
    }

    #[test]
    fn copied_condition_keeps_its_transition_time_while_the_status_stays() {
        let mut conditions =
            vec![Condition { last_transition_time: Some("t0".into()), ..upgradeable("False", "a", 1) }];
        set_condition(&mut conditions, upgradeable("False", "b", 2));
        assert_eq!(conditions[0].last_transition_time.as_deref(), Some("t0"));
        assert_eq!(conditions[0].message.as_deref(), Some("b"));
        set_condition(&mut conditions, upgradeable("True", "c", 3));
        assert_ne!(conditions[0].last_transition_time.as_deref(), Some("t0"));
    }
}
