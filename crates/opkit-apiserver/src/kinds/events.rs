//! Events: kube-apiserver keeps `events.k8s.io/v1` Events in the same place as core/v1
//! Events, so `kubectl get events` shows what controllers record through either API.
//! The events.k8s.io strategy converts between the two forms; both print as events.

use serde_json::{Map, Value};

use super::Strategy;
use crate::selector::{FieldLabels, scalar_at};
use crate::table::{self, Printer};

/// The strategy of core/v1 events.
pub(super) struct CoreEvents;
/// The strategy of events.k8s.io/v1 events, stored as core/v1 events.
pub(super) struct EventsV1;

/// (events.k8s.io/v1 field, core/v1 field) pairs that differ by name.
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

/// Which way to rename the fields of [`EVENT_FIELDS`].
#[derive(Clone, Copy)]
enum Direction {
    /// events.k8s.io/v1 names to core/v1 names.
    ToCore,
    /// core/v1 names to events.k8s.io/v1 names.
    ToEventsV1,
}

fn rename(obj: &mut Value, direction: Direction) {
    let Some(m) = obj.as_object_mut() else { return };
    let mut moved = Map::new();
    for pair in EVENT_FIELDS {
        let (from, to) = match direction {
            Direction::ToCore => (pair.0, pair.1),
            Direction::ToEventsV1 => (pair.1, pair.0),
        };
        if let Some(v) = m.remove(from) {
            moved.insert(to.to_string(), v);
        }
    }
    m.extend(moved);
}

impl Strategy for CoreEvents {
    fn field_labels(&self) -> FieldLabels {
        CORE_EVENT_FIELD_LABELS
    }

    fn table(&self) -> Option<Printer> {
        Some(table::events::core_events())
    }
}

impl Strategy for EventsV1 {
    fn converts_storage(&self, _version: &str) -> bool {
        true
    }

    fn convert_to_storage(&self, obj: &mut Value, _version: &str) {
        rename(obj, Direction::ToCore);
        obj["apiVersion"] = Value::String("v1".into());
    }

    fn convert_from_storage(&self, obj: &mut Value, _version: &str) {
        rename(obj, Direction::ToEventsV1);
    }

    fn field_labels(&self) -> FieldLabels {
        EVENT_V1_FIELD_LABELS
    }

    fn table(&self) -> Option<Printer> {
        Some(table::events::events_v1())
    }
}

/// The field labels of core/v1 Events (`source` is `source.component`, else
/// `reportingComponent`).
const CORE_EVENT_FIELD_LABELS: FieldLabels = FieldLabels {
    names: Some(&[
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
        "metadata.namespace",
        "metadata.name",
    ]),
    value: core_event_field_value,
    unsupported: None,
};

fn core_event_field_value(obj: &Value, field: &str) -> Option<String> {
    match field {
        "source" => {
            let component = scalar_at(obj, "source.component");
            Some(if component.is_empty() { scalar_at(obj, "reportingComponent") } else { component })
        }
        f if f.starts_with("involvedObject.") || matches!(f, "reason" | "reportingComponent" | "type") => {
            Some(scalar_at(obj, f))
        }
        _ => None,
    }
}

/// The field labels of events.k8s.io Events; the core names (`involvedObject.*`,
/// `reportingComponent`) read their events.k8s.io fields.
const EVENT_V1_FIELD_LABELS: FieldLabels = FieldLabels {
    names: Some(&[
        "reason",
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "regarding.apiVersion",
        "regarding.resourceVersion",
        "regarding.fieldPath",
        "reportingController",
        "type",
        "metadata.namespace",
        "metadata.name",
    ]),
    value: event_v1_field_value,
    unsupported: None,
};

fn event_v1_field_value(obj: &Value, field: &str) -> Option<String> {
    let f = field.strip_prefix("involvedObject.").map(|r| format!("regarding.{r}")).unwrap_or(field.to_string());
    let f = if f == "reportingComponent" { "reportingController".to_string() } else { f };
    (f.starts_with("regarding.") || matches!(f.as_str(), "reason" | "reportingController" | "type"))
        .then(|| scalar_at(obj, &f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn event_fields_round_trip() {
        let mut e = json!({"regarding": {"kind": "Pod"}, "note": "hi", "reason": "Started", "deprecatedCount": 2});
        rename(&mut e, Direction::ToCore);
        assert_eq!(e, json!({"reason": "Started", "involvedObject": {"kind": "Pod"}, "message": "hi", "count": 2}));
        rename(&mut e, Direction::ToEventsV1);
        assert_eq!(e["regarding"]["kind"], "Pod");
        assert_eq!(e["note"], "hi");
    }
}
