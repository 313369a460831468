//! What a real pod reports: the kubelet's view of its containers (state, last state,
//! restarts, readiness) and the pod status built from it — phase, conditions, IPs,
//! container and init container statuses — as the body of a merge patch on
//! `pods/status`.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::status::{condition, gates_ready, merge_conditions, qos_class, rfc3339};

/// How a container instance ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Terminated {
    /// The exit code.
    pub exit_code: i32,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// `Completed`, `Error` or `StartError`.
    pub reason: String,
    /// A message (why it could not start).
    pub message: Option<String>,
    /// When it started (seconds).
    pub started_at: i64,
    /// When it ended (seconds).
    pub finished_at: i64,
    /// Its container id.
    pub container_id: String,
}

impl Terminated {
    fn to_json(&self) -> Value {
        let mut v = json!({
            "exitCode": self.exit_code,
            "reason": self.reason,
            "startedAt": rfc3339(self.started_at),
            "finishedAt": rfc3339(self.finished_at),
            "containerID": self.container_id,
        });
        if let Some(s) = self.signal {
            v["signal"] = json!(s);
        }
        if let Some(m) = &self.message {
            v["message"] = json!(m);
        }
        v
    }
}

/// A container's current state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum State {
    /// Not running: why, and a message.
    Waiting {
        /// e.g. `ContainerCreating`, `PodInitializing`, `CrashLoopBackOff`,
        /// `CreateContainerConfigError`.
        reason: String,
        /// Details.
        message: Option<String>,
    },
    /// Running since (seconds), as container id.
    Running {
        /// When it started.
        started_at: i64,
        /// Its container id.
        container_id: String,
    },
    /// Ended.
    Terminated(Terminated),
}

/// The kubelet's view of one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContainerView {
    /// The container's name.
    pub name: String,
    /// Its image as the spec names it.
    pub image: String,
    /// Its state.
    pub state: State,
    /// How its previous instance ended.
    pub last: Option<Terminated>,
    /// How many times it was restarted.
    pub restarts: i32,
    /// Whether it is ready.
    pub ready: bool,
    /// Whether its startup probe passed (or it has none) while it runs.
    pub started: bool,
    /// Whether it ended for good (it will not be restarted).
    pub done: bool,
}

impl ContainerView {
    /// A container not started yet, waiting for `reason`.
    pub(crate) fn waiting(name: &str, image: &str, reason: &str, restarts: i32) -> ContainerView {
        ContainerView {
            name: name.to_string(),
            image: image.to_string(),
            state: State::Waiting { reason: reason.to_string(), message: None },
            last: None,
            restarts,
            ready: false,
            started: false,
            done: false,
        }
    }

    fn to_json(&self, image_id: &str) -> Value {
        let (state, cid) = match &self.state {
            State::Waiting { reason, message } => {
                let mut w = json!({"reason": reason});
                if let Some(m) = message {
                    w["message"] = json!(m);
                }
                (json!({"waiting": w}), None)
            }
            State::Running { started_at, container_id } => {
                (json!({"running": {"startedAt": rfc3339(*started_at)}}), Some(container_id.clone()))
            }
            State::Terminated(t) => (json!({"terminated": t.to_json()}), Some(t.container_id.clone())),
        };
        let mut v = json!({
            "name": self.name,
            "state": state,
            "lastState": self.last.as_ref().map_or(json!({}), |t| json!({"terminated": t.to_json()})),
            "ready": self.ready,
            "restartCount": self.restarts,
            "image": self.image,
            "imageID": image_id,
            "started": self.started,
        });
        if let Some(id) = cid {
            v["containerID"] = json!(id);
        }
        v
    }

    fn running(&self) -> bool {
        matches!(self.state, State::Running { .. })
    }
}

/// The kubelet's view of one real pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PodView {
    /// The pod's IP, once its sandbox exists.
    pub pod_ip: Option<String>,
    /// The node's IP.
    pub host_ip: String,
    /// Whether the sandbox exists.
    pub sandbox_ready: bool,
    /// Init containers.
    pub init: Vec<ContainerView>,
    /// Whether every init container completed.
    pub initialized: bool,
    /// App containers.
    pub containers: Vec<ContainerView>,
    /// Ephemeral containers, in the order they were added (`kubectl debug`).
    pub ephemeral: Vec<ContainerView>,
    /// Whether an init container failed for good (restartPolicy Never).
    pub init_failed: bool,
    /// When the kubelet started the pod (seconds).
    pub start_time: i64,
    /// The digests of the loaded images, by image reference.
    pub image_ids: Vec<(String, String)>,
}

impl PodView {
    /// The phase, as the kubelet's `getPhase` computes it.
    pub(crate) fn phase(&self) -> &'static str {
        if self.init_failed {
            return "Failed";
        }
        if !self.initialized || self.containers.is_empty() {
            return "Pending";
        }
        if self.containers.iter().all(|c| c.done) {
            let failed = self.containers.iter().any(|c| matches!(&c.state, State::Terminated(t) if t.exit_code != 0));
            return if failed { "Failed" } else { "Succeeded" };
        }
        let never_started = |c: &ContainerView| matches!(c.state, State::Waiting { .. }) && c.last.is_none();
        if self.containers.iter().any(never_started) && !self.containers.iter().any(ContainerView::running) {
            return "Pending";
        }
        "Running"
    }

    fn image_id(&self, image: &str) -> String {
        self.image_ids.iter().find(|(i, _)| i == image).map(|(_, d)| d.clone()).unwrap_or_default()
    }
}

/// Why the pod's readiness gates do not hold, as the kubelet words it.
fn unready_gates(pod: &Pod) -> String {
    let gates = pod.spec.as_ref().and_then(|s| s.readiness_gates.clone()).unwrap_or_default();
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let reasons: Vec<String> = gates
        .iter()
        .filter_map(|g| match conditions.iter().find(|c| c.type_ == g.condition_type) {
            None => {
                Some(format!("corresponding condition of pod readiness gate \"{}\" does not exist.", g.condition_type))
            }
            Some(c) if c.status != "True" => Some(format!(
                "the status of pod readiness gate \"{}\" is not \"True\", but {}",
                g.condition_type, c.status
            )),
            Some(_) => None,
        })
        .collect();
    reasons.join(", ")
}

/// The status body (`{"status": …}`) of `pod` as `view` sees it, at `now`.
pub(crate) fn pod_status(pod: &Pod, view: &PodView, now: Timestamp) -> Value {
    let now_text = rfc3339(now.as_second());
    let phase = view.phase();
    let finished = matches!(phase, "Succeeded" | "Failed");
    let unready: Vec<&str> = view.containers.iter().filter(|c| !c.ready).map(|c| c.name.as_str()).collect();
    let containers_ready = unready.is_empty() && !view.containers.is_empty();
    let mut conditions =
        vec![condition("PodReadyToStartContainers", view.sandbox_ready && !finished, None, None, &now_text)];
    if view.initialized {
        conditions.push(condition("Initialized", true, finished.then_some("PodCompleted"), None, &now_text));
    } else {
        let pending: Vec<&str> = view
            .init
            .iter()
            .filter(|c| !matches!(&c.state, State::Terminated(t) if t.exit_code == 0))
            .map(|c| c.name.as_str())
            .collect();
        let msg = format!("containers with incomplete status: [{}]", pending.join(" "));
        conditions.push(condition("Initialized", false, Some("ContainersNotInitialized"), Some(msg), &now_text));
    }
    let reason = if finished { "PodCompleted" } else { "ContainersNotReady" };
    let msg = (!finished).then(|| format!("containers with unready status: [{}]", unready.join(" ")));
    if containers_ready {
        if gates_ready(pod) {
            conditions.push(condition("Ready", true, None, None, &now_text));
        } else {
            let msg = unready_gates(pod);
            conditions.push(condition("Ready", false, Some("ReadinessGatesNotReady"), Some(msg), &now_text));
        }
        conditions.push(condition("ContainersReady", true, None, None, &now_text));
    } else {
        conditions.push(condition("Ready", false, Some(reason), msg.clone(), &now_text));
        conditions.push(condition("ContainersReady", false, Some(reason), msg, &now_text));
    }
    conditions.push(condition("PodScheduled", true, None, None, &now_text));
    let mut status = json!({
        "phase": phase,
        "conditions": merge_conditions(pod, conditions),
        "hostIP": view.host_ip,
        "hostIPs": [{"ip": view.host_ip}],
        "startTime": rfc3339(view.start_time),
        "containerStatuses": view.containers.iter().map(|c| c.to_json(&view.image_id(&c.image))).collect::<Vec<_>>(),
        "qosClass": qos_class(pod),
    });
    if !view.init.is_empty() {
        status["initContainerStatuses"] =
            json!(view.init.iter().map(|c| c.to_json(&view.image_id(&c.image))).collect::<Vec<_>>());
    }
    if !view.ephemeral.is_empty() {
        status["ephemeralContainerStatuses"] =
            json!(view.ephemeral.iter().map(|c| c.to_json(&view.image_id(&c.image))).collect::<Vec<_>>());
    }
    crate::status::set_pod_ips(&mut status, view.pod_ip.as_deref());
    json!({"status": status})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(code: i32) -> Terminated {
        Terminated {
            exit_code: code,
            signal: None,
            reason: if code == 0 { "Completed".into() } else { "Error".into() },
            message: None,
            started_at: 1,
            finished_at: 2,
            container_id: "opkit://x".into(),
        }
    }

    #[test]
    fn readiness_gates_are_named() {
        let pod: Pod = serde_json::from_value(json!({
            "spec": {"containers": [], "readinessGates": [{"conditionType": "a"}, {"conditionType": "b"}]},
            "status": {"conditions": [{"type": "b", "status": "False"}]}
        }))
        .unwrap_or_default();
        assert_eq!(
            unready_gates(&pod),
            "corresponding condition of pod readiness gate \"a\" does not exist., \
             the status of pod readiness gate \"b\" is not \"True\", but False"
        );
    }

    #[test]
    fn phases() {
        let mut v = PodView { initialized: true, ..Default::default() };
        v.containers.push(ContainerView::waiting("c", "i", "ContainerCreating", 0));
        assert_eq!(v.phase(), "Pending");
        v.containers[0].state = State::Running { started_at: 1, container_id: "opkit://x".into() };
        assert_eq!(v.phase(), "Running");
        v.containers[0].state = State::Waiting { reason: "CrashLoopBackOff".into(), message: None };
        v.containers[0].last = Some(term(1));
        assert_eq!(v.phase(), "Running");
        v.containers[0].state = State::Terminated(term(1));
        v.containers[0].done = true;
        assert_eq!(v.phase(), "Failed");
        v.containers[0].state = State::Terminated(term(0));
        assert_eq!(v.phase(), "Succeeded");
    }
}
