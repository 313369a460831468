//! The generic Helm reconciler, one controller per watched kind (operator-sdk's
//! `internal/helm/controller`): a custom resource's spec is the chart's values and its
//! name the release's. Each reconcile renders the chart, installs (no release yet),
//! upgrades (the manifest changed) or re-applies the release's objects (drift repair),
//! stores the revision as Helm does (`pending-install` / `pending-upgrade` while its
//! hooks and objects are created, then `deployed` or `failed`; a pending revision left by
//! an operator stopped in the middle is deleted and made again, as operator-sdk does) and
//! writes operator-sdk's conditions (Initialized, Deployed, ReleaseFailed,
//! Irreconcilable) and `status.deployedRelease`. Deleting the resource uninstalls the
//! release through [`UNINSTALL_FINALIZER`]. operator-sdk's annotations on the resource
//! ([`crate::annotations`]) upgrade and roll back with `--force` (objects replaced,
//! [`ApplyMode::Replace`]) and keep the finalizer until every object of the release is
//! gone. A new chart version is rolled out over the kind's releases one at a time and
//! paused at the first failure (`Rollout`).

//!
//! The actions are Helm's `pkg/action`: [`install`], [`upgrade`], [`rollback`] and
//! [`uninstall`], the steps install and upgrade share in [`deploy`], hooks run as Helm's
//! `execHook` in [`exec_hook`]; each reconcile reads the resource and its stored release,
//! decides ([`Plan`]), acts, and writes the status ([`status`]) once.

mod cluster;
pub(crate) mod conditions;
mod deploy;
mod exec_hook;
mod install;
mod render;
mod rollback;
mod rollout;
mod status;
mod target;
mod uninstall;
mod upgrade;

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::SelectorExt;
use kube::discovery::Scope;
use kube::{Client, ResourceExt};
use opkit::discovery::RestMapper;
use opkit::watches_file;
use opkit::{Action, Context, Controller, Manager, ReconcileError, ReconcileResult, Reconciler};
use serde_json::{Value, json};

use crate::annotations::{self, ReleaseAnnotations, UNINSTALL_WAIT_MESSAGE};
use crate::metrics::ReleaseMetrics;
use crate::release::{self, Release};
use crate::watches::Watch;
use crate::{OperatorError, UNINSTALL_FINALIZER};
pub(crate) use cluster::ApplyMode;
use cluster::Cluster;
use deploy::{DeployFailure, DeployRequest, Deployed, Outcome};
use render::{chart_version, render, render_next};
use rollout::Rollout;
use status::ResourceStatus;
use target::Target;

/// How often a resource being deleted under `uninstall-wait` looks again for its
/// release's objects (at most; the reconcile period if shorter). operator-sdk
/// waits a whole reconcile period.
pub(crate) const UNINSTALL_WAIT_POLL: Duration = Duration::from_secs(2);

/// Reconciles the custom resources of one watched kind.
pub(crate) struct HelmReconciler {
    watch: Watch,
    /// The kinds' resources, shared by every watched kind's reconciler.
    mapper: RestMapper,
    metrics: ReleaseMetrics,
    /// The version in the watched chart's `Chart.yaml` when the operator started.
    chart_version: String,
    rollout: Rollout,
}

/// Registers one controller per watch with `mgr`. Each kind must be served (its CRD
/// installed). With `watchDependentResources`, the kinds the chart renders with its
/// default values are watched (namespaced ones through their owner reference,
/// cluster-scoped ones through Helm's release annotations), so a changed or deleted child
/// is restored at once.
pub async fn setup(mgr: &Manager, watches: Vec<Watch>) -> Result<(), OperatorError> {
    let client = mgr.client();
    let mapper = RestMapper::new(client.clone());
    let metrics = ReleaseMetrics::register(mgr.metrics());
    for watch in watches {
        let (resource, caps) = watches_file::served_kind(&mapper, &watch.group, &watch.version, &watch.kind).await?;
        let dependents =
            if watch.watch_dependent_resources { dependent_kinds(&watch, &mapper).await } else { Vec::new() };
        let concurrency = watch.max_concurrent_reconciles;
        let chart_version = opkit_helm::chart::load(&watch.chart)
            .ok()
            .and_then(|chart| chart.metadata.get("version").and_then(|v| v.as_str()).map(str::to_string))
            .unwrap_or_default();
        let selector: Option<kube::core::Selector> =
            watch.selector.clone().and_then(|selector| selector.try_into().ok());
        let rollout = Rollout::resume(&client, &resource, &chart_version, selector.as_ref()).await;
        let reconciler =
            HelmReconciler { watch, mapper: mapper.clone(), metrics: metrics.clone(), chart_version, rollout };
        let name = format!("{}-helm-controller", resource.kind.to_lowercase());
        let mut controller = Controller::new_dynamic(mgr, resource, caps.scope, reconciler)
            .named(name)
            .max_concurrent_reconciles(concurrency);
        for (child, scope) in &dependents {
            controller = match scope {
                Scope::Namespaced => controller.owns_dynamic(child, Scope::Namespaced),
                // Cluster-scoped children have no owner reference; Helm's annotations name
                // their release.
                Scope::Cluster => controller.watches_dynamic(child, Scope::Cluster, release_of),
            };
        }
        controller.build()?;
    }
    Ok(())
}

/// The kinds the watch's chart renders with its default values (hooks aside), each with
/// its scope; a kind that does not render or is not served is logged and left out.
async fn dependent_kinds(watch: &Watch, mapper: &RestMapper) -> Vec<(ApiResource, Scope)> {
    let rendered = match render(watch, "helm-operator-probe", "default", &json!({}), 1, false) {
        Ok(rendered) => rendered,
        Err(e) => {
            tracing::warn!(
                chart = %watch.chart.display(),
                error = %e,
                "the chart does not render with its default values; dependent resources are not watched"
            );
            return Vec::new();
        }
    };
    let mut dependents = Vec::new();
    let mut seen = Vec::new();
    for object in rendered.manifest_objects() {
        let gvk = object.gvk();
        if seen.contains(&gvk) {
            continue;
        }
        seen.push(gvk.clone());
        match mapper.rest_mapping(&gvk).await {
            Ok((child, child_caps)) => dependents.push((child, child_caps.scope)),
            Err(e) => tracing::warn!(kind = %gvk.kind, error = %e, "not watching a kind the chart renders"),
        }
    }
    dependents
}

/// The release (custom resource) a cluster-scoped child belongs to, from the
/// `meta.helm.sh/release-name` and `-namespace` annotations the operator applies.
fn release_of(child: &DynamicObject) -> Vec<opkit::Request> {
    let annotations = child.annotations();
    match (annotations.get("meta.helm.sh/release-name"), annotations.get("meta.helm.sh/release-namespace")) {
        (Some(name), Some(namespace)) => vec![opkit::Request::new(name.as_str(), Some(namespace.as_str()))],
        _ => Vec::new(),
    }
}

/// What a reconcile does with a selected custom resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// Deleted, and the release is already uninstalled (no finalizer left): nothing.
    Nothing,
    /// Deleted: uninstall the release (`helm uninstall --wait`), then drop the finalizer.
    Uninstall,
    /// Deleted under `uninstall-wait`: uninstall, and keep the finalizer until every
    /// object of the release is gone.
    UninstallAndWait,
    /// Install, upgrade or re-apply the release.
    Deploy,
}

impl Plan {
    /// The plan for `object`, from its deletion, finalizer and annotations.
    fn of(object: &DynamicObject) -> Plan {
        if !opkit::finalizer::is_being_deleted(object) {
            Plan::Deploy
        } else if !opkit::finalizer::contains_finalizer(object, UNINSTALL_FINALIZER) {
            Plan::Nothing
        } else if ReleaseAnnotations::of(object).uninstall_wait {
            Plan::UninstallAndWait
        } else {
            Plan::Uninstall
        }
    }
}

/// A custom resource as a reconcile found it: its release's name and namespace, the
/// secrets the release is stored in, the status the reconcile writes and its period.
struct Observed<'a> {
    object: &'a DynamicObject,
    name: String,
    namespace: String,
    secrets: Api<Secret>,
    status: ResourceStatus,
    period: Duration,
}

impl<'a> Observed<'a> {
    fn of(ctx: &Context<DynamicObject>, object: &'a DynamicObject, period: Duration) -> Observed<'a> {
        let namespace = object.namespace().unwrap_or_else(|| "default".to_string());
        Observed {
            object,
            name: object.name_any(),
            secrets: Api::namespaced(ctx.client.clone(), &namespace),
            status: ResourceStatus::of(ctx.dynamic_api(), object),
            namespace,
            period,
        }
    }

    /// The release as the rollout names it: `namespace/name`.
    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The stored revisions of a release, none pending (a pending revision was left by an
/// operator stopped in the middle of an operation, and is cleared as operator-sdk clears
/// it), and the deployed one.
struct StoredRelease {
    history: Vec<Release>,
    deployed: Option<Release>,
}

impl StoredRelease {
    async fn read(secrets: &Api<Secret>, name: &str) -> Result<StoredRelease, OperatorError> {
        let history = release::history(secrets, name).await?;
        let history = release::delete_pending(secrets, history).await?;
        let deployed = history.iter().rev().find(|r| r.info.status == "deployed").cloned();
        Ok(StoredRelease { history, deployed })
    }
}

impl Reconciler<DynamicObject> for HelmReconciler {
    async fn reconcile(&self, ctx: Context<DynamicObject>) -> ReconcileResult {
        let Some(object) = ctx.object.clone() else { return Ok(Action::done()) };
        if !self.selects(&object)? {
            return Ok(Action::done());
        }
        let period = annotations::reconcile_period(&object)
            .map_err(ReconcileError::retry)?
            .unwrap_or(self.watch.reconcile_period);
        let observed = Observed::of(&ctx, &object, period);
        match Plan::of(&object) {
            Plan::Nothing => Ok(Action::done()),
            Plan::Uninstall => self.uninstall(&ctx, observed).await,
            Plan::UninstallAndWait => self.uninstall_and_wait(&ctx, observed).await,
            Plan::Deploy => self.reconcile_release(&ctx, observed).await,
        }
    }
}

impl HelmReconciler {
    /// Whether the watch's selector (if any) selects `object`.
    fn selects(&self, object: &DynamicObject) -> Result<bool, ReconcileError> {
        let Some(selector) = &self.watch.selector else { return Ok(true) };
        let selector: kube::core::Selector = selector.clone().try_into().map_err(ReconcileError::terminal)?;
        Ok(selector.matches(object.labels()))
    }

    /// The cluster a release in `namespace` lives in.
    fn cluster<'a>(&'a self, client: &'a Client, namespace: &'a str) -> Cluster<'a> {
        Cluster { client, mapper: &self.mapper, namespace }
    }

    /// Installs, upgrades or re-applies the release of a live resource and writes its
    /// status. A release made with another chart version takes its turn in the rollout,
    /// unless the rollout is paused by another release's failure.
    async fn reconcile_release(&self, ctx: &Context<DynamicObject>, mut observed: Observed<'_>) -> ReconcileResult {
        observed.status.set_condition(conditions::INITIALIZED, true, "", "");
        opkit::finalizer::ensure_finalizer(&ctx.dynamic_api(), observed.object, UNINSTALL_FINALIZER)
            .await
            .map_err(ReconcileError::retry)?;
        let stored = StoredRelease::read(&observed.secrets, &observed.name).await.map_err(ReconcileError::retry)?;
        // The status is rebuilt from the stored release, not only from the cached object's
        // (which may predate this controller's last status write).
        if let Some(current) = &stored.deployed {
            let reason = conditions::deployed_reason(current.version);
            observed.status.set_condition(conditions::DEPLOYED, true, reason, "");
            observed.status.set_deployed_release(&current.manifest, current.version);
        }
        let key = observed.key();
        let rolling = stored.deployed.as_ref().is_some_and(|d| chart_version(&d.chart) != self.chart_version);
        let _turn = match rolling {
            true => match self.rollout.take_turn(&key).await {
                Ok(turn) => turn,
                Err(failed) => {
                    self.mark_paused(&mut observed.status, &failed);
                    observed.status.write().await;
                    return Ok(Action::requeue_after(observed.period));
                }
            },
            false => None,
        };
        observed.status.remove_condition(conditions::ROLLOUT_PAUSED);
        let result = self.deploy(ctx, &observed, &stored).await;
        if rolling {
            self.rollout.finished(&key, result.is_ok());
        }
        match result {
            Ok(deployed) => self.record_deployed(observed, deployed).await,
            Err((reason, e)) => self.record_failure(observed, reason, e, rolling).await,
        }
    }

    /// Renders the release's next revision and installs it (nothing deployed), upgrades
    /// to it (the manifest or chart version changed) or re-applies the deployed one.
    async fn deploy(
        &self,
        ctx: &Context<DynamicObject>,
        observed: &Observed<'_>,
        stored: &StoredRelease,
    ) -> Result<Deployed, DeployFailure> {
        let spec = observed.object.data.get("spec").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
        let deployed = stored.deployed.as_ref();
        let failure_reason = if deployed.is_some() { conditions::UPGRADE_ERROR } else { conditions::INSTALL_ERROR };
        let rendered = render_next(&self.watch, &observed.name, &observed.namespace, &spec, &stored.history, deployed)
            .map_err(|e| (failure_reason, e))?;
        let annotations = ReleaseAnnotations::of(observed.object);
        let target = Target {
            name: &observed.name,
            owner: observed.object,
            cluster: self.cluster(&ctx.client, &observed.namespace),
            secrets: &observed.secrets,
        };
        let outcome = Outcome::of(deployed, &rendered);
        let request = DeployRequest {
            target,
            history: &stored.history,
            rendered,
            config: spec,
            mode: ApplyMode::forced_if(annotations.upgrade_force),
        };
        match deployed {
            None => install::install(request).await,
            Some(current) if outcome == Outcome::Reconciled => deploy::reapply(target, request.rendered, current).await,
            Some(previous) => {
                upgrade::upgrade(request, previous, ApplyMode::forced_if(annotations.rollback_force)).await
            }
        }
    }

    /// Writes the status of a deployed release: Deployed (for an install or upgrade),
    /// no failure conditions, `status.deployedRelease`.
    async fn record_deployed(&self, mut observed: Observed<'_>, deployed: Deployed) -> ReconcileResult {
        let Deployed { outcome, manifest, revision } = deployed;
        self.metrics.deployed(&self.watch.kind, &observed.namespace, &observed.name, revision);
        let status = &mut observed.status;
        status.remove_condition(conditions::RELEASE_FAILED);
        status.remove_condition(conditions::IRRECONCILABLE);
        match outcome {
            Outcome::Installed => status.set_condition(conditions::DEPLOYED, true, conditions::INSTALL_SUCCESSFUL, ""),
            Outcome::Upgraded => status.set_condition(conditions::DEPLOYED, true, conditions::UPGRADE_SUCCESSFUL, ""),
            Outcome::Reconciled => {}
        }
        status.set_deployed_release(&manifest, revision);
        status.write().await;
        Ok(Action::requeue_after(observed.period))
    }

    /// Writes the status of a failed deploy (ReleaseFailed, or Irreconcilable when
    /// re-applying failed; the rollout paused by this release when it was rolling) and
    /// retries.
    async fn record_failure(
        &self,
        mut observed: Observed<'_>,
        reason: &str,
        e: OperatorError,
        rolling: bool,
    ) -> ReconcileResult {
        let (kind, namespace, name) = (&self.watch.kind, &observed.namespace, &observed.name);
        if reason == conditions::UPGRADE_ERROR {
            // A failed upgrade may have been rolled back to a new revision.
            let history = release::history(&observed.secrets, name).await.unwrap_or_default();
            if let Some(current) = history.iter().rev().find(|r| r.info.status == "deployed") {
                observed.status.set_deployed_release(&current.manifest, current.version);
                self.metrics.deployed(kind, namespace, name, current.version);
            }
        }
        self.metrics.failed(kind, namespace, name, reason);
        let type_ =
            if reason == conditions::RECONCILE_ERROR { conditions::IRRECONCILABLE } else { conditions::RELEASE_FAILED };
        observed.status.set_condition(type_, true, reason, &e.to_string());
        if rolling {
            // Kept in the cluster: a restarted operator stays paused (Rollout::resume).
            let key = observed.key();
            self.mark_paused(&mut observed.status, &key);
        }
        observed.status.write().await;
        Err(ReconcileError::retry(e))
    }

    /// Sets `RolloutPaused`: the rollout of the chart version is paused by the failed
    /// upgrade of `failed` (`namespace/name`).
    fn mark_paused(&self, status: &mut ResourceStatus, failed: &str) {
        let message = Rollout::pause_message(&self.chart_version, failed);
        status.set_condition(conditions::ROLLOUT_PAUSED, true, conditions::CHART_UPGRADE_FAILED, &message);
    }

    /// Uninstalls the release of a deleted resource, writes Deployed False
    /// (`UninstallSuccessful`) and removes the finalizer.
    async fn uninstall(&self, ctx: &Context<DynamicObject>, mut observed: Observed<'_>) -> ReconcileResult {
        let cluster = self.cluster(&ctx.client, &observed.namespace);
        match uninstall::uninstall(cluster, &observed.secrets, &observed.name, true).await {
            Ok(()) => {
                self.forget(&observed);
                let status = &mut observed.status;
                status.set_condition(conditions::DEPLOYED, false, conditions::UNINSTALL_SUCCESSFUL, "");
                status.remove_condition(conditions::RELEASE_FAILED);
                status.clear_deployed_release();
                status.write().await;
                opkit::finalizer::remove_finalizer(&ctx.dynamic_api(), observed.object, UNINSTALL_FINALIZER)
                    .await
                    .map_err(ReconcileError::retry)?;
                Ok(Action::done())
            }
            Err(e) => Err(self.uninstall_failed(observed, e).await),
        }
    }

    /// operator-sdk's deletion under `uninstall-wait`: the release is uninstalled without
    /// waiting, Deployed becomes False (`UninstallSuccessful`, "Waiting until all
    /// resources are deleted.") and `status.deployedRelease` stays, so later reconciles
    /// still know the manifest; while any of its objects is left, they are deleted again
    /// and the finalizer stays (looked at again after [`UNINSTALL_WAIT_POLL`]). Once
    /// every one is gone the finalizer is removed.
    async fn uninstall_and_wait(&self, ctx: &Context<DynamicObject>, mut observed: Observed<'_>) -> ReconcileResult {
        let cluster = self.cluster(&ctx.client, &observed.namespace);
        let left = match uninstall::uninstall(cluster, &observed.secrets, &observed.name, false).await {
            Ok(()) => {
                let status = &mut observed.status;
                status.remove_condition(conditions::RELEASE_FAILED);
                status.set_condition(
                    conditions::DEPLOYED,
                    false,
                    conditions::UNINSTALL_SUCCESSFUL,
                    UNINSTALL_WAIT_MESSAGE,
                );
                status.write().await;
                uninstall::delete_left(cluster, observed.status.deployed_manifest()).await
            }
            Err(e) => Err(e),
        };
        match left {
            Ok(true) => {
                tracing::info!(
                    name = observed.name,
                    namespace = observed.namespace,
                    "uninstall wait: objects of the release are left"
                );
                Ok(Action::requeue_after(UNINSTALL_WAIT_POLL.min(observed.period)))
            }
            Ok(false) => {
                self.forget(&observed);
                opkit::finalizer::remove_finalizer(&ctx.dynamic_api(), observed.object, UNINSTALL_FINALIZER)
                    .await
                    .map_err(ReconcileError::retry)?;
                Ok(Action::done())
            }
            Err(e) => Err(self.uninstall_failed(observed, e).await),
        }
    }

    /// The release of `observed` is uninstalled: no longer counted, no longer pausing the
    /// rollout.
    fn forget(&self, observed: &Observed<'_>) {
        self.metrics.uninstalled(&self.watch.kind, &observed.namespace, &observed.name);
        self.rollout.forget(&observed.key());
    }

    /// Writes ReleaseFailed (`UninstallError`) and the error to retry with.
    async fn uninstall_failed(&self, mut observed: Observed<'_>, e: OperatorError) -> ReconcileError {
        self.metrics.failed(&self.watch.kind, &observed.namespace, &observed.name, conditions::UNINSTALL_ERROR);
        observed.status.set_condition(conditions::RELEASE_FAILED, true, conditions::UNINSTALL_ERROR, &e.to_string());
        observed.status.write().await;
        ReconcileError::retry(e)
    }
}
