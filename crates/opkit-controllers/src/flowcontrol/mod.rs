//! The API Priority and Fairness configuration controller's status half (kube-apiserver's
//! `apf_controller`): every FlowSchema gets the `Dangling` condition, `False`/`Found` when
//! the PriorityLevelConfiguration it names exists and `True`/`NotFound` when it does not,
//! kept current as priority levels come and go.

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use opkit::{Action, Cache, Context, Controller, Manager, ReconcileResult, Request};
use serde_json::json;

use crate::ControllersConfig;

/// The field manager kube's controller writes the condition with.
const FIELD_MANAGER: &str = "api-priority-and-fairness-config-consumer-v1";

/// Registers the controller with `mgr`.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled("flowcontrol") {
        return Ok(());
    }
    let cache = mgr.cache().clone();
    Controller::new(mgr, reconcile)
        .client(crate::identity::client_for(mgr, cfg, "flowcontrol"))
        .named("flowcontrol")
        .watches::<PriorityLevelConfiguration>(move |level| naming(&cache, &level.name_any()))
        .build()
}

/// The FlowSchemas that name the priority level `level`.
fn naming(cache: &Cache, level: &str) -> Vec<Request> {
    cache
        .list::<FlowSchema>()
        .iter()
        .filter(|fs| fs.spec.as_ref().is_some_and(|s| s.priority_level_configuration.name == level))
        .map(|fs| Request::from_object(&**fs))
        .collect()
}

/// The `Dangling` condition's status, reason and message for a schema naming `level`.
fn dangling(level: &str, exists: bool) -> (&'static str, &'static str, String) {
    if exists {
        let message =
            format!("This FlowSchema references the PriorityLevelConfiguration object named {level:?} and it exists");
        ("False", "Found", message)
    } else {
        let message = format!(
            "This FlowSchema references the PriorityLevelConfiguration object named {level:?} but there is no such object"
        );
        ("True", "NotFound", message)
    }
}

async fn reconcile(ctx: Context<FlowSchema>) -> ReconcileResult {
    let Some(fs) = ctx.object.clone() else { return Ok(Action::done()) };
    if fs.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let level = fs.spec.as_ref().map(|s| s.priority_level_configuration.name.clone()).unwrap_or_default();
    let exists = ctx.cache.get::<PriorityLevelConfiguration>(&level, None).is_some();
    let (status, reason, message) = dangling(&level, exists);
    let conditions = fs.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let current = conditions.iter().find(|c| c.type_.as_deref() == Some("Dangling"));
    if current.is_some_and(|c| c.status.as_deref() == Some(status) && c.message.as_deref() == Some(&message)) {
        return Ok(Action::done());
    }
    let since = match current {
        Some(c) if c.status.as_deref() == Some(status) => json!(c.last_transition_time),
        _ => json!(crate::common::now()),
    };
    let mut updated: Vec<serde_json::Value> = conditions
        .iter()
        .filter(|c| c.type_.as_deref() != Some("Dangling"))
        .map(|c| serde_json::to_value(c).unwrap_or_default())
        .collect();
    updated.push(json!({"type": "Dangling", "status": status, "reason": reason, "message": message,
        "lastTransitionTime": since}));
    let api: Api<FlowSchema> = ctx.api_for();
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    api.patch_status(&fs.name_any(), &params, &Patch::Merge(&json!({"status": {"conditions": updated}}))).await?;
    Ok(Action::done())
}
