//! The OperatorGroup controller: resolves `spec.targetNamespaces` into `status.namespaces`
//! (`[""]`, all namespaces, when none are named), which the CSV controller turns into the
//! `olm.targetNamespaces` annotation of the group's operators.

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use opkit::{Action, Context, ReconcileResult};
use serde_json::json;

use super::{Olm, now};
use crate::types::OperatorGroup;

/// Reconciles one OperatorGroup.
pub async fn reconcile(ctx: Context<OperatorGroup, Olm>) -> ReconcileResult {
    let Some(group) = ctx.object.clone() else { return Ok(Action::done()) };
    let namespaces = if group.spec.target_namespaces.is_empty() {
        vec![String::new()]
    } else {
        group.spec.target_namespaces.clone()
    };
    if group.status.as_ref().map(|s| &s.namespaces) == Some(&namespaces) {
        return Ok(Action::done());
    }
    let api: Api<OperatorGroup> = ctx.api();
    let patch = json!({"status": {"namespaces": namespaces, "lastUpdated": now()}});
    api.patch_status(&group.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(Action::done())
}
