//! The pod Table printer (`printPod`): READY, STATUS (from phase, init and
//! container states), RESTARTS with last-restart age, and the wide columns.

use serde_json::Value;

use super::util::{age, age_col, arr, at, boolean, col, int, name, name_col, or_none, parse_ts, s, st, wide};
use super::{Printer, RowFn};

fn has_condition(o: &Value, path: &str, ty: &str) -> bool {
    arr(o, path).iter().any(|c| s(c, "type") == ty && s(c, "status") == "True")
}

pub(crate) fn pod_row(p: &Value, now: i64) -> Vec<Value> {
    let init_specs = arr(p, "spec.initContainers");
    let restartable = |n: &str| init_specs.iter().any(|c| s(c, "name") == n && s(c, "restartPolicy") == "Always");
    let total =
        arr(p, "spec.containers").len() + init_specs.iter().filter(|c| s(c, "restartPolicy") == "Always").count();
    let phase = s(p, "status.phase");
    let mut reason =
        if s(p, "status.reason").is_empty() { phase.to_string() } else { s(p, "status.reason").to_string() };
    for c in arr(p, "status.conditions") {
        if s(c, "type") == "PodScheduled" && s(c, "reason") == "SchedulingGated" {
            reason = "SchedulingGated".into();
        }
    }
    let (mut restarts, mut ready, mut rinit_restarts) = (0i64, 0usize, 0i64);
    let (mut last_restart, mut last_rinit_restart) = (None::<i64>, None::<i64>);
    let bump = |last: &mut Option<i64>, st: &Value| {
        if let Some(t) = parse_ts(s(st, "lastState.terminated.finishedAt")) {
            *last = Some(last.map_or(t, |l| l.max(t)));
        }
    };
    let mut initializing = false;
    let init_statuses = arr(p, "status.initContainerStatuses");
    for (idx, c) in init_statuses.iter().enumerate() {
        restarts += int(c, "restartCount", 0);
        bump(&mut last_restart, c);
        let is_r = restartable(s(c, "name"));
        if is_r {
            rinit_restarts += int(c, "restartCount", 0);
            bump(&mut last_rinit_restart, c);
        }
        let term = at(c, "state.terminated");
        let waiting_reason = s(c, "state.waiting.reason");
        if term.is_some() && int(c, "state.terminated.exitCode", 0) == 0 {
            continue;
        } else if is_r && boolean(c, "started") {
            if boolean(c, "ready") {
                ready += 1;
            }
            continue;
        } else if let Some(t) = term {
            reason = match (s(t, "reason"), int(t, "signal", 0)) {
                ("", 0) => format!("Init:ExitCode:{}", int(t, "exitCode", 0)),
                ("", sig) => format!("Init:Signal:{sig}"),
                (r, _) => format!("Init:{r}"),
            };
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            reason = format!("Init:{waiting_reason}");
        } else {
            reason = format!("Init:{idx}/{}", init_specs.len());
        }
        initializing = true;
        break;
    }
    if !initializing || has_condition(p, "status.conditions", "Initialized") {
        restarts = rinit_restarts;
        last_restart = last_rinit_restart;
        let mut has_running = false;
        for c in arr(p, "status.containerStatuses").iter().rev() {
            restarts += int(c, "restartCount", 0);
            bump(&mut last_restart, c);
            let term = at(c, "state.terminated");
            if !s(c, "state.waiting.reason").is_empty() {
                reason = s(c, "state.waiting.reason").into();
            } else if let Some(t) = term.filter(|t| !s(t, "reason").is_empty()) {
                reason = s(t, "reason").into();
            } else if let Some(t) = term {
                reason = match int(t, "signal", 0) {
                    0 => format!("ExitCode:{}", int(t, "exitCode", 0)),
                    sig => format!("Signal:{sig}"),
                };
            } else if boolean(c, "ready") && at(c, "state.running").is_some() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if has_condition(p, "status.conditions", "Ready") { "Running".into() } else { "NotReady".into() };
        }
    }
    let deleting = at(p, "metadata.deletionTimestamp").is_some_and(|d| !d.is_null());
    if deleting && s(p, "status.reason") == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && phase != "Failed" && phase != "Succeeded" {
        reason = "Terminating".into();
    }
    let restarts_str = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", super::human_duration(now - t)),
        _ => restarts.to_string(),
    };
    let ip = arr(p, "status.podIPs").first().map_or_else(|| s(p, "status.podIP"), |x| s(x, "ip"));
    let gates = arr(p, "spec.readinessGates");
    let gates_str = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conds = arr(p, "status.conditions");
        let ok = gates
            .iter()
            .filter(|g| {
                conds.iter().find(|c| s(c, "type") == s(g, "conditionType")).is_some_and(|c| s(c, "status") == "True")
            })
            .count();
        format!("{ok}/{}", gates.len())
    };
    vec![
        name(p),
        st(format!("{ready}/{total}")),
        st(reason),
        st(restarts_str),
        age(p, now),
        st(or_none(ip)),
        st(or_none(s(p, "spec.nodeName"))),
        st(or_none(s(p, "status.nominatedNodeName"))),
        st(gates_str),
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
