//! The compiled policies and bindings, shared by every request and rebuilt only after
//! a policy or binding is written (their strategy calls [`PolicyCache::invalidate`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::model::{Binding, Policy, read_binding, read_policy};
use crate::error::ApiResult;
use crate::registry::{Registry, parse_stored};
use crate::storage::{ListRange, ResourceId};

/// Every policy with the bindings that name it, compiled.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    /// (policy, its bindings), by policy name.
    pub policies: Vec<(Policy, Vec<Binding>)>,
}

/// The compiled snapshot and the write generation it was built at.
#[derive(Debug, Default)]
pub struct PolicyCache {
    written: AtomicU64,
    built: Mutex<Option<(u64, Arc<Snapshot>)>>,
}

/// The stored policies' resource.
pub(crate) const POLICIES: (&str, &str) = ("admissionregistration.k8s.io", "validatingadmissionpolicies");
/// The stored bindings' resource.
pub(crate) const BINDINGS: (&str, &str) = ("admissionregistration.k8s.io", "validatingadmissionpolicybindings");

impl PolicyCache {
    /// Marks the snapshot stale: a policy or binding was written or removed.
    pub(crate) fn invalidate(&self) {
        self.written.fetch_add(1, Ordering::SeqCst);
    }

    /// The current snapshot, rebuilt from the store when stale.
    pub(crate) async fn snapshot(&self, registry: &Registry) -> ApiResult<Arc<Snapshot>> {
        let generation = self.written.load(Ordering::SeqCst);
        if let Some((built_at, snap)) = self.built.lock().as_ref()
            && *built_at == generation
        {
            return Ok(snap.clone());
        }
        let policies = stored_objects(registry, POLICIES).await?;
        let bindings = stored_objects(registry, BINDINGS).await?;
        let mut bindings: Vec<Binding> = bindings.iter().map(|b| read_binding(b).0).collect();
        let mut snap = Snapshot::default();
        for p in &policies {
            // A policy whose status predates its spec (a server restarted before the
            // type checker wrote it) is checked again.
            super::type_check::spawn_status_update(registry, p);
            let (policy, _) = read_policy(p);
            let (mine, rest): (Vec<Binding>, Vec<Binding>) =
                bindings.into_iter().partition(|b| b.policy_name == policy.name);
            bindings = rest;
            if !mine.is_empty() {
                snap.policies.push((policy, mine));
            }
        }
        let snap = Arc::new(snap);
        *self.built.lock() = Some((generation, snap.clone()));
        Ok(snap)
    }
}

async fn stored_objects(registry: &Registry, (group, resource): (&str, &str)) -> ApiResult<Vec<serde_json::Value>> {
    let id = ResourceId::new(group, resource);
    let page = registry.store().list(&id, &ListRange::default(), &mut |_| true).await?;
    page.items.iter().map(parse_stored).collect()
}
