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

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::core::SelectorExt;
use kube::discovery::Scope;
use kube::{Client, ResourceExt};
use opkit::discovery::RestMapper;
use opkit::watches_file;
use opkit::{Action, Context, Controller, Manager, ReconcileError, ReconcileResult, Reconciler};
use serde_json::{Value, json};

use crate::annotations::{self, ReleaseAnnotations, UNINSTALL_WAIT_MESSAGE};
use crate::hooks::{
    self, BEFORE_HOOK_CREATION, HOOK_FAILED, HOOK_SUCCEEDED, HOOK_TIMEOUT, HookRun, PHASE_FAILED, PHASE_SUCCEEDED,
};
use crate::manifest::{RenderedObject, manifest_of, split};
use crate::metrics::ReleaseMetrics;
use crate::release::{self, Release, chart_json};
use crate::watches::Watch;
use crate::{OperatorError, UNINSTALL_FINALIZER};

/// The field manager the operator applies objects with.
pub const FIELD_MANAGER: &str = "helm-operator";

/// How often a resource being deleted under `uninstall-wait` looks again for its
/// release's objects (at most; the reconcile period if shorter). operator-sdk
/// waits a whole reconcile period.
pub const UNINSTALL_WAIT_POLL: Duration = Duration::from_secs(2);

/// How an object of a release is written to the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyMode {
    /// Server-side apply (force) by [`FIELD_MANAGER`]: fields other managers own are
    /// kept, as Helm's three-way patch keeps them.
    Patch,
    /// `helm upgrade --force` / `helm rollback --force`: the object is replaced (PUT) with
    /// the rendered one, created if missing; whatever the manifest does not say is gone.
    Replace,
}

/// Condition types and reasons, as operator-sdk's `HelmAppCondition`s.
pub mod conditions {
    /// The resource was seen by the operator.
    pub const INITIALIZED: &str = "Initialized";
    /// The release is deployed.
    pub const DEPLOYED: &str = "Deployed";
    /// Installing, upgrading or uninstalling failed.
    pub const RELEASE_FAILED: &str = "ReleaseFailed";
    /// Re-applying a deployed release's objects failed.
    pub const IRRECONCILABLE: &str = "Irreconcilable";
    /// Reason: installed.
    pub const INSTALL_SUCCESSFUL: &str = "InstallSuccessful";
    /// Reason: upgraded.
    pub const UPGRADE_SUCCESSFUL: &str = "UpgradeSuccessful";
    /// Reason: uninstalled.
    pub const UNINSTALL_SUCCESSFUL: &str = "UninstallSuccessful";
    /// Reason: installing failed.
    pub const INSTALL_ERROR: &str = "InstallError";
    /// Reason: upgrading failed.
    pub const UPGRADE_ERROR: &str = "UpgradeError";
    /// Reason: re-applying failed.
    pub const RECONCILE_ERROR: &str = "ReconcileError";
    /// Reason: uninstalling failed.
    pub const UNINSTALL_ERROR: &str = "UninstallError";
    /// The release waits on a paused chart-version rollout (beyond operator-sdk).
    pub const ROLLOUT_PAUSED: &str = "RolloutPaused";
    /// Reason: another release's upgrade to the new chart version failed.
    pub const CHART_UPGRADE_FAILED: &str = "ChartUpgradeFailed";
}

/// Reconciles the custom resources of one watched kind.
pub struct HelmReconciler {
    watch: Watch,
    /// The kinds' resources, shared by every watched kind's reconciler.
    mapper: RestMapper,
    metrics: ReleaseMetrics,
    /// The version in the watched chart's `Chart.yaml` when the operator started.
    chart_version: String,
    rollout: Rollout,
}

/// The rollout of the operator's chart version over the releases made with another one:
/// upgrades take turns (one at a time, whatever `maxConcurrentReconciles`), and the first
/// that fails pauses the rollout until that release is upgraded or uninstalled. The pause
/// is kept in the cluster too: the failed resource's own `RolloutPaused` condition names
/// it, and a restarted operator resumes from it ([`Rollout::resume`]).
#[derive(Default)]
struct Rollout {
    /// Held while a release is upgraded to the new chart version.
    turn: tokio::sync::Mutex<()>,
    /// The release (`namespace/name`) whose upgrade failed, pausing the rollout.
    failed: Mutex<Option<String>>,
}

impl Rollout {
    /// The failed release pausing the rollout for `release`, unless that is `release`.
    fn paused_by(&self, release: &str) -> Option<String> {
        self.failed.lock().ok().and_then(|failed| failed.clone()).filter(|failed| failed != release)
    }

    /// Records the outcome of `release`'s upgrade to the new chart version.
    fn finished(&self, release: &str, succeeded: bool) {
        if let Ok(mut failed) = self.failed.lock() {
            if !succeeded {
                *failed = Some(release.to_string());
            } else if failed.as_deref() == Some(release) {
                *failed = None;
            }
        }
    }

    /// `release` is gone: it no longer pauses the rollout.
    fn forget(&self, release: &str) {
        self.finished(release, true);
    }

    /// The `RolloutPaused` condition's message: the rollout of `chart_version` is paused
    /// by the failed upgrade of `failed` (`namespace/name`).
    fn pause_message(chart_version: &str, failed: &str) -> String {
        format!("the rollout of chart version {chart_version} is paused: upgrading {failed} failed")
    }

    /// The chart version and failed release a [`Rollout::pause_message`] names.
    fn parse_pause_message(message: &str) -> Option<(&str, &str)> {
        let rest = message.strip_prefix("the rollout of chart version ")?;
        let (version, rest) = rest.split_once(" is paused: upgrading ")?;
        Some((version, rest.strip_suffix(" failed")?))
    }

    /// The rollout of `chart_version` as the resources' conditions left it: paused by the
    /// resource whose own `RolloutPaused` condition names itself for that chart version
    /// (its upgrade failed and it has not been upgraded since).
    fn resumed(chart_version: &str, resources: &[DynamicObject]) -> Rollout {
        let failed = resources.iter().find_map(|cr| {
            let key = format!("{}/{}", cr.namespace().unwrap_or_default(), cr.name_any());
            let conditions = cr.data.pointer("/status/conditions").and_then(Value::as_array)?;
            let paused = conditions.iter().find(|c| {
                c.get("type").and_then(Value::as_str) == Some(conditions::ROLLOUT_PAUSED)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })?;
            let message = paused.get("message").and_then(Value::as_str)?;
            (Rollout::parse_pause_message(message)? == (chart_version, key.as_str())).then_some(key)
        });
        Rollout { turn: tokio::sync::Mutex::new(()), failed: Mutex::new(failed) }
    }

    /// [`Rollout::resumed`] from the custom resources of `resource` in the cluster (those
    /// `selector` matches); a failed list starts unpaused, with a warning.
    async fn resume(
        client: &Client,
        resource: &ApiResource,
        chart_version: &str,
        selector: Option<&kube::core::Selector>,
    ) -> Rollout {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
        match api.list(&kube::api::ListParams::default()).await {
            Ok(list) => {
                let selected: Vec<DynamicObject> = list
                    .items
                    .into_iter()
                    .filter(|cr| selector.is_none_or(|selector| selector.matches(cr.labels())))
                    .collect();
                Rollout::resumed(chart_version, &selected)
            }
            Err(e) => {
                tracing::warn!(kind = %resource.kind, error = %e, "cannot read whether a chart rollout is paused");
                Rollout::default()
            }
        }
    }
}

/// The chart version a release (or Helm's stored chart) was made with.
fn chart_version(chart: &Value) -> &str {
    chart.pointer("/metadata/version").and_then(Value::as_str).unwrap_or_default()
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
        let mut dependents = Vec::new();
        if watch.watch_dependent_resources {
            match render(&watch, "helm-operator-probe", "default", &json!({}), 1, false) {
                Ok(rendered) => {
                    let mut seen = Vec::new();
                    for object in rendered.objects.iter().filter(|o| !o.is_hook()) {
                        let gvk = object.gvk();
                        if seen.contains(&gvk) {
                            continue;
                        }
                        seen.push(gvk.clone());
                        match mapper.rest_mapping(&gvk).await {
                            Ok((child, child_caps)) => dependents.push((child, child_caps.scope)),
                            Err(e) => {
                                tracing::warn!(kind = %gvk.kind, error = %e, "not watching a kind the chart renders")
                            }
                        }
                    }
                }
                Err(e) => tracing::warn!(
                    chart = %watch.chart.display(),
                    error = %e,
                    "the chart does not render with its default values; dependent resources are not watched"
                ),
            }
        }
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

/// The release (custom resource) a cluster-scoped child belongs to, from the
/// `meta.helm.sh/release-name` and `-namespace` annotations the operator applies.
fn release_of(child: &DynamicObject) -> Vec<opkit::Request> {
    let annotations = child.annotations();
    match (annotations.get("meta.helm.sh/release-name"), annotations.get("meta.helm.sh/release-namespace")) {
        (Some(name), Some(namespace)) => vec![opkit::Request::new(name.as_str(), Some(namespace.as_str()))],
        _ => Vec::new(),
    }
}

/// A chart rendered for one release.
struct Rendered {
    /// The objects, hooks included.
    objects: Vec<RenderedObject>,
    /// The manifest (hooks excluded), as Helm stores it.
    manifest: String,
    /// The root chart's rendered `NOTES.txt`.
    notes: String,
    /// The chart as Helm stores it.
    chart: Value,
}

/// Renders the watch's chart for release `name` in `namespace` with `spec` as values, as
/// revision `revision` of an install or (`is_upgrade`) an upgrade.
fn render(
    watch: &Watch,
    name: &str,
    namespace: &str,
    spec: &Value,
    revision: i64,
    is_upgrade: bool,
) -> Result<Rendered, OperatorError> {
    let chart = opkit_helm::chart::load(&watch.chart)?;
    let chart_value = chart_json(&chart, &watch.chart);
    let options = opkit_helm::TemplateOptions {
        release_name: name.to_string(),
        namespace: namespace.to_string(),
        values_files: vec![spec.to_string()],
        set: watch.override_values.clone(),
        revision,
        is_upgrade,
        ..opkit_helm::TemplateOptions::default()
    };
    let rendered = opkit_helm::render_release(chart, &options)?;
    let objects = split(&rendered.manifest)?;
    let manifest = manifest_of(&objects);
    Ok(Rendered { objects, manifest, notes: rendered.notes, chart: chart_value })
}

/// What a reconcile did to the release.
enum Outcome {
    Installed,
    Upgraded,
    Reconciled,
}

impl Reconciler<DynamicObject> for HelmReconciler {
    async fn reconcile(&self, ctx: Context<DynamicObject>) -> ReconcileResult {
        let Some(object) = ctx.object.clone() else { return Ok(Action::done()) };
        if let Some(selector) = &self.watch.selector {
            let selector: kube::core::Selector = selector.clone().try_into().map_err(ReconcileError::terminal)?;
            if !selector.matches(object.labels()) {
                return Ok(Action::done());
            }
        }
        let period = annotations::reconcile_period(&object)
            .map_err(ReconcileError::retry)?
            .unwrap_or(self.watch.reconcile_period);
        let api = ctx.dynamic_api();
        let name = object.name_any();
        let namespace = object.namespace().unwrap_or_else(|| "default".to_string());
        let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
        let mut status = object.data.get("status").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
        let cached_status = status.clone();

        if opkit::finalizer::is_being_deleted(object.as_ref()) {
            if !opkit::finalizer::contains_finalizer(object.as_ref(), UNINSTALL_FINALIZER) {
                return Ok(Action::done());
            }
            if ReleaseAnnotations::of(&object).uninstall_wait {
                return self.uninstall_and_wait(&ctx, &object, &secrets, status, &cached_status, period).await;
            }
            return match self.uninstall(&ctx.client, &secrets, &name, &namespace, true).await {
                Ok(()) => {
                    self.metrics.uninstalled(&self.watch.kind, &namespace, &name);
                    self.rollout.forget(&format!("{namespace}/{name}"));
                    set_condition(&mut status, conditions::DEPLOYED, false, conditions::UNINSTALL_SUCCESSFUL, "");
                    remove_condition(&mut status, conditions::RELEASE_FAILED);
                    if let Some(s) = status.as_object_mut() {
                        s.remove("deployedRelease");
                    }
                    write_status(&api, &name, &status, &cached_status).await;
                    opkit::finalizer::remove_finalizer(&api, object.as_ref(), UNINSTALL_FINALIZER)
                        .await
                        .map_err(ReconcileError::retry)?;
                    Ok(Action::done())
                }
                Err(e) => {
                    self.metrics.failed(&self.watch.kind, &namespace, &name, conditions::UNINSTALL_ERROR);
                    set_condition(
                        &mut status,
                        conditions::RELEASE_FAILED,
                        true,
                        conditions::UNINSTALL_ERROR,
                        &e.to_string(),
                    );
                    write_status(&api, &name, &status, &cached_status).await;
                    Err(ReconcileError::retry(e))
                }
            };
        }

        set_condition(&mut status, conditions::INITIALIZED, true, "", "");
        opkit::finalizer::ensure_finalizer(&api, object.as_ref(), UNINSTALL_FINALIZER)
            .await
            .map_err(ReconcileError::retry)?;

        let history = release::history(&secrets, &name).await.map_err(ReconcileError::retry)?;
        // No operation of this release runs now: a pending revision was left by an
        // operator stopped in the middle of one, and is cleared as operator-sdk clears it.
        let history = release::delete_pending(&secrets, history).await.map_err(ReconcileError::retry)?;
        let deployed = history.iter().rev().find(|r| r.info.status == "deployed").cloned();
        let spec = object.data.get("spec").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
        let failure_reason = if deployed.is_some() { conditions::UPGRADE_ERROR } else { conditions::INSTALL_ERROR };
        // The status is rebuilt from the stored release, not only from the cached object's
        // (which may predate this controller's last status write).
        if let Some(current) = &deployed {
            set_condition(&mut status, conditions::DEPLOYED, true, deployed_reason(current.version), "");
            status["deployedRelease"] =
                json!({ "name": name, "manifest": current.manifest, "revision": current.version });
        }

        // A release made with another chart version takes its turn in the rollout, unless
        // the rollout is paused by another release's failure.
        let key = format!("{namespace}/{name}");
        let rolling = deployed.as_ref().is_some_and(|d| chart_version(&d.chart) != self.chart_version);
        let mut _turn = None;
        if rolling {
            if self.rollout.paused_by(&key).is_none() {
                _turn = Some(self.rollout.turn.lock().await);
            }
            if let Some(failed) = self.rollout.paused_by(&key) {
                let message = Rollout::pause_message(&self.chart_version, &failed);
                set_condition(
                    &mut status,
                    conditions::ROLLOUT_PAUSED,
                    true,
                    conditions::CHART_UPGRADE_FAILED,
                    &message,
                );
                write_status(&api, &name, &status, &cached_status).await;
                return Ok(Action::requeue_after(period));
            }
        }
        remove_condition(&mut status, conditions::ROLLOUT_PAUSED);

        let result = match self.render_next(&name, &namespace, &spec, &history, deployed.as_ref()) {
            Ok(rendered) => {
                self.deploy(&ctx.client, &object, &secrets, &history, deployed.as_ref(), rendered, spec).await
            }
            Err(e) => Err((failure_reason, e)),
        };
        if rolling {
            self.rollout.finished(&key, result.is_ok());
        }
        match result {
            Ok((outcome, manifest, revision)) => {
                self.metrics.deployed(&self.watch.kind, &namespace, &name, revision);
                remove_condition(&mut status, conditions::RELEASE_FAILED);
                remove_condition(&mut status, conditions::IRRECONCILABLE);
                match outcome {
                    Outcome::Installed => {
                        set_condition(&mut status, conditions::DEPLOYED, true, conditions::INSTALL_SUCCESSFUL, "")
                    }
                    Outcome::Upgraded => {
                        set_condition(&mut status, conditions::DEPLOYED, true, conditions::UPGRADE_SUCCESSFUL, "")
                    }
                    Outcome::Reconciled => {}
                }
                status["deployedRelease"] = json!({ "name": name, "manifest": manifest, "revision": revision });
                write_status(&api, &name, &status, &cached_status).await;
                Ok(Action::requeue_after(period))
            }
            Err((reason, e)) => {
                if reason == conditions::UPGRADE_ERROR {
                    // A failed upgrade may have been rolled back to a new revision.
                    let history = release::history(&secrets, &name).await.unwrap_or_default();
                    if let Some(current) = history.iter().rev().find(|r| r.info.status == "deployed") {
                        status["deployedRelease"] =
                            json!({ "name": name, "manifest": current.manifest, "revision": current.version });
                        self.metrics.deployed(&self.watch.kind, &namespace, &name, current.version);
                    }
                }
                self.metrics.failed(&self.watch.kind, &namespace, &name, reason);
                let type_ = if reason == conditions::RECONCILE_ERROR {
                    conditions::IRRECONCILABLE
                } else {
                    conditions::RELEASE_FAILED
                };
                set_condition(&mut status, type_, true, reason, &e.to_string());
                if rolling {
                    // Kept in the cluster: a restarted operator stays paused (Rollout::resume).
                    let message = Rollout::pause_message(&self.chart_version, &key);
                    set_condition(
                        &mut status,
                        conditions::ROLLOUT_PAUSED,
                        true,
                        conditions::CHART_UPGRADE_FAILED,
                        &message,
                    );
                }
                write_status(&api, &name, &status, &cached_status).await;
                Err(ReconcileError::retry(e))
            }
        }
    }
}

impl HelmReconciler {
    /// Renders the release as its deployed revision when that still gives the deployed
    /// manifest (nothing to upgrade: `.Release.Revision` and `.IsUpgrade` are the deployed
    /// revision's), else as the next revision: an install (`.Release.IsInstall`) when
    /// nothing is deployed, an upgrade otherwise.
    fn render_next(
        &self,
        name: &str,
        namespace: &str,
        spec: &Value,
        history: &[Release],
        deployed: Option<&Release>,
    ) -> Result<Rendered, OperatorError> {
        let next = history.last().map_or(1, |r| r.version + 1);
        let Some(current) = deployed else { return render(&self.watch, name, namespace, spec, next, false) };
        let as_deployed = render(&self.watch, name, namespace, spec, current.version, current.version > 1)?;
        if as_deployed.manifest == current.manifest
            && chart_version(&as_deployed.chart) == chart_version(&current.chart)
        {
            return Ok(as_deployed);
        }
        render(&self.watch, name, namespace, spec, next, true)
    }

    /// Installs, upgrades or re-applies the release; returns what it did, the manifest and
    /// the deployed revision. As operator-sdk's helm operator: a failure after the dry run
    /// (a hook, or an object the API server refuses) fails an upgrade, stored as a `failed`
    /// revision, which is then rolled back to the deployed one ([`Self::roll_back`]), and
    /// it uninstalls a failed install ([`Self::remove_objects`]).
    #[allow(clippy::too_many_arguments)]
    async fn deploy(
        &self,
        client: &Client,
        owner: &DynamicObject,
        secrets: &Api<Secret>,
        history: &[Release],
        deployed: Option<&Release>,
        rendered: Rendered,
        config: Value,
    ) -> Result<(Outcome, String, i64), (&'static str, OperatorError)> {
        let Rendered { objects, manifest, notes, chart } = rendered;
        let annotations = ReleaseAnnotations::of(owner);
        let mode = if annotations.upgrade_force { ApplyMode::Replace } else { ApplyMode::Patch };
        let name = owner.name_any();
        let namespace = owner.namespace().unwrap_or_else(|| "default".to_string());
        let outcome = match deployed {
            None => Outcome::Installed,
            Some(r) if r.manifest != manifest || chart_version(&r.chart) != chart_version(&chart) => Outcome::Upgraded,
            Some(_) => Outcome::Reconciled,
        };
        let reason = match outcome {
            Outcome::Installed => conditions::INSTALL_ERROR,
            Outcome::Upgraded => conditions::UPGRADE_ERROR,
            Outcome::Reconciled => conditions::RECONCILE_ERROR,
        };
        let fail = |e: OperatorError| (reason, e);
        if let (Outcome::Reconciled, Some(current)) = (&outcome, deployed) {
            for object in objects.iter().filter(|o| !o.is_hook()) {
                self.apply(client, owner, &namespace, object, ApplyMode::Patch, false).await.map_err(fail)?;
            }
            return Ok((outcome, manifest, current.version));
        }
        // A dry run first, as operator-sdk's install and upgrade: an object the API
        // server refuses fails the release before anything is changed.
        for object in objects.iter().filter(|o| !o.is_hook()) {
            self.apply(client, owner, &namespace, object, mode, true).await.map_err(fail)?;
        }
        let version = history.last().map_or(1, |r| r.version + 1);
        let first_deployed = history.first().map(|r| r.info.first_deployed.clone());
        // Stored pending before any hook or object is created, as Helm stores it.
        let mut release = Release::pending(&name, &namespace, version, first_deployed, chart, config, manifest.clone());
        release.info.notes = notes;
        release.hooks = hooks::release_hooks(&objects);
        release::create(secrets, &release).await.map_err(fail)?;
        let performed = self.perform(client, owner, secrets, &mut release, &objects, deployed, mode).await;
        if let Err(e) = performed {
            match deployed {
                Some(previous) => {
                    release.info.status = "failed".to_string();
                    release.info.description =
                        format!("Upgrade {} failed: {e}", opkit_apimachinery::strconv::quote(&name));
                    release::replace(secrets, &release).await.map_err(fail)?;
                    let rollback_mode = if annotations.rollback_force { ApplyMode::Replace } else { ApplyMode::Patch };
                    if let Err(rollback) =
                        self.roll_back(client, owner, secrets, &release, previous, rollback_mode).await
                    {
                        tracing::warn!(name, error = %rollback, "rolling back the failed upgrade");
                    }
                }
                None => {
                    // Helm stores the failed install (a failed write is logged, as Helm's
                    // `recordRelease`); operator-sdk then uninstalls it, which purges the
                    // record.
                    release.info.status = "failed".to_string();
                    release.info.description = format!("failed: {e}");
                    if let Err(e) = release::replace(secrets, &release).await {
                        tracing::warn!(name, error = %e, "recording the failed install");
                    }
                    let manifest_objects: Vec<RenderedObject> =
                        objects.iter().filter(|o| !o.is_hook()).cloned().collect();
                    let mut errors =
                        match self.remove_objects(client, &namespace, &objects, &manifest_objects, true).await {
                            Ok(errors) => errors,
                            Err(e) => vec![e.to_string()],
                        };
                    if let Err(e) = release::delete_all(secrets, std::slice::from_ref(&release)).await {
                        errors.push(e.to_string());
                    }
                    if !errors.is_empty() {
                        tracing::warn!(name, errors = errors.join("; "), "uninstalling the failed install");
                    }
                }
            }
            return Err((reason, e));
        }
        if let Some(previous) = deployed {
            let mut superseded = previous.clone();
            superseded.info.status = "superseded".to_string();
            release::replace(secrets, &superseded).await.map_err(fail)?;
        }
        release.mark_deployed();
        release::replace(secrets, &release).await.map_err(fail)?;
        Ok((outcome, manifest, version))
    }

    /// Installs (nothing `deployed`) or upgrades the release's objects: the `pre-install`
    /// or `pre-upgrade` hooks, every object applied, the `post-` hooks, and, for an
    /// upgrade, the deployed revision's objects the new manifest no longer has deleted
    /// (after the post hooks; Helm deletes them first). Each hook's run is recorded in
    /// `release` (the new, pending revision), stored in `secrets` as each hook starts.
    /// The error is Helm's.
    #[allow(clippy::too_many_arguments)]
    async fn perform(
        &self,
        client: &Client,
        owner: &DynamicObject,
        secrets: &Api<Secret>,
        release: &mut Release,
        objects: &[RenderedObject],
        deployed: Option<&Release>,
        mode: ApplyMode,
    ) -> Result<(), OperatorError> {
        let namespace = release.namespace.clone();
        let namespace = namespace.as_str();
        let (pre, post) =
            if deployed.is_some() { ("pre-upgrade", "post-upgrade") } else { ("pre-install", "post-install") };
        let hook_failed = |event: &str, e: String| {
            OperatorError::Hook(if deployed.is_some() {
                format!("{event} hooks failed: {e}")
            } else {
                format!("failed {event}: {e}")
            })
        };
        let record = Some((secrets, &mut *release));
        self.run_hooks(client, namespace, objects, pre, record).await.map_err(|e| hook_failed(pre, e))?;
        for object in objects.iter().filter(|o| !o.is_hook()) {
            self.apply(client, owner, namespace, object, mode, false).await?;
        }
        let record = Some((secrets, &mut *release));
        self.run_hooks(client, namespace, objects, post, record).await.map_err(|e| hook_failed(post, e))?;
        if let Some(previous) = deployed {
            self.delete_dropped(client, namespace, &previous.manifest, objects).await?;
        }
        Ok(())
    }

    /// Deletes the objects of `old_manifest` that `objects` no longer has, as `helm
    /// upgrade` and `helm rollback` do.
    async fn delete_dropped(
        &self,
        client: &Client,
        namespace: &str,
        old_manifest: &str,
        objects: &[RenderedObject],
    ) -> Result<(), OperatorError> {
        let kept: Vec<(GroupVersionKind, String)> =
            objects.iter().filter(|o| !o.is_hook()).map(|o| (o.gvk(), o.name().to_string())).collect();
        for object in split(old_manifest)?.iter().filter(|o| !kept.contains(&(o.gvk(), o.name().to_string()))) {
            self.delete(client, namespace, object).await?;
        }
        Ok(())
    }

    /// `helm rollback NAME` after the failed upgrade `failed`, as operator-sdk's helm
    /// operator runs it: a new revision with `target`'s chart, values, manifest, notes and
    /// hooks (`Rollback to N`), `target`'s `pre-rollback` hooks, its objects applied and the
    /// failed revision's others deleted, its `post-rollback` hooks; then `target` is
    /// superseded and the new revision deployed. A failure stores the new revision as
    /// `failed` (`Rollback "NAME" failed: ...`) and `target` stays deployed. `mode` is
    /// [`ApplyMode::Replace`] for `--force` (operator-sdk's default, `rollback-force`).
    async fn roll_back(
        &self,
        client: &Client,
        owner: &DynamicObject,
        secrets: &Api<Secret>,
        failed: &Release,
        target: &Release,
        mode: ApplyMode,
    ) -> Result<(), OperatorError> {
        let mut rolled = target.clone();
        rolled.version = failed.version + 1;
        rolled.info.first_deployed = failed.info.first_deployed.clone();
        rolled.info.last_deployed = jiff::Timestamp::now().to_string();
        rolled.info.description = format!("Rollback to {}", target.version);
        rolled.info.status = "pending-rollback".to_string();
        release::create(secrets, &rolled).await?;
        let namespace = target.namespace.as_str();
        let rolled_back = async {
            let hook_objects = split(&hooks::hooks_text(&target.hooks))?;
            self.run_hooks(client, namespace, &hook_objects, "pre-rollback", Some((secrets, &mut rolled)))
                .await
                .map_err(OperatorError::Hook)?;
            let objects = split(&target.manifest)?;
            for object in &objects {
                self.apply(client, owner, namespace, object, mode, false).await?;
            }
            self.delete_dropped(client, namespace, &failed.manifest, &objects).await?;
            self.run_hooks(client, namespace, &hook_objects, "post-rollback", Some((secrets, &mut rolled)))
                .await
                .map_err(OperatorError::Hook)
        }
        .await;
        match rolled_back {
            Ok(()) => {
                let mut superseded = target.clone();
                superseded.info.status = "superseded".to_string();
                release::replace(secrets, &superseded).await?;
                rolled.info.status = "deployed".to_string();
                release::replace(secrets, &rolled).await
            }
            Err(e) => {
                rolled.info.status = "failed".to_string();
                rolled.info.description =
                    format!("Rollback {} failed: {e}", opkit_apimachinery::strconv::quote(&rolled.name));
                release::replace(secrets, &rolled).await?;
                Err(e)
            }
        }
    }

    /// Uninstalls the release as `helm uninstall --wait` (without `--keep-history`): the
    /// stored release's `pre-delete` hooks, its objects deleted and waited for until they
    /// are gone, its `post-delete` hooks, then every stored revision deleted. A failure
    /// after the objects were deleted still deletes the revisions, and is Helm's
    /// `uninstallation completed with N error(s): ...`. Without `wait` the objects are
    /// only deleted, as `helm uninstall` without `--wait` (operator-sdk's uninstall).
    async fn uninstall(
        &self,
        client: &Client,
        secrets: &Api<Secret>,
        name: &str,
        namespace: &str,
        wait: bool,
    ) -> Result<(), OperatorError> {
        let history = release::history(secrets, name).await?;
        let mut errors = Vec::new();
        if let Some(latest) = history.iter().rev().find(|r| r.info.status == "deployed").or(history.last()) {
            let stored_hooks = split(&hooks::hooks_text(&latest.hooks))?;
            errors = self.remove_objects(client, namespace, &stored_hooks, &split(&latest.manifest)?, wait).await?;
        }
        release::delete_all(secrets, &history).await?;
        if errors.is_empty() {
            Ok(())
        } else {
            Err(OperatorError::Hook(format!(
                "uninstallation completed with {} error(s): {}",
                errors.len(),
                errors.join("; ")
            )))
        }
    }

    /// operator-sdk's deletion under `uninstall-wait`: the release is uninstalled without
    /// waiting, Deployed becomes False (`UninstallSuccessful`, "Waiting until all
    /// resources are deleted.") and `status.deployedRelease` stays, so later reconciles
    /// still know the manifest; while any of its objects is left, they are deleted again
    /// and the finalizer stays (looked at again after [`UNINSTALL_WAIT_POLL`]). Once
    /// every one is gone the finalizer is removed.
    async fn uninstall_and_wait(
        &self,
        ctx: &Context<DynamicObject>,
        object: &DynamicObject,
        secrets: &Api<Secret>,
        mut status: Value,
        cached_status: &Value,
        period: Duration,
    ) -> ReconcileResult {
        let api = ctx.dynamic_api();
        let name = object.name_any();
        let namespace = object.namespace().unwrap_or_else(|| "default".to_string());
        let uninstall_failed = |e: OperatorError, mut status: Value| {
            self.metrics.failed(&self.watch.kind, &namespace, &name, conditions::UNINSTALL_ERROR);
            set_condition(&mut status, conditions::RELEASE_FAILED, true, conditions::UNINSTALL_ERROR, &e.to_string());
            (status, e)
        };
        let left = match self.uninstall(&ctx.client, secrets, &name, &namespace, false).await {
            Ok(()) => {
                remove_condition(&mut status, conditions::RELEASE_FAILED);
                set_condition(
                    &mut status,
                    conditions::DEPLOYED,
                    false,
                    conditions::UNINSTALL_SUCCESSFUL,
                    UNINSTALL_WAIT_MESSAGE,
                );
                write_status(&api, &name, &status, cached_status).await;
                let manifest = status.pointer("/deployedRelease/manifest").and_then(Value::as_str).unwrap_or_default();
                self.delete_left(&ctx.client, &namespace, manifest).await
            }
            Err(e) => Err(e),
        };
        match left {
            Ok(true) => {
                tracing::info!(name, namespace, "uninstall wait: objects of the release are left");
                Ok(Action::requeue_after(UNINSTALL_WAIT_POLL.min(period)))
            }
            Ok(false) => {
                self.metrics.uninstalled(&self.watch.kind, &namespace, &name);
                self.rollout.forget(&format!("{namespace}/{name}"));
                opkit::finalizer::remove_finalizer(&api, object, UNINSTALL_FINALIZER)
                    .await
                    .map_err(ReconcileError::retry)?;
                Ok(Action::done())
            }
            Err(e) => {
                let (status, e) = uninstall_failed(e, status);
                write_status(&api, &name, &status, cached_status).await;
                Err(ReconcileError::retry(e))
            }
        }
    }

    /// operator-sdk's `CleanupRelease`: whether any object of `manifest` (but those
    /// annotated `helm.sh/resource-policy: keep`) still exists; if one does, every one
    /// is deleted again.
    async fn delete_left(&self, client: &Client, namespace: &str, manifest: &str) -> Result<bool, OperatorError> {
        let objects: Vec<RenderedObject> = split(manifest)?.into_iter().filter(|o| !keeps(o)).collect();
        for object in &objects {
            let (api, _) = self.api_for(client, namespace, object).await?;
            if api.get_opt(object.name()).await?.is_some() {
                for object in objects.iter().rev() {
                    self.delete(client, namespace, object).await?;
                }
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The part of `helm uninstall` that acts on the cluster: `pre-delete` hooks (a failure
    /// stops here), `objects` deleted (not those annotated `helm.sh/resource-policy:
    /// keep`) and, with `wait`, waited for until gone, then `post-delete` hooks. Returns
    /// the errors of the wait and the post-delete hooks, which Helm reports once the
    /// release is purged.
    async fn remove_objects(
        &self,
        client: &Client,
        namespace: &str,
        hook_objects: &[RenderedObject],
        objects: &[RenderedObject],
        wait: bool,
    ) -> Result<Vec<String>, OperatorError> {
        // The release's records are purged afterwards: the runs are not recorded.
        self.run_hooks(client, namespace, hook_objects, "pre-delete", None).await.map_err(OperatorError::Hook)?;
        let mut deleted = Vec::new();
        for object in objects.iter().rev() {
            if self.delete(client, namespace, object).await? && wait {
                deleted.push(object);
            }
        }
        let mut errors = Vec::new();
        for object in deleted {
            let (api, _) = self.api_for(client, namespace, object).await?;
            if let Err(e) = wait_until(&api, object.name(), |o: Option<&DynamicObject>| o.is_none()).await {
                errors.push(e);
                break;
            }
        }
        if let Err(e) = self.run_hooks(client, namespace, hook_objects, "post-delete", None).await {
            errors.push(e);
        }
        Ok(errors)
    }

    /// Runs the hooks of `event` among `objects` as Helm's `execHook`, recording each
    /// run in its entry of `record`'s release (a pending revision), which is stored as
    /// each hook starts (its `last_run` `Running`), so `helm status` shows the hook
    /// running; the error is Helm's text (without the event's prefix, which the caller
    /// adds).
    async fn run_hooks(
        &self,
        client: &Client,
        namespace: &str,
        objects: &[RenderedObject],
        event: &str,
        mut record: Option<(&Api<Secret>, &mut Release)>,
    ) -> Result<(), String> {
        let hooks = hooks::hooks_for(objects, event);
        for (i, hook) in hooks.iter().enumerate() {
            let (api, namespaced) = self.api_for(client, namespace, hook.object).await.map_err(|e| e.to_string())?;
            let name = hook.object.name();
            if hook.has_policy(BEFORE_HOOK_CREATION) {
                delete_and_wait(&api, name).await?;
            }
            let mut body = hook.object.object.clone();
            if namespaced
                && hook.object.namespace().is_none()
                && let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut)
            {
                meta.insert("namespace".into(), json!(namespace));
            }
            let body: DynamicObject = serde_json::from_value(body).map_err(|e| e.to_string())?;
            let run = HookRun::started();
            if let Some((secrets, release)) = record.as_mut() {
                hooks::record_run(&mut release.hooks, hook, &run);
                // As Helm's `recordRelease`, a failed write is logged, not fatal.
                if let Err(e) = release::replace(secrets, release).await {
                    tracing::warn!(release = %release.name, error = %e, "recording a hook's run");
                }
            }
            if let Err(e) = api.create(&PostParams::default(), &body).await {
                if let Some((_, release)) = record.as_mut() {
                    hooks::record_run(&mut release.hooks, hook, &run.completed(PHASE_FAILED));
                }
                return Err(format!("warning: Hook {event} {} failed: {}", hook.object.source, status_message(&e)));
            }
            let hook_namespace = hook.object.namespace().unwrap_or(namespace);
            let waited = match hook.object.gvk().kind.as_str() {
                "Job" => wait_for_job(&Api::namespaced(client.clone(), hook_namespace), name).await,
                "Pod" => wait_for_pod(&Api::namespaced(client.clone(), hook_namespace), name).await,
                _ => Ok(()),
            };
            let phase = if waited.is_ok() { PHASE_SUCCEEDED } else { PHASE_FAILED };
            if let Some((_, release)) = record.as_mut() {
                hooks::record_run(&mut release.hooks, hook, &run.completed(phase));
            }
            if let Err(message) = waited {
                for done in hooks[..=i].iter().filter(|h| h.has_policy(HOOK_FAILED)) {
                    let (api, _) = self.api_for(client, namespace, done.object).await.map_err(|e| e.to_string())?;
                    delete_and_wait(&api, done.object.name()).await?;
                }
                return Err(hooks::one_error(&message));
            }
        }
        for hook in hooks.iter().filter(|h| h.has_policy(HOOK_SUCCEEDED)) {
            let (api, _) = self.api_for(client, namespace, hook.object).await.map_err(|e| e.to_string())?;
            delete_and_wait(&api, hook.object.name()).await?;
        }
        Ok(())
    }

    async fn api_for(
        &self,
        client: &Client,
        namespace: &str,
        object: &RenderedObject,
    ) -> Result<(Api<DynamicObject>, bool), OperatorError> {
        let (resource, caps) = self.mapper.rest_mapping(&object.gvk()).await?;
        Ok(match caps.scope {
            Scope::Namespaced => {
                (Api::namespaced_with(client.clone(), object.namespace().unwrap_or(namespace), &resource), true)
            }
            Scope::Cluster => (Api::all_with(client.clone(), &resource), false),
        })
    }

    /// Writes one object as `mode` says (only as a dry run when `dry_run`), labelled and
    /// annotated as Helm does, owned by the custom resource when it is namespaced in the
    /// same namespace.
    async fn apply(
        &self,
        client: &Client,
        owner: &DynamicObject,
        namespace: &str,
        object: &RenderedObject,
        mode: ApplyMode,
        dry_run: bool,
    ) -> Result<(), OperatorError> {
        let (api, namespaced) = self.api_for(client, namespace, object).await?;
        let mut body = object.object.clone();
        let meta = body
            .as_object_mut()
            .map(|o| o.entry("metadata").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut)
            .ok_or_else(|| OperatorError::Manifest(format!("{}: metadata is not a map", object.source)))?;
        if namespaced && object.namespace().is_none() {
            meta.insert("namespace".into(), json!(namespace));
        }
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert("app.kubernetes.io/managed-by".into(), json!("Helm"));
        }
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert("meta.helm.sh/release-name".into(), json!(owner.name_any()));
            annotations.insert("meta.helm.sh/release-namespace".into(), json!(namespace));
        }
        if namespaced && object.namespace().is_none_or(|ns| ns == namespace) {
            let types = owner.types.clone().unwrap_or_default();
            meta.insert(
                "ownerReferences".into(),
                json!([{
                    "apiVersion": types.api_version,
                    "kind": types.kind,
                    "name": owner.name_any(),
                    "uid": owner.uid().unwrap_or_default(),
                    "controller": true,
                    "blockOwnerDeletion": true,
                }]),
            );
        }
        let written = match mode {
            ApplyMode::Patch => {
                let mut params = PatchParams::apply(FIELD_MANAGER).force();
                params.dry_run = dry_run;
                api.patch(object.name(), &params, &Patch::Apply(&body)).await.map(|_| ())
            }
            ApplyMode::Replace => replace(&api, object.name(), body, dry_run).await,
        };
        match written {
            Ok(()) => Ok(()),
            Err(kube::Error::Api(status)) => Err(OperatorError::Apply {
                kind: object.gvk().kind,
                name: object.name().to_string(),
                message: status.message.clone(),
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes one object of a release (background propagation) unless it is annotated
    /// `helm.sh/resource-policy: keep`; whether it was deleted (or already gone).
    async fn delete(&self, client: &Client, namespace: &str, object: &RenderedObject) -> Result<bool, OperatorError> {
        if keeps(object) {
            return Ok(false);
        }
        let (api, _) = self.api_for(client, namespace, object).await?;
        match api.delete(object.name(), &DeleteParams::background()).await {
            Ok(_) => Ok(true),
            Err(e) if opkit::status::is_not_found(&e) => Ok(true),
            Err(e) => Err(e.into()),
        }
    }
}

/// Whether `object` is annotated `helm.sh/resource-policy: keep` (Helm leaves it on
/// uninstall).
fn keeps(object: &RenderedObject) -> bool {
    object.object.pointer("/metadata/annotations/helm.sh~1resource-policy").and_then(Value::as_str) == Some("keep")
}

/// The API server's message of a failed request, or the error's text.
fn status_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message.clone(),
        e => e.to_string(),
    }
}

/// Helm's `--force` update of one object: replaced (PUT, at the live object's
/// resourceVersion) by `body`, or created when it does not exist.
async fn replace(api: &Api<DynamicObject>, name: &str, mut body: Value, dry_run: bool) -> Result<(), kube::Error> {
    let post = PostParams { dry_run, field_manager: Some(FIELD_MANAGER.to_string()) };
    let Some(live) = api.get_opt(name).await? else {
        let body: DynamicObject = serde_json::from_value(body).map_err(kube::Error::SerdeError)?;
        return api.create(&post, &body).await.map(|_| ());
    };
    if let (Some(meta), Some(version)) =
        (body.get_mut("metadata").and_then(Value::as_object_mut), live.resource_version())
    {
        meta.insert("resourceVersion".into(), json!(version));
    }
    let body: DynamicObject = serde_json::from_value(body).map_err(kube::Error::SerdeError)?;
    api.replace(name, &post, &body).await.map(|_| ())
}

/// Waits until `cond` holds for object `name` of `api`, for at most [`HOOK_TIMEOUT`];
/// the timeout is Helm's `timed out waiting for the condition`.
async fn wait_until<K>(
    api: &Api<K>,
    name: &str,
    cond: impl kube::runtime::wait::Condition<K>,
) -> Result<Option<K>, String>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    match tokio::time::timeout(HOOK_TIMEOUT, kube::runtime::wait::await_condition(api.clone(), name, cond)).await {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out waiting for the condition".to_string()),
    }
}

/// Deletes a hook's object (background propagation) and waits until it is gone.
async fn delete_and_wait(api: &Api<DynamicObject>, name: &str) -> Result<(), String> {
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(e) if opkit::status::is_not_found(&e) => return Ok(()),
        Err(e) => return Err(status_message(&e)),
    }
    wait_until(api, name, |o: Option<&DynamicObject>| o.is_none()).await.map(|_| ())
}

/// Helm's `waitForJob`: until the Job is Complete, or Failed (`job NAME failed: REASON`).
async fn wait_for_job(api: &Api<Job>, name: &str) -> Result<(), String> {
    let finished = |job: &Job, type_: &str| {
        job.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == type_ && c.status == "True").cloned())
    };
    let done = move |job: Option<&Job>| {
        job.is_none_or(|job| finished(job, "Complete").is_some() || finished(job, "Failed").is_some())
    };
    let Some(job) = wait_until(api, name, done).await? else { return Err(format!("job {name} was deleted")) };
    match finished(&job, "Failed") {
        Some(failed) => Err(format!("job {name} failed: {}", failed.reason.unwrap_or_default())),
        None => Ok(()),
    }
}

/// Helm's `waitForPodSuccess`: until the Pod Succeeded, or Failed (`pod NAME failed`).
async fn wait_for_pod(api: &Api<Pod>, name: &str) -> Result<(), String> {
    let phase = |pod: &Pod| pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    let done = move |pod: Option<&Pod>| pod.is_none_or(|pod| matches!(phase(pod).as_str(), "Succeeded" | "Failed"));
    let Some(pod) = wait_until(api, name, done).await? else { return Err(format!("pod {name} was deleted")) };
    if phase(&pod) == "Failed" { Err(format!("pod {name} failed")) } else { Ok(()) }
}

/// The Deployed condition's reason for a deployed revision.
fn deployed_reason(revision: i64) -> &'static str {
    if revision == 1 { conditions::INSTALL_SUCCESSFUL } else { conditions::UPGRADE_SUCCESSFUL }
}

/// Sets an operator-sdk condition in `status.conditions`, keeping `lastTransitionTime`
/// unless the status changed.
fn set_condition(status: &mut Value, type_: &str, value: bool, reason: &str, message: &str) {
    let value = if value { "True" } else { "False" };
    let Some(conditions) = conditions_of(status) else { return };
    let now = opkit::status::now();
    let mut condition =
        BTreeMap::from([("type", json!(type_)), ("status", json!(value)), ("lastTransitionTime", json!(now))]);
    if !reason.is_empty() {
        condition.insert("reason", json!(reason));
    }
    if !message.is_empty() {
        condition.insert("message", json!(message));
    }
    match conditions.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some(type_)) {
        Some(existing) => {
            if existing.get("status").and_then(Value::as_str) == Some(value)
                && let Some(t) = existing.get("lastTransitionTime")
            {
                condition.insert("lastTransitionTime", t.clone());
            }
            *existing = json!(condition);
        }
        None => conditions.push(json!(condition)),
    }
}

fn remove_condition(status: &mut Value, type_: &str) {
    if let Some(conditions) = conditions_of(status) {
        conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some(type_));
    }
}

fn conditions_of(status: &mut Value) -> Option<&mut Vec<Value>> {
    let list = status.as_object_mut()?.entry("conditions").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    list.as_array_mut()
}

/// Writes `status` to the status subresource unless it equals the cached one (so a
/// reconcile that changed nothing does not cause another); a failure is logged (the next
/// reconcile writes it again).
async fn write_status(api: &Api<DynamicObject>, name: &str, status: &Value, cached: &Value) {
    if status == cached {
        return;
    }
    let patch = json!({ "status": status });
    if let Err(e) = api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await
        && !opkit::status::is_not_found(&e)
    {
        tracing::warn!(name, error = %e, "writing the release status");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(namespace: &str, name: &str, paused: Option<&str>) -> DynamicObject {
        let conditions: Vec<Value> = paused
            .map(|message| json!({ "type": "RolloutPaused", "status": "True", "message": message }))
            .into_iter()
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "demo.example.com/v1alpha1",
            "kind": "Nginx",
            "metadata": { "name": name, "namespace": namespace },
            "status": { "conditions": conditions },
        }))
        .expect("a resource")
    }

    #[test]
    fn a_restarted_rollout_is_paused_by_the_resource_whose_condition_names_itself() {
        let message = Rollout::pause_message("0.2.0", "team/zulu");
        assert_eq!(message, "the rollout of chart version 0.2.0 is paused: upgrading team/zulu failed");
        assert_eq!(Rollout::parse_pause_message(&message), Some(("0.2.0", "team/zulu")));
        assert_eq!(Rollout::parse_pause_message("something else"), None);

        let paused = [
            resource("team", "alpha", Some(&message)),
            resource("team", "zulu", Some(&message)),
            resource("team", "bravo", None),
        ];
        let rollout = Rollout::resumed("0.2.0", &paused);
        assert_eq!(rollout.paused_by("team/alpha").as_deref(), Some("team/zulu"));
        assert_eq!(rollout.paused_by("team/zulu"), None, "the failed release takes its turn");
        // Another chart version starts a new rollout; a paused resource alone (its failed
        // release since upgraded or deleted) does not pause it.
        assert_eq!(Rollout::resumed("0.3.0", &paused).paused_by("team/alpha"), None);
        assert_eq!(Rollout::resumed("0.2.0", &paused[..1]).paused_by("team/alpha"), None);
    }
}
