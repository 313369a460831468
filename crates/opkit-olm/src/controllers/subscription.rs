//! The Subscription controller (OLM's catalog operator): a subscription resolves, one
//! step at a time, to InstallPlans. The first step installs `startingCSV` or the
//! channel's head; once the installed CSV has succeeded, the next step is the bundle that
//! replaces, skips or skip-ranges it. Each step's plan holds the bundle's manifests and
//! those of the dependencies it resolved. States and conditions are OLM's: `UpgradePending`
//! / `AtLatestKnown`, `CatalogSourcesUnhealthy`, `ResolutionFailed`
//! (`ConstraintsNotSatisfiable`), `InstallPlanPending` (`RequiresApproval`, `Installing`)
//! and `InstallPlanFailed`.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use opkit::{Action, Context, ReconcileError, ReconcileResult};
use serde_json::{Value, json};

use super::{Olm, csv, now};
use crate::fbc::{Bundle, Catalog, Gvk};
use crate::resolve;
use crate::types::{
    CatalogSource, ClusterServiceVersion, Condition, InstallPlan, InstallPlanSpec, InstallPlanStatus, Step,
    StepResource, Subscription,
};

/// Subscription state: an InstallPlan is being installed or waits for approval.
pub const STATE_UPGRADE_PENDING: &str = "UpgradePending";
/// Subscription state: the newest bundle of the channel is installed.
pub const STATE_AT_LATEST: &str = "AtLatestKnown";
/// Subscription state: the InstallPlan failed.
pub const STATE_UPGRADE_FAILED: &str = "UpgradeFailed";

/// Reconciles one Subscription.
pub async fn reconcile(ctx: Context<Subscription, Olm>) -> ReconcileResult {
    if ctx.object.is_none() {
        return Ok(Action::done());
    }
    // Read afresh: a stale copy without the last step's status would plan it twice.
    let api: Api<Subscription> = ctx.api();
    let Some(sub) = api.get_opt(&ctx.request.name).await? else { return Ok(Action::done()) };
    let ns = sub.namespace().unwrap_or_default();
    let mut status = sub.status.clone().unwrap_or_default();
    let before = serde_json::to_value(&status).unwrap_or_default();

    let catalog = match ctx.cache.get::<CatalogSource>(&sub.spec.source, Some(&sub.spec.source_namespace)) {
        None => Err(format!("targeted catalogsource {}/{} missing", sub.spec.source_namespace, sub.spec.source)),
        Some(source) => super::catalog_source::load(&ctx.client, &ctx.state, &source).await,
    };
    let catalog = match catalog {
        Ok(catalog) => {
            set_condition(
                &mut status.conditions,
                "CatalogSourcesUnhealthy",
                "False",
                "AllCatalogSourcesHealthy",
                "all available catalogsources are healthy",
            );
            catalog
        }
        Err(message) => {
            set_condition(
                &mut status.conditions,
                "CatalogSourcesUnhealthy",
                "True",
                "UnhealthyCatalogSourceFound",
                &message,
            );
            return write_status(&ctx, &sub, status, &before).await;
        }
    };

    // The step in progress.
    if let Some(plan_name) = status.install_plan_ref.as_ref().and_then(|r| r.get("name")).and_then(Value::as_str) {
        let plan = ctx.cache.get::<InstallPlan>(plan_name, Some(&ns));
        let phase = plan.as_ref().and_then(|p| p.status.as_ref()).map(|s| s.phase.clone()).unwrap_or_default();
        match phase.as_str() {
            "RequiresApproval" => {
                status.state = Some(STATE_UPGRADE_PENDING.into());
                set_condition(&mut status.conditions, "InstallPlanPending", "True", "RequiresApproval", "");
                return write_status(&ctx, &sub, status, &before).await;
            }
            "Failed" => {
                let message = plan
                    .as_ref()
                    .and_then(|p| p.status.as_ref())
                    .and_then(|s| s.conditions.iter().find_map(|c| c.message.clone()))
                    .unwrap_or_default();
                status.state = Some(STATE_UPGRADE_FAILED.into());
                remove_condition(&mut status.conditions, "InstallPlanPending");
                set_condition(&mut status.conditions, "InstallPlanFailed", "True", "InstallComponentFailed", &message);
                return write_status(&ctx, &sub, status, &before).await;
            }
            "Complete" => {
                remove_condition(&mut status.conditions, "InstallPlanPending");
                remove_condition(&mut status.conditions, "InstallPlanFailed");
            }
            _ if plan.is_some() => {
                status.state = Some(STATE_UPGRADE_PENDING.into());
                set_condition(&mut status.conditions, "InstallPlanPending", "True", "Installing", "");
                return write_status(&ctx, &sub, status, &before).await;
            }
            _ => {}
        }
    }

    let channel = match resolve::channel(&catalog, &sub.spec.name, sub.spec.channel.as_deref(), &sub.name_any()) {
        Ok(channel) => channel,
        Err(e) => return resolution_failed(&ctx, &sub, status, &before, &e.to_string()).await,
    };
    let target: &Bundle = match status.current_csv.clone() {
        None => match resolve::first(&catalog, channel, sub.spec.starting_csv.as_deref(), &sub.name_any()) {
            Ok(bundle) => bundle,
            Err(e) => return resolution_failed(&ctx, &sub, status, &before, &e.to_string()).await,
        },
        Some(current) => {
            let current_csv = ctx.cache.get::<ClusterServiceVersion>(&current, Some(&ns));
            let succeeded = current_csv.as_ref().and_then(|c| c.status.as_ref()).and_then(|s| s.phase.as_deref())
                == Some(csv::PHASE_SUCCEEDED);
            if current_csv.is_some() {
                status.installed_csv = Some(current.clone());
            }
            if !succeeded {
                status.state = Some(STATE_UPGRADE_PENDING.into());
                return write_status(&ctx, &sub, status, &before).await;
            }
            remove_replaced(&ctx, &ns, &current, channel.entries.iter().map(|e| e.name.as_str())).await?;
            match resolve::next(&catalog, channel, &current) {
                Some(next) => next,
                None => {
                    status.state = Some(STATE_AT_LATEST.into());
                    remove_condition(&mut status.conditions, "ResolutionFailed");
                    return write_status(&ctx, &sub, status, &before).await;
                }
            }
        }
    };
    let served = served_gvks(&ctx).await?;
    let dependencies = match resolve::dependencies(&catalog, target, &served) {
        Ok(d) => d,
        Err(e) => return resolution_failed(&ctx, &sub, status, &before, &e.to_string()).await,
    };
    remove_condition(&mut status.conditions, "ResolutionFailed");
    let plan = create_plan(&ctx, &sub, &catalog, std::iter::once(target).chain(dependencies).collect()).await?;
    status.current_csv = Some(target.name.clone());
    status.state = Some(STATE_UPGRADE_PENDING.into());
    status.install_plan_ref = Some(json!({
        "apiVersion": InstallPlan::api_version(&()), "kind": InstallPlan::kind(&()),
        "name": plan.name_any(), "namespace": ns, "uid": plan.uid(), "resourceVersion": plan.resource_version(),
    }));
    status.extra.insert(
        "installplan".into(),
        json!({"apiVersion": InstallPlan::api_version(&()), "kind": InstallPlan::kind(&()), "name": plan.name_any(), "uuid": plan.uid()}),
    );
    let approved = plan.spec.approved;
    set_condition(
        &mut status.conditions,
        "InstallPlanPending",
        "True",
        if approved { "Installing" } else { "RequiresApproval" },
        "",
    );
    write_status(&ctx, &sub, status, &before).await
}

/// Records a resolution failure (OLM's `ResolutionFailed`, `ConstraintsNotSatisfiable`).
async fn resolution_failed(
    ctx: &Context<Subscription, Olm>,
    sub: &Subscription,
    mut status: crate::types::SubscriptionStatus,
    before: &Value,
    message: &str,
) -> ReconcileResult {
    set_condition(&mut status.conditions, "ResolutionFailed", "True", "ConstraintsNotSatisfiable", message);
    write_status(ctx, sub, status, before).await
}

/// Writes the status when it changed.
async fn write_status(
    ctx: &Context<Subscription, Olm>,
    sub: &Subscription,
    mut status: crate::types::SubscriptionStatus,
    before: &Value,
) -> ReconcileResult {
    if serde_json::to_value(&status).unwrap_or_default() == *before {
        return Ok(Action::done());
    }
    status.extra.insert("lastUpdated".into(), json!(now()));
    let api: Api<Subscription> = ctx.api();
    let patch = json!({"status": status});
    api.patch_status(&sub.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(Action::done())
}

/// Sets a condition (type, status, reason, message), keeping its transition time when
/// its status does not change.
fn set_condition(conditions: &mut Vec<Condition>, type_: &str, status: &str, reason: &str, message: &str) {
    let condition = Condition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: (!message.is_empty()).then(|| message.to_string()),
        ..Condition::default()
    };
    super::set_condition(conditions, condition);
}

fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) {
    conditions.retain(|c| c.type_ != type_);
}

/// The APIs the cluster's CRDs serve.
async fn served_gvks(ctx: &Context<Subscription, Olm>) -> Result<BTreeSet<Gvk>, ReconcileError> {
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let mut served = BTreeSet::new();
    for crd in crds.list(&Default::default()).await? {
        for version in crd.spec.versions.iter().filter(|v| v.served) {
            served.insert(Gvk {
                group: crd.spec.group.clone(),
                version: version.name.clone(),
                kind: crd.spec.names.kind.clone(),
            });
        }
    }
    Ok(served)
}

/// Deletes the CSVs of the channel other than `current` that the subscription installed
/// before (replaced or skipped ones), once `current` has succeeded.
async fn remove_replaced<'a>(
    ctx: &Context<Subscription, Olm>,
    ns: &str,
    current: &str,
    channel_entries: impl Iterator<Item = &'a str>,
) -> Result<(), ReconcileError> {
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), ns);
    for name in channel_entries.filter(|n| *n != current) {
        if ctx
            .cache
            .get::<ClusterServiceVersion>(name, Some(ns))
            .is_some_and(|c| c.metadata.deletion_timestamp.is_none())
        {
            match api.delete(name, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(e) if opkit::status::is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

/// Creates the InstallPlan of one step (owned by the subscription) and writes its plan.
async fn create_plan(
    ctx: &Context<Subscription, Olm>,
    sub: &Subscription,
    _catalog: &Catalog,
    bundles: Vec<&Bundle>,
) -> Result<InstallPlan, ReconcileError> {
    let ns = sub.namespace().unwrap_or_default();
    let approval = sub.spec.install_plan_approval.clone().unwrap_or_else(|| "Automatic".into());
    let approved = approval != "Manual";
    let mut plan = InstallPlan::new(
        "",
        InstallPlanSpec {
            cluster_service_version_names: bundles.iter().map(|b| b.name.clone()).collect(),
            approval: approval.clone(),
            approved,
            generation: Some(1),
        },
    );
    plan.metadata.name = None;
    plan.metadata.generate_name = Some("install-".into());
    plan.metadata.namespace = Some(ns.clone());
    plan.metadata.owner_references = opkit::owner::controller_reference(sub).map(|r| vec![r]);
    let mut steps = Vec::new();
    for bundle in &bundles {
        for object in bundle.objects()? {
            let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            steps.push(Step {
                resolving: bundle.name.clone(),
                resource: StepResource {
                    group: group.into(),
                    version: version.into(),
                    kind: object.get("kind").and_then(Value::as_str).unwrap_or_default().into(),
                    name: object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().into(),
                    source_name: sub.spec.source.clone(),
                    source_namespace: sub.spec.source_namespace.clone(),
                    manifest: Some(serde_json::to_string(&object).unwrap_or_default()),
                },
                status: "Unknown".into(),
            });
        }
    }
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), &ns);
    let created = api.create(&PostParams::default(), &plan).await?;
    let status = InstallPlanStatus {
        phase: if approved { "Installing".into() } else { "RequiresApproval".into() },
        catalog_sources: vec![sub.spec.source.clone()],
        plan: steps,
        conditions: Vec::new(),
        extra: Default::default(),
    };
    let patch = json!({"status": status});
    let written = api.patch_status(&created.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(written)
}
