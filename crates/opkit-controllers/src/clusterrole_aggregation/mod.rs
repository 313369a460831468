//! The ClusterRole aggregation controller (kube-controller-manager's
//! `clusterrole-aggregation`): a ClusterRole with an `aggregationRule` gets the rules of
//! every ClusterRole its selectors match, kept current as those roles come, change and go
//! (so a CRD's `aggregate-to-view` role extends `view`, `edit` and `admin`).

use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use opkit::{Action, Cache, Context, Controller, Manager, ReconcileResult, Request};
use serde_json::json;

use crate::ControllersConfig;

/// The field manager kube's controller writes the rules with.
const FIELD_MANAGER: &str = "clusterrole-aggregation-controller";

/// Registers the controller with `mgr`.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled("clusterrole-aggregation") {
        return Ok(());
    }
    let cache = mgr.cache().clone();
    Controller::new(mgr, reconcile)
        .client(crate::identity::client_for(mgr, cfg, "clusterrole-aggregation"))
        .named("clusterrole-aggregation")
        .watches::<ClusterRole>(move |_changed| aggregated(&cache))
        .build()
}

/// Every ClusterRole with an aggregation rule: any ClusterRole's change may change them.
fn aggregated(cache: &Cache) -> Vec<Request> {
    cache
        .list::<ClusterRole>()
        .iter()
        .filter(|r| r.aggregation_rule.is_some())
        .map(|r| Request::from_object(&**r))
        .collect()
}

async fn reconcile(ctx: Context<ClusterRole>) -> ReconcileResult {
    let Some(role) = ctx.object.clone() else { return Ok(Action::done()) };
    let Some(rule) = role.aggregation_rule.as_ref() else { return Ok(Action::done()) };
    let all: Vec<ClusterRole> = ctx.cache.list::<ClusterRole>().iter().map(|r| (**r).clone()).collect();
    let rules = opkit_apimachinery::rbac::aggregated_rules(&role.name_any(), rule, &all);
    if role.rules.as_ref().map_or(rules.is_empty(), |current| *current == rules) {
        return Ok(Action::done());
    }
    let api: Api<ClusterRole> = ctx.api_for();
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    api.patch(&role.name_any(), &params, &Patch::Merge(&json!({"rules": rules}))).await?;
    Ok(Action::done())
}
