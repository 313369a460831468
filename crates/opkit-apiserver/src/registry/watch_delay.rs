//! Holding back watch events, for tests: a lagging watch cache, made on purpose.
//!
//! A test names the events to hold (a resource, and optionally a namespace, a name and
//! the event types). Every watch that is about to deliver a matching event stops there
//! until the test releases the hold, so the event and everything after it on that watch
//! arrive late, in order, as from an API server whose watch cache lags. Lists, gets and
//! writes are not affected. This is how a test shows that a controller does not act on a
//! cache older than its own writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

use super::Target;
use super::read::{WatchEvent, WatchPayload};

/// Which watch events to hold back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchEventFilter {
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource (plural), e.g. `configmaps`.
    pub resource: String,
    /// Only objects in this namespace.
    pub namespace: Option<String>,
    /// Only the object of this name.
    pub name: Option<String>,
    /// Only these event types (`ADDED`, `MODIFIED`, `DELETED`); empty: all three.
    pub event_types: Vec<String>,
}

impl WatchEventFilter {
    /// Every event of `resource` in `group`.
    #[must_use]
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> WatchEventFilter {
        WatchEventFilter { group: group.into(), resource: resource.into(), ..WatchEventFilter::default() }
    }

    /// Only objects in `namespace`.
    #[must_use]
    pub fn in_namespace(mut self, namespace: impl Into<String>) -> WatchEventFilter {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only the object named `name`.
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> WatchEventFilter {
        self.name = Some(name.into());
        self
    }

    /// Only events of type `event_type` (`ADDED`, `MODIFIED` or `DELETED`); may be given
    /// more than once.
    #[must_use]
    pub fn of_type(mut self, event_type: impl Into<String>) -> WatchEventFilter {
        self.event_types.push(event_type.into());
        self
    }

    fn matches_target(&self, target: &Target) -> bool {
        target.info.group == self.group && target.info.resource == self.resource
    }

    fn matches_event(&self, event: &WatchEvent) -> bool {
        if !matches!(event.kind, "ADDED" | "MODIFIED" | "DELETED") {
            return false;
        }
        if !self.event_types.is_empty() && !self.event_types.iter().any(|t| t == event.kind) {
            return false;
        }
        if self.namespace.is_none() && self.name.is_none() {
            return true;
        }
        let (namespace, name) = event_location(&event.payload);
        self.namespace.as_ref().is_none_or(|ns| namespace.as_deref() == Some(ns.as_str()))
            && self.name.as_ref().is_none_or(|n| name.as_deref() == Some(n.as_str()))
    }
}

/// An event object's namespace and name.
fn event_location(payload: &WatchPayload) -> (Option<String>, Option<String>) {
    #[derive(serde::Deserialize, Default)]
    struct Meta {
        namespace: Option<String>,
        name: Option<String>,
    }
    #[derive(serde::Deserialize, Default)]
    struct Obj {
        #[serde(default)]
        metadata: Meta,
    }
    let obj: Obj = match payload {
        WatchPayload::Raw(b) => serde_json::from_slice(b).unwrap_or_default(),
        WatchPayload::Json(v) => serde_json::from_value(v.clone()).unwrap_or_default(),
    };
    (obj.metadata.namespace, obj.metadata.name)
}

/// One hold: its filter, whether it was released, and how many events it holds now.
struct Hold {
    filter: WatchEventFilter,
    released: watch::Sender<bool>,
    holding: AtomicUsize,
    held_total: AtomicUsize,
    changed: tokio::sync::Notify,
}

/// The holds of one API server (see the module's text). Cheap when there are none: a
/// watch pays one atomic load per event.
#[derive(Default)]
pub struct WatchDelays {
    holds: Mutex<Vec<Arc<Hold>>>,
    active: AtomicUsize,
}

impl WatchDelays {
    /// Holds back, on every watch, the events `filter` matches (and what follows them on
    /// the same watch) until the returned handle is released or dropped.
    pub fn hold(self: &Arc<Self>, filter: WatchEventFilter) -> HeldWatchEvents {
        let hold = Arc::new(Hold {
            filter,
            released: watch::Sender::new(false),
            holding: AtomicUsize::new(0),
            held_total: AtomicUsize::new(0),
            changed: tokio::sync::Notify::new(),
        });
        self.holds.lock().push(hold.clone());
        self.active.fetch_add(1, Ordering::SeqCst);
        HeldWatchEvents { delays: self.clone(), hold, released: false }
    }

    /// Waits, before `event` is delivered on a watch of `target`, until no hold matching
    /// it is in force.
    pub(crate) async fn admit(&self, target: &Target, event: &WatchEvent) {
        if self.active.load(Ordering::Relaxed) == 0 {
            return;
        }
        let matching: Vec<Arc<Hold>> = self
            .holds
            .lock()
            .iter()
            .filter(|h| !*h.released.borrow() && h.filter.matches_target(target) && h.filter.matches_event(event))
            .cloned()
            .collect();
        for hold in matching {
            let _holding = Holding::start(&hold);
            let mut released = hold.released.subscribe();
            // An error means the hold is gone, which releases it too.
            let _ = released.wait_for(|r| *r).await;
        }
    }

    fn remove(&self, hold: &Arc<Hold>) {
        let mut holds = self.holds.lock();
        let before = holds.len();
        holds.retain(|h| !Arc::ptr_eq(h, hold));
        if holds.len() < before {
            self.active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Counts an event as held while it lives.
struct Holding<'a>(&'a Hold);

impl<'a> Holding<'a> {
    fn start(hold: &'a Hold) -> Holding<'a> {
        hold.holding.fetch_add(1, Ordering::SeqCst);
        hold.held_total.fetch_add(1, Ordering::SeqCst);
        hold.changed.notify_waiters();
        Holding(hold)
    }
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        self.0.holding.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

/// A hold in force ([`WatchDelays::hold`]): released by [`HeldWatchEvents::release`] or
/// when dropped, after which the held events are delivered in order.
pub struct HeldWatchEvents {
    delays: Arc<WatchDelays>,
    hold: Arc<Hold>,
    released: bool,
}

impl HeldWatchEvents {
    /// How many events are being held now (one per watch at most: a watch stops at its
    /// first held event).
    #[must_use]
    pub fn holding(&self) -> usize {
        self.hold.holding.load(Ordering::SeqCst)
    }

    /// How many events this hold has stopped, in all.
    #[must_use]
    pub fn held_total(&self) -> usize {
        self.hold.held_total.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` events have been stopped by this hold, up to `timeout`.
    /// Returns whether they were.
    pub async fn wait_held(&self, n: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.hold.changed.notified();
            if self.held_total() >= n {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.held_total() >= n;
            }
        }
    }

    /// Releases the hold: the held events are delivered now, and no more are held.
    pub fn release(mut self) {
        self.release_now();
    }

    fn release_now(&mut self) {
        if !self.released {
            self.released = true;
            self.hold.released.send_replace(true);
            self.delays.remove(&self.hold);
        }
    }
}

impl Drop for HeldWatchEvents {
    fn drop(&mut self) {
        self.release_now();
    }
}
