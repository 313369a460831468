//! The KUDO engine: one controller, written on the opkit runtime, that runs the plans of
//! every `Instance` (KUDO's instance controller and workflow engine).
//!
//! A reconcile reads the Instance and its OperatorVersion, then:
//! 1. **deletion**: runs the `cleanup` plan, held by the [`CLEANUP_FINALIZER`] (added only
//!    when the operator has a cleanup plan, as KUDO does), then lets the Instance go;
//! 2. **cancel / retry** (beyond KUDO): the [`CANCEL_ANNOTATION`] ends the active plan in
//!    FATAL_ERROR ("cancelled"); the [`RETRY_ANNOTATION`] resumes a failed plan from its
//!    failed steps, with the same UID;
//! 3. **triggers**: `deploy` when the Instance is new; a changed parameter's `trigger`
//!    plan (default `update`, else `deploy`); `upgrade` (else `update`, else `deploy`) when
//!    `spec.operatorVersion` changes; a plan named in `spec.planExecution.planName`
//!    (`kubectl kudo plan trigger`). What the last started plan saw is kept in the
//!    [`SNAPSHOT_ANNOTATION`], as KUDO's `last-applied-instance-state`;
//! 4. **concurrency** (defined here; KUDO left it open): one plan runs at a time. A plan
//!    triggered while another runs waits for it to end, except the same plan triggered
//!    again, which replaces the running execution (a new UID, from its first step);
//! 5. **execution**: phases and steps by their `serial`/`parallel` strategies; a step runs
//!    its tasks in order (Apply, Delete, Toggle, Dummy, Pipe, KudoOperator) and is COMPLETE when every object it applied is
//!    healthy ([`crate::health`]); an API error is ERROR (retried, as KUDO), a rendering
//!    error or a failed Job FATAL_ERROR. Status goes to `status.planStatus`;
//! 6. **drift repair** (beyond KUDO): with no plan active, the objects of the last
//!    completed plan are applied again; one that was deleted or changed is restored, with
//!    a `DriftRepaired` event.
//!
//! Every run is kept in the Instance's plan history ([`crate::plan::HISTORY_ANNOTATION`]).
//! An object of an API version Kubernetes removed (`policy/v1beta1` PodDisruptionBudget,
//! `batch/v1beta1` CronJob, …) is applied at its same-fielded successor.

mod apply;
mod drift;
mod enhance;
mod pipe;
mod pipe_script;
mod removed_apis;
mod step;
mod tasks;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::Scope;
use kube::{Resource, ResourceExt};
use opkit::discovery::RestMapper;
use opkit::events::EventType;
use opkit::{Action, Context, Controller, Manager, ReconcileError, ReconcileResult, Reconciler};
use serde_json::{Value, json};

use crate::KudoError;
use crate::package::{Plan, Task};
use crate::params::Parameter;
use crate::plan::{HistoryEntry, PhaseStatus, PlanStatus, state};
use crate::resources;

/// The finalizer that holds a deleted Instance until its cleanup plan ran (KUDO's).
pub const CLEANUP_FINALIZER: &str = "kudo.dev.instance.cleanup";
/// Annotation: what the last started plan saw (`{"operatorVersion":…,"parameters":{…}}`).
pub(crate) const SNAPSHOT_ANNOTATION: &str = "kudo.dev/last-applied-instance-state";
/// Annotation (opkit): cancel the active plan (`opkit kudo plan cancel`); the value is
/// the plan's name, or empty for whichever runs.
pub(crate) const CANCEL_ANNOTATION: &str = "kudo.dev/cancel-plan";
/// Annotation (opkit): retry a failed plan from its failed steps (`opkit kudo plan retry`);
/// the value is the plan's name.
pub(crate) const RETRY_ANNOTATION: &str = "kudo.dev/retry-plan";
/// The field manager the engine applies objects with.
pub(crate) const FIELD_MANAGER: &str = "kudo-manager";
/// How often an active plan's health is looked at again.
pub(crate) const POLL: Duration = Duration::from_secs(1);
/// How often drift is looked for when nothing else happens.
pub(crate) const DRIFT_PERIOD: Duration = Duration::from_secs(30);
/// The message of a cancelled plan.
pub const CANCELLED: &str = "cancelled by user";

/// Options of the engine.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// How many Instances are reconciled at once.
    pub concurrency: usize,
    /// Whether drift is repaired.
    pub drift_repair: bool,
}

impl Default for EngineOptions {
    fn default() -> EngineOptions {
        EngineOptions { concurrency: 8, drift_repair: true }
    }
}

/// Registers the engine with `mgr` (default options). KUDO's CRDs must be installed.
pub async fn setup(mgr: &Manager) -> Result<(), KudoError> {
    setup_with(mgr, EngineOptions::default()).await
}

/// Registers the engine with `mgr`: one controller for Instances, owning what plans
/// deploy (Deployments, StatefulSets, Services, ConfigMaps, Secrets, Pods, Jobs and child
/// Instances), so a change to one of them reconciles its Instance at once.
pub async fn setup_with(mgr: &Manager, options: EngineOptions) -> Result<(), KudoError> {
    let mapper = RestMapper::new(mgr.client());
    let gvk = GroupVersionKind::gvk(resources::GROUP, resources::VERSION, "Instance");
    let (instance, caps) = mapper.rest_mapping(&gvk).await.map_err(|e| {
        KudoError::Crd(format!("the API server does not serve kudo.dev/v1beta1 Instance; run `opkit kudo init`: {e}"))
    })?;
    let engine = Engine { mapper, drift_repair: options.drift_repair };
    Controller::new_dynamic(mgr, instance.clone(), caps.scope, engine)
        .named("kudo-instance")
        .max_concurrent_reconciles(options.concurrency)
        .owns::<Deployment>()
        .owns::<StatefulSet>()
        .owns::<Service>()
        .owns::<ConfigMap>()
        .owns::<Secret>()
        .owns::<Pod>()
        .owns::<Job>()
        .owns_dynamic(&instance, Scope::Namespaced)
        .build()?;
    Ok(())
}

/// The Instance reconciler.
pub(crate) struct Engine {
    /// The resources of the kinds plans deploy.
    pub(crate) mapper: RestMapper,
    drift_repair: bool,
}

/// An OperatorVersion as the engine reads it.
#[derive(Debug, Clone, Default)]
pub(crate) struct OperatorVersion {
    pub(crate) name: String,
    pub(crate) operator_name: String,
    pub(crate) version: String,
    pub(crate) app_version: String,
    pub(crate) templates: BTreeMap<String, String>,
    pub(crate) tasks: Vec<Task>,
    pub(crate) parameters: Vec<Parameter>,
    pub(crate) plans: BTreeMap<String, Plan>,
}

impl OperatorVersion {
    fn from_object(ov: &DynamicObject) -> Result<OperatorVersion, String> {
        let spec = ov.data.get("spec").cloned().unwrap_or_else(|| json!({}));
        let s = |k: &str| spec.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let de = |k: &str| spec.get(k).cloned().filter(|v| !v.is_null());
        Ok(OperatorVersion {
            name: ov.name_any(),
            operator_name: spec.pointer("/operator/name").and_then(Value::as_str).unwrap_or_default().to_string(),
            version: s("version"),
            app_version: s("appVersion"),
            templates: de("templates")
                .map(serde_json::from_value)
                .transpose()
                .map_err(|e| e.to_string())?
                .unwrap_or_default(),
            tasks: de("tasks").map(serde_json::from_value).transpose().map_err(|e| e.to_string())?.unwrap_or_default(),
            parameters: spec
                .get("parameters")
                .and_then(Value::as_array)
                .map(|ps| ps.iter().map(crate::params::from_api).collect())
                .unwrap_or_default(),
            plans: de("plans").map(serde_json::from_value).transpose().map_err(|e| e.to_string())?.unwrap_or_default(),
        })
    }

    fn has_plan(&self, name: &str) -> bool {
        self.plans.contains_key(name)
    }
}

/// What the last started plan saw.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Snapshot {
    pub(crate) operator_version: String,
    #[serde(default)]
    pub(crate) parameters: BTreeMap<String, String>,
}

/// The Instance as one reconcile sees it.
pub(crate) struct InstanceView {
    pub(crate) object: DynamicObject,
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) ov_name: String,
    /// Where the OperatorVersion lives: `spec.operatorVersion.namespace`, else the
    /// Instance's namespace (KUDO's `OperatorVersionNamespace`).
    pub(crate) ov_namespace: String,
    pub(crate) parameters: BTreeMap<String, String>,
    pub(crate) plan_status: BTreeMap<String, PlanStatus>,
    pub(crate) snapshot: Option<Snapshot>,
    pub(crate) execution: (String, String),
}

impl InstanceView {
    fn of(object: &DynamicObject) -> InstanceView {
        let spec = object.data.get("spec").cloned().unwrap_or_else(|| json!({}));
        let parameters: BTreeMap<String, String> = spec
            .get("parameters")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter().map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string))).collect()
            })
            .unwrap_or_default();
        let plan_status = object
            .data
            .pointer("/status/planStatus")
            .cloned()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        let snapshot = object.annotations().get(SNAPSHOT_ANNOTATION).and_then(|s| serde_json::from_str(s).ok());
        let s = |p: &str| spec.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
        let namespace = object.namespace().unwrap_or_else(|| "default".into());
        let ov_namespace = Some(s("/operatorVersion/namespace")).filter(|n| !n.is_empty()).unwrap_or(namespace.clone());
        InstanceView {
            object: object.clone(),
            name: object.name_any(),
            namespace,
            ov_name: s("/operatorVersion/name"),
            ov_namespace,
            parameters,
            plan_status,
            snapshot,
            execution: (s("/planExecution/planName"), s("/planExecution/uid")),
        }
    }

    /// The active plan: the one PENDING, IN_PROGRESS or in (retried) ERROR.
    fn active(&self) -> Option<&PlanStatus> {
        self.plan_status
            .values()
            .find(|p| matches!(p.status.as_str(), state::PENDING | state::IN_PROGRESS | state::ERROR))
    }
}

/// What a trigger asks for.
#[derive(Debug, Clone, PartialEq)]
struct Trigger {
    plan: String,
    reason: String,
}

impl Reconciler<DynamicObject> for Engine {
    async fn reconcile(&self, ctx: Context<DynamicObject>) -> ReconcileResult {
        let Some(object) = ctx.object.clone() else { return Ok(Action::done()) };
        let api = ctx.dynamic_api();
        // The cache may lag behind this controller's own writes; read the Instance fresh.
        let Some(object) = api.get_opt(&object.name_any()).await.map_err(ReconcileError::retry)? else {
            return Ok(Action::done());
        };
        let mut inst = InstanceView::of(&object);
        let ovs: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), &inst.ov_namespace, &resources::api_resource("OperatorVersion"));
        let Some(ov_object) = ovs.get_opt(&inst.ov_name).await.map_err(ReconcileError::retry)? else {
            if opkit::finalizer::is_being_deleted(&object) {
                // Nothing can run without the OperatorVersion: let the Instance go.
                opkit::finalizer::remove_finalizer(&api, &object, CLEANUP_FINALIZER)
                    .await
                    .map_err(ReconcileError::retry)?;
                return Ok(Action::done());
            }
            tracing::warn!(instance = %inst.name, ov = %inst.ov_name, "the Instance's OperatorVersion does not exist");
            return Ok(Action::requeue_after(Duration::from_secs(5)));
        };
        let ov = OperatorVersion::from_object(&ov_object).map_err(ReconcileError::terminal)?;
        let before = inst.plan_status.clone();
        for (name, plan) in &ov.plans {
            inst.plan_status.entry(name.clone()).or_insert_with(|| PlanStatus::never_run(name, plan));
        }
        let mut meta = MetaChanges::default();

        if opkit::finalizer::is_being_deleted(&object) {
            return self.deleting(&ctx, &api, &mut inst, &ov, before).await;
        }
        if ov.has_plan("cleanup") {
            opkit::finalizer::ensure_finalizer(&api, &object, CLEANUP_FINALIZER)
                .await
                .map_err(ReconcileError::retry)?;
        }

        self.cancel_and_retry(&ctx, &inst.object.clone(), &mut inst, &mut meta).await;

        if let Some(trigger) = self.trigger(&inst, &ov) {
            let active = inst.active().map(|a| (a.name.clone(), a.uid.clone()));
            match active {
                None => self.start(&ctx, &mut inst, &ov, &trigger, &mut meta),
                Some((running, _)) if running == trigger.plan => {
                    self.start(&ctx, &mut inst, &ov, &trigger, &mut meta);
                }
                Some(_) => {} // waits for the active plan to end
            }
        }

        let mut action = Action::requeue_after(DRIFT_PERIOD);
        if let Some(active) = inst.active().map(|a| a.name.clone()) {
            let params = inst.snapshot.clone().unwrap_or_default().parameters;
            self.execute(&ctx, &mut inst, &ov, &active, &params).await;
            let status = inst.plan_status.get(&active).cloned().unwrap_or_default();
            if !state::is_terminal(&status.status) || status.status == state::ERROR {
                action = Action::requeue_after(if status.status == state::ERROR { POLL * 3 } else { POLL });
            }
            if matches!(status.status.as_str(), state::COMPLETE | state::FATAL_ERROR) {
                self.finished(&ctx, &inst, &status, &mut meta).await;
            }
        } else if self.drift_repair {
            drift::repair(self, &ctx, &inst, &ov).await;
        }

        meta.write(&api, &inst).await.map_err(ReconcileError::retry)?;
        write_status(&api, &inst.name, &before, &inst.plan_status).await.map_err(ReconcileError::retry)?;
        Ok(action)
    }
}

/// Metadata and spec changes one reconcile makes to the Instance.
#[derive(Default)]
struct MetaChanges {
    annotations: BTreeMap<String, Option<String>>,
    plan_execution: Option<Value>,
}

impl MetaChanges {
    async fn write(&self, api: &Api<DynamicObject>, inst: &InstanceView) -> kube::Result<()> {
        if self.annotations.is_empty() && self.plan_execution.is_none() {
            return Ok(());
        }
        let mut patch = json!({"metadata": {"annotations": self.annotations}});
        if let Some(pe) = &self.plan_execution {
            patch["spec"] = json!({"planExecution": pe});
        }
        match api.patch(&inst.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => Ok(()),
            Err(e) if opkit::status::is_not_found(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Engine {
    /// The plan a change asks for, if any.
    fn trigger(&self, inst: &InstanceView, ov: &OperatorVersion) -> Option<Trigger> {
        let (manual, uid) = &inst.execution;
        if !manual.is_empty() && uid.is_empty() {
            return Some(Trigger { plan: manual.clone(), reason: "triggered manually".into() });
        }
        let Some(snapshot) = &inst.snapshot else {
            return Some(Trigger { plan: "deploy".into(), reason: "instance created".into() });
        };
        if snapshot.operator_version != inst.ov_name {
            let plan = ["upgrade", "update", "deploy"].into_iter().find(|p| ov.has_plan(p)).unwrap_or("deploy");
            return Some(Trigger {
                plan: plan.into(),
                reason: format!("operator version changed from {} to {}", snapshot.operator_version, inst.ov_name),
            });
        }
        let mut changed: Vec<&String> =
            inst.parameters.iter().filter(|(k, v)| snapshot.parameters.get(*k) != Some(*v)).map(|(k, _)| k).collect();
        changed.extend(snapshot.parameters.keys().filter(|k| !inst.parameters.contains_key(*k)));
        if changed.is_empty() {
            return None;
        }
        let plans: Vec<String> = changed
            .iter()
            .map(|k| crate::params::trigger_plan(ov.parameters.iter().find(|p| &p.name == *k), |p| ov.has_plan(p)))
            .collect();
        // Several plans at once: KUDO refuses the update; the engine runs the broadest
        // (deploy if one asks for it, else the first).
        let plan = if plans.iter().any(|p| p == "deploy") { "deploy".to_string() } else { plans[0].clone() };
        let names: Vec<&str> = changed.iter().map(|s| s.as_str()).collect();
        Some(Trigger { plan, reason: format!("parameter(s) {} changed", names.join(", ")) })
    }

    /// Starts `trigger.plan` with a new UID.
    fn start(
        &self,
        ctx: &Context<DynamicObject>,
        inst: &mut InstanceView,
        ov: &OperatorVersion,
        trigger: &Trigger,
        meta: &mut MetaChanges,
    ) {
        let snapshot = Snapshot { operator_version: inst.ov_name.clone(), parameters: inst.parameters.clone() };
        meta.annotations.insert(SNAPSHOT_ANNOTATION.into(), serde_json::to_string(&snapshot).ok());
        inst.snapshot = Some(snapshot);
        let Some(plan) = ov.plans.get(&trigger.plan) else {
            tracing::warn!(instance = %inst.name, plan = %trigger.plan, "the triggered plan does not exist");
            meta.plan_execution = Some(Value::Null);
            let recorder = ctx.recorder.clone();
            let reference = inst.object.object_ref(&resources::api_resource("Instance"));
            let note = format!("plan {:?} is not defined by {}", trigger.plan, ov.name);
            tokio::spawn(async move {
                recorder.publish(&reference, EventType::Warning, "UnknownPlan", "TriggerPlan", &note).await;
            });
            return;
        };
        // A replaced execution of the same plan goes to the history first.
        if let Some(old) = inst.plan_status.get(&trigger.plan).filter(|p| p.is_running() || p.status == state::ERROR) {
            let mut ended = old.clone();
            ended.finish_unfinished(state::FATAL_ERROR, "replaced by a new execution");
            meta.annotations.insert(crate::plan::HISTORY_ANNOTATION.into(), Some(history_with(inst, meta, &ended, "")));
        }
        let uid = uuid::Uuid::new_v4().to_string();
        let status = PlanStatus::started(&trigger.plan, plan, &uid);
        let entry = HistoryEntry {
            plan: trigger.plan.clone(),
            uid: uid.clone(),
            status: state::IN_PROGRESS.into(),
            reason: trigger.reason.clone(),
            started: crate::plan::now(),
            ..HistoryEntry::default()
        };
        let history = crate::plan::record(current_history(inst, meta), entry);
        meta.annotations.insert(crate::plan::HISTORY_ANNOTATION.into(), serde_json::to_string(&history).ok());
        inst.plan_status.insert(trigger.plan.clone(), status);
        meta.plan_execution = Some(json!({"planName": trigger.plan, "uid": uid, "status": state::IN_PROGRESS}));
        inst.execution = (trigger.plan.clone(), uid);
        tracing::info!(instance = %inst.name, plan = %trigger.plan, reason = %trigger.reason, "starting plan");
        publish(
            ctx,
            &inst.object,
            EventType::Normal,
            "PlanStarted",
            "RunPlan",
            format!("plan {} started: {}", trigger.plan, trigger.reason),
        );
    }

    /// Records the end of the active plan and clears `spec.planExecution`.
    async fn finished(
        &self,
        ctx: &Context<DynamicObject>,
        inst: &InstanceView,
        status: &PlanStatus,
        meta: &mut MetaChanges,
    ) {
        let history = history_with(inst, meta, status, "");
        meta.annotations.insert(crate::plan::HISTORY_ANNOTATION.into(), Some(history));
        if inst.execution.1 == status.uid || inst.execution.1.is_empty() && inst.execution.0 == status.name {
            meta.plan_execution = Some(Value::Null);
        }
        let (type_, reason) = if status.status == state::COMPLETE {
            (EventType::Normal, "PlanComplete")
        } else {
            (EventType::Warning, "PlanFailed")
        };
        let mut note = format!("plan {} ended {}", status.name, status.status);
        if !status.message.is_empty() {
            note.push_str(&format!(": {}", status.message));
        }
        publish(ctx, &inst.object, type_, reason, "RunPlan", note);
    }

    /// Handles the cancel and retry annotations.
    async fn cancel_and_retry(
        &self,
        ctx: &Context<DynamicObject>,
        object: &DynamicObject,
        inst: &mut InstanceView,
        meta: &mut MetaChanges,
    ) {
        let annotations = object.annotations();
        if let Some(which) = annotations.get(CANCEL_ANNOTATION) {
            meta.annotations.insert(CANCEL_ANNOTATION.into(), None);
            let active = inst.active().map(|a| a.name.clone()).filter(|a| which.is_empty() || a == which);
            if let Some(name) = active
                && let Some(status) = inst.plan_status.get_mut(&name)
            {
                status.finish_unfinished(state::FATAL_ERROR, CANCELLED);
                let status = status.clone();
                self.finished(ctx, inst, &status, meta).await;
                publish(
                    ctx,
                    object,
                    EventType::Normal,
                    "PlanCancelled",
                    "CancelPlan",
                    format!("plan {name} cancelled"),
                );
            }
        }
        if let Some(which) = annotations.get(RETRY_ANNOTATION) {
            meta.annotations.insert(RETRY_ANNOTATION.into(), None);
            let busy = inst.active().is_some_and(|a| &a.name != which);
            if !busy
                && let Some(status) = inst.plan_status.get_mut(which)
                && matches!(status.status.as_str(), state::ERROR | state::FATAL_ERROR)
            {
                status.retry();
                let status = status.clone();
                let entry = HistoryEntry {
                    plan: status.name.clone(),
                    uid: status.uid.clone(),
                    status: state::IN_PROGRESS.into(),
                    reason: "retried".into(),
                    started: crate::plan::now(),
                    ..HistoryEntry::default()
                };
                let history = crate::plan::record(current_history(inst, meta), entry);
                meta.annotations.insert(crate::plan::HISTORY_ANNOTATION.into(), serde_json::to_string(&history).ok());
                meta.plan_execution =
                    Some(json!({"planName": status.name, "uid": status.uid, "status": state::IN_PROGRESS}));
                inst.execution = (status.name.clone(), status.uid.clone());
                publish(ctx, object, EventType::Normal, "PlanRetried", "RetryPlan", format!("plan {which} retried"));
            }
        }
    }

    /// A deleted Instance: run `cleanup` (once), then remove the finalizer.
    async fn deleting(
        &self,
        ctx: &Context<DynamicObject>,
        api: &Api<DynamicObject>,
        inst: &mut InstanceView,
        ov: &OperatorVersion,
        before: BTreeMap<String, PlanStatus>,
    ) -> ReconcileResult {
        if !opkit::finalizer::contains_finalizer(&inst.object, CLEANUP_FINALIZER) {
            return Ok(Action::done());
        }
        let mut meta = MetaChanges::default();
        // The execution UID of cleanup on deletion is derived from the Instance's, so it
        // runs once per deletion.
        let uid = format!("cleanup-{}", inst.object.uid().unwrap_or_default());
        let done = match (ov.plans.get("cleanup"), inst.plan_status.get("cleanup").cloned()) {
            (None, _) => true,
            (Some(plan), status) => {
                if status.as_ref().is_none_or(|s| s.uid != uid) {
                    if let Some(active) = inst.active().map(|a| a.name.clone())
                        && let Some(s) = inst.plan_status.get_mut(&active)
                    {
                        s.finish_unfinished(state::FATAL_ERROR, "cancelled: the instance is being deleted");
                    }
                    inst.plan_status.insert("cleanup".into(), PlanStatus::started("cleanup", plan, &uid));
                    publish(
                        ctx,
                        &inst.object,
                        EventType::Normal,
                        "PlanStarted",
                        "RunPlan",
                        "plan cleanup started: instance deleted".into(),
                    );
                }
                let params = inst.snapshot.clone().map(|s| s.parameters).unwrap_or_else(|| inst.parameters.clone());
                self.execute(ctx, inst, ov, "cleanup", &params).await;
                let status = inst.plan_status.get("cleanup").cloned().unwrap_or_default();
                if matches!(status.status.as_str(), state::COMPLETE | state::FATAL_ERROR) {
                    self.finished(ctx, inst, &status, &mut meta).await;
                    true
                } else {
                    false
                }
            }
        };
        write_status(api, &inst.name, &before, &inst.plan_status).await.map_err(ReconcileError::retry)?;
        if done {
            opkit::finalizer::remove_finalizer(api, &inst.object, CLEANUP_FINALIZER)
                .await
                .map_err(ReconcileError::retry)?;
            return Ok(Action::done());
        }
        Ok(Action::requeue_after(POLL))
    }

    /// One pass over the active plan `plan_name`: runs what its strategies allow and
    /// updates its status.
    async fn execute(
        &self,
        ctx: &Context<DynamicObject>,
        inst: &mut InstanceView,
        ov: &OperatorVersion,
        plan_name: &str,
        given: &BTreeMap<String, String>,
    ) {
        let Some(plan) = ov.plans.get(plan_name).cloned() else { return };
        let Some(mut status) = inst.plan_status.get(plan_name).cloned() else { return };
        let params = match crate::params::effective(&ov.parameters, given) {
            Ok(p) => p,
            Err(e) => {
                status.finish_unfinished(state::FATAL_ERROR, &e);
                inst.plan_status.insert(plan_name.to_string(), status);
                return;
            }
        };
        let run = PlanRun {
            engine: self,
            ctx,
            ov,
            instance: &inst.object,
            plan: plan_name,
            uid: &status.uid,
            pipes: pipe::pipe_names(&inst.name, plan_name, &plan, ov),
            params,
        };
        let mut phases = status.phases.clone();
        for (phase, phase_status) in plan.phases.iter().zip(phases.iter_mut()) {
            if phase_status.status == state::COMPLETE {
                continue;
            }
            run.phase(phase, phase_status).await;
            if plan.strategy == crate::package::Ordering::Serial && phase_status.status != state::COMPLETE {
                break;
            }
        }
        status.phases = phases;
        let new_state = combined_state(status.phases.iter().map(|p| p.status.as_str()));
        let message = status
            .phases
            .iter()
            .flat_map(|p| &p.steps)
            .find(|s| matches!(s.status.as_str(), state::ERROR | state::FATAL_ERROR))
            .map(|s| s.message.clone())
            .unwrap_or_default();
        let old = inst.plan_status.get(plan_name);
        if old.map(|o| (&o.phases, &o.status, &o.message)) != Some((&status.phases, &new_state.to_string(), &message)) {
            status.status = new_state.to_string();
            status.message = message;
            status.touch();
        }
        inst.plan_status.insert(plan_name.to_string(), status);
    }
}

/// The history as this reconcile has it (its own pending write, else the Instance's).
fn current_history(inst: &InstanceView, meta: &MetaChanges) -> Vec<HistoryEntry> {
    match meta.annotations.get(crate::plan::HISTORY_ANNOTATION) {
        Some(Some(h)) => serde_json::from_str(h).unwrap_or_default(),
        _ => crate::plan::history_of(inst.object.annotations()),
    }
}

/// The history with the end of `status` recorded.
fn history_with(inst: &InstanceView, meta: &MetaChanges, status: &PlanStatus, reason: &str) -> String {
    let history = current_history(inst, meta);
    let previous = history.iter().find(|h| h.uid == status.uid).cloned().unwrap_or_default();
    let entry = HistoryEntry {
        plan: status.name.clone(),
        uid: status.uid.clone(),
        status: status.status.clone(),
        reason: if previous.reason.is_empty() { reason.to_string() } else { previous.reason },
        started: if previous.started.is_empty() { crate::plan::now() } else { previous.started },
        finished: crate::plan::now(),
        message: status.message.clone(),
    };
    serde_json::to_string(&crate::plan::record(history, entry)).unwrap_or_default()
}

/// Publishes an event about the Instance in the background (an event failing to be
/// written does not fail the reconcile).
pub(crate) fn publish(
    ctx: &Context<DynamicObject>,
    instance: &DynamicObject,
    type_: EventType,
    reason: &'static str,
    action: &'static str,
    note: String,
) {
    let recorder = ctx.recorder.clone();
    let reference = instance.object_ref(&resources::api_resource("Instance"));
    tokio::spawn(async move {
        recorder.publish(&reference, type_, reason, action, &note).await;
    });
}

/// Writes `status.planStatus` unless unchanged.
async fn write_status(
    api: &Api<DynamicObject>,
    name: &str,
    before: &BTreeMap<String, PlanStatus>,
    after: &BTreeMap<String, PlanStatus>,
) -> kube::Result<()> {
    if before == after {
        return Ok(());
    }
    let patch = json!({"status": {"planStatus": after}});
    match api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(e) if opkit::status::is_not_found(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

/// One pass of a plan for an Instance: what every step of it runs with.
struct PlanRun<'a> {
    engine: &'a Engine,
    ctx: &'a Context<DynamicObject>,
    ov: &'a OperatorVersion,
    instance: &'a DynamicObject,
    plan: &'a str,
    uid: &'a str,
    params: BTreeMap<String, Option<String>>,
    pipes: BTreeMap<String, String>,
}

impl PlanRun<'_> {
    /// Runs the phase's unfinished steps (one at a time if it is serial, stopping at the
    /// first that is not complete) and sets the phase's status from its steps'.
    async fn phase(&self, phase: &crate::package::Phase, phase_status: &mut PhaseStatus) {
        for (step, entry) in phase.steps.iter().zip(phase_status.steps.iter_mut()) {
            if entry.status == state::COMPLETE {
                continue;
            }
            if entry.status == state::FATAL_ERROR {
                break;
            }
            let meta = step::StepMeta {
                instance: self.instance.clone(),
                plan: self.plan.to_string(),
                phase: phase.name.clone(),
                step: step.name.clone(),
                uid: self.uid.to_string(),
            };
            let outcome = tasks::run_step(self.engine, self.ctx, self.ov, &meta, step, &self.params, &self.pipes).await;
            let (st, msg) = match outcome {
                step::Outcome::Done => (state::COMPLETE, String::new()),
                step::Outcome::Waiting(m) => (state::IN_PROGRESS, m),
                step::Outcome::Error(m) => (state::ERROR, m),
                step::Outcome::Fatal(m) => (state::FATAL_ERROR, m),
            };
            entry.status = st.to_string();
            entry.message = msg;
            if phase.strategy == crate::package::Ordering::Serial && st != state::COMPLETE {
                break;
            }
        }
        phase_status.status = combined_state(phase_status.steps.iter().map(|s| s.status.as_str())).to_string();
    }
}

/// The state of a phase or plan from its children's: COMPLETE when all are, else
/// FATAL_ERROR, ERROR or IN_PROGRESS by the worst of them.
fn combined_state<'a>(children: impl Iterator<Item = &'a str> + Clone) -> &'static str {
    if children.clone().all(|s| s == state::COMPLETE) {
        state::COMPLETE
    } else if children.clone().any(|s| s == state::FATAL_ERROR) {
        state::FATAL_ERROR
    } else if children.clone().any(|s| s == state::ERROR) {
        state::ERROR
    } else {
        state::IN_PROGRESS
    }
}
