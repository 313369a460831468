//! The kubelets' events about pods (Pulled, Created, Started, Killing, BackOff, ...),
//! one recorder per node, published in the background through the bounded [`EventSink`].

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use opkit::events::{EventType, Recorder};
use parking_lot::Mutex;

use crate::events::EventSink;

/// The reporting controller of the events.
const KUBELET: &str = "kubelet";
/// Events waiting to be written beyond which new ones are dropped.
const MAX_PENDING_EVENTS: usize = 1000;
/// Events written at once.
const EVENT_WRITERS: usize = 2;

/// Publishes the kubelets' events about pods (one recorder per node).
pub(crate) struct PodEvents {
    client: kube::Client,
    recorders: Mutex<HashMap<String, Recorder>>,
    sink: EventSink,
}

impl PodEvents {
    /// Publishes with `client`.
    pub(crate) fn new(client: kube::Client) -> PodEvents {
        PodEvents {
            client,
            recorders: Mutex::new(HashMap::new()),
            sink: EventSink::new(EVENT_WRITERS, MAX_PENDING_EVENTS),
        }
    }

    /// Publishes one event about `pod` (and its `container`) from `node`'s kubelet in the
    /// background (dropped when too many are queued).
    pub(crate) fn emit(
        &self,
        pod: &Pod,
        node: &str,
        container: Option<&str>,
        type_: EventType,
        reason: &'static str,
        note: &str,
    ) {
        let recorder = self
            .recorders
            .lock()
            .entry(node.to_string())
            .or_insert_with(|| Recorder::new(self.client.clone(), KUBELET, node))
            .clone();
        let mut regarding: ObjectReference = kube::Resource::object_ref(pod, &());
        regarding.field_path = container.map(|c| format!("spec.containers{{{c}}}"));
        self.sink.publish(&recorder, regarding, type_, reason, reason, note.to_string());
    }
}
