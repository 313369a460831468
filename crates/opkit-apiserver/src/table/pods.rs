//! The pod Table printer (`printPod`): READY, STATUS (from phase, init and
//! container states), RESTARTS with last-restart age, and the wide columns.

use serde_json::Value;

use super::util::{age, age_col, arr, at, boolean, col, int, name, name_col, or_none, parse_ts, s, st, wide};
use super::{Printer, RowFn};

fn has_condition(o: &Value, path: &str, ty: &str) -> bool {
    arr(o, path).iter().any(|c| s(c, "type") == ty && s(c, "status") == "True")
}

/// Restarts of a set of containers and when the last one finished.
#[derive(Clone, Copy, Default)]
struct Restarts {
    count: i64,
    last: Option<i64>,
}

impl Restarts {
    /// Adds one container status.
    fn add(&mut self, status: &Value) {
        self.count += int(status, "restartCount", 0);
        if let Some(t) = parse_ts(s(status, "lastState.terminated.finishedAt")) {
            self.last = Some(self.last.map_or(t, |l| l.max(t)));
        }
    }

    /// The RESTARTS cell: the count, with the age of the last restart.
    fn cell(self, now: i64) -> String {
        match self.last {
            Some(t) if self.count != 0 => format!("{} ({} ago)", self.count, super::human_duration(now - t)),
            _ => self.count.to_string(),
        }
    }
}

/// What the READY, STATUS and RESTARTS columns summarise.
struct Summary {
    reason: String,
    ready: usize,
    restarts: Restarts,
}

/// The STATUS a pod starts from: its reason or phase, or `SchedulingGated`.
fn initial_reason(p: &Value) -> String {
    let mut reason = if s(p, "status.reason").is_empty() { s(p, "status.phase") } else { s(p, "status.reason") };
    for c in arr(p, "status.conditions") {
        if s(c, "type") == "PodScheduled" && s(c, "reason") == "SchedulingGated" {
            reason = "SchedulingGated";
        }
    }
    reason.to_string()
}

/// Walks the init containers as kube's `printPod` does, counting restarts (the
/// restartable "sidecar" ones also into `sidecars`) and ready sidecars; true, with an
/// `Init:` reason set, while the pod is still initializing.
fn summarize_init_containers(p: &Value, sum: &mut Summary, sidecars: &mut Restarts) -> bool {
    let init_specs = arr(p, "spec.initContainers");
    let restartable = |n: &str| init_specs.iter().any(|c| s(c, "name") == n && s(c, "restartPolicy") == "Always");
    for (idx, c) in arr(p, "status.initContainerStatuses").iter().enumerate() {
        sum.restarts.add(c);
        let is_sidecar = restartable(s(c, "name"));
        if is_sidecar {
            sidecars.add(c);
        }
        if at(c, "state.terminated").is_some() && int(c, "state.terminated.exitCode", 0) == 0 {
            continue;
        }
        if is_sidecar && boolean(c, "started") {
            if boolean(c, "ready") {
                sum.ready += 1;
            }
            continue;
        }
        sum.reason = init_reason(c, idx, init_specs.len());
        return true;
    }
    false
}

/// The `Init:` STATUS of the init container `idx` (of `total`) that holds the pod.
fn init_reason(c: &Value, idx: usize, total: usize) -> String {
    let waiting_reason = s(c, "state.waiting.reason");
    if let Some(t) = at(c, "state.terminated") {
        match (s(t, "reason"), int(t, "signal", 0)) {
            ("", 0) => format!("Init:ExitCode:{}", int(t, "exitCode", 0)),
            ("", sig) => format!("Init:Signal:{sig}"),
            (r, _) => format!("Init:{r}"),
        }
    } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
        format!("Init:{waiting_reason}")
    } else {
        format!("Init:{idx}/{total}")
    }
}

/// Walks the app containers (last first, as kube does): restarts on top of the
/// sidecars', the STATUS of a waiting or terminated container, and ready ones.
fn summarize_containers(p: &Value, sum: &mut Summary, sidecars: Restarts) {
    sum.restarts = sidecars;
    let mut has_running = false;
    for c in arr(p, "status.containerStatuses").iter().rev() {
        sum.restarts.add(c);
        let term = at(c, "state.terminated");
        if !s(c, "state.waiting.reason").is_empty() {
            sum.reason = s(c, "state.waiting.reason").into();
        } else if let Some(t) = term.filter(|t| !s(t, "reason").is_empty()) {
            sum.reason = s(t, "reason").into();
        } else if let Some(t) = term {
            sum.reason = match int(t, "signal", 0) {
                0 => format!("ExitCode:{}", int(t, "exitCode", 0)),
                sig => format!("Signal:{sig}"),
            };
        } else if boolean(c, "ready") && at(c, "state.running").is_some() {
            has_running = true;
            sum.ready += 1;
        }
    }
    if sum.reason == "Completed" && has_running {
        sum.reason = if has_condition(p, "status.conditions", "Ready") { "Running".into() } else { "NotReady".into() };
    }
}

/// The STATUS of a pod being deleted: `Unknown` on a lost node, else `Terminating`
/// unless it finished.
fn deletion_reason(p: &Value, reason: String) -> String {
    let deleting = at(p, "metadata.deletionTimestamp").is_some_and(|d| !d.is_null());
    let phase = s(p, "status.phase");
    if deleting && s(p, "status.reason") == "NodeLost" {
        "Unknown".into()
    } else if deleting && phase != "Failed" && phase != "Succeeded" {
        "Terminating".into()
    } else {
        reason
    }
}

/// The READINESS GATES cell: how many gates' conditions are true, of how many.
fn readiness_gates(p: &Value) -> String {
    let gates = arr(p, "spec.readinessGates");
    if gates.is_empty() {
        return "<none>".to_string();
    }
    let conds = arr(p, "status.conditions");
    let ok = gates
        .iter()
        .filter(|g| {
            conds.iter().find(|c| s(c, "type") == s(g, "conditionType")).is_some_and(|c| s(c, "status") == "True")
        })
        .count();
    format!("{ok}/{}", gates.len())
}

/// One pod row, as kube's `printPod`.
pub(crate) fn pod_row(p: &Value, now: i64) -> Vec<Value> {
    let total = arr(p, "spec.containers").len()
        + arr(p, "spec.initContainers").iter().filter(|c| s(c, "restartPolicy") == "Always").count();
    let mut sum = Summary { reason: initial_reason(p), ready: 0, restarts: Restarts::default() };
    let mut sidecars = Restarts::default();
    let initializing = summarize_init_containers(p, &mut sum, &mut sidecars);
    if !initializing || has_condition(p, "status.conditions", "Initialized") {
        summarize_containers(p, &mut sum, sidecars);
    }
    let ip = arr(p, "status.podIPs").first().map_or_else(|| s(p, "status.podIP"), |x| s(x, "ip"));
    vec![
        name(p),
        st(format!("{}/{total}", sum.ready)),
        st(deletion_reason(p, sum.reason)),
        st(sum.restarts.cell(now)),
        age(p, now),
        st(or_none(ip)),
        st(or_none(s(p, "spec.nodeName"))),
        st(or_none(s(p, "status.nominatedNodeName"))),
        st(readiness_gates(p)),
    ]
}

/// Row conditions kube attaches to pod rows (`Completed` for finished pods).
pub(crate) fn pod_conditions(p: &Value) -> Option<Value> {
    let (reason, msg) = match s(p, "status.phase") {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(serde_json::json!([{"type": "Completed", "status": "True", "reason": reason, "message": msg}]))
}

/// The printer of pods.
pub(crate) fn pods() -> Printer {
    Printer::of((
            vec![
                name_col(),
                col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
                col("Status", "string", "The aggregate status of the containers in this pod."),
                col(
                    "Restarts",
                    "string",
                    "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                ),
                age_col(),
                wide(
                    "IP",
                    "string",
                    "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
                ),
                wide("Node", "string", "NodeName indicates in which node this pod is scheduled."),
                wide(
                    "Nominated Node",
                    "string",
                    "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods.",
                ),
                wide(
                    "Readiness Gates",
                    "string",
                    "If specified, all readiness gates will be evaluated for pod readiness.",
                ),
            ],
            pod_row as RowFn,
        ))
    .with_conditions(pod_conditions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: i64 = 1_800_000_000;

    fn ts(ago: i64) -> String {
        jiff::Timestamp::from_second(NOW - ago).map(|t| t.to_string()).unwrap_or_default()
    }

    #[test]
    fn pod_ready_and_status() {
        let p = json!({
            "metadata": {"name": "web-0", "creationTimestamp": ts(200)},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
            "status": {"phase": "Running", "podIP": "10.1.1.1", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "ready": false, "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                 "lastState": {"terminated": {"finishedAt": ts(30), "exitCode": 1}}}
            ]}
        });
        let row = pod_row(&p, NOW);
        assert_eq!(row[0], json!("web-0"));
        assert_eq!(row[1], json!("1/2"));
        assert_eq!(row[2], json!("CrashLoopBackOff"));
        assert_eq!(row[3], json!("2 (30s ago)"));
        assert_eq!(row[4], json!("3m20s"));
        assert_eq!(row[5], json!("10.1.1.1"));
        assert_eq!(row[6], json!("n1"));
        assert_eq!(row[7], json!("<none>"));
        assert_eq!(row[8], json!("<none>"));
    }

    #[test]
    fn pod_phases_and_init() {
        let pending = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}], "initContainers": [{"name": "i"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [{"name": "i", "state": {"waiting": {"reason": "PodInitializing"}}}]}});
        let row = pod_row(&pending, NOW);
        assert_eq!(
            (row[1].clone(), row[2].clone(), row[4].clone()),
            (json!("0/1"), json!("Init:0/1"), json!("<unknown>"))
        );
        let done = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Succeeded", "containerStatuses": [{"name": "a", "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}]}});
        assert_eq!(pod_row(&done, NOW)[2], json!("Completed"));
        assert!(pod_conditions(&done).is_some());
        let term = json!({"metadata": {"name": "p", "deletionTimestamp": ts(1)}, "spec": {"containers": []}, "status": {"phase": "Running"}});
        assert_eq!(pod_row(&term, NOW)[2], json!("Terminating"));
        let oom = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 137, "signal": 9}}}]}});
        assert_eq!(pod_row(&oom, NOW)[2], json!("Signal:9"));
    }
}
