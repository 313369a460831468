//! The job events `ansible-runner` writes for a run (`artifacts/<ident>/job_events/*.json`,
//! the same events operator-sdk receives over its event API): the final
//! `playbook_on_stats` counts and the messages of failed tasks (`runner_on_failed` not
//! ignored nor rescued; `res.msg`, else `unknown playbook failure`).

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The host Ansible operators run against.
const HOST: &str = "localhost";

/// operator-sdk's message when a failed task has no `msg`.
pub const UNKNOWN_FAILURE: &str = "unknown playbook failure";

/// One job event.
#[derive(Debug, Clone, Deserialize)]
pub struct JobEvent {
    /// The event's position in the run.
    #[serde(default)]
    pub counter: i64,
    /// `runner_on_ok`, `runner_on_failed`, `playbook_on_stats`, …
    #[serde(default)]
    pub event: String,
    /// The event's data (`task`, `task_action`, `res`, counts, …).
    #[serde(default)]
    pub event_data: Map<String, Value>,
    /// The text Ansible printed for the event.
    #[serde(default)]
    pub stdout: String,
    /// When the event happened.
    #[serde(default)]
    pub created: String,
}

impl JobEvent {
    /// The failed task's `res.msg`, else [`UNKNOWN_FAILURE`].
    pub fn failure_message(&self) -> String {
        self.event_data
            .get("res")
            .and_then(|r| r.get("msg"))
            .and_then(Value::as_str)
            .map_or_else(|| UNKNOWN_FAILURE.to_string(), str::to_string)
    }

    /// Whether the task had `ignore_errors: true`.
    pub fn ignored(&self) -> bool {
        self.event_data.get("ignore_errors").and_then(Value::as_bool) == Some(true)
    }

    /// Whether a `rescue` block handled the failure.
    pub fn rescued(&self) -> bool {
        self.event_data
            .get("rescued")
            .and_then(Value::as_object)
            .is_some_and(|m| m.values().any(|v| v.as_i64() == Some(1) || v.as_f64() == Some(1.0)))
    }

    /// The task's name, for logs.
    pub fn task(&self) -> &str {
        self.event_data.get("task").and_then(Value::as_str).unwrap_or_default()
    }

    /// The module the task ran (`task_action`).
    pub fn task_action(&self) -> &str {
        self.event_data.get("task_action").and_then(Value::as_str).unwrap_or_default()
    }
}

/// operator-sdk's `ansibleResult`: the counts of the run's final stats and when it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnsibleResult {
    /// Tasks that were ok.
    pub ok: i64,
    /// Tasks that changed something.
    pub changed: i64,
    /// Tasks skipped.
    pub skipped: i64,
    /// Tasks that failed.
    pub failures: i64,
    /// When the run completed.
    pub completion: String,
}

/// What a run's events say.
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    /// The events, in order.
    pub events: Vec<JobEvent>,
    /// The final stats, if the run reached `playbook_on_stats`.
    pub result: Option<AnsibleResult>,
    /// The messages of the failed tasks that count.
    pub failures: Vec<String>,
    /// A `requeue_after` task's period, if one ran.
    pub requeue_after: Option<String>,
}

impl RunSummary {
    /// Reads the events of the run in `artifact_dir` (`artifacts/<ident>`).
    pub fn read(artifact_dir: &Path) -> std::io::Result<RunSummary> {
        let dir = artifact_dir.join("job_events");
        let mut events = Vec::new();
        if dir.is_dir() {
            for entry in std::fs::read_dir(&dir)? {
                let path = entry?.path();
                if path.extension().is_none_or(|e| e != "json") {
                    continue;
                }
                let text = std::fs::read_to_string(&path)?;
                match serde_json::from_str::<JobEvent>(&text) {
                    Ok(event) => events.push(event),
                    Err(e) => tracing::warn!(file = %path.display(), error = %e, "skipping an unreadable job event"),
                }
            }
        }
        events.sort_by_key(|e| e.counter);
        Ok(RunSummary::from_events(events))
    }

    /// Summarises `events` (in order).
    pub fn from_events(events: Vec<JobEvent>) -> RunSummary {
        let mut summary = RunSummary::default();
        for event in &events {
            match event.event.as_str() {
                "playbook_on_stats" => {
                    let count = |key: &str| {
                        event.event_data.get(key).and_then(|m| m.get(HOST)).and_then(Value::as_i64).unwrap_or(0)
                    };
                    summary.result = Some(AnsibleResult {
                        ok: count("ok"),
                        changed: count("changed"),
                        skipped: count("skipped"),
                        failures: count("failures"),
                        completion: completion_time(&event.created),
                    });
                }
                "runner_on_failed" if !event.ignored() && !event.rescued() => {
                    summary.failures.push(event.failure_message());
                }
                "runner_on_ok"
                    if matches!(event.task_action(), "operator_sdk.util.requeue_after" | "requeue_after") =>
                {
                    summary.requeue_after = event
                        .event_data
                        .get("res")
                        .and_then(|r| r.get("period"))
                        .and_then(Value::as_str)
                        .map(str::to_string);
                }
                _ => {}
            }
        }
        summary.events = events;
        summary
    }

    /// Whether the run succeeded: it finished and no task failed.
    pub fn succeeded(&self) -> bool {
        self.result.is_some() && self.failures.is_empty()
    }
}

/// ansible-runner's `created` (`2024-01-02T03:04:05.123456`, UTC) as operator-sdk writes
/// `completion` (`…+00:00`).
fn completion_time(created: &str) -> String {
    if created.is_empty() || created.ends_with("+00:00") || created.ends_with('Z') {
        return created.to_string();
    }
    format!("{created}+00:00")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(counter: i64, name: &str, data: Value) -> JobEvent {
        serde_json::from_value(
            json!({"counter": counter, "event": name, "event_data": data, "created": "2026-01-02T03:04:05.5"}),
        )
        .expect("event")
    }

    #[test]
    fn stats_and_failures() {
        let summary = RunSummary::from_events(vec![
            event(1, "runner_on_ok", json!({"task": "a"})),
            event(2, "runner_on_failed", json!({"task": "b", "ignore_errors": true, "res": {"msg": "ignored"}})),
            event(3, "runner_on_failed", json!({"task": "c", "rescued": {"localhost": 1}, "res": {"msg": "rescued"}})),
            event(4, "runner_on_failed", json!({"task": "d", "res": {"msg": "size must be at most 5"}})),
            event(5, "runner_on_failed", json!({"task": "e", "res": {}})),
            event(
                6,
                "playbook_on_stats",
                json!({"ok": {"localhost": 3}, "changed": {"localhost": 1}, "failures": {"localhost": 2}, "skipped": {}}),
            ),
        ]);
        assert_eq!(summary.failures, vec!["size must be at most 5".to_string(), UNKNOWN_FAILURE.to_string()]);
        let result = summary.result.clone().expect("stats");
        assert_eq!((result.ok, result.changed, result.skipped, result.failures), (3, 1, 0, 2));
        assert_eq!(result.completion, "2026-01-02T03:04:05.5+00:00");
        assert!(!summary.succeeded());
    }
}
