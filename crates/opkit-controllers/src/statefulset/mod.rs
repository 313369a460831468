//! The statefulset controller (kube-controller-manager's `statefulset-controller`): stable
//! pod identities `<set>-<ordinal>`, per-ordinal PersistentVolumeClaims from
//! `volumeClaimTemplates` (bound by the persistent-volume binder), OrderedReady and Parallel pod management,
//! RollingUpdate in reverse ordinal order above a partition, ControllerRevisions and status.

pub(crate) mod pods;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use opkit::events::{EventType, Recorder};
use opkit::{Action, Context, Controller, Manager, ReconcileResult};

use crate::ControllersConfig;
use crate::common::WorkloadError;
use crate::common::events::publish;
use crate::common::ownership::owned_pods;
use crate::common::pods::{is_running_and_available, is_running_and_ready, is_terminating, phase};
use crate::common::revision;
use pods::{ordinal_of, revision_of};

/// The reportingController of the statefulset controller's events.
pub(crate) const REPORTING_CONTROLLER: &str = "statefulset-controller";

/// Registers the statefulset controller with `mgr`.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled("statefulset") {
        return Ok(());
    }
    let recorder = Recorder::for_controller(crate::identity::client_for(mgr, cfg, "statefulset"), REPORTING_CONTROLLER);
    Controller::new(mgr, move |ctx| reconcile(ctx, recorder.clone()))
        .client(crate::identity::client_for(mgr, cfg, "statefulset"))
        .named("statefulset")
        .owns::<Pod>()
        .owns::<ControllerRevision>()
        .max_concurrent_reconciles(4)
        .build()
}

/// What one pass decided, for status.
struct Observed {
    pods: Vec<Pod>,
}

/// The revisions a pass works with: the current one (what pods below the partition
/// keep) and the update one (what the spec asks for now).
struct Revisions {
    current_name: String,
    current_template: PodTemplateSpec,
    update_name: String,
}

/// One reconcile of a StatefulSet: its settings, its pods by ordinal slot (and the
/// condemned ones beyond the replica count, highest ordinal first), and where it writes.
struct Pass<'a> {
    client: &'a kube::Client,
    rec: &'a Recorder,
    sts: &'a StatefulSet,
    pods_api: Api<Pod>,
    revisions: Revisions,
    /// The first ordinal (`spec.ordinals.start`).
    start: i32,
    /// OrderedReady: each step waits for the one before it.
    monotonic: bool,
    rolling: bool,
    partition: i32,
    min_ready: i32,
    slots: Vec<Option<Pod>>,
    condemned: Vec<(i32, Pod)>,
}

/// Whether a step lets the next one run (OrderedReady halts after any change or any
/// pod that is not ready).
#[derive(PartialEq)]
enum Flow {
    Continue,
    Halt,
}

async fn reconcile(ctx: Context<StatefulSet>, rec: Recorder) -> ReconcileResult {
    let Some(sts) = ctx.object.clone() else { return Ok(Action::done()) };
    if sts.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let (ns, uid) = (sts.namespace().unwrap_or_default(), sts.uid().unwrap_or_default());
    let spec = sts.spec.clone().unwrap_or_default();
    let revisions = pass_revisions(&ctx, &sts).await?;
    let mut pass = Pass::observe(&ctx, &rec, &sts, revisions);

    if pass.scale_up().await? == Flow::Continue && pass.scale_down().await? == Flow::Continue && pass.rolling {
        pass.roll().await?;
    }

    let Pass { slots, condemned, revisions, rolling, min_ready, .. } = pass;
    let Revisions { current_name, update_name, .. } = revisions;
    let observed =
        Observed { pods: slots.into_iter().flatten().chain(condemned.into_iter().map(|(_, p)| p)).collect() };
    let requeue = write_status(&ctx, &sts, &observed, &current_name, &update_name, rolling, min_ready).await?;

    let mut live: BTreeSet<String> = observed.pods.iter().filter_map(|p| revision_of(p).map(String::from)).collect();
    live.insert(current_name);
    live.insert(update_name);
    let limit = spec.revision_history_limit.unwrap_or(10);
    let revisions = revision::owned_revisions(&ctx.cache, &ns, &uid);
    revision::truncate_history(&ctx.client, &ns, &revisions, &live, limit).await?;
    Ok(requeue)
}

/// Ensures the ControllerRevision of the current template, and finds the current one.
async fn pass_revisions(ctx: &Context<StatefulSet>, sts: &StatefulSet) -> Result<Revisions, WorkloadError> {
    let (ns, uid) = (sts.namespace().unwrap_or_default(), sts.uid().unwrap_or_default());
    let spec = sts.spec.clone().unwrap_or_default();
    let status = sts.status.clone().unwrap_or_default();
    let revisions = revision::owned_revisions(&ctx.cache, &ns, &uid);
    let collision = status.collision_count.unwrap_or(0);
    let update_rev = revision::ensure_revision(&ctx.client, sts, &revisions, &spec.template, collision).await?;
    let current_rev = status
        .current_revision
        .as_ref()
        .and_then(|n| revisions.iter().find(|r| r.metadata.name.as_ref() == Some(n)))
        .cloned()
        .unwrap_or_else(|| update_rev.clone());
    Ok(Revisions {
        current_name: current_rev.name_any(),
        current_template: revision::template_of(&current_rev).unwrap_or_else(|| spec.template.clone()),
        update_name: update_rev.name_any(),
    })
}

impl<'a> Pass<'a> {
    /// Reads the settings from the spec and sorts the owned pods into ordinal slots.
    fn observe(ctx: &'a Context<StatefulSet>, rec: &'a Recorder, sts: &'a StatefulSet, revisions: Revisions) -> Self {
        let (ns, set, uid) = (sts.namespace().unwrap_or_default(), sts.name_any(), sts.uid().unwrap_or_default());
        let spec = sts.spec.clone().unwrap_or_default();
        let replicas = spec.replicas.unwrap_or(1).max(0);
        let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0);
        let strategy = spec.update_strategy.clone().unwrap_or_default();
        let mut slots: Vec<Option<Pod>> = vec![None; usize::try_from(replicas).unwrap_or(0)];
        let mut condemned: Vec<(i32, Pod)> = Vec::new();
        for p in owned_pods(&ctx.cache, &ns, &uid) {
            match ordinal_of(&set, &p.name_any()) {
                Some(o) if o >= start && o < start + replicas => {
                    slots[usize::try_from(o - start).unwrap_or(0)] = Some((*p).clone())
                }
                Some(o) => condemned.push((o, (*p).clone())),
                None => {}
            }
        }
        condemned.sort_by_key(|(o, _)| std::cmp::Reverse(*o));
        Pass {
            client: &ctx.client,
            rec,
            sts,
            pods_api: Api::namespaced(ctx.client.clone(), &ns),
            revisions,
            start,
            monotonic: spec.pod_management_policy.as_deref() != Some("Parallel"),
            rolling: strategy.type_.as_deref().unwrap_or("RollingUpdate") == "RollingUpdate",
            partition: strategy.rolling_update.as_ref().and_then(|r| r.partition).unwrap_or(0).clamp(0, replicas),
            min_ready: spec.min_ready_seconds.unwrap_or(0),
            slots,
            condemned,
        }
    }

    /// Creates missing replicas in ordinal order and deletes failed or succeeded ones
    /// (each waits for its predecessor when OrderedReady).
    async fn scale_up(&mut self) -> Result<Flow, WorkloadError> {
        for i in 0..self.slots.len() {
            let ordinal = self.start + i32::try_from(i).unwrap_or(0);
            match &self.slots[i] {
                Some(p) if matches!(phase(p), "Failed" | "Succeeded") && !is_terminating(p) => {
                    delete_pod(&self.pods_api, self.rec, self.sts, p).await?;
                    if let Some(p) = self.slots[i].as_mut() {
                        p.metadata.deletion_timestamp = Some(opkit::status::now());
                    }
                }
                Some(p) => {
                    if self.monotonic && (is_terminating(p) || !is_running_and_ready(p)) {
                        return Ok(Flow::Halt);
                    }
                    continue;
                }
                None => self.slots[i] = Some(self.create_pod(ordinal).await?),
            }
            if self.monotonic {
                return Ok(Flow::Halt);
            }
        }
        Ok(Flow::Continue)
    }

    /// Creates the pod (and its claims) of `ordinal`, from the current revision below the
    /// partition of a rolling update and the update revision otherwise.
    async fn create_pod(&self, ordinal: i32) -> Result<Pod, WorkloadError> {
        let spec = self.sts.spec.as_ref();
        let r = &self.revisions;
        let (template, rev) = if ordinal < self.start + self.partition && self.rolling {
            (&r.current_template, &r.current_name)
        } else {
            (&spec.map(|s| s.template.clone()).unwrap_or_default(), &r.update_name)
        };
        ensure_claims(self.client, self.rec, self.sts, ordinal).await?;
        let pod = pods::new_pod(self.sts, template, rev, ordinal)?;
        match self.pods_api.create(&PostParams::default(), &pod).await {
            Ok(p) => {
                let note = format!("create Pod {} in StatefulSet {} successful", p.name_any(), self.sts.name_any());
                publish(self.rec, self.sts, EventType::Normal, "SuccessfulCreate", "Create", &note).await;
                Ok(p)
            }
            Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(pod),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes condemned pods, highest ordinal first (OrderedReady: one at a time, and
    /// only while every other pod is healthy).
    async fn scale_down(&mut self) -> Result<Flow, WorkloadError> {
        let mut flow = Flow::Continue;
        let mut deleted = Vec::new();
        for (idx, (_, p)) in self.condemned.iter().enumerate() {
            if is_terminating(p) {
                if self.monotonic {
                    flow = Flow::Halt;
                    break;
                }
                continue;
            }
            if self.monotonic && !self.all_healthy_but(&p.name_any()) {
                flow = Flow::Halt;
                break;
            }
            delete_pod(&self.pods_api, self.rec, self.sts, p).await?;
            deleted.push(idx);
            if self.monotonic {
                flow = Flow::Halt;
                break;
            }
        }
        for idx in deleted {
            self.condemned[idx].1.metadata.deletion_timestamp = Some(opkit::status::now());
        }
        Ok(flow)
    }

    /// Whether every pod but `skip` is running, ready and not terminating.
    fn all_healthy_but(&self, skip: &str) -> bool {
        self.slots
            .iter()
            .flatten()
            .chain(self.condemned.iter().map(|(_, p)| p))
            .all(|p| p.name_any() == skip || (!is_terminating(p) && is_running_and_ready(p)))
    }

    /// Rolling update: replaces the highest-ordinal outdated pod above the partition,
    /// once every pod above it is available.
    async fn roll(&mut self) -> Result<(), WorkloadError> {
        let now = jiff::Timestamp::now();
        for target in (usize::try_from(self.partition).unwrap_or(0)..self.slots.len()).rev() {
            let Some(p) = self.slots[target].as_mut() else { break };
            if revision_of(p) != Some(self.revisions.update_name.as_str()) && !is_terminating(p) {
                delete_pod(&self.pods_api, self.rec, self.sts, p).await?;
                p.metadata.deletion_timestamp = Some(opkit::status::now());
                break;
            }
            if is_terminating(p) || !is_running_and_available(p, self.min_ready, now) {
                break;
            }
        }
        Ok(())
    }
}

/// Computes and writes the status; returns when to look again (minReadySeconds).
async fn write_status(
    ctx: &Context<StatefulSet>,
    sts: &Arc<StatefulSet>,
    observed: &Observed,
    current: &str,
    update: &str,
    rolling: bool,
    min_ready: i32,
) -> Result<Action, WorkloadError> {
    let now = jiff::Timestamp::now();
    let count =
        |f: &dyn Fn(&Pod) -> bool| i32::try_from(observed.pods.iter().filter(|p| f(p)).count()).unwrap_or(i32::MAX);
    let replicas = count(&|_| true);
    let ready = count(&is_running_and_ready);
    let available = count(&|p| is_running_and_available(p, min_ready, now));
    let mut current_replicas = count(&|p| !is_terminating(p) && revision_of(p) == Some(current));
    let updated = count(&|p| !is_terminating(p) && revision_of(p) == Some(update));
    let mut current_revision = current.to_string();
    if rolling && updated == replicas && ready == replicas {
        current_revision = update.to_string();
        current_replicas = updated;
    }
    let nonzero = |n: i32| (n != 0).then_some(n);
    let generation = sts.metadata.generation;
    let api: Api<StatefulSet> = ctx.api();
    opkit::status::update_status_from(&api, (**sts).clone(), |s| {
        let st = s.status.get_or_insert_with(Default::default);
        st.observed_generation = generation;
        st.replicas = replicas;
        st.ready_replicas = nonzero(ready);
        st.available_replicas = Some(available);
        st.current_replicas = nonzero(current_replicas);
        st.updated_replicas = nonzero(updated);
        st.current_revision = Some(current_revision.clone());
        st.update_revision = Some(update.to_string());
        st.collision_count = Some(st.collision_count.unwrap_or(0));
    })
    .await?;
    if min_ready > 0 && available < ready {
        return Ok(Action::requeue_after(Duration::from_secs(u64::try_from(min_ready).unwrap_or(1))));
    }
    Ok(Action::done())
}

/// Creates the claims of `ordinal` that do not exist.
async fn ensure_claims(
    client: &kube::Client,
    rec: &Recorder,
    sts: &StatefulSet,
    ordinal: i32,
) -> Result<(), WorkloadError> {
    let ns = sts.namespace().unwrap_or_default();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    // Binding is the persistent-volume binder's (with the scheduler for
    // WaitForFirstConsumer classes), as in kube: the claims are only created here.
    for claim in pods::new_claims(sts, ordinal) {
        let name = claim.name_any();
        if api.get_opt(&name).await?.is_some() {
            continue;
        }
        match api.create(&PostParams::default(), &claim).await {
            Ok(_) => {
                let note = format!(
                    "create Claim {name} Pod {}-{ordinal} in StatefulSet {} success",
                    sts.name_any(),
                    sts.name_any()
                );
                publish(rec, sts, EventType::Normal, "SuccessfulCreate", "Create", &note).await;
            }
            Err(kube::Error::Api(s)) if s.is_already_exists() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

async fn delete_pod(api: &Api<Pod>, rec: &Recorder, sts: &StatefulSet, pod: &Pod) -> Result<(), WorkloadError> {
    match api.delete(&pod.name_any(), &DeleteParams::default()).await {
        Ok(_) => {
            let note = format!("delete Pod {} in StatefulSet {} successful", pod.name_any(), sts.name_any());
            publish(rec, sts, EventType::Normal, "SuccessfulDelete", "Delete", &note).await;
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}
