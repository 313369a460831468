//! The collector's workers: checking a dependent's owners against the server (delete it
//! when none is left, drop dangling references when some are), finishing foreground
//! deletions, and orphaning dependents.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy};
use opkit::events::EventType;
use serde_json::{Value, json};

use super::graph::{FOREGROUND_FINALIZER, Node, ORPHAN_FINALIZER, OwnerRef, Work};
use super::monitors::Mapper;
use super::{GcError, Shared};

/// How many times an update is retried on conflicts.
const MAX_CONFLICTS: usize = 5;

/// What became of one piece of work.
enum Done {
    /// Finished.
    Ok,
    /// Try again after a while (not a failure).
    After(Duration),
}

/// Processes work until the queue shuts down.
pub(super) async fn run(shared: Arc<Shared>) {
    while let Some(item) = shared.queue.get().await {
        let result = match &item {
            Work::AttemptToDelete(uid) => attempt_to_delete(&shared, uid).await,
            Work::Orphan(uid) => orphan(&shared, uid).await,
        };
        match result {
            Ok(Done::Ok) => shared.queue.forget(&item),
            Ok(Done::After(d)) => {
                shared.queue.forget(&item);
                shared.queue.add_after(item.clone(), d);
            }
            Err(e) => {
                tracing::debug!(?item, error = %e, "garbage collector: retrying");
                shared.queue.add_rate_limited(item.clone());
            }
        }
        shared.queue.done(&item);
    }
}

fn api_resource(node: &Node) -> ApiResource {
    let (group, version) = node.api_version.split_once('/').unwrap_or(("", &node.api_version));
    ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: node.api_version.clone(),
        kind: node.kind.clone(),
        plural: node.resource.plural.clone(),
    }
}

fn api(shared: &Shared, ar: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(shared.client.clone(), ns, ar),
        None => Api::all_with(shared.client.clone(), ar),
    }
}

fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// The current object behind a node, if it still is that object.
async fn latest(shared: &Shared, node: &Node) -> Result<Option<DynamicObject>, GcError> {
    let obj = api(shared, &api_resource(node), node.namespace.as_deref()).get_opt(&node.name).await?;
    Ok(obj.filter(|o| o.metadata.uid.as_deref() == Some(node.uid.as_str())))
}

/// How one owner reference stands.
#[derive(Debug, PartialEq, Eq)]
enum OwnerState {
    /// The owner exists.
    Solid,
    /// The owner does not exist (or is a different object).
    Dangling,
    /// The owner is being deleted in the foreground.
    Waiting,
    /// The reference cannot be resolved (unknown kind, or a namespaced owner of a
    /// cluster-scoped object): it keeps the dependent.
    Unresolvable,
}

async fn classify(shared: &Shared, mapper: &Mapper, dep: &Node, owner: &OwnerRef) -> Result<OwnerState, GcError> {
    let Some(m) = mapper.resolve(&owner.api_version, &owner.kind) else {
        return Ok(OwnerState::Unresolvable);
    };
    if dep.namespace.is_none() && m.namespaced {
        invalid_namespace_event(shared, dep, owner).await;
        return Ok(OwnerState::Unresolvable);
    }
    let ns = if m.namespaced { dep.namespace.as_deref() } else { None };
    let found = api(shared, &m.resource, ns).get_opt(&owner.name).await?;
    let state = match found {
        Some(o) if o.metadata.uid.as_deref() == Some(owner.uid.as_str()) => {
            let fins = o.metadata.finalizers.unwrap_or_default();
            if o.metadata.deletion_timestamp.is_some() && fins.iter().any(|f| f == FOREGROUND_FINALIZER) {
                OwnerState::Waiting
            } else {
                OwnerState::Solid
            }
        }
        _ => OwnerState::Dangling,
    };
    if state == OwnerState::Dangling {
        let elsewhere =
            shared.graph.lock().get(&owner.uid).is_some_and(|n| n.namespace.is_some() && n.namespace != dep.namespace);
        if elsewhere {
            invalid_namespace_event(shared, dep, owner).await;
        }
    }
    Ok(state)
}

/// Records kube's `OwnerRefInvalidNamespace` warning on the dependent.
async fn invalid_namespace_event(shared: &Shared, dep: &Node, owner: &OwnerRef) {
    let ns = dep.namespace.clone().unwrap_or_default();
    let regarding = ObjectReference {
        api_version: Some(dep.api_version.clone()),
        kind: Some(dep.kind.clone()),
        namespace: dep.namespace.clone(),
        name: Some(dep.name.clone()),
        uid: Some(dep.uid.clone()),
        ..ObjectReference::default()
    };
    let note = format!(
        "ownerRef [{}/{}, namespace: {ns}, name: {}, uid: {}] does not exist in namespace {ns:?}",
        owner.api_version, owner.kind, owner.name, owner.uid
    );
    shared.recorder.publish(&regarding, EventType::Warning, "OwnerRefInvalidNamespace", "GarbageCollect", &note).await;
}

/// kube's `attemptToDeleteItem`: an object whose owners are all gone (or all being
/// deleted in the foreground) is deleted; one with a live owner keeps only the
/// references to live owners.
async fn attempt_to_delete(shared: &Shared, uid: &str) -> Result<Done, GcError> {
    let Some(node) = shared.graph.lock().get(uid).cloned() else { return Ok(Done::Ok) };
    if node.deleting {
        if node.deleting_dependents() {
            return process_deleting_dependents(shared, &node).await;
        }
        return Ok(Done::Ok);
    }
    let Some(obj) = latest(shared, &node).await? else { return Ok(Done::Ok) };
    if obj.metadata.deletion_timestamp.is_some() {
        return Ok(Done::Ok);
    }
    let mut current = node.clone();
    current.owners = Node::from_meta(node.resource.clone(), &node.api_version, &node.kind, &obj.metadata)
        .map(|n| n.owners)
        .unwrap_or_default();
    if current.owners.is_empty() {
        return Ok(Done::Ok);
    }
    let owners = OwnerStates::classify(shared, &current).await?;
    let a = api(shared, &api_resource(&node), node.namespace.as_deref());
    if owners.solid > 0 {
        if owners.dangling.is_empty() && owners.waiting.is_empty() {
            return Ok(Done::Ok);
        }
        return keep_live_owners(&a, &node, &obj, &owners).await;
    }
    let fins = obj.metadata.finalizers.clone().unwrap_or_default();
    let has_dependents = shared.graph.lock().has_dependents(uid);
    let policy = if !owners.waiting.is_empty() && has_dependents {
        PropagationPolicy::Foreground
    } else if fins.iter().any(|f| f == ORPHAN_FINALIZER) {
        PropagationPolicy::Orphan
    } else if fins.iter().any(|f| f == FOREGROUND_FINALIZER) {
        PropagationPolicy::Foreground
    } else {
        PropagationPolicy::Background
    };
    let dp = DeleteParams {
        propagation_policy: Some(policy.clone()),
        preconditions: Some(Preconditions { uid: Some(node.uid.clone()), resource_version: None }),
        ..DeleteParams::default()
    };
    tracing::debug!(kind = %node.kind, name = %node.name, namespace = ?node.namespace, ?policy, "garbage collector: deleting");
    match a.delete(&node.name, &dp).await {
        Ok(_) => Ok(Done::Ok),
        Err(e) if matches!(status_code(&e), Some(404 | 409)) => Ok(Done::Ok),
        Err(e) => Err(e.into()),
    }
}

/// An object's owners, sorted by what they say about it.
struct OwnerStates {
    /// Owners that exist (or cannot be resolved, which counts as existing).
    solid: usize,
    /// Uids of owners that are gone.
    dangling: Vec<String>,
    /// Uids of owners being deleted in the foreground.
    waiting: Vec<String>,
}

impl OwnerStates {
    /// Classifies every owner of `node`; an owner of a kind the server does not serve
    /// (yet) is an error, so nothing is decided and the object is looked at again later,
    /// as kube does with references it cannot map.
    async fn classify(shared: &Shared, node: &Node) -> Result<Self, GcError> {
        let mapper = shared.mapper();
        let mut states = OwnerStates { solid: 0, dangling: Vec::new(), waiting: Vec::new() };
        let mut unknown = Vec::new();
        for owner in &node.owners {
            match classify(shared, &mapper, node, owner).await? {
                OwnerState::Solid => states.solid += 1,
                OwnerState::Unresolvable => {
                    states.solid += 1;
                    if mapper.resolve(&owner.api_version, &owner.kind).is_none() {
                        unknown.push(format!("{}/{}", owner.api_version, owner.kind));
                    }
                }
                OwnerState::Dangling => states.dangling.push(owner.uid.clone()),
                OwnerState::Waiting => states.waiting.push(owner.uid.clone()),
            }
        }
        if !unknown.is_empty() {
            return Err(GcError::UnknownKind(unknown.join(", ")));
        }
        Ok(states)
    }
}

/// Keeps an object that has a live owner: drops its references to absent owners and
/// unblocks those to owners being deleted (a merge patch guarded by uid and
/// resourceVersion; a conflict is retried at once).
async fn keep_live_owners(
    a: &Api<DynamicObject>,
    node: &Node,
    obj: &DynamicObject,
    owners: &OwnerStates,
) -> Result<Done, GcError> {
    let refs: Vec<Value> = obj
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|r| !owners.dangling.contains(&r.uid))
        .map(|r| {
            let mut v = serde_json::to_value(r).expect("a k8s-openapi OwnerReference always serialises");
            if owners.waiting.contains(&r.uid) {
                v["blockOwnerDeletion"] = json!(false);
            }
            v
        })
        .collect();
    let patch = json!({"metadata": {"ownerReferences": refs, "uid": node.uid, "resourceVersion": obj.metadata.resource_version}});
    match a.patch(&node.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(Done::Ok),
        Err(e) if matches!(status_code(&e), Some(404)) => Ok(Done::Ok),
        Err(e) if matches!(status_code(&e), Some(409)) => Ok(Done::After(Duration::ZERO)),
        Err(e) => Err(e.into()),
    }
}

/// An owner deleted in the foreground: wait for blocking dependents, then let it go.
async fn process_deleting_dependents(shared: &Shared, node: &Node) -> Result<Done, GcError> {
    if !shared.all_synced() {
        return Ok(Done::After(Duration::from_millis(100)));
    }
    let blocking = shared.graph.lock().blocking_dependents(&node.uid);
    if blocking.is_empty() {
        return remove_finalizer(shared, node, FOREGROUND_FINALIZER).await;
    }
    for d in blocking {
        if !d.deleting_dependents() {
            shared.queue.add(Work::AttemptToDelete(d.uid.clone()));
        }
    }
    Ok(Done::Ok)
}

/// An owner deleted with orphaning: drop it from its dependents, then let it go.
async fn orphan(shared: &Shared, uid: &str) -> Result<Done, GcError> {
    let Some(node) = shared.graph.lock().get(uid).cloned() else { return Ok(Done::Ok) };
    if !node.orphaning() {
        return Ok(Done::Ok);
    }
    if !shared.all_synced() {
        return Ok(Done::After(Duration::from_millis(100)));
    }
    let dependents = shared.graph.lock().dependents_of(uid);
    for d in dependents {
        edit(shared, &d, |obj| {
            let refs = obj.metadata.owner_references.clone().unwrap_or_default();
            if !refs.iter().any(|r| r.uid == uid) {
                return None;
            }
            let left: Vec<_> = refs.into_iter().filter(|r| r.uid != uid).collect();
            Some(json!({"ownerReferences": if left.is_empty() { Value::Null } else { json!(left) }}))
        })
        .await?;
    }
    remove_finalizer(shared, &node, ORPHAN_FINALIZER).await
}

async fn remove_finalizer(shared: &Shared, node: &Node, finalizer: &str) -> Result<Done, GcError> {
    edit(shared, node, |obj| {
        let fins = obj.metadata.finalizers.clone().unwrap_or_default();
        if !fins.iter().any(|f| f == finalizer) {
            return None;
        }
        let left: Vec<_> = fins.into_iter().filter(|f| f != finalizer).collect();
        Some(json!({"finalizers": if left.is_empty() { Value::Null } else { json!(left) }}))
    })
    .await
}

/// Applies a metadata change computed from the latest object (None: nothing to do) as
/// a merge patch guarded by uid and resourceVersion, retrying on conflicts.
async fn edit(shared: &Shared, node: &Node, change: impl Fn(&DynamicObject) -> Option<Value>) -> Result<Done, GcError> {
    let a = api(shared, &api_resource(node), node.namespace.as_deref());
    for _ in 0..MAX_CONFLICTS {
        let Some(obj) = latest(shared, node).await? else { return Ok(Done::Ok) };
        let Some(mut meta) = change(&obj) else { return Ok(Done::Ok) };
        meta["uid"] = json!(node.uid);
        meta["resourceVersion"] = json!(obj.metadata.resource_version);
        match a.patch(&node.name, &PatchParams::default(), &Patch::Merge(&json!({"metadata": meta}))).await {
            Ok(_) => return Ok(Done::Ok),
            Err(e) if matches!(status_code(&e), Some(404)) => return Ok(Done::Ok),
            Err(e) if matches!(status_code(&e), Some(409)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(GcError::Conflicts(format!("{}/{}", node.kind, node.name)))
}
