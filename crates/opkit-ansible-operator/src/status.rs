//! operator-sdk's managed status (`internal/ansible/controller/status`): the conditions
//! `Running`, `Successful` and `Failure` in `status.conditions`, the run's counts as
//! `ansibleResult`, and every other status field (what `k8s_status` set) kept.

use serde_json::{Map, Value, json};

use crate::job_events::AnsibleResult;

/// Condition type: a reconcile runs (or the last one succeeded, awaiting the next).
pub(crate) const RUNNING: &str = "Running";
/// Condition type: the last reconcile succeeded.
pub(crate) const SUCCESSFUL: &str = "Successful";
/// Condition type: the last reconcile failed.
pub(crate) const FAILURE: &str = "Failure";
/// Reason: running.
pub(crate) const RUNNING_REASON: &str = "Running";
/// Reason: succeeded.
pub(crate) const SUCCESSFUL_REASON: &str = "Successful";
/// Reason: failed.
pub(crate) const FAILED_REASON: &str = "Failed";
/// Message of `Running` while a run goes.
pub(crate) const RUNNING_MESSAGE: &str = "Running reconciliation";
/// Message of `Running` after a successful run.
pub(crate) const AWAITING_MESSAGE: &str = "Awaiting next reconciliation";
/// Message of `Successful`.
pub(crate) const SUCCESSFUL_MESSAGE: &str = "Last reconciliation succeeded";

/// One condition, as operator-sdk writes it.
fn condition(type_: &str, status: bool, result: Option<&AnsibleResult>, reason: &str, message: &str) -> Value {
    let mut c = json!({
        "type": type_,
        "status": if status { "True" } else { "False" },
        "lastTransitionTime": now(),
        "reason": reason,
        "message": message,
    });
    if let (Some(result), Some(map)) = (result, c.as_object_mut()) {
        map.insert("ansibleResult".into(), serde_json::to_value(result).unwrap_or(Value::Null));
    }
    c
}

/// Now, as RFC 3339 in UTC to the second (as `metav1.Time` is written).
fn now() -> String {
    opkit::status::now().0.to_string()
}

fn conditions(status: &mut Map<String, Value>) -> Option<&mut Vec<Value>> {
    let entry = status.entry("conditions").or_insert_with(|| json!([]));
    if !entry.is_array() {
        *entry = json!([]);
    }
    entry.as_array_mut()
}

fn get<'a>(status: &'a Map<String, Value>, type_: &str) -> Option<&'a Value> {
    status.get("conditions")?.as_array()?.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

fn field<'a>(c: &'a Value, name: &str) -> &'a str {
    c.get(name).and_then(Value::as_str).unwrap_or_default()
}

/// operator-sdk's `SetCondition`: no change when a non-Failure condition keeps its status
/// and reason; `lastTransitionTime` kept while the status stays; the condition moves last.
fn set(status: &mut Map<String, Value>, mut new: Value) {
    let type_ = field(&new, "type").to_string();
    if let Some(current) = get(status, &type_) {
        let same = field(current, "status") == field(&new, "status");
        if type_ != FAILURE && same && field(current, "reason") == field(&new, "reason") {
            return;
        }
        if same && let (Some(t), Some(map)) = (current.get("lastTransitionTime").cloned(), new.as_object_mut()) {
            map.insert("lastTransitionTime".into(), t);
        }
    }
    if let Some(list) = conditions(status) {
        list.retain(|c| c.get("type").and_then(Value::as_str) != Some(type_.as_str()));
        list.push(new);
    }
}

/// Sets an existing condition's status to False (keeping the rest), as operator-sdk does
/// to the conditions a new state replaces.
fn falsify(status: &mut Map<String, Value>, type_: &str) {
    if let Some(mut c) = get(status, type_).cloned() {
        if let Some(map) = c.as_object_mut() {
            map.insert("status".into(), json!("False"));
        }
        set(status, c);
    }
}

/// `markRunning`: `Successful` goes False, `Running` True (Running, "Running reconciliation").
pub(crate) fn mark_running(status: &mut Map<String, Value>) {
    falsify(status, SUCCESSFUL);
    set(status, condition(RUNNING, true, None, RUNNING_REASON, RUNNING_MESSAGE));
}

/// `markDone`: after a successful run `Running` (Successful, awaiting, with the result),
/// `Successful` True and `Failure` False; after a failed one `Running` False, `Failure`
/// True with the result and the failed tasks' messages, `Successful` False.
pub(crate) fn mark_done(status: &mut Map<String, Value>, result: &AnsibleResult, failures: &[String]) {
    if failures.is_empty() {
        set(status, condition(RUNNING, true, Some(result), SUCCESSFUL_REASON, AWAITING_MESSAGE));
        set(status, condition(SUCCESSFUL, true, None, SUCCESSFUL_REASON, SUCCESSFUL_MESSAGE));
        set(status, condition(FAILURE, false, None, "", ""));
    } else {
        falsify(status, RUNNING);
        set(status, condition(FAILURE, true, Some(result), FAILED_REASON, &failures.join("\n")));
        set(status, condition(SUCCESSFUL, false, None, "", ""));
    }
}

/// `markError`: the run could not be made; `Running` and `Successful` go False and
/// `Failure` is True with `message`.
pub(crate) fn mark_error(status: &mut Map<String, Value>, message: &str) {
    falsify(status, RUNNING);
    falsify(status, SUCCESSFUL);
    set(status, condition(FAILURE, true, None, FAILED_REASON, message));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of<'a>(status: &'a Map<String, Value>, type_: &str) -> &'a Value {
        get(status, type_).unwrap_or_else(|| panic!("no {type_} in {status:?}"))
    }

    #[test]
    fn running_then_done_then_failed_keeps_custom_status() {
        let mut status = Map::new();
        status.insert("nodes".into(), json!(["a"]));
        mark_running(&mut status);
        assert_eq!(of(&status, RUNNING)["reason"], RUNNING_REASON);
        let result = AnsibleResult { ok: 2, changed: 1, ..Default::default() };
        mark_done(&mut status, &result, &[]);
        assert_eq!(of(&status, RUNNING)["reason"], SUCCESSFUL_REASON);
        assert_eq!(of(&status, RUNNING)["ansibleResult"]["ok"], 2);
        assert_eq!(of(&status, SUCCESSFUL)["status"], "True");
        assert_eq!(of(&status, FAILURE)["status"], "False");
        mark_running(&mut status);
        assert_eq!(of(&status, SUCCESSFUL)["status"], "False");
        mark_done(&mut status, &AnsibleResult { failures: 1, ..Default::default() }, &["boom".to_string()]);
        assert_eq!(of(&status, FAILURE)["status"], "True");
        assert_eq!(of(&status, FAILURE)["message"], "boom");
        assert_eq!(of(&status, FAILURE)["ansibleResult"]["failures"], 1);
        assert_eq!(of(&status, RUNNING)["status"], "False");
        assert_eq!(status["nodes"], json!(["a"]));
    }
}
