//! Event publishing for controllers whose reconcile must not fail because an Event could not
//! be recorded.

use opkit::events::{EventType, Recorder};

/// Records an event, logging (not failing) when that is impossible.
pub(crate) async fn publish<K: kube::Resource<DynamicType = ()>>(
    rec: &Recorder,
    obj: &K,
    t: EventType,
    reason: &str,
    action: &str,
    note: &str,
) {
    rec.publish_for(obj, t, reason, action, note).await;
}
