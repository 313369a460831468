//! The pod status a kubelet reports for each [`Stage`]: phase, conditions, IPs, start
//! time, container and init container statuses (with fake but stable image and container
//! ids) and the QoS class — built as the body of a merge patch on `pods/status`.

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::lifecycle::{Exit, Stage, Track};
use opkit_apimachinery::quantity;

/// A stable 64-hex-digit digest of some strings (fake image and container ids).
pub(crate) fn digest(parts: &[&str]) -> String {
    let mut out = String::with_capacity(64);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0u8]) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    for i in 0..4u64 {
        let v = (h ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xff51_afd7_ed55_8ccd).rotate_left(31);
        out.push_str(&format!("{v:016x}"));
    }
    out
}

/// RFC 3339 at one-second precision.
pub(crate) fn rfc3339(secs: i64) -> String {
    Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH).to_string()
}

/// A fully qualified image reference, as containerd reports it.
fn qualified(image: &str) -> String {
    let (repo, tagged) = match image.rsplit_once('/') {
        Some((_, last)) => (image, last.contains(':') || last.contains('@')),
        None => (image, image.contains(':') || image.contains('@')),
    };
    let first = repo.split('/').next().unwrap_or_default();
    let has_registry = repo.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let mut out = if has_registry {
        repo.to_string()
    } else if repo.contains('/') {
        format!("docker.io/{repo}")
    } else {
        format!("docker.io/library/{repo}")
    };
    if !tagged {
        out.push_str(":latest");
    }
    out
}

fn image_id(image: &str) -> String {
    let q = qualified(image);
    let repo = match q.rsplit_once('/') {
        Some((pre, last)) => format!("{pre}/{}", last.split([':', '@']).next().unwrap_or(last)),
        None => q.clone(),
    };
    format!("{repo}@sha256:{}", digest(&[&q]))
}

/// The QoS class of a pod (`Guaranteed`, `Burstable` or `BestEffort`).
pub(crate) fn qos_class(pod: &Pod) -> &'static str {
    let Some(spec) = &pod.spec else { return "BestEffort" };
    let all: Vec<&Container> = spec.containers.iter().chain(spec.init_containers.iter().flatten()).collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in &all {
        let res = c.resources.clone().unwrap_or_default();
        let requests = res.requests.unwrap_or_default();
        let limits = res.limits.unwrap_or_default();
        for r in ["cpu", "memory"] {
            // An unreadable quantity counts as zero, as the scheduler counts it.
            let req = requests.get(r).map(|q| quantity::milli(q).unwrap_or(0));
            let lim = limits.get(r).map(|q| quantity::milli(q).unwrap_or(0));
            any |= req.is_some_and(|v| v != 0) || lim.is_some_and(|v| v != 0);
            match (req, lim) {
                (_, None) => guaranteed = false,
                (Some(q), Some(l)) if q != l => guaranteed = false,
                _ => {}
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// One pod condition (JSON), with `lastTransitionTime` `now`.
pub(crate) fn condition(type_: &str, ok: bool, reason: Option<&str>, message: Option<String>, now: &str) -> Value {
    let mut c = json!({"type": type_, "status": if ok { "True" } else { "False" }, "lastProbeTime": null, "lastTransitionTime": now});
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    if let Some(m) = message {
        c["message"] = json!(m);
    }
    c
}

/// Keeps `lastTransitionTime` of conditions whose status did not change, and conditions
/// of types this kubelet does not own.
pub(crate) fn merge_conditions(pod: &Pod, mut new: Vec<Value>) -> Vec<Value> {
    let old = pod.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    for c in &mut new {
        if let Some(prev) = old.iter().find(|o| c["type"] == o.type_.as_str())
            && c["status"] == prev.status.as_str()
            && let Some(t) = &prev.last_transition_time
        {
            c["lastTransitionTime"] = json!(t);
        }
    }
    for o in old {
        if !new.iter().any(|c| c["type"] == o.type_.as_str()) {
            new.push(serde_json::to_value(&o).expect("a k8s-openapi PodCondition always serialises"));
        }
    }
    new
}

fn terminated(exit: &Exit, container_id: &str) -> Value {
    json!({
        "exitCode": exit.code,
        "reason": if exit.code == 0 { "Completed" } else { "Error" },
        "startedAt": rfc3339(exit.started),
        "finishedAt": rfc3339(exit.finished),
        "containerID": container_id,
    })
}

/// Whether the pod's readiness gates (extra conditions) all hold.
pub(crate) fn gates_ready(pod: &Pod) -> bool {
    let gates = pod.spec.as_ref().and_then(|s| s.readiness_gates.clone()).unwrap_or_default();
    let conds = pod.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    gates.iter().all(|g| conds.iter().any(|c| c.type_ == g.condition_type && c.status == "True"))
}

/// The status body (`{"status": …}`) for `pod` in `stage`, on a node with `host_ip`.
pub(crate) fn pod_status(pod: &Pod, track: &Track, stage: Stage, host_ip: &str, now_wall: i64) -> Value {
    let spec = pod.spec.clone().unwrap_or_default();
    let now = rfc3339(now_wall);
    let start_time = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0.to_string())
        .unwrap_or_else(|| rfc3339(track.run_since_wall.min(now_wall)));
    let (phase, containers_ready) = match stage {
        Stage::Creating => ("Pending", false),
        Stage::Running { ready } => ("Running", ready),
        Stage::BackOff => ("Running", false),
        Stage::Finished { exit_code } => (if exit_code == 0 { "Succeeded" } else { "Failed" }, false),
    };
    let simulated = SimulatedPod { pod, track, stage, now_wall };
    let containers: Vec<Value> =
        spec.containers.iter().map(|c| simulated.container_status(c, containers_ready)).collect();
    let inits: Vec<Value> = spec.init_containers.iter().flatten().map(|c| simulated.init_container_status(c)).collect();
    let mut status = json!({
        "phase": phase,
        "conditions": merge_conditions(pod, pod_conditions(pod, stage, containers_ready, &now)),
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": start_time,
        "containerStatuses": containers,
        "qosClass": qos_class(pod),
    });
    if !inits.is_empty() {
        status["initContainerStatuses"] = json!(inits);
    }
    let ephemeral: Vec<Value> =
        spec.ephemeral_containers.iter().flatten().map(|c| simulated.ephemeral_container_status(c)).collect();
    if !ephemeral.is_empty() {
        status["ephemeralContainerStatuses"] = json!(ephemeral);
    }
    let pod_ip = if spec.host_network == Some(true) { Some(host_ip.to_string()) } else { track.ip.clone() };
    set_pod_ips(&mut status, pod_ip.filter(|_| stage != Stage::Creating).as_deref());
    json!({"status": status})
}

/// A simulated pod at one stage of its track, whose container statuses are written.
struct SimulatedPod<'a> {
    pod: &'a Pod,
    track: &'a Track,
    stage: Stage,
    now_wall: i64,
}

impl SimulatedPod<'_> {
    /// The ID of container `name`'s `n`-th instance.
    fn container_id(&self, name: &str, n: i32) -> String {
        let uid = self.pod.metadata.uid.as_deref().unwrap_or_default();
        format!("containerd://{}", digest(&[uid, name, &n.to_string()]))
    }

    /// The status of container `c` (`ready` when every container is).
    fn container_status(&self, c: &Container, containers_ready: bool) -> Value {
        let (track, stage) = (self.track, self.stage);
        let image = c.image.clone().unwrap_or_default();
        let id = self.container_id(&c.name, track.restarts);
        let (state, ready, started, with_id) = match stage {
            Stage::Creating => (json!({"waiting": {"reason": "ContainerCreating"}}), false, false, false),
            Stage::Running { ready } => {
                (json!({"running": {"startedAt": rfc3339(track.run_since_wall)}}), ready, true, true)
            }
            Stage::BackOff => {
                let meta = &self.pod.metadata;
                let msg = format!(
                    "back-off {} restarting failed container={} pod={}_{}({})",
                    opkit_apimachinery::duration::format(track.backoff_for),
                    c.name,
                    meta.name.as_deref().unwrap_or_default(),
                    meta.namespace.as_deref().unwrap_or_default(),
                    meta.uid.as_deref().unwrap_or_default(),
                );
                (json!({"waiting": {"reason": "CrashLoopBackOff", "message": msg}}), false, false, false)
            }
            Stage::Finished { exit_code } => {
                let exit = track.last_exit.unwrap_or(Exit {
                    code: exit_code,
                    started: track.run_since_wall,
                    finished: self.now_wall,
                });
                (json!({"terminated": terminated(&exit, &id)}), false, false, true)
            }
        };
        let last_state = match (stage, track.last_exit) {
            (Stage::Finished { .. }, _) | (_, None) => json!({}),
            (_, Some(exit)) => {
                let previous = if stage == Stage::BackOff { track.restarts } else { track.restarts - 1 };
                json!({"terminated": terminated(&exit, &self.container_id(&c.name, previous))})
            }
        };
        let mut s = json!({
            "name": c.name,
            "state": state,
            "lastState": last_state,
            "ready": ready && containers_ready,
            "restartCount": track.restarts,
            "image": if with_id { qualified(&image) } else { image.clone() },
            "imageID": if with_id { image_id(&image) } else { String::new() },
            "started": started,
        });
        if with_id {
            s["containerID"] = json!(id);
        }
        s
    }

    /// The status of ephemeral container `c` of a simulated pod: running once the pod
    /// runs (it was added to a started pod), as long as the pod does.
    fn ephemeral_container_status(&self, c: &EphemeralContainer) -> Value {
        let image = c.image.clone().unwrap_or_default();
        let id = self.container_id(&c.name, 0);
        let state = match self.stage {
            Stage::Finished { .. } => {
                let exit = Exit { code: 0, started: self.track.run_since_wall, finished: self.now_wall };
                json!({"terminated": terminated(&exit, &id)})
            }
            _ => json!({"running": {"startedAt": rfc3339(self.now_wall)}}),
        };
        json!({"name": c.name, "state": state, "lastState": {}, "ready": false, "restartCount": 0,
            "image": qualified(&image), "imageID": image_id(&image), "containerID": id})
    }

    /// The status of init container `c`: initializing while the pod is created, then
    /// completed.
    fn init_container_status(&self, c: &Container) -> Value {
        let image = c.image.clone().unwrap_or_default();
        if self.stage == Stage::Creating {
            return json!({"name": c.name, "state": {"waiting": {"reason": "PodInitializing"}}, "lastState": {},
                "ready": false, "restartCount": 0, "image": image, "imageID": "", "started": false});
        }
        let id = self.container_id(&c.name, 0);
        let run_since = self.track.run_since_wall;
        let exit = Exit { code: 0, started: run_since, finished: run_since };
        json!({"name": c.name, "state": {"terminated": terminated(&exit, &id)}, "lastState": {}, "ready": true,
            "restartCount": 0, "image": qualified(&image), "imageID": image_id(&image), "containerID": id, "started": false})
    }
}

/// The pod's conditions at `stage` (before the ones others own are merged in).
fn pod_conditions(pod: &Pod, stage: Stage, containers_ready: bool, now: &str) -> Vec<Value> {
    let spec = pod.spec.clone().unwrap_or_default();
    let names: Vec<String> = spec.containers.iter().map(|c| c.name.clone()).collect();
    let list = format!("[{}]", names.join(" "));
    let finished = matches!(stage, Stage::Finished { .. });
    let ready = containers_ready && gates_ready(pod);
    let not_ready_reason = if finished { "PodCompleted" } else { "ContainersNotReady" };
    let not_ready_msg = (!finished).then(|| format!("containers with unready status: {list}"));
    let init_names: Vec<String> = spec.init_containers.iter().flatten().map(|c| c.name.clone()).collect();
    let initialized = stage != Stage::Creating || init_names.is_empty();
    let mut conditions = vec![
        condition(
            "PodReadyToStartContainers",
            !matches!(stage, Stage::Creating | Stage::Finished { .. }),
            None,
            None,
            now,
        ),
        if initialized {
            condition("Initialized", true, if finished { Some("PodCompleted") } else { None }, None, now)
        } else {
            let msg = format!("containers with incomplete status: [{}]", init_names.join(" "));
            condition("Initialized", false, Some("ContainersNotInitialized"), Some(msg), now)
        },
    ];
    if ready {
        conditions.push(condition("Ready", true, None, None, now));
        conditions.push(condition("ContainersReady", true, None, None, now));
    } else if containers_ready {
        let gates = spec.readiness_gates.clone().unwrap_or_default();
        let missing: Vec<String> = gates.iter().map(|g| g.condition_type.clone()).collect();
        let msg = format!("corresponding condition of pod readiness gate \"{}\" does not exist.", missing.join(", "));
        conditions.push(condition("Ready", false, Some("ReadinessGatesNotReady"), Some(msg), now));
        conditions.push(condition("ContainersReady", true, None, None, now));
    } else {
        conditions.push(condition("Ready", false, Some(not_ready_reason), not_ready_msg.clone(), now));
        conditions.push(condition("ContainersReady", false, Some(not_ready_reason), not_ready_msg, now));
    }
    conditions.push(condition("PodScheduled", true, None, None, now));
    conditions
}

/// Sets `podIP` and `podIPs` of a status body (null, so a merge patch clears them, when
/// the pod has no address).
pub(crate) fn set_pod_ips(status: &mut Value, ip: Option<&str>) {
    match ip {
        Some(ip) => {
            status["podIP"] = json!(ip);
            status["podIPs"] = json!([{"ip": ip}]);
        }
        None => {
            status["podIP"] = Value::Null;
            status["podIPs"] = Value::Null;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).expect("test pod")
    }

    #[test]
    fn images_are_qualified() {
        assert_eq!(qualified("nginx"), "docker.io/library/nginx:latest");
        assert_eq!(qualified("nginx:1.25"), "docker.io/library/nginx:1.25");
        assert_eq!(qualified("bitnami/redis"), "docker.io/bitnami/redis:latest");
        assert_eq!(qualified("registry.k8s.io/pause:3.9"), "registry.k8s.io/pause:3.9");
        assert!(image_id("nginx").starts_with("docker.io/library/nginx@sha256:"));
        assert_eq!(digest(&["a"]).len(), 64);
        assert_ne!(digest(&["a", "b"]), digest(&["ab"]));
    }

    #[test]
    fn qos_classes() {
        let c = |res: Value| pod(json!({"spec": {"containers": [{"name": "c", "resources": res}]}}));
        assert_eq!(qos_class(&c(json!({}))), "BestEffort");
        assert_eq!(qos_class(&c(json!({"requests": {"cpu": "1"}}))), "Burstable");
        assert_eq!(qos_class(&c(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))), "Guaranteed");
        assert_eq!(
            qos_class(&c(
                json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}})
            )),
            "Burstable"
        );
    }

    #[test]
    fn running_ready_status() {
        let p = pod(json!({"metadata": {"name": "p", "namespace": "d", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], "initContainers": [{"name": "i", "image": "busybox"}]}}));
        let mut t = Track::new("u".into(), Instant::now(), 100);
        t.ip = Some("10.244.0.5".into());
        let s = pod_status(&p, &t, Stage::Running { ready: true }, "10.0.0.2", 100);
        let st = &s["status"];
        assert_eq!(st["phase"], "Running");
        assert_eq!(st["podIP"], "10.244.0.5");
        assert_eq!(st["hostIP"], "10.0.0.2");
        assert_eq!(st["containerStatuses"][0]["ready"], true);
        assert!(st["containerStatuses"][0]["state"]["running"]["startedAt"].is_string());
        assert_eq!(st["initContainerStatuses"][0]["state"]["terminated"]["reason"], "Completed");
        let ready = st["conditions"].as_array().and_then(|cs| cs.iter().find(|c| c["type"] == "Ready")).cloned();
        assert_eq!(ready.map(|c| c["status"].clone()), Some(json!("True")));
    }

    #[test]
    fn finished_and_crashing_status() {
        let p = pod(json!({"metadata": {"name": "p", "namespace": "d", "uid": "u"},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}));
        let mut t = Track::new("u".into(), Instant::now(), 100);
        t.last_exit = Some(Exit { code: 3, started: 100, finished: 101 });
        let s = pod_status(&p, &t, Stage::Finished { exit_code: 3 }, "10.0.0.2", 101);
        assert_eq!(s["status"]["phase"], "Failed");
        assert_eq!(s["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 3);
        t.restarts = 2;
        let s = pod_status(&p, &t, Stage::BackOff, "10.0.0.2", 101);
        assert_eq!(s["status"]["containerStatuses"][0]["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(s["status"]["containerStatuses"][0]["restartCount"], 2);
        assert_eq!(s["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"], 3);
    }
}
