//! The scheduler, playing kube-scheduler's `default-scheduler`: it places pending pods
//! (no `spec.nodeName`, `schedulerName` empty or `default-scheduler`) on a node that passes
//! the filters of [`filter`] — cordons, taints vs tolerations, nodeSelector and required
//! node affinity, cpu/memory/pods and extended resources — preferring the least allocated.
//!
//! Binding: the API server has no `pods/binding` subresource yet, so a pod is bound by
//! patching `spec.nodeName` (guarded by its resourceVersion). Like kube-scheduler, a pod is
//! *assumed* on its node as soon as it is chosen, so concurrent decisions see it before the
//! cache does. A pod that fits nowhere gets `PodScheduled=False` (reason `Unschedulable`,
//! kube's message) and a `FailedScheduling` event and is retried with backoff, and at once
//! when nodes change or a bound pod ends; a bound pod gets a `Scheduled` event. Pods with
//! PersistentVolumeClaims go through [`volumes`] first (kube's VolumeBinding plugin).

pub(crate) mod filter;
pub(crate) mod resources;
mod volumes;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use kube::api::{Api, Patch, PatchParams};
use opkit::events::{EventType, Recorder};
use opkit::{Action, Context, Controller, Manager, ReconcileResult, Request};
use parking_lot::Mutex;
use serde_json::json;

use crate::ControllersConfig;
use filter::Usage;
use opkit_kubelet::events::EventSink;
use resources::Resources;
use volumes::VolumeCheck;

/// The scheduler name pods opt into (and the event reporting controller).
pub(crate) const SCHEDULER_NAME: &str = "default-scheduler";

/// How long a cached view of node usage is reused before it is rebuilt from the cache.
const SNAPSHOT_TTL: Duration = Duration::from_millis(500);
/// How long an assumed binding counts when the cache never confirms it.
const ASSUME_TTL: Duration = Duration::from_secs(30);
/// Retry backoff of unschedulable pods: initial and maximum.
const BACKOFF_INITIAL: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// How soon a pod whose claims wait for their first consumer is looked at again, besides
/// whenever one of its claims changes.
const WAIT_FOR_CLAIMS: Duration = Duration::from_secs(5);

/// Registers the scheduler with `mgr` (controller name `scheduler`).
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled("scheduler") {
        return Ok(());
    }
    let sched = Arc::new(Scheduler {
        recorder: Recorder::for_controller(crate::identity::client_for(mgr, cfg, "scheduler"), SCHEDULER_NAME),
        events: EventSink::new(2, 1000),
        state: Mutex::new(State::default()),
        set_scheduled_condition: !cfg.enabled("kubelet"),
    });
    let (on_pod, on_node, run) = (sched.clone(), sched.clone(), sched);
    let claims_cache = mgr.cache().clone();
    Controller::new(mgr, move |ctx: Context<Pod>| {
        let s = run.clone();
        async move { s.reconcile(ctx).await }
    })
    .client(crate::identity::client_for(mgr, cfg, "scheduler"))
    .named("scheduler")
    .watches::<Node>(move |_: &Node| on_node.retry_all())
    .watches::<Pod>(move |p: &Pod| if frees_resources(p) { on_pod.retry_all() } else { vec![] })
    .watches::<PersistentVolumeClaim>(move |c: &PersistentVolumeClaim| pods_using(&claims_cache, c))
    .max_concurrent_reconciles(4)
    .without_leader_election()
    .build()
}

/// Whether a bound pod is ending (terminating or finished), so its resources free up.
fn frees_resources(p: &Pod) -> bool {
    let bound = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty());
    bound && (p.metadata.deletion_timestamp.is_some() || is_terminal(p))
}

fn is_terminal(p: &Pod) -> bool {
    matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

/// A pod placed on a node before the cache shows it there.
struct Assumed {
    uid: String,
    node: String,
    req: Resources,
    score: (i128, i128),
    at: Instant,
}

#[derive(Default)]
struct State {
    /// Usage per node as of the last snapshot, plus later assumptions.
    usage: HashMap<String, Usage>,
    taken: Option<Instant>,
    assumed: HashMap<Request, Assumed>,
    /// Pods waiting for a node, with their failed attempts.
    unschedulable: HashMap<Request, u32>,
}

fn add_usage(u: &mut Usage, req: &Resources, score: (i128, i128), sign: i128) {
    for (k, v) in req {
        *u.requested.entry(k.clone()).or_insert(0) += sign * v;
    }
    u.score.0 += sign * score.0;
    u.score.1 += sign * score.1;
    u.pods += sign;
}

impl State {
    /// Rebuilds node usage from the cached pods when the snapshot is old.
    fn refresh(&mut self, pods: impl FnOnce() -> Vec<Arc<Pod>>) {
        if self.taken.is_some_and(|t| t.elapsed() < SNAPSHOT_TTL) {
            return;
        }
        let mut usage: HashMap<String, Usage> = HashMap::new();
        let mut seen: HashMap<Request, String> = HashMap::new();
        for p in pods() {
            let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty()) else {
                continue;
            };
            seen.insert(Request::from_object(p.as_ref()), p.metadata.uid.clone().unwrap_or_default());
            if is_terminal(&p) {
                continue;
            }
            add_usage(
                usage.entry(node).or_default(),
                &resources::pod_requests(&p),
                resources::pod_score_requests(&p),
                1,
            );
        }
        self.assumed.retain(|k, a| seen.get(k) != Some(&a.uid) && a.at.elapsed() < ASSUME_TTL);
        for a in self.assumed.values() {
            add_usage(usage.entry(a.node.clone()).or_default(), &a.req, a.score, 1);
        }
        self.usage = usage;
        self.taken = Some(Instant::now());
    }
}

/// The outcome of trying to place one pod.
enum Placement {
    Node(String),
    Nowhere(String),
}

struct Scheduler {
    recorder: Recorder,
    events: EventSink,
    state: Mutex<State>,
    /// Set PodScheduled=True on binding (when no kubelet will).
    set_scheduled_condition: bool,
}

impl Scheduler {
    fn retry_all(&self) -> Vec<Request> {
        self.state.lock().unschedulable.keys().cloned().collect()
    }

    /// Chooses a node for `pod` and assumes it there.
    fn place(&self, pod: &Pod, key: &Request, nodes: &[Arc<Node>], cache: &opkit::Cache) -> Placement {
        let req = resources::pod_requests(pod);
        let score_req = resources::pod_score_requests(pod);
        let mut state = self.state.lock();
        state.refresh(|| cache.list::<Pod>());
        let empty = Usage::default();
        let mut reasons = Vec::with_capacity(nodes.len());
        let mut best: Option<(i128, i128, u32, &str)> = None;
        for n in nodes {
            let name = n.metadata.name.as_deref().unwrap_or_default();
            let usage = state.usage.get(name).unwrap_or(&empty);
            let why = filter::filter(pod, &req, n, usage);
            if !why.is_empty() {
                reasons.push(why);
                continue;
            }
            let s = filter::score(n, usage, score_req);
            let tiebreak = rand::random::<u32>();
            let cand = (s, -usage.pods, tiebreak, name);
            if best.as_ref().is_none_or(|b| (cand.0, cand.1, cand.2) > (b.0, b.1, b.2)) {
                best = Some(cand);
            }
        }
        match best {
            Some((_, _, _, name)) => {
                let node = name.to_string();
                add_usage(state.usage.entry(node.clone()).or_default(), &req, score_req, 1);
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                state.assumed.insert(
                    key.clone(),
                    Assumed { uid, node: node.clone(), req, score: score_req, at: Instant::now() },
                );
                state.unschedulable.remove(key);
                Placement::Node(node)
            }
            None => Placement::Nowhere(filter::unschedulable_message(nodes.len(), &reasons)),
        }
    }

    /// Undoes the assumption of `key` after a failed binding.
    fn forget(&self, key: &Request) {
        let mut state = self.state.lock();
        if let Some(a) = state.assumed.remove(key)
            && let Some(u) = state.usage.get_mut(&a.node)
        {
            add_usage(u, &a.req, a.score, -1);
        }
    }

    async fn reconcile(&self, ctx: Context<Pod>) -> ReconcileResult {
        let key = ctx.request.clone();
        let Some(pod) = ctx.object.clone() else {
            let mut state = self.state.lock();
            state.unschedulable.remove(&key);
            return Ok(Action::done());
        };
        let spec = pod.spec.clone().unwrap_or_default();
        let ours = spec.scheduler_name.as_deref().is_none_or(|s| s.is_empty() || s == SCHEDULER_NAME);
        let pending = spec.node_name.as_deref().is_none_or(str::is_empty)
            && pod.metadata.deletion_timestamp.is_none()
            && !is_terminal(&pod);
        if !ours || !pending {
            self.state.lock().unschedulable.remove(&key);
            return Ok(Action::done());
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if self.state.lock().assumed.get(&key).is_some_and(|a| a.uid == uid) {
            // Bound already; the cache has not caught up.
            return Ok(Action::done());
        }
        let api: Api<Pod> = ctx.api();
        if spec.scheduling_gates.as_ref().is_some_and(|g| !g.is_empty()) {
            let msg = "Scheduling is blocked due to non-empty scheduling gates";
            set_pod_scheduled(&api, &pod, "False", "SchedulingGated", msg).await?;
            return Ok(Action::done());
        }
        // The Node cache has synced before the first reconcile: no nodes means none yet
        // (a later Node event retries the pod).
        let mut nodes = ctx.cache.list::<Node>();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let (required_node, waiting_claims) = match volumes::check(&ctx.cache, &pod) {
            VolumeCheck::Unschedulable(why) => {
                let n = nodes.len();
                let message = format!(
                    "0/{n} nodes are available: {why}. preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
                );
                return self.unschedulable(&api, &pod, &key, message).await;
            }
            VolumeCheck::Ready(node) => (node, Vec::new()),
            VolumeCheck::WaitForFirstConsumer { unbound, node } => (node, unbound),
        };
        if let Some(required) = &required_node {
            nodes.retain(|n| n.metadata.name.as_deref() == Some(required.as_str()));
        }
        match self.place(&pod, &key, &nodes, &ctx.cache) {
            Placement::Nowhere(message) => self.unschedulable(&api, &pod, &key, message).await,
            Placement::Node(node) if !waiting_claims.is_empty() => {
                // The claims learn their first consumer's node; the pod is bound once the
                // provisioner has bound them (a claim change retries it).
                self.forget(&key);
                select_node(&ctx, &waiting_claims, &node).await?;
                Ok(Action::requeue_after(WAIT_FOR_CLAIMS))
            }
            Placement::Node(node) => self.bind(&api, &pod, &key, &node).await,
        }
    }

    /// Binds `pod` to `node` (a merge patch of `spec.nodeName`, guarded by its
    /// resourceVersion), then marks it `PodScheduled` and records `Scheduled`; a pod gone
    /// meanwhile is done, a conflict is retried soon.
    async fn bind(&self, api: &Api<Pod>, pod: &Pod, key: &Request, node: &str) -> ReconcileResult {
        let name = &key.name;
        let patch = json!({
            "metadata": {"resourceVersion": pod.metadata.resource_version},
            "spec": {"nodeName": node},
        });
        let params = PatchParams { field_manager: Some(SCHEDULER_NAME.into()), ..Default::default() };
        if let Err(e) = api.patch(name, &params, &Patch::Merge(&patch)).await {
            self.forget(key);
            return match &e {
                kube::Error::Api(s) if s.is_not_found() => Ok(Action::done()),
                kube::Error::Api(s) if s.is_conflict() => Ok(Action::requeue_after(Duration::from_millis(50))),
                _ => Err(e.into()),
            };
        }
        if self.set_scheduled_condition {
            set_pod_scheduled(api, pod, "True", "", "").await?;
        }
        let ns = key.namespace.as_deref().unwrap_or("default");
        let note = format!("Successfully assigned {ns}/{name} to {node}");
        self.event(pod, EventType::Normal, "Scheduled", "Binding", note);
        Ok(Action::done())
    }

    /// Records that `pod` fits nowhere (`PodScheduled=False`, a `FailedScheduling` event at
    /// exponentially spaced attempts) and retries it with backoff.
    async fn unschedulable(&self, api: &Api<Pod>, pod: &Pod, key: &Request, message: String) -> ReconcileResult {
        let changed = set_pod_scheduled(api, pod, "False", "Unschedulable", &message).await?;
        let attempts = {
            let mut state = self.state.lock();
            let n = state.unschedulable.entry(key.clone()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        // Repeats are reported at exponentially spaced attempts to bound event writes.
        if changed || attempts.is_power_of_two() {
            self.event(pod, EventType::Warning, "FailedScheduling", "Scheduling", message);
        }
        let backoff = BACKOFF_INITIAL.saturating_mul(1u32 << attempts.saturating_sub(1).min(6)).min(BACKOFF_MAX);
        Ok(Action::requeue_after(backoff))
    }

    /// Publishes an event about `pod` in the background (bounded, see [`EventSink`]).
    fn event(&self, pod: &Pod, type_: EventType, reason: &'static str, action: &'static str, note: String) {
        let regarding = kube::Resource::object_ref(pod, &());
        self.events.publish(&self.recorder, regarding, type_, reason, action, note);
    }
}

/// Gives each claim the node of its first consumer (`volume.kubernetes.io/selected-node`),
/// for the provisioner.
async fn select_node(ctx: &Context<Pod>, claims: &[String], node: &str) -> Result<(), kube::Error> {
    let api: Api<PersistentVolumeClaim> = ctx.api_for();
    for claim in claims {
        let patch = json!({"metadata": {"annotations": {crate::volume::SELECTED_NODE: node}}});
        match api.patch(claim, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The pending pods in the claim's namespace that use it (retried when it changes).
fn pods_using(cache: &opkit::Cache, pvc: &PersistentVolumeClaim) -> Vec<Request> {
    let name = pvc.metadata.name.clone().unwrap_or_default();
    cache
        .list::<Pod>()
        .iter()
        .filter(|p| p.metadata.namespace == pvc.metadata.namespace)
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_none_or(str::is_empty))
        .filter(|p| {
            let volumes = p.spec.as_ref().and_then(|s| s.volumes.as_ref());
            volumes.is_some_and(|vs| {
                vs.iter().any(|v| v.persistent_volume_claim.as_ref().is_some_and(|c| c.claim_name == name))
            })
        })
        .map(|p| Request::from_object(&**p))
        .collect()
}

/// Sets the pod's PodScheduled condition (strategic merge on `/status`, as
/// kube-scheduler's `PatchPodStatus`), unless it already says so. Returns whether it
/// changed.
async fn set_pod_scheduled(api: &Api<Pod>, pod: &Pod, status: &str, reason: &str, message: &str) -> kube::Result<bool> {
    let current = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
    let same = current.is_some_and(|c| {
        c.status == status
            && c.reason.as_deref().unwrap_or("") == reason
            && c.message.as_deref().unwrap_or("") == message
    });
    if same {
        return Ok(false);
    }
    let transition = match current {
        Some(c) if c.status == status => c.last_transition_time.clone().unwrap_or_else(opkit::status::now),
        _ => opkit::status::now(),
    };
    let mut cond =
        json!({"type": "PodScheduled", "status": status, "lastProbeTime": null, "lastTransitionTime": transition});
    if !reason.is_empty() {
        cond["reason"] = json!(reason);
    }
    if !message.is_empty() {
        cond["message"] = json!(message);
    }
    let patch = json!({"status": {"conditions": [cond]}});
    let name = pod.metadata.name.clone().unwrap_or_default();
    let params = PatchParams { field_manager: Some(SCHEDULER_NAME.into()), ..Default::default() };
    match api.patch_status(&name, &params, &Patch::Strategic(&patch)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(node: &str, phase: &str, cpu: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("p-{node}-{phase}"), "namespace": "d", "uid": "u"},
                "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
                "status": {"phase": phase}
            }))
            .unwrap_or_default(),
        )
    }

    #[test]
    fn snapshot_counts_live_bound_pods_and_assumptions() {
        let mut st = State::default();
        st.assumed.insert(
            Request::new("x", Some("d")),
            Assumed {
                uid: "ux".into(),
                node: "n1".into(),
                req: [("cpu".into(), 300)].into(),
                score: (300, 0),
                at: Instant::now(),
            },
        );
        st.refresh(|| vec![pod("n1", "Running", "1"), pod("n1", "Succeeded", "2"), pod("", "Pending", "4")]);
        let u = st.usage.get("n1").cloned().unwrap_or_default();
        assert_eq!(u.requested.get("cpu"), Some(&1300));
        assert_eq!(u.pods, 2);
        assert_eq!(st.assumed.len(), 1, "unconfirmed assumption kept");
    }

    #[test]
    fn ending_pods_free_resources() {
        assert!(frees_resources(&pod("n1", "Succeeded", "1")));
        assert!(!frees_resources(&pod("n1", "Running", "1")));
        assert!(!frees_resources(&pod("", "Failed", "1")));
    }
}
