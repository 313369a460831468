//! The garbage collector's dependency graph: every observed object (of every watched
//! resource) with its owner references, an index from owner uid to dependents, and the
//! rules that turn observed changes into work (check a dependent's owners, delete the
//! dependents of a foreground-deleted owner, orphan the dependents of an owner).

use std::collections::{BTreeSet, HashMap, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The finalizer that makes the collector delete dependents before their owner.
pub(super) const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// The finalizer that makes the collector orphan dependents before their owner goes.
pub(super) const ORPHAN_FINALIZER: &str = "orphan";

/// A watched resource, independent of its version: group and plural name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct ResourceKey {
    /// The API group ("" for core).
    pub group: String,
    /// The plural resource name.
    pub plural: String,
}

/// An owner reference, as far as the collector cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OwnerRef {
    /// The owner's apiVersion.
    pub api_version: String,
    /// The owner's kind.
    pub kind: String,
    /// The owner's name.
    pub name: String,
    /// The owner's uid.
    pub uid: String,
    /// Whether the owner's foreground deletion waits for this dependent.
    pub block_owner_deletion: bool,
}

/// What the collector knows about one observed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Node {
    /// The resource it was observed through.
    pub resource: ResourceKey,
    /// The apiVersion it was observed at.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its namespace (None: cluster-scoped).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// Its owner references.
    pub owners: Vec<OwnerRef>,
    /// Whether it has a deletionTimestamp.
    pub deleting: bool,
    /// Its finalizers.
    pub finalizers: Vec<String>,
}

/// The group of an apiVersion ("" for core `v1`).
pub(super) fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

impl Node {
    /// A node for an object's metadata; None when it lacks a name or uid.
    pub(super) fn from_meta(resource: ResourceKey, api_version: &str, kind: &str, meta: &ObjectMeta) -> Option<Node> {
        let name = meta.name.clone().filter(|n| !n.is_empty())?;
        let uid = meta.uid.clone().filter(|u| !u.is_empty())?;
        let owners = meta
            .owner_references
            .iter()
            .flatten()
            .map(|o| OwnerRef {
                api_version: o.api_version.clone(),
                kind: o.kind.clone(),
                name: o.name.clone(),
                uid: o.uid.clone(),
                block_owner_deletion: o.block_owner_deletion == Some(true),
            })
            .collect();
        Some(Node {
            resource,
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            namespace: meta.namespace.clone().filter(|n| !n.is_empty()),
            name,
            uid,
            owners,
            deleting: meta.deletion_timestamp.is_some(),
            finalizers: meta.finalizers.clone().unwrap_or_default(),
        })
    }

    fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers.iter().any(|x| x == f)
    }

    /// Being deleted in the foreground: its dependents go first.
    pub(super) fn deleting_dependents(&self) -> bool {
        self.deleting && self.has_finalizer(FOREGROUND_FINALIZER)
    }

    /// Being deleted with its dependents orphaned.
    pub(super) fn orphaning(&self) -> bool {
        self.deleting && self.has_finalizer(ORPHAN_FINALIZER)
    }

    /// Whether this node is the object `owner` refers to, seen from dependent `dep`: same
    /// uid, group, kind and name, and a namespace the dependent may refer to (its own,
    /// or none for a cluster-scoped owner).
    pub(super) fn is_owner_for(&self, owner: &OwnerRef, dep: &Node) -> bool {
        self.uid == owner.uid
            && self.kind == owner.kind
            && self.name == owner.name
            && group_of(&self.api_version) == group_of(&owner.api_version)
            && (self.namespace.is_none() || self.namespace == dep.namespace)
    }
}

/// Work for the collector's workers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Work {
    /// Check the object with this uid: delete it if its owners are gone, clean up
    /// dangling references, or (if it is deleted in the foreground) finish that.
    AttemptToDelete(String),
    /// Orphan the dependents of the object with this uid, then drop its finalizer.
    Orphan(String),
}

/// Observed objects and who depends on whom.
#[derive(Debug, Default)]
pub(super) struct Graph {
    nodes: HashMap<String, Node>,
    dependents: HashMap<String, BTreeSet<String>>,
}

impl Graph {
    /// The node with this uid.
    pub(super) fn get(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    /// The observed dependents of the object with this uid.
    pub(super) fn dependents_of(&self, uid: &str) -> Vec<Node> {
        self.dependents.get(uid).into_iter().flatten().filter_map(|d| self.nodes.get(d)).cloned().collect()
    }

    /// Whether the object with this uid has observed dependents.
    pub(super) fn has_dependents(&self, uid: &str) -> bool {
        self.dependents.get(uid).is_some_and(|d| d.iter().any(|x| self.nodes.contains_key(x)))
    }

    /// The dependents whose reference to `uid` blocks its foreground deletion.
    pub(super) fn blocking_dependents(&self, uid: &str) -> Vec<Node> {
        self.dependents_of(uid)
            .into_iter()
            .filter(|d| d.owners.iter().any(|o| o.uid == uid && o.block_owner_deletion))
            .collect()
    }

    /// The uids of the known objects of one resource.
    pub(super) fn uids_of(&self, resource: &ResourceKey) -> Vec<String> {
        self.nodes.values().filter(|n| &n.resource == resource).map(|n| n.uid.clone()).collect()
    }

    /// Whether an owner reference of `dep` resolves to an observed object.
    fn owner_observed(&self, dep: &Node, owner: &OwnerRef) -> bool {
        self.nodes.get(&owner.uid).is_some_and(|n| n.is_owner_for(owner, dep))
    }

    /// Records an added or updated object; returns the work it causes.
    pub(super) fn upsert(&mut self, node: Node) -> Vec<Work> {
        let uid = node.uid.clone();
        let old = self.nodes.insert(uid.clone(), node.clone());
        let old_owners: HashSet<String> = old.iter().flat_map(|o| o.owners.iter().map(|r| r.uid.clone())).collect();
        let new_owners: HashSet<String> = node.owners.iter().map(|r| r.uid.clone()).collect();
        for gone in old_owners.difference(&new_owners) {
            self.unlink(gone, &uid);
        }
        for added in new_owners.difference(&old_owners) {
            self.dependents.entry(added.clone()).or_default().insert(uid.clone());
        }
        let mut work = Vec::new();
        let owners_changed = old.as_ref().is_none_or(|o| o.owners != node.owners);
        // An owner we have not seen (yet, or at all): verify it against the server.
        if owners_changed && !node.deleting && node.owners.iter().any(|o| !self.owner_observed(&node, o)) {
            work.push(Work::AttemptToDelete(uid.clone()));
        }
        if node.deleting_dependents() {
            work.push(Work::AttemptToDelete(uid.clone()));
            if !old.as_ref().is_some_and(Node::deleting_dependents) {
                for d in self.dependents.get(&uid).into_iter().flatten() {
                    work.push(Work::AttemptToDelete(d.clone()));
                }
            }
        }
        if node.orphaning() {
            work.push(Work::Orphan(uid.clone()));
        }
        // A dependent changing its references (or starting to go) may unblock an owner.
        if owners_changed || old.as_ref().is_some_and(|o| o.deleting != node.deleting) {
            for o in old_owners.union(&new_owners) {
                if self.nodes.get(o).is_some_and(Node::deleting_dependents) {
                    work.push(Work::AttemptToDelete(o.clone()));
                }
            }
        }
        work
    }

    /// Records a deleted object; returns the work it causes.
    pub(super) fn remove(&mut self, uid: &str) -> Vec<Work> {
        let Some(node) = self.nodes.remove(uid) else { return Vec::new() };
        let mut work = Vec::new();
        for o in &node.owners {
            self.unlink(&o.uid, uid);
            if self.nodes.get(&o.uid).is_some_and(Node::deleting_dependents) {
                work.push(Work::AttemptToDelete(o.uid.clone()));
            }
        }
        for d in self.dependents.get(uid).into_iter().flatten() {
            work.push(Work::AttemptToDelete(d.clone()));
        }
        work
    }

    fn unlink(&mut self, owner: &str, dependent: &str) {
        if let Some(set) = self.dependents.get_mut(owner) {
            set.remove(dependent);
            if set.is_empty() {
                self.dependents.remove(owner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str, uid: &str, ns: Option<&str>) -> Node {
        Node {
            resource: ResourceKey { group: String::new(), plural: "configmaps".into() },
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: ns.map(String::from),
            name: name.into(),
            uid: uid.into(),
            owners: vec![],
            deleting: false,
            finalizers: vec![],
        }
    }

    fn owned_by(mut n: Node, owner: &Node, block: bool) -> Node {
        n.owners.push(OwnerRef {
            api_version: owner.api_version.clone(),
            kind: owner.kind.clone(),
            name: owner.name.clone(),
            uid: owner.uid.clone(),
            block_owner_deletion: block,
        });
        n
    }

    #[test]
    fn dependent_of_observed_owner_needs_no_check() {
        let mut g = Graph::default();
        let owner = cm("o", "u1", Some("a"));
        assert!(g.upsert(owner.clone()).is_empty());
        let dep = owned_by(cm("d", "u2", Some("a")), &owner, false);
        assert!(g.upsert(dep).is_empty());
        assert_eq!(g.dependents_of("u1").len(), 1);
        // The owner goes: the dependent is checked.
        assert_eq!(g.remove("u1"), vec![Work::AttemptToDelete("u2".into())]);
    }

    #[test]
    fn unobserved_or_cross_namespace_owner_is_checked() {
        let mut g = Graph::default();
        let ghost = cm("ghost", "u9", Some("a"));
        let dep = owned_by(cm("d", "u2", Some("a")), &ghost, false);
        assert_eq!(g.upsert(dep), vec![Work::AttemptToDelete("u2".into())]);
        let other_ns = cm("o", "u1", Some("b"));
        g.upsert(other_ns.clone());
        let cross = owned_by(cm("x", "u3", Some("a")), &other_ns, false);
        assert_eq!(g.upsert(cross), vec![Work::AttemptToDelete("u3".into())]);
        // A cluster-scoped owner is fine for a namespaced dependent.
        let mut cluster = cm("c", "u4", None);
        cluster.kind = "ClusterRole".into();
        cluster.api_version = "rbac.authorization.k8s.io/v1".into();
        g.upsert(cluster.clone());
        assert!(g.upsert(owned_by(cm("y", "u5", Some("a")), &cluster, false)).is_empty());
    }

    #[test]
    fn foreground_deletion_enqueues_dependents_and_blocking_is_tracked() {
        let mut g = Graph::default();
        let owner = cm("o", "u1", Some("a"));
        g.upsert(owner.clone());
        g.upsert(owned_by(cm("d1", "u2", Some("a")), &owner, true));
        g.upsert(owned_by(cm("d2", "u3", Some("a")), &owner, false));
        let mut deleting = owner.clone();
        deleting.deleting = true;
        deleting.finalizers = vec![FOREGROUND_FINALIZER.into()];
        let work = g.upsert(deleting);
        assert!(work.contains(&Work::AttemptToDelete("u1".into())));
        assert!(work.contains(&Work::AttemptToDelete("u2".into())));
        assert!(work.contains(&Work::AttemptToDelete("u3".into())));
        assert_eq!(g.blocking_dependents("u1").len(), 1);
        // The blocking dependent goes: the owner is rechecked.
        assert_eq!(g.remove("u2"), vec![Work::AttemptToDelete("u1".into())]);
        assert!(g.blocking_dependents("u1").is_empty());
    }

    #[test]
    fn orphan_finalizer_enqueues_orphaning() {
        let mut g = Graph::default();
        let mut owner = cm("o", "u1", None);
        g.upsert(owner.clone());
        owner.deleting = true;
        owner.finalizers = vec![ORPHAN_FINALIZER.into()];
        assert_eq!(g.upsert(owner), vec![Work::Orphan("u1".into())]);
    }

    #[test]
    fn dropping_a_reference_unlinks() {
        let mut g = Graph::default();
        let owner = cm("o", "u1", Some("a"));
        g.upsert(owner.clone());
        let dep = owned_by(cm("d", "u2", Some("a")), &owner, true);
        g.upsert(dep.clone());
        let mut freed = dep;
        freed.owners.clear();
        assert!(g.upsert(freed).is_empty());
        assert!(!g.has_dependents("u1"));
        assert_eq!(g.uids_of(&ResourceKey { group: String::new(), plural: "configmaps".into() }).len(), 2);
    }
}
