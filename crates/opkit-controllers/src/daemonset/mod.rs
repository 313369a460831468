//! The daemonset controller (kube-controller-manager's `daemonset-controller`): one pod
//! per eligible node (nodeSelector, node affinity, taints and tolerations), bound to its node,
//! failed and misplaced pods replaced, RollingUpdate within `maxUnavailable`, and status.

pub(crate) mod placement;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
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
pub(crate) const REPORTING_CONTROLLER: &str = "daemonset-controller";

/// How long a created pod may be missing from the cache before it is given up on.
const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(30);

struct Shared {
    recorder: Recorder,
    /// Pods created but not yet cached: DaemonSet uid -> node -> when.
    pending: Mutex<HashMap<String, HashMap<String, Instant>>>,
}

/// Registers the daemonset controller with `mgr`.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
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

/// The DaemonSet's pods as one pass sees them: by node (oldest first), and those on no
/// known node.
struct View {
    nodes: BTreeMap<String, NodeState>,
    /// Live pods whose node is gone.
    orphaned: Vec<Arc<Pod>>,
    /// The current revision's hash (`controller-revision-hash`).
    hash: String,
    min_ready: i32,
    now: jiff::Timestamp,
}

/// What one pass does.
#[derive(Default)]
struct Plan {
    /// Pods to delete: misplaced, failed, duplicate and (rolling update) outdated ones.
    delete: Vec<Arc<Pod>>,
    /// Nodes to create a pod on.
    create: Vec<String>,
    /// `FailedDaemonPod` warnings.
    failed_notes: Vec<String>,
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

    let view = View::observe(&ctx, &ds, hash);
    let mut plan = view.place(&ds, shared.pending.lock().entry(uid.clone()).or_default());
    let strategy = spec.update_strategy.clone().unwrap_or_default();
    if strategy.type_.as_deref().unwrap_or("RollingUpdate") == "RollingUpdate" {
        let max_unavailable = strategy.rolling_update.and_then(|r| r.max_unavailable);
        view.roll(max_unavailable.as_ref(), &mut plan);
    }
    apply(&ctx.api_for(), &shared, &ds, &view.hash, plan).await?;

    let (status, ready, available) = view.status(&ds);
    let api: Api<DaemonSet> = ctx.api();
    opkit::status::update_status_from(&api, (*ds).clone(), |d| {
        let conditions = d.status.as_ref().and_then(|s| s.conditions.clone());
        d.status = Some(DaemonSetStatus { conditions, ..status.clone() });
    })
    .await?;
    let live_names: std::collections::BTreeSet<String> = [rev.name_any()].into();
    let revisions = revision::owned_revisions(&ctx.cache, &ns, &uid);
    revision::truncate_history(&ctx.client, &ns, &revisions, &live_names, spec.revision_history_limit.unwrap_or(10))
        .await?;
    tracing::trace!(daemonset = %name, "synced");
    if view.min_ready > 0 && available < ready {
        return Ok(Action::requeue_after(Duration::from_secs(u64::try_from(view.min_ready).unwrap_or(1))));
    }
    Ok(Action::done())
}

impl View {
    /// Reads the nodes and the DaemonSet's pods from the cache.
    fn observe(ctx: &Context<DaemonSet>, ds: &DaemonSet, hash: String) -> View {
        let (ns, uid) = (ds.namespace().unwrap_or_default(), ds.uid().unwrap_or_default());
        let mut nodes: BTreeMap<String, NodeState> = BTreeMap::new();
        for n in ctx.cache.list::<Node>() {
            nodes.insert(n.name_any(), NodeState { should_run: placement::should_run(ds, &n), pods: Vec::new() });
        }
        let mut orphaned = Vec::new();
        for p in owned_pods(&ctx.cache, &ns, &uid) {
            match placement::node_of(&p).and_then(|n| nodes.get_mut(&n)) {
                Some(st) => st.pods.push(p),
                None if !is_terminating(&p) => orphaned.push(p),
                None => {}
            }
        }
        for st in nodes.values_mut() {
            st.pods.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
        }
        let min_ready = ds.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0);
        View { nodes, orphaned, hash, min_ready, now: jiff::Timestamp::now() }
    }

    /// One pod per eligible node: deletes pods on nodes the DaemonSet does not belong on,
    /// failed pods and duplicates; creates a pod where none runs and none is `pending`
    /// (created but not cached yet; entries that are cached or timed out are dropped).
    fn place(&self, ds: &DaemonSet, pending: &mut HashMap<String, Instant>) -> Plan {
        let ns = ds.namespace().unwrap_or_default();
        let mut plan = Plan { delete: self.orphaned.clone(), ..Plan::default() };
        pending.retain(|node, at| {
            self.nodes.get(node).is_some_and(|s| s.pods.is_empty()) && at.elapsed() < EXPECTATION_TIMEOUT
        });
        for (node, st) in &self.nodes {
            let live: Vec<Arc<Pod>> = st.pods.iter().filter(|p| !is_terminating(p)).cloned().collect();
            if !st.should_run {
                plan.delete.extend(live);
                continue;
            }
            let (failed, running): (Vec<_>, Vec<_>) = live.into_iter().partition(|p| phase(p) == "Failed");
            for p in &failed {
                plan.failed_notes
                    .push(format!("Found failed daemon pod {ns}/{} on node {node}, will try to kill it", p.name_any()));
            }
            plan.delete.extend(failed);
            if running.is_empty() {
                if !pending.contains_key(node) {
                    plan.create.push(node.clone());
                }
            } else {
                plan.delete.extend(running.into_iter().skip(1));
            }
        }
        plan
    }

    /// Rolling update: replaces outdated pods, keeping at most `maxUnavailable` nodes
    /// unavailable (an unavailable outdated pod is always replaced).
    fn roll(&self, max_unavailable: Option<&IntOrString>, plan: &mut Plan) {
        let desired = self.nodes.values().filter(|s| s.should_run).count();
        let max_unavailable = match max_unavailable {
            Some(IntOrString::Int(n)) => usize::try_from(*n).unwrap_or(0),
            Some(IntOrString::String(s)) => {
                let pct: usize = s.trim_end_matches('%').parse().unwrap_or(0);
                (desired * pct).div_ceil(100).max(1)
            }
            None => 1,
        };
        let available = |p: &Pod| is_available(p, self.min_ready, self.now);
        let mut unavailable = self
            .nodes
            .values()
            .filter(|s| s.should_run && !s.pods.iter().any(|p| !is_terminating(p) && available(p)))
            .count();
        for st in self.nodes.values().filter(|s| s.should_run) {
            let Some(p) = st.pods.iter().find(|p| !is_terminating(p) && phase(p) != "Failed") else { continue };
            if self.is_current(p) || plan.delete.iter().any(|d| d.uid() == p.uid()) {
                continue;
            }
            if !available(p) {
                plan.delete.push(p.clone());
            } else if unavailable < max_unavailable {
                unavailable += 1;
                plan.delete.push(p.clone());
            }
        }
    }

    /// Whether `p` runs the current revision.
    fn is_current(&self, p: &Pod) -> bool {
        p.labels().get("controller-revision-hash") == Some(&self.hash)
    }

    /// The DaemonSet's status, with the counts of ready and available pods.
    fn status(&self, ds: &DaemonSet) -> (DaemonSetStatus, usize, usize) {
        let mut st = DaemonSetStatus { observed_generation: ds.metadata.generation, ..Default::default() };
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        let (mut ready, mut available, mut updated) = (0, 0, 0);
        for s in self.nodes.values() {
            let live: Vec<&Arc<Pod>> = s.pods.iter().filter(|p| !is_terminating(p)).collect();
            if !s.should_run {
                st.number_misscheduled += count(usize::from(!live.is_empty()));
                continue;
            }
            st.desired_number_scheduled += 1;
            let Some(p) = live.first() else { continue };
            st.current_number_scheduled += 1;
            ready += usize::from(is_running_and_ready(p));
            available += usize::from(is_available(p, self.min_ready, self.now));
            updated += usize::from(self.is_current(p));
        }
        st.number_ready = count(ready);
        let nonzero = |n: usize| (n != 0).then(|| count(n));
        st.number_available = nonzero(available);
        st.updated_number_scheduled = nonzero(updated);
        st.number_unavailable =
            nonzero(usize::try_from(st.desired_number_scheduled).unwrap_or(0).saturating_sub(available));
        st.collision_count = ds.status.as_ref().and_then(|s| s.collision_count);
        (st, ready, available)
    }
}

/// Carries out `plan`: the warnings, the deletions, then the creations (each remembered
/// as pending until the cache has it).
async fn apply(
    pods_api: &Api<Pod>,
    shared: &Shared,
    ds: &DaemonSet,
    hash: &str,
    plan: Plan,
) -> Result<(), WorkloadError> {
    let uid = ds.uid().unwrap_or_default();
    for note in &plan.failed_notes {
        publish(&shared.recorder, ds, EventType::Warning, "FailedDaemonPod", "Sync", note).await;
    }
    for p in &plan.delete {
        match pods_api.delete(&p.name_any(), &DeleteParams::default()).await {
            Ok(_) => {
                let note = format!("Deleted pod: {}", p.name_any());
                publish(&shared.recorder, ds, EventType::Normal, "SuccessfulDelete", "Delete", &note).await
            }
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    for node in &plan.create {
        let pod = placement::new_pod(ds, node, hash)?;
        let created = pods_api.create(&PostParams::default(), &pod).await?;
        shared.pending.lock().entry(uid.clone()).or_default().insert(node.clone(), Instant::now());
        let note = format!("Created pod: {}", created.name_any());
        publish(&shared.recorder, ds, EventType::Normal, "SuccessfulCreate", "Create", &note).await;
    }
    Ok(())
}
