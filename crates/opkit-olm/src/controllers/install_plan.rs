//! The InstallPlan controller: a plan that needs approval waits in `RequiresApproval`
//! until `spec.approved` is true; an approved plan is `Installing` while its steps are
//! created — CRDs first (waited on until established), then the CSVs, then every other
//! manifest, owned by the CSV it came with — and ends `Complete` (condition `Installed`)
//! or `Failed` (`InstallComponentFailed`).

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use opkit::{Action, Context, ReconcileResult};
use serde_json::{Value, json};

use super::{Olm, csv, now};
use crate::types::{ClusterServiceVersion, InstallPlan, Step};

/// How long a plan waits for its CRDs to be established.
const CRD_TIMEOUT: Duration = Duration::from_secs(30);

/// Reconciles one InstallPlan.
pub(crate) async fn reconcile(ctx: Context<InstallPlan, Olm>) -> ReconcileResult {
    if ctx.object.is_none() {
        return Ok(Action::done());
    }
    let api: Api<InstallPlan> = ctx.api();
    let Some(plan) = api.get_opt(&ctx.request.name).await? else { return Ok(Action::done()) };
    let Some(status) = plan.status.clone() else { return Ok(Action::done()) };
    match status.phase.as_str() {
        "RequiresApproval" if plan.spec.approved => {
            let patch = json!({"status": {"phase": "Installing"}});
            api.patch_status(&plan.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
            Ok(Action::done())
        }
        "Installing" => {
            let ns = plan.namespace().unwrap_or_default();
            let mut steps = status.plan.clone();
            let outcome = execute(&ctx, &ns, &mut steps).await;
            let patch = match &outcome {
                Ok(()) => json!({"status": {
                    "phase": "Complete", "plan": steps,
                    "conditions": [{"type": "Installed", "status": "True", "lastTransitionTime": now(), "lastUpdateTime": now()}],
                }}),
                Err(message) => json!({"status": {
                    "phase": "Failed", "plan": steps,
                    "conditions": [{
                        "type": "Installed", "status": "False", "reason": "InstallComponentFailed",
                        "message": message, "lastTransitionTime": now(), "lastUpdateTime": now(),
                    }],
                }}),
            };
            api.patch_status(&plan.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
            Ok(Action::done())
        }
        _ => Ok(Action::done()),
    }
}

/// Creates the plan's resources in order, marking each step `Created`.
async fn execute(ctx: &Context<InstallPlan, Olm>, ns: &str, steps: &mut [Step]) -> Result<(), String> {
    let manifest = |step: &Step| -> Result<Value, String> {
        let text =
            step.resource.manifest.as_deref().ok_or_else(|| format!("step {} has no manifest", step.resource.name))?;
        serde_json::from_str(text).map_err(|e| format!("step {}: {e}", step.resource.name))
    };
    let order = |step: &Step| match step.resource.kind.as_str() {
        "CustomResourceDefinition" => 0,
        "ClusterServiceVersion" => 1,
        _ => 2,
    };
    let mut indices: Vec<usize> = (0..steps.len()).collect();
    indices.sort_by_key(|&i| order(&steps[i]));
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), ns);
    for i in indices {
        let mut object = manifest(&steps[i])?;
        if steps[i].resource.kind == "CustomResourceDefinition" {
            // Kubernetes no longer serves v1beta1 CRDs; OLM installs them as v1.
            object = opkit_olm_bundle::BundleCrd::from_object(std::path::PathBuf::new(), object).to_v1();
        }
        if steps[i].resource.kind == "ClusterServiceVersion" {
            object["apiVersion"] = json!("operators.coreos.com/v1alpha1");
        }
        let kind = steps[i].resource.kind.clone();
        let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
        let namespaced = match ctx.state.resources.resolve(&api_version, &kind).await {
            Ok((_, scope)) => matches!(scope, kube::discovery::Scope::Namespaced),
            Err(e) => return Err(e.to_string()),
        };
        if order(&steps[i]) == 2 {
            // Owned by the CSV of its bundle, so deleting the CSV removes it.
            let owner = csvs.get_opt(&steps[i].resolving).await.map_err(|e| e.to_string())?;
            if let (Some(owner), Some(meta)) = (owner, object.get_mut("metadata").and_then(Value::as_object_mut)) {
                let labels = meta.entry("labels").or_insert_with(|| json!({}));
                if let Some(labels) = labels.as_object_mut() {
                    labels.insert(csv::OWNER_LABEL.into(), json!(owner.name_any()));
                    labels.insert(csv::OWNER_NAMESPACE_LABEL.into(), json!(ns));
                    labels.insert(csv::OWNER_KIND_LABEL.into(), json!("ClusterServiceVersion"));
                }
                if let Some(mut reference) =
                    opkit::owner::owner_reference(&owner).ok().filter(|_| namespaced).map(|r| json!(r))
                {
                    reference["blockOwnerDeletion"] = json!(false);
                    meta.insert("ownerReferences".into(), json!([reference]));
                }
            }
        }
        let applied = ctx.state.resources.apply(&ctx.client, &object, ns).await.map_err(|e| e.to_string())?;
        if kind == "CustomResourceDefinition" {
            crate::objects::wait_crd_established(&ctx.client, &applied.name_any(), CRD_TIMEOUT)
                .await
                .map_err(|e| e.to_string())?;
        }
        steps[i].status = "Created".into();
    }
    Ok(())
}
