//! The deployment controller, as kube-controller-manager's: each Deployment owns
//! ReplicaSets named `<deployment>-<pod-template-hash>`; the one whose template matches
//! the Deployment's is the new one, the rest are old. RollingUpdate and Recreate rollouts,
//! proportional scaling, pausing, rollbacks (a template equal to an old ReplicaSet's
//! reuses it with a new revision), revision history cleanup, and status with the
//! Available and Progressing conditions that `kubectl rollout status` waits for. Events
//! (`ScalingReplicaSet`) are reported as `deployment-controller`.

mod rollout;
mod status;
mod sync;
pub(crate) mod util;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use opkit::events::{EventType, Recorder};
use opkit::{Action, Cache, Context, Controller, Manager, ReconcileError, ReconcileResult, Request};
use serde_json::json;

use crate::ControllersConfig;
use crate::common::{ownership, selectors};
use sync::{SyncError, SyncingDeployment};

/// The controller's name in [`crate::ALL`].
pub(crate) const NAME: &str = "deployment";
/// The reporting controller of its events.
pub(crate) const REPORTING_CONTROLLER: &str = "deployment-controller";

/// What every reconcile shares.
pub(crate) struct State {
    recorder: Recorder,
}

/// Registers the deployment controller with `mgr`.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled(NAME) {
        return Ok(());
    }
    let state = Arc::new(State {
        recorder: Recorder::for_controller(crate::identity::client_for(mgr, cfg, "deployment"), REPORTING_CONTROLLER),
    });
    let (rs_cache, pod_cache) = (mgr.cache().clone(), mgr.cache().clone());
    rs_cache.add_index::<ReplicaSet>(ownership::CONTROLLER_INDEX, |rs: &ReplicaSet| ownership::controller_index(rs));
    Controller::new(mgr, move |ctx: Context<Deployment>| {
        let state = state.clone();
        async move { reconcile(ctx, &state).await }
    })
    .client(crate::identity::client_for(mgr, cfg, "deployment"))
    .named(NAME)
    .watches::<ReplicaSet>(move |rs: &ReplicaSet| deployments_for_rs(&rs_cache, rs))
    .watches::<Pod>(move |pod: &Pod| deployments_for_pod(&pod_cache, pod))
    .max_concurrent_reconciles(5)
    .build()
}

/// The Deployments to sync when a ReplicaSet changes: its controller, or for an orphan
/// every Deployment in its namespace whose selector matches it.
fn deployments_for_rs(cache: &Cache, rs: &ReplicaSet) -> Vec<Request> {
    let ns = rs.metadata.namespace.as_deref();
    if let Some(owner) = opkit::owner::controller_of(rs) {
        if owner.kind == "Deployment" && owner.api_version == "apps/v1" {
            return vec![Request::new(owner.name.clone(), ns)];
        }
        return Vec::new();
    }
    cache
        .list::<Deployment>()
        .iter()
        .filter(|d| d.metadata.namespace.as_deref() == ns)
        .filter(|d| {
            selectors::selector(d.spec.as_ref().map(|s| &s.selector))
                .is_ok_and(|sel| sel.matches_labels(rs.metadata.labels.as_ref()))
        })
        .map(|d| Request::from_object(d.as_ref()))
        .collect()
}

/// Recreate Deployments wait for their old pods to be gone: sync them when pods change.
fn deployments_for_pod(cache: &Cache, pod: &Pod) -> Vec<Request> {
    let ns = pod.metadata.namespace.as_deref();
    let Some(owner) = opkit::owner::controller_of(pod).filter(|o| o.kind == "ReplicaSet") else { return Vec::new() };
    let Some(rs) = cache.get::<ReplicaSet>(&owner.name, ns) else { return Vec::new() };
    let Some(d_ref) = opkit::owner::controller_of(&*rs).filter(|o| o.kind == "Deployment") else { return Vec::new() };
    match cache.get::<Deployment>(&d_ref.name, ns) {
        Some(d) if util::is_recreate(&d) => vec![Request::new(d_ref.name.clone(), ns)],
        _ => Vec::new(),
    }
}

async fn reconcile(ctx: Context<Deployment>, st: &State) -> ReconcileResult {
    let Some(d) = ctx.object.clone() else { return Ok(Action::done()) };
    if !ctx.cache.informer::<ReplicaSet>().is_synced() || !ctx.cache.informer::<Pod>().is_synced() {
        return Ok(Action::requeue_after(Duration::from_millis(100)));
    }
    let mut s = SyncingDeployment { ctx: &ctx, st, d: (*d).clone(), rss: Vec::new() };
    let sel = match selectors::selector(d.spec.as_ref().map(|x| &x.selector)) {
        Ok(sel) => sel,
        Err(e) => {
            let note = "This deployment is selecting all pods. A non-empty selector is required.".to_string();
            s.event(EventType::Warning, "SelectingAll", "Select", note);
            tracing::warn!(deployment = %ctx.request, error = %e, "skipping Deployment");
            let mut status = s.d.status.clone().unwrap_or_default();
            if status.observed_generation < s.d.metadata.generation {
                status.observed_generation = s.d.metadata.generation;
                into_result(s.write_status(status).await)?;
            }
            return Ok(Action::done());
        }
    };
    s.rss = into_result(claim_replicasets(&ctx, &d, &sel).await.map_err(SyncError::from))?;
    let result = run(&mut s).await;
    if let Err(SyncError::Kube(e)) = &result {
        // kube-controller-manager logs these at V(2), not as errors. A conflict: the
        // Deployment or a ReplicaSet changed since the cache saw it, so sync again from the
        // newer state. Not found: the Deployment went meanwhile. A terminating namespace:
        // nothing can be created there any more, and its deletion takes the Deployment.
        if opkit::status::is_conflict(e) {
            tracing::debug!(deployment = %ctx.request, error = %e, "conflict, synced again");
            return Ok(Action::requeue());
        }
        if opkit::status::is_not_found(e) || opkit::status::is_namespace_terminating(e) {
            tracing::debug!(deployment = %ctx.request, error = %e, "deployment or its namespace going");
            return Ok(Action::done());
        }
    }
    into_result(result)?;
    let deadline = util::progress_deadline(&s.d);
    let status = s.d.status.clone().unwrap_or_default();
    if let Some(secs) = deadline.and_then(|dl| status::seconds_to_deadline(&status, dl)) {
        return Ok(Action::requeue_after(Duration::from_secs(secs.unsigned_abs() + 1)));
    }
    Ok(Action::done())
}

fn into_result<T>(r: Result<T, SyncError>) -> Result<T, ReconcileError> {
    r.map_err(ReconcileError::retry)
}

async fn run(s: &mut SyncingDeployment<'_>) -> Result<(), SyncError> {
    if s.d.metadata.deletion_timestamp.is_some() {
        let (new_rs, old) = s.new_and_old(false).await?;
        let status = s.calculate_status(new_rs.as_ref(), &old);
        return s.write_status(status).await;
    }
    paused_conditions(s).await?;
    if util::is_paused(&s.d) {
        return s.scale_only().await;
    }
    let (new_rs, old) = s.split();
    if rollout::is_scaling_event(&s.d, new_rs.as_ref(), &old) {
        return s.scale_only().await;
    }
    if util::is_recreate(&s.d) {
        let pods_list = s.ctx.cache.list::<Pod>();
        return s
            .recreate(|old: &[ReplicaSet]| {
                let uids: Vec<&str> = old.iter().filter_map(|rs| rs.metadata.uid.as_deref()).collect();
                pods_list.iter().any(|p| {
                    let phase = p.status.as_ref().and_then(|x| x.phase.as_deref());
                    opkit::owner::controller_of(&**p).is_some_and(|o| uids.contains(&o.uid.as_str()))
                        && !matches!(phase, Some("Succeeded") | Some("Failed"))
                })
            })
            .await;
    }
    s.rolling().await
}

/// Adds or removes the DeploymentPaused / DeploymentResumed Progressing condition.
async fn paused_conditions(s: &mut SyncingDeployment<'_>) -> Result<(), SyncError> {
    if util::progress_deadline(&s.d).is_none() {
        return Ok(());
    }
    let mut status = s.d.status.clone().unwrap_or_default();
    let reason = util::get_condition(&status, "Progressing").and_then(|c| c.reason.clone());
    let paused = util::is_paused(&s.d);
    if paused && reason.as_deref() != Some("DeploymentPaused") {
        util::set_condition(
            &mut status,
            util::condition("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused".into()),
        );
    } else if !paused && reason.as_deref() == Some("DeploymentPaused") {
        util::set_condition(
            &mut status,
            util::condition("Progressing", "Unknown", "DeploymentResumed", "Deployment is resumed".into()),
        );
    } else {
        return Ok(());
    }
    s.write_status(status).await
}

/// The ReplicaSets the Deployment owns after adopting matching orphans and releasing
/// owned ones that no longer match (kube's `ClaimReplicaSets`).
async fn claim_replicasets(
    ctx: &Context<Deployment>,
    d: &Deployment,
    sel: &opkit_apimachinery::selector::LabelSelector,
) -> kube::Result<Vec<ReplicaSet>> {
    let uid = d.metadata.uid.clone().unwrap_or_default();
    let ns = d.metadata.namespace.clone();
    let api: Api<ReplicaSet> = ctx.api_for();
    let deleting = d.metadata.deletion_timestamp.is_some();
    let mut owned = Vec::new();
    let candidates =
        ownership::controlled_or_orphans::<ReplicaSet>(&ctx.cache, &uid, ns.as_deref().unwrap_or_default());
    for rs in &candidates {
        let matching = sel.matches_labels(rs.metadata.labels.as_ref());
        let name = rs.metadata.name.clone().unwrap_or_default();
        match opkit::owner::controller_of(&**rs) {
            Some(r) if r.uid == uid => {
                if matching || deleting {
                    owned.push((**rs).clone());
                    continue;
                }
                ownership::release(&api, &name, &rs.metadata, &uid).await?;
            }
            Some(_) => {}
            None => {
                if !matching || deleting || rs.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let Some(owner) = opkit::owner::controller_reference(d) else { continue };
                let mut refs = rs.metadata.owner_references.clone().unwrap_or_default();
                refs.push(owner);
                let body = json!({"metadata": {"ownerReferences": refs, "uid": rs.metadata.uid}});
                match api.patch(&name, &PatchParams::default(), &Patch::Merge(&body)).await {
                    Ok(adopted) => owned.push(adopted),
                    Err(e) if opkit::status::is_not_found(&e) => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(owned)
}
