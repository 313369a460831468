//! The OperatorGroup controller: resolves the group's target namespaces into
//! `status.namespaces`, which the CSV controller turns into the `olm.targetNamespaces`
//! annotation of the group's operators. As OLM's `getOperatorGroupTargets`: the named
//! `spec.targetNamespaces` when there are any; else, when `spec.selector` selects
//! something, the namespaces whose labels match it (none matching leaves the list empty);
//! else `[""]`, all namespaces. Namespaces labelled or created later are picked up.

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use opkit::{Action, Context, ReconcileResult};
use opkit_apimachinery::selector::{LabelSelector, SelectorError};
use serde_json::json;

use super::{Olm, now};
use crate::types::OperatorGroup;

/// Reconciles one OperatorGroup.
pub(crate) async fn reconcile(ctx: Context<OperatorGroup, Olm>) -> ReconcileResult {
    let Some(group) = ctx.object.clone() else { return Ok(Action::done()) };
    let namespaces = ctx.cache.list::<Namespace>();
    let namespaces = resolve_targets(&group, namespaces.iter().map(|n| n.as_ref()))?;
    if group.status.as_ref().is_some_and(|s| s.last_updated.is_some() && s.namespaces == namespaces) {
        return Ok(Action::done());
    }
    let api: Api<OperatorGroup> = ctx.api();
    let patch = json!({"status": {"namespaces": namespaces, "lastUpdated": now()}});
    api.patch_status(&group.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(Action::done())
}

/// The group's label selector, when it selects anything but everything: a missing, null or
/// empty `spec.selector` means all namespaces (OLM treats `labels.Nothing()` and an empty
/// selector alike).
pub(crate) fn namespace_selector(group: &OperatorGroup) -> Result<Option<LabelSelector>, SelectorError> {
    let Some(selector) = group.spec.extra.get("selector").filter(|s| !s.is_null()) else { return Ok(None) };
    Ok(Some(LabelSelector::from_label_selector_json(selector)?).filter(|s| !s.is_empty()))
}

/// The group's target namespaces among `namespaces`: the named ones in their order, or
/// the selected ones sorted by name, or `[""]` for all.
pub(crate) fn resolve_targets<'a>(
    group: &OperatorGroup,
    namespaces: impl IntoIterator<Item = &'a Namespace>,
) -> Result<Vec<String>, SelectorError> {
    if !group.spec.target_namespaces.is_empty() {
        let mut named: Vec<String> = Vec::new();
        for ns in &group.spec.target_namespaces {
            if !named.contains(ns) {
                named.push(ns.clone());
            }
        }
        return Ok(named);
    }
    let Some(selector) = namespace_selector(group)? else { return Ok(vec![String::new()]) };
    let mut matched: Vec<String> = namespaces
        .into_iter()
        .filter(|n| selector.matches_labels(n.metadata.labels.as_ref()))
        .map(|n| n.name_any())
        .collect();
    matched.sort();
    Ok(matched)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::OperatorGroupSpec;
    use serde_json::Value;

    fn group(spec: Value) -> OperatorGroup {
        let spec: OperatorGroupSpec = serde_json::from_value(spec).expect("spec");
        OperatorGroup::new("og", spec)
    }

    fn namespace(name: &str, labels: &[(&str, &str)]) -> Namespace {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels.iter().copied().collect::<std::collections::BTreeMap<_, _>>()}}))
            .expect("namespace")
    }

    #[test]
    fn targets_follow_olm_rules() {
        let all = [namespace("b", &[("team", "x")]), namespace("a", &[("team", "x")]), namespace("c", &[])];
        let targets = |spec: Value| resolve_targets(&group(spec), &all).expect("targets");
        assert_eq!(targets(json!({})), [""]);
        assert_eq!(targets(json!({"selector": {}})), [""]);
        assert_eq!(targets(json!({"selector": null})), [""]);
        assert_eq!(targets(json!({"selector": {"matchLabels": {"team": "x"}}})), ["a", "b"]);
        assert_eq!(targets(json!({"selector": {"matchLabels": {"team": "y"}}})), Vec::<String>::new());
        let named = json!({"targetNamespaces": ["c"], "selector": {"matchLabels": {"team": "x"}}});
        assert_eq!(targets(named), ["c"]);
        let expression = json!({"selector": {"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}});
        assert_eq!(targets(expression), ["c"]);
    }

    #[test]
    fn a_bad_selector_is_an_error() {
        let bad = group(json!({"selector": {"matchExpressions": [{"key": "team", "operator": "Near"}]}}));
        assert!(resolve_targets(&bad, &[]).is_err());
    }
}
