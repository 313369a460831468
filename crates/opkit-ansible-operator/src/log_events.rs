//! `--ansible-log-events`: what the operator logs of a run's job events as they arrive
//! (ansible-operator's `internal/ansible/events` logging event handler).
//!
//! - `Tasks` (the default): a task's start (`[playbook task start]`, not for `set_fact`
//!   nor `debug`), a `debug` task's arguments (`[playbook debug]`), a loop item's output
//!   and a failed task (`[playbook task failed]`, an error with the task, its arguments and
//!   path), each with Ansible's output for it; with a verbosity from the resource's
//!   `ansible.sdk.operatorframework.io/verbosity` annotation or `ANSIBLE_VERBOSITY`
//!   above 0, Ansible's output of every task event instead;
//! - `Everything`: every event with its data and output;
//! - `Nothing`: nothing.

use serde_json::{Map, Value};

use crate::job_events::JobEvent;
use crate::runner::VERBOSITY_ANNOTATION;

/// How much of a run's events is logged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogEvents {
    /// The tasks: starts, debug output, loop items, failures.
    #[default]
    Tasks,
    /// Every event.
    Everything,
    /// Nothing.
    Nothing,
}

/// `--ansible-log-events` was not one of its values.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not one of Tasks, Everything, Nothing")]
pub struct UnknownLogEvents(pub String);

impl std::str::FromStr for LogEvents {
    type Err = UnknownLogEvents;

    /// `Tasks`, `Everything` or `Nothing`, in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "tasks" => Ok(LogEvents::Tasks),
            "everything" => Ok(LogEvents::Everything),
            "nothing" => Ok(LogEvents::Nothing),
            _ => Err(UnknownLogEvents(s.to_string())),
        }
    }
}

/// One line the operator logs for an event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EventLogLine {
    /// The message (`[playbook task start]`, …; empty for output and `Everything`).
    pub message: &'static str,
    /// Whether it is logged as an error (a failed task).
    pub error: bool,
    /// The event's fields logged with it (`EventData.Name`, `EventData.TaskArgs`, …).
    pub fields: Map<String, Value>,
    /// Ansible's output for the event (empty when it printed nothing).
    pub stdout: String,
}

/// Who the events are about, logged with every line.
#[derive(Debug, Clone, Default)]
pub(crate) struct EventSubject {
    /// The resource's name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its group, version and kind.
    pub gvk: String,
    /// The run's id.
    pub job: String,
}

/// The verbosity that makes `Tasks` log every task's output: the resource's annotation,
/// else `ANSIBLE_VERBOSITY`, else 0 (ansible-operator's `GetVerbosity`).
pub(crate) fn event_verbosity(object: &Value) -> u32 {
    let annotation = object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(VERBOSITY_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(0);
    if annotation > 0 {
        return annotation;
    }
    std::env::var("ANSIBLE_VERBOSITY").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// What `level` logs of `event`, `verbosity` being [`event_verbosity`].
pub(crate) fn log_line(level: LogEvents, verbosity: u32, event: &JobEvent) -> Option<EventLogLine> {
    let data = &event.event_data;
    let line = |message, error, fields: &[(&str, Option<&Value>)]| {
        let fields = fields.iter().filter_map(|(k, v)| v.map(|v| (k.to_string(), v.clone()))).collect();
        Some(EventLogLine { message, error, fields, stdout: event.stdout.clone() })
    };
    match level {
        LogEvents::Nothing => None,
        LogEvents::Everything => line("", false, &[("EventData", Some(&Value::Object(data.clone())))]),
        LogEvents::Tasks => {
            let task = data.get("task")?;
            let action = short_action(event.task_action());
            if verbosity > 0 {
                return line("", false, &[]);
            }
            match event.event.as_str() {
                "playbook_on_task_start" if action != "set_fact" && action != "debug" => {
                    line("[playbook task start]", false, &[("EventData.Name", data.get("name"))])
                }
                "runner_on_ok" if action == "debug" => {
                    line("[playbook debug]", false, &[("EventData.TaskArgs", data.get("task_args"))])
                }
                "runner_item_on_ok" => line("", false, &[]),
                "runner_on_failed" => line(
                    "[playbook task failed]",
                    true,
                    &[
                        ("EventData.Task", Some(task)),
                        ("EventData.TaskArgs", data.get("task_args")),
                        ("EventData.FailedTaskPath", data.get("task_path")),
                    ],
                ),
                _ => None,
            }
        }
    }
}

/// A builtin module's short name (`ansible.builtin.debug` → `debug`), as roles name
/// `debug` and `set_fact` either way.
fn short_action(action: &str) -> &str {
    action.strip_prefix("ansible.builtin.").or_else(|| action.strip_prefix("ansible.legacy.")).unwrap_or(action)
}

/// Logs what `level` logs of `event` (logger `logging_event_handler`).
pub(crate) fn log_event(level: LogEvents, verbosity: u32, subject: &EventSubject, event: &JobEvent) {
    let Some(line) = log_line(level, verbosity, event) else { return };
    let fields = Value::Object(line.fields).to_string();
    let stdout = line.stdout.trim_end();
    let (name, namespace, gvk, job, event_type) =
        (&subject.name, &subject.namespace, &subject.gvk, &subject.job, &event.event);
    if line.error {
        tracing::error!(target: "logging_event_handler", name, namespace, gvk, event_type, job, %fields, stdout, "{}", line.message);
    } else {
        tracing::info!(target: "logging_event_handler", name, namespace, gvk, event_type, job, %fields, stdout, "{}", line.message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(name: &str, data: Value) -> JobEvent {
        serde_json::from_value(json!({"counter": 1, "event": name, "event_data": data, "stdout": "TASK [x] ***"}))
            .expect("event")
    }

    #[test]
    fn each_level_logs_what_ansible_operator_logs() {
        let start = event("playbook_on_task_start", json!({"task": "create", "name": "create", "task_action": "k8s"}));
        let fact = event("playbook_on_task_start", json!({"task": "f", "name": "f", "task_action": "set_fact"}));
        let ok = event("runner_on_ok", json!({"task": "create", "task_action": "k8s"}));
        let debug = event("runner_on_ok", json!({"task": "d", "task_action": "debug", "task_args": "msg=hi"}));
        let fqcn =
            event("playbook_on_task_start", json!({"task": "d", "name": "d", "task_action": "ansible.builtin.debug"}));
        let failed = event(
            "runner_on_failed",
            json!({"task": "boom", "task_action": "fail", "task_args": "msg=no", "task_path": "/r/tasks/main.yml:3"}),
        );
        let stats = event("playbook_on_stats", json!({"ok": {"localhost": 1}}));

        let tasks = |e: &JobEvent| log_line(LogEvents::Tasks, 0, e);
        let start_line = tasks(&start).expect("task start");
        assert_eq!(
            (start_line.message, start_line.fields["EventData.Name"].clone()),
            ("[playbook task start]", json!("create"))
        );
        assert!(tasks(&fact).is_none() && tasks(&ok).is_none() && tasks(&stats).is_none() && tasks(&fqcn).is_none());
        assert_eq!(tasks(&debug).expect("debug").fields["EventData.TaskArgs"], "msg=hi");
        let failed_line = tasks(&failed).expect("failed");
        assert!(failed_line.error);
        assert_eq!(failed_line.message, "[playbook task failed]");
        assert_eq!(failed_line.fields["EventData.FailedTaskPath"], "/r/tasks/main.yml:3");
        // A verbosity makes every task event print Ansible's output, and only that.
        let verbose = log_line(LogEvents::Tasks, 1, &ok).expect("verbose");
        assert_eq!((verbose.message, verbose.stdout.as_str()), ("", "TASK [x] ***"));
        assert!(log_line(LogEvents::Tasks, 1, &stats).is_none(), "no task, nothing");

        for e in [&start, &fact, &ok, &debug, &failed, &stats] {
            let line = log_line(LogEvents::Everything, 0, e).expect("everything");
            assert_eq!(line.fields["EventData"], Value::Object(e.event_data.clone()));
            assert!(log_line(LogEvents::Nothing, 3, e).is_none());
        }
        assert_eq!("EVERYTHING".parse::<LogEvents>().expect("parse"), LogEvents::Everything);
        assert!("some".parse::<LogEvents>().is_err());
    }
}
