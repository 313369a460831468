//! The daemonset controller (kube-controller-manager's `daemonset-controller`): one pod
//! per eligible node (nodeSelector, node affinity, taints and tolerations), bound to its node,
//! failed and misplaced pods replaced, RollingUpdate within `maxUnavailable`, and status.

pub mod placement;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use opkit::events::{EventType, Recorder};
use opkit::{Action, Context, Controller, Manager, ReconcileResult, Request};
use parking_lot::Mutex;

use crate::ControllersConfig;
use crate::common::WorkloadError;
use crate::common::events::publish;
use crate::common::ownership::owned_pods;
use crate::common::pods::{is_available, is_running_and_ready, is_terminating, phase};
use crate::common::revision::{self, REVISION_HASH_LABEL};

/// The reportingController of the daemonset controller's events.
pub const REPORTING_CONTROLLER: &str = "daemonset-controller";

/// How long a created pod may be missing from the cache before it is given up on.
const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(30);

struct Shared {
    recorder: Recorder,
    /// Pods created but not yet cached: DaemonSet uid -> node -> when.
    pending: Mutex<HashMap<String, HashMap<String, Instant>>>,
}

/// Registers the daemonset controller with `mgr`.
pub fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled("daemonset") {
        return Ok(());
    }
    let shared = Arc::new(Shared {
        recorder: Recorder::for_controller(crate::identity::client_for(mgr, cfg, "daemonset"), REPORTING_CONTROLLER),
        pending: Mutex::new(HashMap::new()),
    });
    let cache = mgr.cache().clone();
    Controller::new(mgr, move |ctx| reconcile(ctx, shared.clone()))
        .client(crate::identity::client_for(mgr, cfg, "daemonset"))
        .named("daemonset")
        .owns::<Pod>()
        .owns::<ControllerRevision>()
        .watches::<Node>(move |_| cache.list::<DaemonSet>().iter().map(|d| Request::from_object(&**d)).collect())
        .max_concurrent_reconciles(2)
        .build()
}

/// The pods of one node, and whether the DaemonSet belongs there.
#[derive(Default)]
struct NodeState {
    should_run: bool,
    pods: Vec<Arc<Pod>>,
}

async fn reconcile(ctx: Context<DaemonSet>, shared: Arc<Shared>) -> ReconcileResult {
    let Some(ds) = ctx.object.clone() else { return Ok(Action::done()) };
    if ds.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let (ns, uid, name) = (ds.namespace().unwrap_or_default(), ds.uid().unwrap_or_default(), ds.name_any());
    let spec = ds.spec.clone().unwrap_or_default();
    let revisions = revision::owned_revisions(&ctx.cache, &ns, &uid);
    let collision = ds.status.as_ref().and_then(|s| s.collision_count).unwrap_or(0);
    let rev = revision::ensure_revision(&ctx.client, &*ds, &revisions, &spec.template, collision).await?;
    let hash = rev.labels().get(REVISION_HASH_LABEL).cloned().unwrap_or_default();
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let now = jiff::Timestamp::now();

    let mut nodes: BTreeMap<String, NodeState> = BTreeMap::new();
    for n in ctx.cache.list::<Node>() {
        nodes.insert(n.name_any(), NodeState { should_run: placement::should_run(&ds, &n), pods: Vec::new() });
    }
    let pods_api: Api<Pod> = ctx.api_for();
    let mut to_delete: Vec<Arc<Pod>> = Vec::new();
    for p in owned_pods(&ctx.cache, &ns, &uid) {
        match placement::node_of(&p).and_then(|n| nodes.get_mut(&n)) {
            Some(st) => st.pods.push(p),
            None if !is_terminating(&p) => to_delete.push(p),
            None => {}
        }
    }
    let mut to_create: Vec<String> = Vec::new();
    let mut failed_notes: Vec<String> = Vec::new();
    {
        let mut pending = shared.pending.lock();
        let pending = pending.entry(uid.clone()).or_default();
        pending.retain(|node, at| {
            nodes.get(node).is_some_and(|s| s.pods.is_empty()) && at.elapsed() < EXPECTATION_TIMEOUT
        });
        for (node, st) in nodes.iter_mut() {
            st.pods.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
            let live: Vec<Arc<Pod>> = st.pods.iter().filter(|p| !is_terminating(p)).cloned().collect();
            if !st.should_run {
                to_delete.extend(live);
                continue;
            }
            let (failed, running): (Vec<_>, Vec<_>) = live.into_iter().partition(|p| phase(p) == "Failed");
            for p in &failed {
                failed_notes
                    .push(format!("Found failed daemon pod {ns}/{} on node {node}, will try to kill it", p.name_any()));
            }
            to_delete.extend(failed);
            if running.is_empty() {
                if !pending.contains_key(node) {
                    to_create.push(node.clone());
                }
            } else {
                to_delete.extend(running.into_iter().skip(1));
            }
        }
    }

    for note in &failed_notes {
        publish(&shared.recorder, &*ds, EventType::Warning, "FailedDaemonPod", "Sync", note).await;
    }

    // Rolling update: replace outdated pods, keeping at most maxUnavailable nodes unavailable.
    let strategy = spec.update_strategy.clone().unwrap_or_default();
    if strategy.type_.as_deref().unwrap_or("RollingUpdate") == "RollingUpdate" {
        let desired = nodes.values().filter(|s| s.should_run).count();
        let max_unavailable = match strategy.rolling_update.and_then(|r| r.max_unavailable) {
            Some(IntOrString::Int(n)) => usize::try_from(n).unwrap_or(0),
            Some(IntOrString::String(s)) => {
                let pct: usize = s.trim_end_matches('%').parse().unwrap_or(0);
                (desired * pct).div_ceil(100).max(1)
            }
            None => 1,
        };
        let current = |p: &Pod| p.labels().get("controller-revision-hash") == Some(&hash);
        let mut unavailable = nodes
            .values()
            .filter(|s| s.should_run && !s.pods.iter().any(|p| !is_terminating(p) && is_available(p, min_ready, now)))
            .count();
        for st in nodes.values().filter(|s| s.should_run) {
            let Some(p) = st.pods.iter().find(|p| !is_terminating(p) && phase(p) != "Failed") else { continue };
            if current(p) || to_delete.iter().any(|d| d.uid() == p.uid()) {
                continue;
            }
            if !is_available(p, min_ready, now) {
                to_delete.push(p.clone());
            } else if unavailable < max_unavailable {
                unavailable += 1;
                to_delete.push(p.clone());
            }
        }
    }

    for p in &to_delete {
        match pods_api.delete(&p.name_any(), &DeleteParams::default()).await {
            Ok(_) => {
                publish(
                    &shared.recorder,
                    &*ds,
                    EventType::Normal,
                    "SuccessfulDelete",
                    "Delete",
                    &format!("Deleted pod: {}", p.name_any()),
                )
                .await
            }
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    for node in &to_create {
        let pod = placement::new_pod(&ds, node, &hash)?;
        let created = pods_api.create(&PostParams::default(), &pod).await.map_err(WorkloadError::from)?;
        shared.pending.lock().entry(uid.clone()).or_default().insert(node.clone(), Instant::now());
        publish(
            &shared.recorder,
            &*ds,
            EventType::Normal,
            "SuccessfulCreate",
            "Create",
            &format!("Created pod: {}", created.name_any()),
        )
        .await;
    }

    // Status.
    let mut st = k8s_openapi::api::apps::v1::DaemonSetStatus {
        observed_generation: ds.metadata.generation,
        ..Default::default()
    };
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let mut ready = 0;
    let mut available = 0;
    let mut updated = 0;
    for s in nodes.values() {
        let live: Vec<&Arc<Pod>> = s.pods.iter().filter(|p| !is_terminating(p)).collect();
        if !s.should_run {
            st.number_misscheduled += count(usize::from(!live.is_empty()));
            continue;
        }
        st.desired_number_scheduled += 1;
        let Some(p) = live.first() else { continue };
        st.current_number_scheduled += 1;
        ready += usize::from(is_running_and_ready(p));
        available += usize::from(is_available(p, min_ready, now));
        updated += usize::from(p.labels().get("controller-revision-hash") == Some(&hash));
    }
    st.number_ready = count(ready);
    let nonzero = |n: usize| (n != 0).then(|| count(n));
    st.number_available = nonzero(available);
    st.updated_number_scheduled = nonzero(updated);
    st.number_unavailable =
        nonzero(usize::try_from(st.desired_number_scheduled).unwrap_or(0).saturating_sub(available));
    st.collision_count = ds.status.as_ref().and_then(|s| s.collision_count);
    let api: Api<DaemonSet> = ctx.api();
    opkit::status::update_status_from(&api, (*ds).clone(), |d| {
        let conditions = d.status.as_ref().and_then(|s| s.conditions.clone());
        d.status = Some(k8s_openapi::api::apps::v1::DaemonSetStatus { conditions, ..st.clone() });
    })
    .await?;
    let live_names: std::collections::BTreeSet<String> = [rev.name_any()].into();
    let revisions = revision::owned_revisions(&ctx.cache, &ns, &uid);
    revision::truncate_history(&ctx.client, &ns, &revisions, &live_names, spec.revision_history_limit.unwrap_or(10))
        .await?;
    tracing::trace!(daemonset = %name, "synced");
    if min_ready > 0 && available < ready {
        return Ok(Action::requeue_after(Duration::from_secs(u64::try_from(min_ready).unwrap_or(1))));
    }
    Ok(Action::done())
}
