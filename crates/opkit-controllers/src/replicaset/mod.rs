//! The replicaset controller, as kube-controller-manager's: keeps `spec.replicas` active
//! pods for each ReplicaSet, creating them from the template (generateName `<rs>-`, a
//! controller reference) and deleting surplus ones (unscheduled, not-ready and newer pods
//! first), adopts matching orphans and releases pods that stop matching, and reports
//! `status` (replicas, fullyLabeledReplicas, readyReplicas, availableReplicas,
//! observedGeneration, the ReplicaFailure condition). Expectations keep a lagging cache
//! from causing duplicate creations or deletions. Events are reported as
//! `replicaset-controller`.

mod claim;
pub(crate) mod expectations;
mod manage;
pub(crate) mod pods;
mod status;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use opkit::events::Recorder;
use opkit::{Action, Cache, Context, Controller, Manager, ReconcileError, ReconcileResult, Request};

use crate::ControllersConfig;
use crate::common::pods::{is_active, seconds_until_available};
use crate::common::{ownership, selectors};
use expectations::Expectations;

/// The controller's name in [`crate::ALL`].
pub(crate) const NAME: &str = "replicaset";
/// The reporting controller of its events.
pub(crate) const REPORTING_CONTROLLER: &str = "replicaset-controller";
/// At most this many pods are created or deleted in one sync (kube's `burstReplicas`).
pub(crate) const BURST_REPLICAS: usize = 500;

/// What every reconcile shares.
struct State {
    expectations: Expectations,
    recorder: Recorder,
}

/// Registers the replicaset controller with `mgr`.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled(NAME) {
        return Ok(());
    }
    let state = Arc::new(State {
        expectations: Expectations::default(),
        recorder: Recorder::for_controller(crate::identity::client_for(mgr, cfg, "replicaset"), REPORTING_CONTROLLER),
    });
    let cache = mgr.cache().clone();
    cache.add_index::<Pod>(ownership::CONTROLLER_INDEX, |p: &Pod| ownership::controller_index(p));
    Controller::new(mgr, move |ctx: Context<ReplicaSet>| {
        let state = state.clone();
        async move { reconcile(ctx, &state).await }
    })
    .client(crate::identity::client_for(mgr, cfg, "replicaset"))
    .named(NAME)
    .watches::<Pod>(move |pod: &Pod| replicasets_for_pod(&cache, pod))
    .max_concurrent_reconciles(5)
    .build()
}

/// The ReplicaSets to sync when `pod` changes: its controller if that is a ReplicaSet,
/// else (an orphan) every ReplicaSet in its namespace whose selector matches it.
fn replicasets_for_pod(cache: &Cache, pod: &Pod) -> Vec<Request> {
    let ns = pod.metadata.namespace.as_deref();
    if let Some(owner) = opkit::owner::controller_of(pod) {
        if owner.kind == "ReplicaSet" && owner.api_version == "apps/v1" {
            return vec![Request::new(owner.name.clone(), ns)];
        }
        return Vec::new();
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return Vec::new();
    }
    cache
        .list::<ReplicaSet>()
        .iter()
        .filter(|rs| rs.metadata.namespace.as_deref() == ns)
        .filter(|rs| {
            selectors::selector(rs.spec.as_ref().map(|s| &s.selector))
                .is_ok_and(|sel| sel.matches_labels(pod.metadata.labels.as_ref()))
        })
        .map(|rs| Request::from_object(rs.as_ref()))
        .collect()
}

async fn reconcile(ctx: Context<ReplicaSet>, st: &State) -> ReconcileResult {
    let key = ctx.request.to_string();
    let Some(rs) = ctx.object.clone() else {
        st.expectations.forget(&key);
        return Ok(Action::done());
    };
    let informer = ctx.cache.informer::<Pod>();
    if !informer.is_synced() {
        return Ok(Action::requeue_after(Duration::from_millis(100)));
    }
    let ns = rs.metadata.namespace.clone().unwrap_or_default();
    let sel = match selectors::selector(rs.spec.as_ref().map(|s| &s.selector)) {
        Ok(sel) => sel,
        Err(e) => {
            tracing::warn!(replicaset = %key, error = %e, "skipping ReplicaSet");
            return Ok(Action::done());
        }
    };
    // The pods it controls and the namespace's orphans: the only ones it may own.
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let all: Vec<Arc<Pod>> = ownership::controlled_or_orphans(&ctx.cache, &uid, &ns);
    let all: Vec<&Pod> = all.iter().map(|p| p.as_ref()).collect();
    let pending = st.expectations.pending(&key, &all);
    let active: Vec<&Pod> = all.iter().copied().filter(|p| is_active(p)).collect();
    let owned = claim::claim_pods(&ctx, &rs, &sel, &active).await?;

    let mut manage_err = None;
    if pending.is_none() && rs.metadata.deletion_timestamp.is_none() {
        let owned_refs: Vec<&Pod> = owned.iter().collect();
        if let Err(e) = manage::manage_replicas(&ctx, st, &rs, &owned_refs, &key).await {
            manage_err = Some(e);
        }
    }

    let now = Timestamp::now();
    let new_status = status::calculate(&rs, &owned, manage_err.as_ref(), now);
    if rs.status.as_ref() != Some(&new_status) {
        let mut updated = (*rs).clone();
        updated.status = Some(new_status.clone());
        match ctx.api().replace_status(&ctx.request.name, &PostParams::default(), &updated).await {
            Ok(_) => {}
            Err(e) if opkit::status::is_not_found(&e) => return Ok(Action::done()),
            Err(e) if opkit::status::is_conflict(&e) => return Ok(Action::requeue()),
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(e) = manage_err {
        return Err(ReconcileError::retry(e));
    }
    if let Some(wait) = pending {
        return Ok(Action::requeue_after(wait + Duration::from_millis(10)));
    }
    let min_ready = rs.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0);
    if min_ready > 0 {
        let next = owned.iter().filter_map(|p| seconds_until_available(p, min_ready, now)).min();
        if let Some(secs) = next {
            return Ok(Action::requeue_after(Duration::from_secs(secs.unsigned_abs()) + Duration::from_millis(50)));
        }
    }
    Ok(Action::done())
}
