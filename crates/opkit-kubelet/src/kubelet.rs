//! Simulated kubelets (as kwok provides them) for every node marked
//! [`crate::node::SIMULATED_ANNOTATION`]: a pod bound to such a node is "started" after
//! `cfg.pod_start_delay` (phase Running, host and pod IPs, container statuses, conditions,
//! QoS class), becomes Ready after `cfg.pod_ready_delay`, and run-to-completion pods
//! (restartPolicy Never/OnFailure) succeed after `cfg.job_run_time` or the
//! `opkit.dev/run-duration` annotation. Failures are injected with annotations (see
//! [`lifecycle`]). A pod being deleted is confirmed with a 0-second delete (after a
//! terminal status when finalizers keep it). Every transition is one merge patch on
//! `pods/status`; kubelet-like events (Pulled, Created, Started, Killing, BackOff) are
//! published in the background and dropped, as client-go does, when too many queue up.
//!
//! A pod whose every image is loaded in the image store runs for real instead (see
//! [`runtime`]); the kubelet server ([`server`]) serves container logs and is advertised
//! on every simulated Node.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use opkit::events::EventType;
use opkit::{Action, Context, Controller, Manager, ReconcileResult, Request};
use parking_lot::Mutex;

use crate::config::{KubeletClients, KubeletConfig};
use crate::lifecycle::{self, Behaviour, Exit, Stage, Track};
use crate::node::{internal_ip, is_simulated};
use crate::pod_events::PodEvents;
use crate::{ip, runtime, server, status};

/// The field manager and event reporting controller.
const KUBELET: &str = "kubelet";
/// The exit code of containers stopped by a deletion (SIGTERM).
const KILLED_EXIT_CODE: i32 = 143;

/// Registers the simulated kubelets with `mgr` (controller name `kubelet`), acting with
/// `clients`, their process runtime (when `cfg.images` is set) and, on `listener`, their
/// server.
pub fn register(
    mgr: &Manager,
    cfg: &KubeletConfig,
    clients: KubeletClients,
    listener: Option<server::KubeletListener>,
) -> Result<(), opkit::BuildError> {
    let KubeletClients { kubelet: client, kube_proxy: proxy_client } = clients;
    let events = Arc::new(PodEvents::new(client.clone()));
    let runtime = runtime::Runtime::new(cfg, client.clone(), proxy_client, events.clone()).map(Arc::new);
    if let Some(rt) = &runtime {
        mgr.add(runtime::RuntimeStopper { runtime: rt.clone() });
    }
    if let Some(listener) = listener {
        mgr.add(server::KubeletServer::new(listener, runtime.clone(), client.clone()));
    }
    let kubelet = Arc::new(Kubelet {
        start_delay: cfg.pod_start_delay,
        ready_delay: cfg.pod_ready_delay,
        job_run_time: cfg.job_run_time,
        state: Mutex::new(State::default()),
        events,
        runtime,
    });
    Controller::new(mgr, move |ctx: Context<Pod>| {
        let k = kubelet.clone();
        async move { k.reconcile(ctx).await }
    })
    .client(client)
    .named("kubelet")
    .max_concurrent_reconciles(8)
    .without_leader_election()
    .build()
}

#[derive(Default)]
struct State {
    tracks: HashMap<Request, Track>,
    ips: ip::IpPool,
    /// Pods being stopped, since when.
    terminating: HashMap<Request, Instant>,
}

impl State {
    /// Drops a pod's track and returns its IP.
    fn forget(&mut self, key: &Request) {
        self.terminating.remove(key);
        // A finished pod's address was returned when it finished.
        if let Some(t) = self.tracks.remove(key)
            && t.finished.is_none()
            && let Some(ip) = &t.ip
        {
            self.ips.release(ip);
        }
    }
}

struct Kubelet {
    start_delay: Duration,
    ready_delay: Duration,
    job_run_time: Duration,
    state: Mutex<State>,
    events: Arc<PodEvents>,
    /// The real pods' runtime, when an image store is configured.
    runtime: Option<Arc<runtime::Runtime>>,
}

fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

fn host_ip(node: &Node) -> String {
    let name = node.metadata.name.clone().unwrap_or_default();
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .map(|a| a.address.clone())
        .unwrap_or_else(|| internal_ip(&name))
}

/// One step of a simulated pod's track.
struct Advanced {
    step: lifecycle::Step,
    /// The status to write, when it changed.
    status: Option<serde_json::Value>,
    /// What the status reflects (see [`Track::written`]).
    written: (Stage, i32, bool, usize),
    /// Whether its containers started in this step.
    first_start: bool,
}

/// Hands `pod` to the real pods' runtime `rt` when it runs there (or is being stopped
/// there); whether it did.
fn hand_to_runtime(rt: &runtime::Runtime, key: &Request, pod: &Pod, node: &Node) -> bool {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    if pod.metadata.deletion_timestamp.is_some() {
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0).max(0).unsigned_abs();
        return rt.delete(key, &uid, Duration::from_secs(grace));
    }
    if rt.owns(key, &uid) {
        rt.update_ephemeral(key, pod);
        return true;
    }
    if matches!(phase(pod), "Succeeded" | "Failed") || !rt.is_real(pod) {
        return false;
    }
    let facts = runtime::pod::NodeFacts {
        name: node.metadata.name.clone().unwrap_or_default(),
        host_ip: host_ip(node),
        pod_cidr: node.spec.as_ref().and_then(|s| s.pod_cidr.clone()),
        allocatable: node.status.as_ref().and_then(|s| s.allocatable.clone()).unwrap_or_default(),
    };
    rt.ensure(key, pod, facts);
    true
}

impl Kubelet {
    async fn reconcile(&self, ctx: Context<Pod>) -> ReconcileResult {
        let key = ctx.request.clone();
        let Some(pod) = ctx.object.clone() else {
            self.state.lock().forget(&key);
            if let Some(rt) = &self.runtime {
                rt.forget(&key);
            }
            return Ok(Action::done());
        };
        let Some(node_name) = pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty()) else {
            return Ok(Action::done());
        };
        let Some(node) = ctx.cache.get::<Node>(&node_name, None) else {
            // Not (yet) known: look again shortly.
            return Ok(Action::requeue_after(Duration::from_secs(1)));
        };
        if !is_simulated(&node) {
            return Ok(Action::done());
        }
        if let Some(rt) = &self.runtime
            && hand_to_runtime(rt, &key, &pod, &node)
        {
            return Ok(Action::done());
        }
        let api: Api<Pod> = ctx.api();
        if pod.metadata.deletion_timestamp.is_some() {
            return self.terminate(&api, &pod, &key, &node_name).await;
        }
        if matches!(phase(&pod), "Succeeded" | "Failed") {
            self.state.lock().forget(&key);
            return Ok(Action::done());
        }
        let behaviour = Behaviour::of(&pod, self.job_run_time);
        let Some(advanced) = self.advance(&key, &pod, &node, &behaviour) else { return Ok(Action::done()) };
        if let Some(body) = &advanced.status
            && !self.write_status(&api, &key, &pod, body, &advanced).await?
        {
            return Ok(Action::done());
        }
        let step = &advanced.step;
        self.events_for(&pod, &node_name, step, advanced.first_start, &behaviour);
        Ok(step.wake.map_or(Action::done(), |d| Action::requeue_after(d + Duration::from_millis(1))))
    }

    /// Moves `pod`'s track one step on (adopting a pod already running, giving it an IP
    /// once it needs one), and builds its status when it changed since last written.
    fn advance(&self, key: &Request, pod: &Pod, node: &Node, behaviour: &Behaviour) -> Option<Advanced> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let (now, now_wall) = (Instant::now(), Timestamp::now().as_second());
        let host = host_ip(node);
        let mut guard = self.state.lock();
        let st = &mut *guard;
        if st.tracks.get(key).is_some_and(|t| t.uid != uid) {
            st.forget(key);
        }
        if !st.tracks.contains_key(key) {
            let mut t = Track::new(uid.clone(), now, now_wall);
            if adopt(&mut t, pod, now)
                && let Some(ip) = &t.ip
            {
                st.ips.reserve(ip);
            }
            st.tracks.insert(key.clone(), t);
        }
        let track = st.tracks.get_mut(key)?;
        let first_start = track.started.is_none();
        let step = track.advance(behaviour, self.start_delay, self.ready_delay, now, now_wall);
        let needs_ip = step.stage != Stage::Creating
            && track.ip.is_none()
            && pod.spec.as_ref().and_then(|s| s.host_network) != Some(true);
        if needs_ip {
            let cidr = node.spec.as_ref().and_then(|s| s.pod_cidr.clone());
            track.ip = st.ips.allocate(cidr.as_deref());
        }
        let track = st.tracks.get(key)?;
        let ephemeral = pod.spec.as_ref().and_then(|s| s.ephemeral_containers.as_ref()).map_or(0, Vec::len);
        let written = (step.stage, track.restarts, status::gates_ready(pod), ephemeral);
        let status =
            (track.written != Some(written)).then(|| status::pod_status(pod, track, step.stage, &host, now_wall));
        Some(Advanced { first_start: first_start && step.started, step, status, written })
    }

    /// Writes the pod's new status `body` and records it as written (returning a
    /// finished pod's IP); `false` when the pod is gone.
    async fn write_status(
        &self,
        api: &Api<Pod>,
        key: &Request,
        pod: &Pod,
        body: &serde_json::Value,
        advanced: &Advanced,
    ) -> Result<bool, kube::Error> {
        let params = PatchParams { field_manager: Some(KUBELET.into()), ..Default::default() };
        match api.patch_status(&key.name, &params, &Patch::Merge(body)).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                self.state.lock().forget(key);
                return Ok(false);
            }
            Err(e) => return Err(e),
        }
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let mut st = self.state.lock();
        if let Some(t) = st.tracks.get_mut(key).filter(|t| t.uid == uid) {
            t.written = Some(advanced.written);
        }
        if matches!(advanced.step.stage, Stage::Finished { .. })
            && let Some(ip) = st.tracks.get(key).and_then(|t| t.ip.clone())
        {
            st.ips.release(&ip);
        }
        Ok(true)
    }

    /// Confirms the deletion of a pod on a simulated node.
    async fn terminate(&self, api: &Api<Pod>, pod: &Pod, key: &Request, node: &str) -> ReconcileResult {
        if pod.metadata.deletion_grace_period_seconds == Some(0) {
            self.state.lock().forget(key);
            return Ok(Action::done());
        }
        let now = Instant::now();
        let (first, since) = {
            let mut st = self.state.lock();
            let first = !st.terminating.contains_key(key);
            (first, *st.terminating.entry(key.clone()).or_insert(now))
        };
        if first && phase(pod) == "Running" {
            for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
                let note = format!("Stopping container {}", c.name);
                self.event(pod, node, Some(&c.name), EventType::Normal, "Killing", &note);
            }
        }
        let grace = Duration::from_secs(pod.metadata.deletion_grace_period_seconds.unwrap_or(0).max(0).unsigned_abs());
        let stop_after = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| lifecycle::duration_annotation(a, lifecycle::TERMINATION_DURATION))
            .map_or(Duration::ZERO, |d| d.min(grace));
        if now < since + stop_after {
            return Ok(Action::requeue_after(since + stop_after - now));
        }
        let has_finalizers = pod.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty());
        if has_finalizers && !matches!(phase(pod), "Succeeded" | "Failed") {
            // Finalizer holders watch for the pod to end: report it terminated first.
            let now_wall = Timestamp::now().as_second();
            let body = {
                let mut st = self.state.lock();
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                let mut t = st.tracks.get(key).cloned().unwrap_or_else(|| Track::new(uid, Instant::now(), now_wall));
                t.last_exit = Some(Exit { code: KILLED_EXIT_CODE, started: t.run_since_wall, finished: now_wall });
                st.forget(key);
                status::pod_status(pod, &t, Stage::Finished { exit_code: KILLED_EXIT_CODE }, &host_from(pod), now_wall)
            };
            let params = PatchParams { field_manager: Some(KUBELET.into()), ..Default::default() };
            match api.patch_status(&key.name, &params, &Patch::Merge(&body)).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => return Ok(Action::done()),
                Err(e) => return Err(e.into()),
            }
        }
        self.state.lock().forget(key);
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: pod.metadata.uid.clone(), resource_version: None }),
            ..Default::default()
        };
        match api.delete(&key.name, &dp).await {
            Ok(_) => Ok(Action::done()),
            Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => Ok(Action::done()),
            Err(e) => Err(e.into()),
        }
    }

    /// The events of one step.
    fn events_for(&self, pod: &Pod, node: &str, step: &lifecycle::Step, first_start: bool, b: &Behaviour) {
        let Some(spec) = &pod.spec else { return };
        if step.started {
            let inits = spec.init_containers.iter().flatten().filter(|_| first_start);
            for c in inits.chain(spec.containers.iter()) {
                let image = c.image.clone().unwrap_or_default();
                let pulled = format!("Container image \"{image}\" already present on machine");
                self.event(pod, node, Some(&c.name), EventType::Normal, "Pulled", &pulled);
                self.event(
                    pod,
                    node,
                    Some(&c.name),
                    EventType::Normal,
                    "Created",
                    &format!("Created container: {}", c.name),
                );
                self.event(
                    pod,
                    node,
                    Some(&c.name),
                    EventType::Normal,
                    "Started",
                    &format!("Started container {}", c.name),
                );
            }
        }
        if step.stage == Stage::BackOff && b.restarts(b.exit_code) {
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            for c in &spec.containers {
                let note = format!("Back-off restarting failed container {} in pod {name}_{ns}({uid})", c.name);
                self.event(pod, node, Some(&c.name), EventType::Warning, "BackOff", &note);
            }
        }
    }

    /// Publishes one event in the background (dropped when too many are queued).
    fn event(
        &self,
        pod: &Pod,
        node: &str,
        container: Option<&str>,
        type_: EventType,
        reason: &'static str,
        note: &str,
    ) {
        self.events.emit(pod, node, container, type_, reason, note);
    }
}

/// The host IP a pod's status already names (for terminal statuses written on deletion).
fn host_from(pod: &Pod) -> String {
    pod.status.as_ref().and_then(|s| s.host_ip.clone()).unwrap_or_default()
}

/// Takes over a pod that was already started (by an earlier run of the kubelet): its IP,
/// restart count and start, so it is not started again. Returns whether it was running.
fn adopt(t: &mut Track, pod: &Pod, now: Instant) -> bool {
    let Some(st) = &pod.status else { return false };
    if st.phase.as_deref() != Some("Running") {
        return false;
    }
    t.ip = st.pod_ip.clone();
    t.started = Some(now);
    t.restarts = st.container_statuses.iter().flatten().map(|c| c.restart_count).max().unwrap_or(0);
    if let Some(since) = st
        .container_statuses
        .iter()
        .flatten()
        .find_map(|c| c.state.as_ref().and_then(|s| s.running.as_ref()).and_then(|r| r.started_at.clone()))
    {
        t.run_since_wall = since.0.as_second();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgetting_returns_addresses_once() {
        let mut st = State::default();
        let now = Instant::now();
        let cidr = Some("10.244.0.0/24");
        let mut running = Track::new("a".into(), now, 0);
        running.ip = st.ips.allocate(cidr);
        let mut done = Track::new("b".into(), now, 0);
        done.ip = st.ips.allocate(cidr);
        done.finished = Some(0);
        // The finished pod's address was released when it finished and reused since.
        if let Some(ip) = &done.ip {
            st.ips.release(ip);
        }
        let reused = st.ips.allocate(cidr);
        assert_eq!(reused, done.ip);
        st.tracks.insert(Request::new("a", Some("d")), running.clone());
        st.tracks.insert(Request::new("b", Some("d")), done);
        st.forget(&Request::new("b", Some("d")));
        st.forget(&Request::new("a", Some("d")));
        // Only the running pod's address is free again; the reused one stays taken.
        assert_eq!(st.ips.allocate(cidr), running.ip);
        assert_eq!(st.ips.allocate(cidr).as_deref(), Some("10.244.0.4"));
    }

    #[test]
    fn adopts_running_pods() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Running", "podIP": "10.244.1.7",
                "containerStatuses": [{"name": "c", "restartCount": 3, "ready": true, "image": "", "imageID": "",
                    "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}}]}
        }))
        .unwrap_or_default();
        let mut t = Track::new("u".into(), Instant::now(), 0);
        assert!(adopt(&mut t, &pod, Instant::now()));
        assert_eq!((t.ip.as_deref(), t.restarts), (Some("10.244.1.7"), 3));
        assert!(t.started.is_some());
    }
}
