//! Expectations, as kube-controller-manager keeps them: the pods a controller created or
//! deleted that its informer cache has not shown yet. While any are outstanding the
//! controller does not add or remove pods, so a lagging cache never makes it create or
//! delete twice. Entries expire after a timeout in case the change is never observed.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;

/// How long an unobserved creation or deletion is waited for (kube: 5 minutes).
pub(crate) const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
struct Pending {
    /// Names of created pods not yet seen in the cache.
    creates: HashMap<String, Instant>,
    /// UIDs of deleted pods still in the cache without a deletion timestamp.
    deletes: HashMap<String, Instant>,
}

/// Outstanding creations and deletions, per controller key.
#[derive(Debug, Default)]
pub(crate) struct Expectations {
    inner: Mutex<HashMap<String, Pending>>,
}

impl Expectations {
    /// Records that the pod `name` was created for `key`.
    pub(crate) fn expect_create(&self, key: &str, name: &str) {
        self.inner.lock().entry(key.to_string()).or_default().creates.insert(name.to_string(), Instant::now());
    }

    /// Records that the pod with `uid` was deleted for `key`.
    pub(crate) fn expect_delete(&self, key: &str, uid: &str) {
        self.inner.lock().entry(key.to_string()).or_default().deletes.insert(uid.to_string(), Instant::now());
    }

    /// Drops everything recorded for `key` (its owner is gone).
    pub(crate) fn forget(&self, key: &str) {
        self.inner.lock().remove(key);
    }

    /// Clears what `pods` (the cache's pods of the owner's namespace) show as done and
    /// expired entries. Returns `None` when nothing is outstanding, otherwise how long
    /// until the oldest outstanding entry expires.
    pub(crate) fn pending(&self, key: &str, pods: &[&Pod]) -> Option<Duration> {
        self.pending_at(key, pods, Instant::now())
    }

    fn pending_at(&self, key: &str, pods: &[&Pod], now: Instant) -> Option<Duration> {
        let mut map = self.inner.lock();
        let entry = map.get_mut(key)?;
        let fresh = |at: &Instant| now.saturating_duration_since(*at) < EXPECTATIONS_TIMEOUT;
        entry.creates.retain(|name, at| fresh(at) && !pods.iter().any(|p| p.metadata.name.as_deref() == Some(name)));
        entry.deletes.retain(|uid, at| {
            fresh(at)
                && pods
                    .iter()
                    .any(|p| p.metadata.uid.as_deref() == Some(uid) && p.metadata.deletion_timestamp.is_none())
        });
        let oldest = entry.creates.values().chain(entry.deletes.values()).min().copied();
        match oldest {
            None => {
                map.remove(key);
                None
            }
            Some(at) => Some(EXPECTATIONS_TIMEOUT.saturating_sub(now.saturating_duration_since(at))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;

    fn pod(name: &str, uid: &str, deleting: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(uid.into()),
                deletion_timestamp: deleting.then(|| Time(Timestamp::now())),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn creations_wait_until_seen() {
        let e = Expectations::default();
        assert_eq!(e.pending("ns/rs", &[]), None);
        e.expect_create("ns/rs", "rs-a");
        e.expect_create("ns/rs", "rs-b");
        let a = pod("rs-a", "1", false);
        assert!(e.pending("ns/rs", &[&a]).is_some());
        let b = pod("rs-b", "2", false);
        assert_eq!(e.pending("ns/rs", &[&a, &b]), None);
    }

    #[test]
    fn deletions_wait_until_terminating_or_gone() {
        let e = Expectations::default();
        e.expect_delete("k", "1");
        let live = pod("p", "1", false);
        assert!(e.pending("k", &[&live]).is_some());
        let terminating = pod("p", "1", true);
        assert_eq!(e.pending("k", &[&terminating]), None);
        e.expect_delete("k", "1");
        assert_eq!(e.pending("k", &[]), None);
    }

    #[test]
    fn entries_expire() {
        let e = Expectations::default();
        e.expect_create("k", "never-seen");
        let later = Instant::now() + EXPECTATIONS_TIMEOUT + Duration::from_secs(1);
        assert_eq!(e.pending_at("k", &[], later), None);
        e.expect_create("k", "x");
        e.forget("k");
        assert_eq!(e.pending("k", &[]), None);
    }
}
