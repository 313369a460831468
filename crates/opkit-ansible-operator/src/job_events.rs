//! The job events `ansible-runner` writes for a run (`artifacts/<ident>/job_events/*.json`,
//! the same events operator-sdk receives over its event API): the final
//! `playbook_on_stats` counts and the messages of failed tasks (`runner_on_failed` not
//! ignored nor rescued; `res.msg`, else `unknown playbook failure`). [`EventFollower`]
//! reads them while the run writes them.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The host Ansible operators run against.
const HOST: &str = "localhost";

/// operator-sdk's message when a failed task has no `msg`.
pub(crate) const UNKNOWN_FAILURE: &str = "unknown playbook failure";

/// One job event.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct JobEvent {
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
    pub(crate) fn failure_message(&self) -> String {
        self.event_data
            .get("res")
            .and_then(|r| r.get("msg"))
            .and_then(Value::as_str)
            .map_or_else(|| UNKNOWN_FAILURE.to_string(), str::to_string)
    }

    /// Whether the task had `ignore_errors: true`.
    pub(crate) fn ignored(&self) -> bool {
        self.event_data.get("ignore_errors").and_then(Value::as_bool) == Some(true)
    }

    /// Whether a `rescue` block handled the failure.
    pub(crate) fn rescued(&self) -> bool {
        self.event_data
            .get("rescued")
            .and_then(Value::as_object)
            .is_some_and(|m| m.values().any(|v| v.as_i64() == Some(1) || v.as_f64() == Some(1.0)))
    }

    /// The module the task ran (`task_action`).
    pub(crate) fn task_action(&self) -> &str {
        self.event_data.get("task_action").and_then(Value::as_str).unwrap_or_default()
    }
}

/// operator-sdk's `ansibleResult`: the counts of the run's final stats and when it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AnsibleResult {
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
pub(crate) struct RunSummary {
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
    /// Summarises `events` (in order).
    pub(crate) fn from_events(events: Vec<JobEvent>) -> RunSummary {
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
    pub(crate) fn succeeded(&self) -> bool {
        self.result.is_some() && self.failures.is_empty()
    }
}

/// Follows a run's `job_events/` directory while ansible-runner writes it, handing out
/// each event once, in the run's order (by `counter`).
#[derive(Debug)]
pub(crate) struct EventFollower {
    dir: PathBuf,
    /// Files already read.
    seen: HashSet<PathBuf>,
    /// Events read but not handed out (a lower counter is still missing).
    pending: BTreeMap<i64, JobEvent>,
    /// The counter handed out next.
    next: i64,
    /// Every event handed out, in order.
    events: Vec<JobEvent>,
}

impl EventFollower {
    /// Follows `artifact_dir/job_events` (it need not exist yet).
    pub(crate) fn new(artifact_dir: &Path) -> EventFollower {
        EventFollower {
            dir: artifact_dir.join("job_events"),
            seen: HashSet::new(),
            pending: BTreeMap::new(),
            next: 1,
            events: Vec::new(),
        }
    }

    /// The events written since the last call that follow the ones handed out. A file
    /// still being written (not yet valid JSON) is read again next time.
    pub(crate) fn poll(&mut self) -> Vec<JobEvent> {
        self.read(false);
        let mut out = Vec::new();
        while let Some(event) = self.pending.remove(&self.next) {
            self.next += 1;
            out.push(event);
        }
        self.events.extend(out.iter().cloned());
        out
    }

    /// After the run: every event not handed out yet, in order.
    pub(crate) fn finish(&mut self) -> Vec<JobEvent> {
        self.read(true);
        let out: Vec<JobEvent> = std::mem::take(&mut self.pending).into_values().collect();
        if let Some(last) = out.last() {
            self.next = last.counter + 1;
        }
        self.events.extend(out.iter().cloned());
        out
    }

    /// What every event handed out says.
    pub(crate) fn summary(&self) -> RunSummary {
        RunSummary::from_events(self.events.clone())
    }

    fn read(&mut self, last: bool) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if !name.ends_with(".json") || name.ends_with("-partial.json") || self.seen.contains(&path) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else { continue };
            match serde_json::from_str::<JobEvent>(&text) {
                Ok(event) => {
                    self.seen.insert(path);
                    self.pending.insert(event.counter, event);
                }
                Err(e) if last => {
                    self.seen.insert(path.clone());
                    tracing::warn!(file = %path.display(), error = %e, "skipping an unreadable job event");
                }
                Err(_) => {}
            }
        }
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

    #[test]
    fn the_follower_hands_out_events_once_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let events = dir.path().join("job_events");
        let mut follower = EventFollower::new(dir.path());
        assert!(follower.poll().is_empty(), "no directory yet");
        std::fs::create_dir_all(&events).expect("job_events");
        let write = |counter: i64, name: &str| {
            let text = json!({"counter": counter, "event": name, "event_data": {}}).to_string();
            std::fs::write(events.join(format!("{counter}-u{counter}.json")), text).expect("write");
        };
        write(2, "runner_on_ok");
        std::fs::write(events.join("u3-partial.json"), "{}").expect("partial");
        assert!(follower.poll().is_empty(), "1 is missing");
        write(1, "playbook_on_start");
        std::fs::write(events.join("3-u3.json"), "{\"counter\": 3, \"ev").expect("half written");
        let got: Vec<i64> = follower.poll().iter().map(|e| e.counter).collect();
        assert_eq!(got, vec![1, 2]);
        write(3, "runner_on_failed");
        write(5, "playbook_on_stats");
        assert_eq!(follower.poll().iter().map(|e| e.counter).collect::<Vec<_>>(), vec![3]);
        assert_eq!(follower.finish().iter().map(|e| e.counter).collect::<Vec<_>>(), vec![5]);
        assert!(follower.poll().is_empty());
        assert_eq!(follower.summary().events.len(), 4);
    }
}
