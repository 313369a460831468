//! An `events.k8s.io/v1` event recorder, like client-go's `tools/events` broadcaster:
//! each event names the object it is about (`regarding`), the reporting controller and
//! instance, a reason, an action and a note. Repeats of an event (same action, reason,
//! regarding and related object) within the series window do not create new Event objects:
//! the first repeat starts a `series` on the stored event and later repeats increment
//! `series.count` and move `series.lastObservedTime`.
//!
//! # Why not `kube::runtime::events::Recorder`
//! kube 5's recorder also writes `events.k8s.io/v1` Events with series, and its
//! public API (`Recorder::new(client, Reporter)`, `publish(&Event, &ObjectReference)`)
//! would fit behind this one. It is not used because of what it cannot do, each checked
//! against the in-process API server:
//! - **Concurrent repeats.** kube looks the event up, writes to the API server, and only
//!   then updates its cache, with nothing serializing repeats of one event. Six
//!   concurrent first occurrences create six Event objects; one repeat followed by five
//!   concurrent ones ends at `series.count` 3 instead of 7. The kubelet, scheduler and
//!   workload controllers publish from many tasks at once; here, repeats of one event
//!   wait on a per-event lock, so they land on one object and every occurrence counts.
//! - **Events that expired on the server** (kube-apiserver's event TTL, 1 h by default).
//!   kube keeps patching the vanished Event and returns 404 on every repeat until its
//!   6-minute cache entry ages out, so those occurrences are lost. Here a 404 on the
//!   series patch re-creates the Event with its series.
//! - **API limits.** kube sends `note`, `reason`, `action` and `reportingInstance` as
//!   given, and kube-apiserver rejects an Event whose note exceeds 1 KiB or whose other
//!   fields exceed 128 bytes. Here they are cut to fit ([`MAX_NOTE_BYTES`]).
//! - **The series window** is fixed at 6 minutes in kube; here
//!   [`Recorder::with_series_window`] sets it (zero turns series off).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::OwnedMutexGuard;

/// How long after its last occurrence an event can still be continued as a series
/// (client-go's `finishTime`, 6 minutes).
pub const DEFAULT_SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// The API server's limit on `note` (1 KiB); longer notes are truncated.
pub const MAX_NOTE_BYTES: usize = 1024;

/// The API server's limit on `reportingInstance`, `reason` and `action`.
const MAX_FIELD_BYTES: usize = 128;

/// The type of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something may need attention.
    Warning,
}

impl EventType {
    /// The wire value, `"Normal"` or `"Warning"`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// What identifies repeats of one event (client-go's `eventKey`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EventKey {
    action: String,
    reason: String,
    regarding: String,
    related: Option<String>,
}

/// A recorded event the recorder may continue as a series.
struct CacheEntry {
    namespace: String,
    event: Event,
    count: i32,
    last_seen: Instant,
    last_observed: Timestamp,
    /// Serializes the API writes for this event so series counts land in order.
    write: Arc<tokio::sync::Mutex<()>>,
}

/// Records `events.k8s.io/v1` Events on behalf of one controller. Cheap to clone; clones
/// share the series cache.
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    reporting_controller: String,
    reporting_instance: String,
    window: Duration,
    cache: Arc<Mutex<HashMap<EventKey, CacheEntry>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("reporting_controller", &self.reporting_controller)
            .field("reporting_instance", &self.reporting_instance)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder reporting as `reporting_controller` (e.g. `example.com/widget-controller`)
    /// from `reporting_instance` (e.g. the pod name).
    pub fn new(client: Client, reporting_controller: impl Into<String>, reporting_instance: impl Into<String>) -> Self {
        Recorder {
            client,
            reporting_controller: reporting_controller.into(),
            reporting_instance: truncate(reporting_instance.into(), MAX_FIELD_BYTES),
            window: DEFAULT_SERIES_WINDOW,
            cache: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// A recorder whose instance is `<reporting_controller>-<hostname>`, as client-go's
    /// `NewRecorder` does.
    pub fn for_controller(client: Client, reporting_controller: impl Into<String>) -> Self {
        let controller = reporting_controller.into();
        let instance = format!("{controller}-{}", crate::hostname::hostname());
        Recorder::new(client, controller, instance)
    }

    /// Sets how long after its last occurrence an event may still be continued as a series
    /// (default [`DEFAULT_SERIES_WINDOW`]; zero turns series off).
    pub fn with_series_window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// The reporting controller.
    pub fn reporting_controller(&self) -> &str {
        &self.reporting_controller
    }

    /// The reporting instance.
    pub fn reporting_instance(&self) -> &str {
        &self.reporting_instance
    }

    /// Records an event about `regarding`: `reason` says why (CamelCase, e.g. `Scaled`),
    /// `action` what was done or failed (e.g. `Scale`), `note` is the human-readable detail.
    ///
    /// Best-effort, as client-go's recorder is: an event the API server refuses (a
    /// namespace being deleted, a lost connection) is logged, never returned, so that a
    /// reconcile or a finalizer's cleanup does not fail on its events.
    /// [`Recorder::try_publish_with_related`] returns the error instead.
    pub async fn publish(&self, regarding: &ObjectReference, type_: EventType, reason: &str, action: &str, note: &str) {
        self.publish_with_related(regarding, None, type_, reason, action, note).await
    }

    /// Records an event about object `obj` (see [`Recorder::publish`]).
    pub async fn publish_for<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        self.publish(&obj.object_ref(&()), type_, reason, action, note).await
    }

    /// Records an event about `regarding` that also involves a secondary `related` object
    /// (best-effort, see [`Recorder::publish`]).
    pub async fn publish_with_related(
        &self,
        regarding: &ObjectReference,
        related: Option<&ObjectReference>,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        let Err(e) = self.try_publish_with_related(regarding, related, type_, reason, action, note).await else {
            return;
        };
        let object = format!(
            "{}/{}",
            regarding.kind.as_deref().unwrap_or_default(),
            regarding.name.as_deref().unwrap_or_default()
        );
        if crate::status::is_namespace_terminating(&e) {
            tracing::debug!(error = %e, reason, object, "event dropped: its namespace is being deleted");
        } else {
            tracing::warn!(error = %e, reason, object, "the API server refused an event (it is not retried)");
        }
    }

    /// Records an event about object `obj`, returning what the API server answered.
    pub async fn try_publish_for<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) -> kube::Result<()> {
        self.try_publish_with_related(&obj.object_ref(&()), None, type_, reason, action, note).await
    }

    /// Records an event about `regarding` (and a secondary `related` object), returning
    /// what the API server answered.
    pub async fn try_publish_with_related(
        &self,
        regarding: &ObjectReference,
        related: Option<&ObjectReference>,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) -> kube::Result<()> {
        let key = EventKey {
            action: action.to_string(),
            reason: reason.to_string(),
            regarding: reference_key(regarding),
            related: related.map(reference_key),
        };
        let what = EventFields { type_, reason, action, note };
        let (write, create) = self.count_occurrence(&key, regarding, related, &what);
        let _guard = match write {
            Ok(held) => held,
            Err(write) => write.lock_owned().await,
        };
        self.write_occurrence(&key, create).await
    }

    /// Counts one occurrence of `key` in the series cache (dropping entries older than the
    /// window), under the cache lock. A new entry's write lock comes back held (`Ok`), and
    /// `true` says the event is to be created; a repeat gets the entry's lock to wait on.
    fn count_occurrence(
        &self,
        key: &EventKey,
        regarding: &ObjectReference,
        related: Option<&ObjectReference>,
        what: &EventFields<'_>,
    ) -> (Result<OwnedMutexGuard<()>, Arc<tokio::sync::Mutex<()>>>, bool) {
        let now = Timestamp::now();
        let seen = Instant::now();
        let mut cache = self.cache.lock();
        let window = self.window;
        cache.retain(|_, e| seen.saturating_duration_since(e.last_seen) < window);
        if let Some(entry) = cache.get_mut(key) {
            entry.count = entry.count.saturating_add(1);
            entry.last_seen = seen;
            entry.last_observed = now;
            return (Err(entry.write.clone()), false);
        }
        let event = self.new_event(regarding, related, what, now);
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let write = Arc::new(tokio::sync::Mutex::new(()));
        // Hold the write lock from the start so repeats wait for the create.
        let guard = write.clone().try_lock_owned();
        let entry =
            CacheEntry { namespace, event, count: 1, last_seen: seen, last_observed: now, write: write.clone() };
        cache.insert(key.clone(), entry);
        (guard.map_err(|_| write), true)
    }

    /// Writes the newest state of `key`'s series (concurrent repeats may have bumped the
    /// count meanwhile): creates the event, or patches its series, recreating it when it
    /// expired on the server.
    async fn write_occurrence(&self, key: &EventKey, create: bool) -> kube::Result<()> {
        let Some((namespace, mut event, count, last)) =
            self.cache.lock().get(key).map(|e| (e.namespace.clone(), e.event.clone(), e.count, e.last_observed))
        else {
            return Ok(());
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let name = event.metadata.name.clone().unwrap_or_default();
        if create {
            if count > 1 {
                event.series = Some(series(count, last));
            }
            if let Err(e) = api.create(&PostParams::default(), &event).await {
                self.forget(key, &name);
                return Err(e);
            }
            return Ok(());
        }
        let patch = json!({ "series": series(count, last) });
        match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => Ok(()),
            // The event expired on the server; record it again with its series.
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                event.series = Some(series(count, last));
                event.metadata.resource_version = None;
                api.create(&PostParams::default(), &event).await.map(|_| ())
            }
            Err(e) => Err(e),
        }
    }

    /// Drops a cache entry whose creation failed so the next occurrence tries again.
    fn forget(&self, key: &EventKey, name: &str) {
        let mut cache = self.cache.lock();
        if cache.get(key).is_some_and(|e| e.event.metadata.name.as_deref() == Some(name)) {
            cache.remove(key);
        }
    }

    fn new_event(
        &self,
        regarding: &ObjectReference,
        related: Option<&ObjectReference>,
        what: &EventFields<'_>,
        now: Timestamp,
    ) -> Event {
        let EventFields { type_, reason, action, note } = *what;
        let namespace = match regarding.namespace.as_deref() {
            Some(ns) if !ns.is_empty() => ns.to_string(),
            _ => "default".to_string(),
        };
        Event {
            metadata: ObjectMeta {
                name: Some(event_name(regarding.name.as_deref().unwrap_or_default(), now)),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            reporting_controller: Some(self.reporting_controller.clone()),
            reporting_instance: Some(self.reporting_instance.clone()),
            action: Some(truncate(action.to_string(), MAX_FIELD_BYTES)),
            reason: Some(truncate(reason.to_string(), MAX_FIELD_BYTES)),
            note: Some(truncate(note.to_string(), MAX_NOTE_BYTES)),
            type_: Some(type_.as_str().to_string()),
            regarding: Some(regarding.clone()),
            related: related.cloned(),
            ..Event::default()
        }
    }
}

/// What an event says: its type, reason, action and note.
#[derive(Clone, Copy)]
struct EventFields<'a> {
    type_: EventType,
    reason: &'a str,
    action: &'a str,
    note: &'a str,
}

fn series(count: i32, last: Timestamp) -> EventSeries {
    EventSeries { count, last_observed_time: MicroTime(last) }
}

/// The name client-go gives an event: `<regarding name>.<unix nanoseconds in hex>`.
fn event_name(regarding_name: &str, now: Timestamp) -> String {
    let base = if regarding_name.is_empty() { "event" } else { regarding_name };
    format!("{base}.{:x}", now.as_nanosecond())
}

/// A stable string form of an object reference, for the series cache key.
fn reference_key(r: &ObjectReference) -> String {
    serde_json::to_string(r).expect("an ObjectReference (strings and optionals) always serialises")
}

/// Cuts `s` to at most `max` bytes at a character boundary.
fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_follow_client_go() {
        let t = Timestamp::from_nanosecond(0x1234_5678_9abc).expect("valid");
        assert_eq!(event_name("web", t), "web.123456789abc");
        assert_eq!(event_name("", t), "event.123456789abc");
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate("abcdef".into(), 4), "abcd");
        assert_eq!(truncate("ab".into(), 4), "ab");
        // "é" is two bytes; cutting in its middle backs off.
        assert_eq!(truncate("aé".into(), 2), "a");
        assert_eq!(truncate("x".repeat(2000), MAX_NOTE_BYTES).len(), MAX_NOTE_BYTES);
    }

    #[test]
    fn keys_distinguish_regarding_objects() {
        let a = ObjectReference { name: Some("a".into()), ..ObjectReference::default() };
        let b = ObjectReference { name: Some("b".into()), ..ObjectReference::default() };
        assert_ne!(reference_key(&a), reference_key(&b));
        assert_eq!(reference_key(&a), reference_key(&a.clone()));
    }

    #[test]
    fn event_type_wire_values() {
        assert_eq!(EventType::Normal.as_str(), "Normal");
        assert_eq!(EventType::Warning.as_str(), "Warning");
    }

    #[tokio::test]
    async fn repeats_increment_the_series_of_one_event() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::api::ListParams;

        let env = opkit_testenv::TestEnv::start().await.expect("test env");
        let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("subject".into());
        let cm = cms.create(&PostParams::default(), &cm).await.expect("create");
        let events: Api<Event> = Api::namespaced(env.client(), "default");
        let recorder = Recorder::new(env.client(), "opkit.test/widget-controller", "widget-0");

        recorder.try_publish_for(&cm, EventType::Normal, "Synced", "Sync", "synced the config").await.expect("first");
        let list = events.list(&ListParams::default()).await.expect("list").items;
        assert_eq!(list.len(), 1);
        let ev = &list[0];
        assert_eq!(ev.reason.as_deref(), Some("Synced"));
        assert_eq!(ev.action.as_deref(), Some("Sync"));
        assert_eq!(ev.note.as_deref(), Some("synced the config"));
        assert_eq!(ev.type_.as_deref(), Some("Normal"));
        assert_eq!(ev.reporting_controller.as_deref(), Some("opkit.test/widget-controller"));
        assert_eq!(ev.reporting_instance.as_deref(), Some("widget-0"));
        let regarding = ev.regarding.clone().expect("regarding");
        assert_eq!(regarding.kind.as_deref(), Some("ConfigMap"));
        assert_eq!(regarding.uid, cm.metadata.uid);
        assert!(ev.event_time.is_some());
        assert!(ev.series.is_none());

        for _ in 0..2 {
            recorder
                .try_publish_for(&cm, EventType::Normal, "Synced", "Sync", "synced the config")
                .await
                .expect("repeat");
        }
        let list = events.list(&ListParams::default()).await.expect("list").items;
        assert_eq!(list.len(), 1, "repeats reuse the event object");
        assert_eq!(list[0].series.as_ref().map(|s| s.count), Some(3));

        recorder
            .try_publish_for(&cm, EventType::Warning, "Failed", "Sync", "could not sync")
            .await
            .expect("different reason");
        let list = events.list(&ListParams::default()).await.expect("list").items;
        assert_eq!(list.len(), 2);

        // Concurrent repeats land on the same object with every occurrence counted.
        let burst =
            (0..5).map(|_| recorder.try_publish_for(&cm, EventType::Warning, "Failed", "Sync", "could not sync"));
        for res in futures::future::join_all(burst).await {
            res.expect("burst");
        }
        let list = events.list(&ListParams::default()).await.expect("list").items;
        assert_eq!(list.len(), 2);
        let failed = list.iter().find(|e| e.reason.as_deref() == Some("Failed")).expect("failed event");
        assert_eq!(failed.series.as_ref().map(|s| s.count), Some(6));

        // An event that expired on the server is recorded again, its series intact.
        let failed_name = failed.metadata.name.clone().expect("name");
        events.delete(&failed_name, &Default::default()).await.expect("expire the event");
        recorder
            .try_publish_for(&cm, EventType::Warning, "Failed", "Sync", "could not sync")
            .await
            .expect("after expiry");
        let again = events.get(&failed_name).await.expect("re-created under its name");
        assert_eq!(again.series.as_ref().map(|s| s.count), Some(7));
        assert_eq!(again.reason.as_deref(), Some("Failed"));

        // Without a series window every occurrence is a new object.
        let plain = Recorder::new(env.client(), "opkit.test/other", "other-0").with_series_window(Duration::ZERO);
        for _ in 0..2 {
            plain.try_publish_for(&cm, EventType::Normal, "Seen", "Look", "").await.expect("plain");
        }
        let list = events.list(&ListParams::default()).await.expect("list").items;
        assert_eq!(list.len(), 4);
    }

    #[tokio::test]
    async fn events_in_a_terminating_namespace_are_dropped_not_returned() {
        use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
        use kube::api::DeleteParams;

        let env = opkit_testenv::TestEnv::start().await.expect("test env");
        let namespaces: Api<Namespace> = Api::all(env.client());
        let mut ns = Namespace::default();
        ns.metadata.name = Some("doomed".into());
        namespaces.create(&PostParams::default(), &ns).await.expect("namespace");
        let cms: Api<ConfigMap> = Api::namespaced(env.client(), "doomed");
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("held".into());
        cm.metadata.finalizers = Some(vec!["opkit.test/cleanup".into()]);
        let cm = cms.create(&PostParams::default(), &cm).await.expect("configmap");
        namespaces.delete("doomed", &DeleteParams::default()).await.expect("delete the namespace");
        let terminating =
            kube::runtime::wait::await_condition(namespaces.clone(), "doomed", |n: Option<&Namespace>| {
                n.and_then(|n| n.status.as_ref()).and_then(|s| s.phase.as_deref()) == Some("Terminating")
            });
        tokio::time::timeout(std::time::Duration::from_secs(30), terminating)
            .await
            .expect("the namespace is terminating within 30 s")
            .expect("watch");

        // A finalizer's cleanup publishes, and goes on: nothing to return, nothing to `?`.
        let recorder = Recorder::new(env.client(), "opkit.test/widget-controller", "widget-0");
        recorder.publish_for(&cm, EventType::Normal, "CleanedUp", "Finalize", "released").await;
        let refused = recorder.try_publish_for(&cm, EventType::Normal, "CleanedUp", "Finalize", "released").await;
        let err = refused.expect_err("the API server refuses new content in a terminating namespace");
        assert!(crate::status::is_namespace_terminating(&err), "{err}");
    }
}
