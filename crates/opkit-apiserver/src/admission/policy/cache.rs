//! The compiled policies and bindings, shared by every request and rebuilt only after
//! a policy or binding is written (the revisions of the last writes to either resource
//! tell, as the webhook configurations' cache tells its own).

use std::sync::Arc;

use parking_lot::Mutex;

use super::model::{BINDINGS, Binding, POLICIES, Policy, read_binding, read_policy};
use crate::error::ApiResult;
use crate::registry::{Registry, parse_stored};
use crate::storage::{ListRange, ResourceId, Revision};

/// Every policy with the bindings that name it, compiled.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    /// (policy, its bindings), by policy name.
    pub policies: Vec<(Policy, Vec<Binding>)>,
}

/// The compiled snapshot and the revisions of the last writes to policies and bindings
/// it was built at.
#[derive(Debug, Default)]
pub(crate) struct PolicyCache {
    built: Mutex<Option<([Revision; 2], Arc<Snapshot>)>>,
}

impl PolicyCache {
    /// The current snapshot, rebuilt from the store when stale.
    pub(crate) async fn snapshot(&self, registry: &Registry) -> ApiResult<Arc<Snapshot>> {
        // Read before the objects: a write in between only makes the next request rebuild.
        let generation = registry
            .view()
            .last_writes(&[ResourceId::new(POLICIES.0, POLICIES.1), ResourceId::new(BINDINGS.0, BINDINGS.1)]);
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
