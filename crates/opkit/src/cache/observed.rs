//! Whether the cache has seen a write: the check read-your-own-writes makes before a
//! reconcile (KEP-5647's staleness guard). A write is seen once the informer of its
//! resource reflects its resourceVersion, or, for a delete, once the object is gone from
//! the cache (a tombstone until then).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::informer::{Informer, resource_version_of};
use crate::object::Kind;

/// What a write left on the API server, as its response said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WriteOutcome {
    /// The object exists at this resourceVersion.
    Version(u64),
    /// The object is gone. `uid` is the deleted object's, when known: an object of the
    /// same name with another uid is a new one.
    Deleted {
        /// The deleted object's uid.
        uid: Option<String>,
    },
}

/// An object a reconcile wrote, and what the write left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WrittenObject {
    /// The API group (`""` for the core group).
    pub(crate) group: String,
    /// The resource (plural).
    pub(crate) resource: String,
    /// The namespace (`None` for cluster-scoped objects).
    pub(crate) namespace: Option<String>,
    /// The name.
    pub(crate) name: String,
    /// The labels after the write (what decides whether a label-scoped cache holds it).
    pub(crate) labels: Option<BTreeMap<String, String>>,
    /// What the write left.
    pub(crate) outcome: WriteOutcome,
}

/// The informer side of the check, for any kind.
pub(super) trait ObservesWrites: Send + Sync {
    /// Whether the cache reflects `outcome` for the object `name` in `namespace`.
    fn has_observed(&self, namespace: Option<&str>, name: &str, outcome: &WriteOutcome) -> bool;
    /// Whether the informer watches an object in `namespace` with `labels`.
    fn watches(&self, namespace: Option<&str>, labels: Option<&BTreeMap<String, String>>) -> bool;
    /// The uid of the cached object `name` in `namespace`, if cached.
    fn cached_uid(&self, namespace: Option<&str>, name: &str) -> Option<String>;
    /// Whether it holds the object `name` in `namespace`.
    fn holds(&self, namespace: Option<&str>, name: &str) -> bool;
}

impl<K: Kind> ObservesWrites for Informer<K> {
    fn has_observed(&self, namespace: Option<&str>, name: &str, outcome: &WriteOutcome) -> bool {
        let cached = self.get_named(namespace, name);
        match outcome {
            WriteOutcome::Version(rv) => {
                self.seen_resource_version(namespace) >= *rv
                    || cached.is_some_and(|o| resource_version_of(&*o).is_some_and(|c| c >= *rv))
            }
            WriteOutcome::Deleted { uid } => {
                cached.is_none_or(|o| uid.as_ref().is_some_and(|u| o.meta().uid.as_ref() != Some(u)))
            }
        }
    }

    fn watches(&self, namespace: Option<&str>, labels: Option<&BTreeMap<String, String>>) -> bool {
        Informer::watches(self, namespace, labels)
    }

    fn cached_uid(&self, namespace: Option<&str>, name: &str) -> Option<String> {
        self.get_named(namespace, name)?.meta().uid.clone()
    }

    fn holds(&self, namespace: Option<&str>, name: &str) -> bool {
        self.get_named(namespace, name).is_some()
    }
}

/// A write the cache must reflect before the next reconcile of the request that made it.
#[derive(Clone)]
pub(crate) struct Expectation {
    informer: Arc<dyn ObservesWrites>,
    pub(crate) written: WrittenObject,
}

impl std::fmt::Debug for Expectation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expectation").field("written", &self.written).finish_non_exhaustive()
    }
}

impl Expectation {
    /// What the cache must reflect of `written`, or `None` if it never will (the object is
    /// outside the informer's scope and not cached) or there is nothing to wait for (a
    /// delete of an object the cache does not hold).
    pub(super) fn new(informer: Arc<dyn ObservesWrites>, mut written: WrittenObject) -> Option<Expectation> {
        let (ns, name) = (written.namespace.as_deref(), written.name.as_str());
        if !informer.watches(ns, written.labels.as_ref()) && !informer.holds(ns, name) {
            return None;
        }
        if let WriteOutcome::Deleted { uid } = &mut written.outcome
            && uid.is_none()
        {
            *uid = Some(informer.cached_uid(ns, name)?);
        }
        Some(Expectation { informer, written })
    }

    /// Whether the cache reflects the write.
    pub(crate) fn is_met(&self) -> bool {
        let w = &self.written;
        self.informer.has_observed(w.namespace.as_deref(), &w.name, &w.outcome)
    }
}
