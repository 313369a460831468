//! The Subscription controller (OLM's catalog operator): a subscription resolves, one
//! step at a time, to InstallPlans. The first step installs `startingCSV` or the
//! channel's head; once the installed CSV has succeeded, the next step is the bundle that
//! replaces, skips or skip-ranges it. Each step's plan holds the bundle's manifests and
//! those of the dependencies it resolved. States and conditions are OLM's: `UpgradePending`
//! / `AtLatestKnown`, `CatalogSourcesUnhealthy`, `ResolutionFailed`
//! (`ConstraintsNotSatisfiable`), `InstallPlanPending` (`RequiresApproval`, `Installing`)
//! and `InstallPlanFailed`.

use std::collections::BTreeSet;
use std::sync::Arc;

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
    StepResource, Subscription, SubscriptionStatus,
};

/// Subscription state: an InstallPlan is being installed or waits for approval.
pub(crate) const STATE_UPGRADE_PENDING: &str = "UpgradePending";
/// Subscription state: the newest bundle of the channel is installed.
pub(crate) const STATE_AT_LATEST: &str = "AtLatestKnown";
/// Subscription state: the InstallPlan failed.
pub(crate) const STATE_UPGRADE_FAILED: &str = "UpgradeFailed";

/// Reconciles one Subscription: records its catalog's health, waits on the step in
/// progress, resolves the next bundle and its dependencies, and plans their install.
pub(crate) async fn reconcile(ctx: Context<Subscription, Olm>) -> ReconcileResult {
    if ctx.object.is_none() {
        return Ok(Action::done());
    }
    // Read afresh: a stale copy without the last step's status would plan it twice.
    let api: Api<Subscription> = ctx.api();
    let Some(sub) = api.get_opt(&ctx.request.name).await? else { return Ok(Action::done()) };
    let ns = sub.namespace().unwrap_or_default();
    let mut status = sub.status.clone().unwrap_or_default();
    let before = serde_json::to_value(&status).unwrap_or_default();

    let catalog = load_catalog(&ctx, &sub).await;
    record_catalog_health(&mut status, catalog.as_ref().err());
    let Ok(catalog) = catalog else { return write_status(&ctx, &sub, status, &before).await };
    if let Some(plan_name) = status.install_plan_ref.as_ref().and_then(|r| r.get("name")).and_then(Value::as_str) {
        let plan = ctx.cache.get::<InstallPlan>(plan_name, Some(&ns));
        if record_step_in_progress(&mut status, plan.as_deref()) == StepProgress::Waiting {
            return write_status(&ctx, &sub, status, &before).await;
        }
    }
    let Some(target) = next_bundle(&ctx, &sub, &mut status, &catalog).await? else {
        return write_status(&ctx, &sub, status, &before).await;
    };
    let served = served_gvks(&ctx).await?;
    let dependencies = match resolve::dependencies(&catalog, target, &served) {
        Ok(d) => d,
        Err(e) => {
            record_resolution_failed(&mut status, &e.to_string());
            return write_status(&ctx, &sub, status, &before).await;
        }
    };
    remove_condition(&mut status.conditions, "ResolutionFailed");
    let plan = create_plan(&ctx, &sub, &catalog, std::iter::once(target).chain(dependencies).collect()).await?;
    status.current_csv = Some(target.name.clone());
    record_plan(&mut status, &plan, &ns);
    write_status(&ctx, &sub, status, &before).await
}

/// The catalog of the subscription's CatalogSource, or why it cannot be read.
async fn load_catalog(ctx: &Context<Subscription, Olm>, sub: &Subscription) -> Result<Arc<Catalog>, String> {
    match ctx.cache.get::<CatalogSource>(&sub.spec.source, Some(&sub.spec.source_namespace)) {
        None => Err(format!("targeted catalogsource {}/{} missing", sub.spec.source_namespace, sub.spec.source)),
        Some(source) => super::catalog_source::load(&ctx.client, &ctx.state, &source).await,
    }
}

/// Records the `CatalogSourcesUnhealthy` condition: false, or true with why the catalog
/// cannot be read.
fn record_catalog_health(status: &mut SubscriptionStatus, error: Option<&String>) {
    match error {
        None => set_condition(
            &mut status.conditions,
            "CatalogSourcesUnhealthy",
            "False",
            "AllCatalogSourcesHealthy",
            "all available catalogsources are healthy",
        ),
        Some(message) => set_condition(
            &mut status.conditions,
            "CatalogSourcesUnhealthy",
            "True",
            "UnhealthyCatalogSourceFound",
            message,
        ),
    }
}

/// Whether the subscription waits on its InstallPlan in progress.
#[derive(Debug, PartialEq)]
enum StepProgress {
    /// The plan waits for approval, is installing, or failed.
    Waiting,
    /// The plan completed (or is gone): resolve the next step.
    Done,
}

/// Records the state of the step in progress (`UpgradePending` with `InstallPlanPending`,
/// or `UpgradeFailed` with `InstallPlanFailed`) from its InstallPlan.
fn record_step_in_progress(status: &mut SubscriptionStatus, plan: Option<&InstallPlan>) -> StepProgress {
    let plan_status = plan.and_then(|p| p.status.as_ref());
    match plan_status.map(|s| s.phase.as_str()).unwrap_or_default() {
        "RequiresApproval" => {
            status.state = Some(STATE_UPGRADE_PENDING.into());
            set_condition(&mut status.conditions, "InstallPlanPending", "True", "RequiresApproval", "");
            StepProgress::Waiting
        }
        "Failed" => {
            let message =
                plan_status.and_then(|s| s.conditions.iter().find_map(|c| c.message.clone())).unwrap_or_default();
            status.state = Some(STATE_UPGRADE_FAILED.into());
            remove_condition(&mut status.conditions, "InstallPlanPending");
            set_condition(&mut status.conditions, "InstallPlanFailed", "True", "InstallComponentFailed", &message);
            StepProgress::Waiting
        }
        "Complete" => {
            remove_condition(&mut status.conditions, "InstallPlanPending");
            remove_condition(&mut status.conditions, "InstallPlanFailed");
            StepProgress::Done
        }
        _ if plan.is_some() => {
            status.state = Some(STATE_UPGRADE_PENDING.into());
            set_condition(&mut status.conditions, "InstallPlanPending", "True", "Installing", "");
            StepProgress::Waiting
        }
        _ => StepProgress::Done,
    }
}

/// The bundle the next step installs: the first one of the channel while nothing is
/// installed, else the next upgrade once the current CSV has succeeded (removing the CSVs
/// it replaced). `None` when there is none yet; the status says why.
async fn next_bundle<'a>(
    ctx: &Context<Subscription, Olm>,
    sub: &Subscription,
    status: &mut SubscriptionStatus,
    catalog: &'a Catalog,
) -> Result<Option<&'a Bundle>, ReconcileError> {
    let ns = sub.namespace().unwrap_or_default();
    let channel = match resolve::channel(catalog, &sub.spec.name, sub.spec.channel.as_deref(), &sub.name_any()) {
        Ok(channel) => channel,
        Err(e) => {
            record_resolution_failed(status, &e.to_string());
            return Ok(None);
        }
    };
    let Some(current) = status.current_csv.clone() else {
        return match resolve::first(catalog, channel, sub.spec.starting_csv.as_deref(), &sub.name_any()) {
            Ok(bundle) => Ok(Some(bundle)),
            Err(e) => {
                record_resolution_failed(status, &e.to_string());
                Ok(None)
            }
        };
    };
    let current_csv = ctx.cache.get::<ClusterServiceVersion>(&current, Some(&ns));
    let succeeded = current_csv.as_ref().and_then(|c| c.status.as_ref()).and_then(|s| s.phase.as_deref())
        == Some(csv::PHASE_SUCCEEDED);
    if current_csv.is_some() {
        status.installed_csv = Some(current.clone());
    }
    if !succeeded {
        status.state = Some(STATE_UPGRADE_PENDING.into());
        return Ok(None);
    }
    remove_replaced(ctx, &ns, &current, channel.entries.iter().map(|e| e.name.as_str())).await?;
    let next = resolve::next(catalog, channel, &current);
    if next.is_none() {
        status.state = Some(STATE_AT_LATEST.into());
        remove_condition(&mut status.conditions, "ResolutionFailed");
    }
    Ok(next)
}

/// Records the InstallPlan just created as the step in progress.
fn record_plan(status: &mut SubscriptionStatus, plan: &InstallPlan, ns: &str) {
    status.state = Some(STATE_UPGRADE_PENDING.into());
    status.install_plan_ref = Some(json!({
        "apiVersion": InstallPlan::api_version(&()), "kind": InstallPlan::kind(&()),
        "name": plan.name_any(), "namespace": ns, "uid": plan.uid(), "resourceVersion": plan.resource_version(),
    }));
    status.extra.insert(
        "installplan".into(),
        json!({"apiVersion": InstallPlan::api_version(&()), "kind": InstallPlan::kind(&()), "name": plan.name_any(), "uuid": plan.uid()}),
    );
    let reason = if plan.spec.approved { "Installing" } else { "RequiresApproval" };
    set_condition(&mut status.conditions, "InstallPlanPending", "True", reason, "");
}

/// Records a resolution failure (OLM's `ResolutionFailed`, `ConstraintsNotSatisfiable`).
fn record_resolution_failed(status: &mut SubscriptionStatus, message: &str) {
    set_condition(&mut status.conditions, "ResolutionFailed", "True", "ConstraintsNotSatisfiable", message);
}

/// Writes the status when it changed.
async fn write_status(
    ctx: &Context<Subscription, Olm>,
    sub: &Subscription,
    mut status: SubscriptionStatus,
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
