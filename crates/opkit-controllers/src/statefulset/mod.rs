//! The statefulset controller (kube-controller-manager's `statefulset-controller`): stable
//! pod identities `<set>-<ordinal>`, per-ordinal PersistentVolumeClaims from
//! `volumeClaimTemplates` (bound by the persistent-volume binder), OrderedReady and Parallel pod management,
//! RollingUpdate in reverse ordinal order above a partition, ControllerRevisions and status.

pub mod pods;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
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
pub const REPORTING_CONTROLLER: &str = "statefulset-controller";

/// Registers the statefulset controller with `mgr`.
pub fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
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

async fn reconcile(ctx: Context<StatefulSet>, rec: Recorder) -> ReconcileResult {
    let Some(sts) = ctx.object.clone() else { return Ok(Action::done()) };
    if sts.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let (ns, set, uid) = (sts.namespace().unwrap_or_default(), sts.name_any(), sts.uid().unwrap_or_default());
    let spec = sts.spec.clone().unwrap_or_default();
    let status = sts.status.clone().unwrap_or_default();
    let revisions = revision::owned_revisions(&ctx.cache, &ns, &uid);
    let collision = status.collision_count.unwrap_or(0);
    let update_rev = revision::ensure_revision(&ctx.client, &*sts, &revisions, &spec.template, collision).await?;
    let update_name = update_rev.name_any();
    let current_rev = status
        .current_revision
        .as_ref()
        .and_then(|n| revisions.iter().find(|r| r.metadata.name.as_ref() == Some(n)))
        .cloned()
        .unwrap_or_else(|| update_rev.clone());
    let current_name = current_rev.name_any();
    let current_template = revision::template_of(&current_rev).unwrap_or_else(|| spec.template.clone());

    let replicas = spec.replicas.unwrap_or(1).max(0);
    let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0);
    let monotonic = spec.pod_management_policy.as_deref() != Some("Parallel");
    let strategy = spec.update_strategy.clone().unwrap_or_default();
    let rolling = strategy.type_.as_deref().unwrap_or("RollingUpdate") == "RollingUpdate";
    let partition = strategy.rolling_update.as_ref().and_then(|r| r.partition).unwrap_or(0).clamp(0, replicas);
    let min_ready = spec.min_ready_seconds.unwrap_or(0);

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
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);

    let mut halted = false;
    // Create missing replicas in order (each waits for its predecessor when OrderedReady).
    for (i, slot) in slots.iter_mut().enumerate() {
        let ordinal = start + i32::try_from(i).unwrap_or(0);
        let pod = match slot {
            Some(p) if matches!(phase(p), "Failed" | "Succeeded") && !is_terminating(p) => {
                delete_pod(&pods_api, &rec, &sts, p).await?;
                p.metadata.deletion_timestamp = Some(opkit::status::now());
                if monotonic {
                    halted = true;
                    break;
                }
                continue;
            }
            Some(p) => p,
            None => {
                let (template, rev) = if ordinal < start + partition && rolling {
                    (&current_template, &current_name)
                } else {
                    (&spec.template, &update_name)
                };
                ensure_claims(&ctx.client, &rec, &sts, ordinal).await?;
                let pod = pods::new_pod(&sts, template, rev, ordinal)?;
                let created = match pods_api.create(&PostParams::default(), &pod).await {
                    Ok(p) => {
                        let note = format!("create Pod {} in StatefulSet {set} successful", p.name_any());
                        publish(&rec, &*sts, EventType::Normal, "SuccessfulCreate", "Create", &note).await;
                        p
                    }
                    Err(kube::Error::Api(s)) if s.is_already_exists() => pod,
                    Err(e) => return Err(e.into()),
                };
                *slot = Some(created);
                if monotonic {
                    halted = true;
                    break;
                }
                continue;
            }
        };
        if monotonic && (is_terminating(pod) || !is_running_and_ready(pod)) {
            halted = true;
            break;
        }
    }

    // Remove condemned pods, highest ordinal first.
    if !halted {
        let all_healthy = |skip: &str| {
            slots
                .iter()
                .flatten()
                .chain(condemned.iter().map(|(_, p)| p))
                .all(|p| p.name_any() == skip || (!is_terminating(p) && is_running_and_ready(p)))
        };
        let mut deleted = Vec::new();
        for (idx, (_, p)) in condemned.iter().enumerate() {
            if is_terminating(p) {
                if monotonic {
                    halted = true;
                    break;
                }
                continue;
            }
            if monotonic && !all_healthy(&p.name_any()) {
                halted = true;
                break;
            }
            delete_pod(&pods_api, &rec, &sts, p).await?;
            deleted.push(idx);
            if monotonic {
                halted = true;
                break;
            }
        }
        for idx in deleted {
            condemned[idx].1.metadata.deletion_timestamp = Some(opkit::status::now());
        }
    }

    // Rolling update: replace outdated pods from the highest ordinal down to the partition.
    if !halted && rolling {
        for target in (usize::try_from(partition).unwrap_or(0)..slots.len()).rev() {
            let Some(p) = slots[target].as_mut() else { break };
            if revision_of(p) != Some(update_name.as_str()) && !is_terminating(p) {
                delete_pod(&pods_api, &rec, &sts, p).await?;
                p.metadata.deletion_timestamp = Some(opkit::status::now());
                break;
            }
            if is_terminating(p) || !is_running_and_available(p, min_ready, jiff::Timestamp::now()) {
                break;
            }
        }
    }

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
