//! The event Table printer (`printEvent`) for core/v1 and events.k8s.io/v1 Events.

use serde_json::Value;

use super::Printer;
use super::util::{Col, DESC_NAME, at, col, i, int, name, parse_ts, s, st, wide};

/// Human age of the timestamp at `path`, if it is set.
fn ago(o: &Value, path: &str, now: i64) -> Option<String> {
    parse_ts(s(o, path)).map(|t| super::human_duration(now - t))
}

pub(crate) fn event_row(e: &Value, now: i64) -> Vec<Value> {
    event_cells(
        e,
        now,
        ["involvedObject", "source.component", "source.host", "message", "firstTimestamp", "lastTimestamp", "count"],
    )
}

pub(crate) fn events_v1_row(e: &Value, now: i64) -> Vec<Value> {
    event_cells(
        e,
        now,
        [
            "regarding",
            "deprecatedSource.component",
            "deprecatedSource.host",
            "note",
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
            "deprecatedCount",
        ],
    )
}

/// kube's `printEvent`; `p` names the fields: [object ref, source component, source host,
/// message, first timestamp, last timestamp, count] (core/v1 vs events.k8s.io/v1 spelling).
fn event_cells(e: &Value, now: i64, p: [&str; 7]) -> Vec<Value> {
    let unknown = || "<unknown>".to_string();
    let first = ago(e, p[4], now).or_else(|| ago(e, "eventTime", now)).unwrap_or_else(unknown);
    let mut last = ago(e, p[5], now).unwrap_or_else(|| first.clone());
    let mut count = int(e, p[6], 0);
    if at(e, "series").is_some_and(|v| !v.is_null()) {
        last = ago(e, "series.lastObservedTime", now).unwrap_or_else(unknown);
        count = int(e, "series.count", 0);
    } else if count == 0 {
        count = 1;
    }
    let kind = s(e, &format!("{}.kind", p[0])).to_lowercase();
    let obj_name = s(e, &format!("{}.name", p[0]));
    let target = if obj_name.is_empty() { kind } else { format!("{kind}/{obj_name}") };
    let component = Some(s(e, p[1])).filter(|c| !c.is_empty()).unwrap_or(s(e, "reportingController"));
    let instance = Some(s(e, p[2])).filter(|c| !c.is_empty()).unwrap_or(s(e, "reportingInstance"));
    let source = if instance.is_empty() { component.to_string() } else { format!("{component}, {instance}") };
    vec![
        st(last),
        st(s(e, "type")),
        st(s(e, "reason")),
        st(target),
        st(s(e, &format!("{}.fieldPath", p[0]))),
        st(source),
        st(s(e, p[3]).trim()),
        st(first),
        i(count),
        name(e),
    ]
}

/// The columns of both Event APIs.
fn event_cols() -> Vec<Col> {
    vec![
        col("Last Seen", "string", "The time at which the most recent occurrence of this event was recorded."),
        col("Type", "string", "Type of this event (Normal, Warning), new types could be added in the future"),
        col(
            "Reason",
            "string",
            "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
        ),
        col("Object", "string", "The object that this event is about."),
        wide(
            "Subobject",
            "string",
            "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement.",
        ),
        wide(
            "Source",
            "string",
            "The component reporting this event. Should be a short machine understandable string.",
        ),
        col("Message", "string", "A human-readable description of the status of this operation."),
        wide(
            "First Seen",
            "string",
            "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
        ),
        wide("Count", "string", "The number of times this event has occurred."),
        Col { priority: 1, format: "name".into(), ..col("Name", "string", DESC_NAME) },
    ]
}

/// The printer of core/v1 events.
pub(crate) fn core_events() -> Printer {
    Printer::of((event_cols(), event_row))
}

/// The printer of events.k8s.io/v1 events.
pub(crate) fn events_v1() -> Printer {
    Printer::of((event_cols(), events_v1_row))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn core_event_row() {
        let ev = json!({"metadata": {"name": "ev1"}, "type": "Warning", "reason": "BackOff", "message": " boom ",
            "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{a}"}, "source": {"component": "kubelet", "host": "n1"}});
        let row = event_row(&ev, 0);
        assert_eq!(row[0], json!("<unknown>"));
        assert_eq!(
            row[3..9].to_vec(),
            vec![
                json!("pod/p"),
                json!("spec.containers{a}"),
                json!("kubelet, n1"),
                json!("boom"),
                json!("<unknown>"),
                json!(1)
            ]
        );
    }
}
