//! The job controller (kube-controller-manager's `job-controller`, plus the
//! `ttl-after-finished-controller`): runs pods until `completions` succeed with at most
//! `parallelism` at once (NonIndexed and Indexed modes), fails the Job past `backoffLimit`
//! or `activeDeadlineSeconds`, tracks finished pods with the `batch.kubernetes.io/job-tracking`
//! finalizer and `status.uncountedTerminatedPods`, suspends, and deletes finished Jobs after
//! `ttlSecondsAfterFinished`.

pub(crate) mod pods;
mod state;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::{Api, ResourceExt};
use opkit::events::{EventType, Recorder};
use opkit::{Action, Context, Controller, Manager, ReconcileResult};
use parking_lot::Mutex;
use serde_json::json;

use crate::ControllersConfig;
use crate::common::WorkloadError;
use crate::common::events::publish;
use crate::common::ownership::owned_pods;
use pods::TRACKING_FINALIZER;

/// The reportingController of the job controller's events.
pub(crate) const REPORTING_CONTROLLER: &str = "job-controller";

/// How long a created pod may be missing from the cache before it is given up on.
const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(30);

/// What the controller did that its cache may not show yet (kube's expectations).
#[derive(Default)]
struct Expectations {
    /// Pods created, by name, with when.
    created: HashMap<String, Instant>,
    /// Pods deleted, by name.
    deleted: BTreeSet<String>,
    /// Pods whose tracking finalizer was removed, by uid.
    untracked: BTreeSet<String>,
}

/// State shared by the controller's reconciles.
struct Shared {
    recorder: Recorder,
    expectations: Mutex<HashMap<String, Expectations>>,
}

/// Registers the job controller with `mgr`.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled("job") {
        return Ok(());
    }
    let shared = Arc::new(Shared {
        recorder: Recorder::for_controller(crate::identity::client_for(mgr, cfg, "job"), REPORTING_CONTROLLER),
        expectations: Mutex::new(HashMap::new()),
    });
    Controller::new(mgr, move |ctx| reconcile(ctx, shared.clone()))
        .client(crate::identity::client_for(mgr, cfg, "job"))
        .named("job")
        .owns::<Pod>()
        .max_concurrent_reconciles(4)
        .build()
}

async fn reconcile(ctx: Context<Job>, shared: Arc<Shared>) -> ReconcileResult {
    let pods_api: Api<Pod> = ctx.api_for();
    let Some(job) = ctx.object.clone() else {
        release_orphans(&ctx, &pods_api).await?;
        return Ok(Action::done());
    };
    let uid = job.uid().unwrap_or_default();
    let pods = owned_pods(&ctx.cache, &job.namespace().unwrap_or_default(), &uid);
    if job.metadata.deletion_timestamp.is_some() {
        for p in pods.iter().filter(|p| has_tracking_finalizer(p)) {
            remove_finalizer(&pods_api, p).await?;
        }
        shared.expectations.lock().remove(&uid);
        return Ok(Action::done());
    }
    let Some((deleted, untracked)) = shared.settled(&uid, &pods) else {
        return Ok(Action::requeue_after(Duration::from_secs(1)));
    };
    let mut view = state::View::new(&job, &pods, &deleted, &untracked);
    let act = Act { api: ctx.api(), pods_api, shared: &shared, job: &job, uid };
    act.count_finished(&mut view).await?;
    view.flush_uncounted();
    let plan = view.plan(jiff::Timestamp::now());
    act.apply(&plan).await
}

/// The Job is gone: releases its pods' tracking finalizers.
async fn release_orphans(ctx: &Context<Job>, pods_api: &Api<Pod>) -> Result<(), WorkloadError> {
    let ns = ctx.request.namespace.clone().unwrap_or_default();
    let orphans: Vec<Arc<Pod>> = ctx
        .cache
        .list::<Pod>()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()) && has_tracking_finalizer(p))
        .filter(|p| opkit::owner::controller_of(&**p).is_some_and(|o| o.kind == "Job" && o.name == ctx.request.name))
        .collect();
    for p in orphans {
        remove_finalizer(pods_api, &p).await?;
    }
    Ok(())
}

impl Shared {
    /// The Job's pods deleted and untracked so far, once every pod this controller created
    /// is in the cache (`None` while one is not yet, and not timed out).
    fn settled(&self, uid: &str, pods: &[Arc<Pod>]) -> Option<(BTreeSet<String>, BTreeSet<String>)> {
        let mut all = self.expectations.lock();
        let exp = all.entry(uid.to_string()).or_default();
        let names: BTreeSet<String> = pods.iter().map(|p| p.name_any()).collect();
        exp.created.retain(|n, at| !names.contains(n) && at.elapsed() < EXPECTATION_TIMEOUT);
        if !exp.created.is_empty() {
            return None;
        }
        exp.deleted.retain(|n| names.contains(n));
        Some((exp.deleted.clone(), exp.untracked.clone()))
    }

    fn expect(&self, uid: &str, f: impl FnOnce(&mut Expectations)) {
        f(self.expectations.lock().entry(uid.to_string()).or_default());
    }
}

/// Where one pass of a Job writes: the Job, its pods, its events and the expectations.
struct Act<'a> {
    api: Api<Job>,
    pods_api: Api<Pod>,
    shared: &'a Shared,
    job: &'a Job,
    uid: String,
}

impl Act<'_> {
    /// Counts finished pods: records them as uncounted, then releases their finalizers.
    async fn count_finished(&self, view: &mut state::View<'_>) -> Result<(), WorkloadError> {
        let newly: Vec<Arc<Pod>> = view.newly_finished();
        if newly.is_empty() {
            return Ok(());
        }
        let written =
            opkit::status::update_status_from(&self.api, self.job.clone(), |j| state::add_uncounted(j, &newly)).await?;
        view.status = written.status.clone().unwrap_or_default();
        for p in &newly {
            remove_finalizer(&self.pods_api, p).await?;
            if let Some(u) = p.uid() {
                self.shared.expect(&self.uid, |e| {
                    e.untracked.insert(u);
                });
            }
        }
        view.untracked.extend(newly.iter().filter_map(|p| p.uid()));
        Ok(())
    }

    /// Carries out `plan`: pod deletions and creations, the status, the events, and the
    /// TTL's deletion of a finished Job.
    async fn apply(&self, plan: &state::Plan) -> ReconcileResult {
        for p in &plan.delete {
            match self.pods_api.delete(&p.name_any(), &DeleteParams::default()).await {
                Ok(_) => {
                    self.shared.expect(&self.uid, |e| {
                        e.deleted.insert(p.name_any());
                    });
                    self.event(
                        EventType::Normal,
                        "SuccessfulDelete",
                        "Delete",
                        &format!("Deleted pod: {}", p.name_any()),
                    )
                    .await;
                }
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
        for index in &plan.create {
            let pod = pods::new_pod(self.job, *index)?;
            let name = self.pods_api.create(&PostParams::default(), &pod).await?.name_any();
            self.shared.expect(&self.uid, |e| {
                e.created.insert(name.clone(), Instant::now());
            });
            self.event(EventType::Normal, "SuccessfulCreate", "Create", &format!("Created pod: {name}")).await;
        }
        let new_status = plan.status.clone();
        opkit::status::update_status_from(&self.api, self.job.clone(), |j| j.status = Some(new_status.clone())).await?;
        for (t, reason, note) in &plan.events {
            self.event(*t, reason, "Sync", note).await;
        }
        match plan.ttl_expired_in {
            Some(after) if after.is_zero() => {
                let dp = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
                match self.api.delete(&self.job.name_any(), &dp).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.is_not_found() => {}
                    Err(e) => return Err(e.into()),
                }
                Ok(Action::done())
            }
            Some(after) => Ok(Action::requeue_after(after)),
            None => Ok(plan.requeue.map_or(Action::done(), Action::requeue_after)),
        }
    }

    async fn event(&self, type_: EventType, reason: &str, action: &str, note: &str) {
        publish(&self.shared.recorder, self.job, type_, reason, action, note).await;
    }
}

fn has_tracking_finalizer(p: &Pod) -> bool {
    p.finalizers().iter().any(|f| f == TRACKING_FINALIZER)
}

/// Removes the tracking finalizer from a pod (a merge patch of the remaining list, guarded
/// by the pod's resourceVersion).
async fn remove_finalizer(api: &Api<Pod>, pod: &Pod) -> Result<(), WorkloadError> {
    if !has_tracking_finalizer(pod) {
        return Ok(());
    }
    let rest: Vec<&String> = pod.finalizers().iter().filter(|f| *f != TRACKING_FINALIZER).collect();
    let patch = json!({"metadata": {"finalizers": rest, "resourceVersion": pod.resource_version()}});
    match api.patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) if opkit::status::is_conflict(&e) => {
            let Some(fresh) = api.get_opt(&pod.name_any()).await? else { return Ok(()) };
            let rest: Vec<&String> = fresh.finalizers().iter().filter(|f| *f != TRACKING_FINALIZER).collect();
            let patch = json!({"metadata": {"finalizers": rest, "resourceVersion": fresh.resource_version()}});
            api.patch(&fresh.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}
