//! Conversions between a served view and the stored form, where kube-apiserver keeps two
//! resources in one place: `events.k8s.io/v1` Events are stored as core/v1 Events, so
//! `kubectl get events` shows what controllers record through either API.

use serde_json::{Map, Value};

use super::Target;

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

/// Whether objects of `target` are stored in another resource's form.
pub(crate) fn needs_conversion(target: &Target) -> bool {
    target.info.group == "events.k8s.io" && target.info.resource == "events"
}

fn rename(obj: &mut Value, from_index: usize) {
    let Some(m) = obj.as_object_mut() else { return };
    let mut moved = Map::new();
    for pair in EVENT_FIELDS {
        let (from, to) = if from_index == 0 { (pair.0, pair.1) } else { (pair.1, pair.0) };
        if let Some(v) = m.remove(from) {
            moved.insert(to.to_string(), v);
        }
    }
    m.extend(moved);
}

/// Turns a stored object into the form `target` serves (apiVersion is set by the caller).
pub(crate) fn from_storage(target: &Target, obj: &mut Value) {
    if needs_conversion(target) {
        rename(obj, 1);
    }
}

/// Turns an object in `target`'s form into the stored form.
pub(crate) fn to_storage(target: &Target, obj: &mut Value) {
    if needs_conversion(target) {
        rename(obj, 0);
        obj["apiVersion"] = Value::String("v1".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn event_fields_round_trip() {
        let mut e = json!({"regarding": {"kind": "Pod"}, "note": "hi", "reason": "Started", "deprecatedCount": 2});
        rename(&mut e, 0);
        assert_eq!(e, json!({"reason": "Started", "involvedObject": {"kind": "Pod"}, "message": "hi", "count": 2}));
        rename(&mut e, 1);
        assert_eq!(e["regarding"]["kind"], "Pod");
        assert_eq!(e["note"], "hi");
    }
}
