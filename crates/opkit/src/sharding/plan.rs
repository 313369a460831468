//! Where each sharded object belongs, and the label change that takes it there: the
//! coordinator's decisions, made from its view and the ring of live shards, with no I/O.
//!
//! - An object of a kind that follows its owner goes to its controller owner's shard.
//!   If a controller also reconciles that kind (KUDO's Instances own Instances), it
//!   moves with the drain handshake; otherwise its label is set directly.
//! - Any other object of a reconciled kind goes to the shard the ring gives its key.
//! - An object on a live shard other than its own is drained, and moves once that shard
//!   let go of it. One on a dead shard, or naming a shard that never had a Lease, is
//!   drained and moved at once (the label's guard allows a move only while draining).

use std::collections::BTreeMap;

use super::ring::Ring;
use super::view::{ObjectKey, Placed, View};
use super::{ShardedResource, ShardingConfig};

/// Label → new value (`None`: remove).
pub(super) type LabelChange = BTreeMap<String, Option<String>>;

/// One planned change of an object's labels.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Move {
    pub key: ObjectKey,
    pub resource_version: String,
    pub labels: LabelChange,
    /// For the metric and the log: assigned, drained, undrained, reassigned, repaired,
    /// followed.
    pub how: &'static str,
}

/// Plans against one view of the live shards.
pub(super) struct Planner<'a> {
    pub cfg: &'a ShardingConfig,
    pub view: &'a View,
    pub ring: &'a Ring,
    /// Shards that ever had a Lease (live or not).
    pub known: &'a [String],
}

impl Planner<'_> {
    /// The move `key` needs now, if any.
    pub(super) fn plan(&self, key: &ObjectKey) -> Option<Move> {
        let obj = self.view.get(key)?;
        let kind = self.cfg.kinds().get(key.0)?;
        let (labels, how) = self.decide(key, kind, &obj)?;
        Some(Move { key: key.clone(), resource_version: obj.resource_version, labels, how })
    }

    fn decide(&self, key: &ObjectKey, kind: &ShardedResource, obj: &Placed) -> Option<(LabelChange, &'static str)> {
        let owners = obj.owner.as_ref().and_then(|owner| self.view.get(owner)?.shard);
        match owners {
            Some(shard) if kind.hashed => {
                self.ring.contains(&shard).then(|| self.place(key, obj, &shard, "followed"))?
            }
            Some(shard) => (obj.shard.as_ref() != Some(&shard))
                .then(|| ([(self.cfg.shard_label(), Some(shard))].into(), "followed")),
            None if kind.hashed => {
                let (_, namespace, name) = key;
                let desired = self.ring.shard_for(&format!("{}/{name}", namespace.as_deref().unwrap_or("")))?;
                self.place(key, obj, desired, "assigned")
            }
            None => None,
        }
    }

    /// The label change that takes `obj` to `desired` (a live shard).
    fn place(
        &self,
        key: &ObjectKey,
        obj: &Placed,
        desired: &str,
        assigned: &'static str,
    ) -> Option<(LabelChange, &'static str)> {
        let (shard, drain) = (self.cfg.shard_label(), self.cfg.drain_label());
        let draining = obj.draining;
        let assign = |how| Some(([(shard.clone(), Some(desired.to_string())), (drain.clone(), None)].into(), how));
        match obj.shard.as_deref() {
            None | Some("") => assign(assigned),
            Some(current) if current == desired => draining.then(|| ([(drain.clone(), None)].into(), "undrained")),
            Some(current) if !self.ring.contains(current) => {
                if !draining {
                    Some(([(drain.clone(), Some("true".to_string()))].into(), "drained"))
                } else if self.known.iter().any(|k| k == current) {
                    assign("reassigned")
                } else {
                    tracing::warn!(ring = %self.cfg.ring, object = %key.2, namespace = ?key.1, shard = current,
                        "an object names a shard that never existed (was its label overwritten?); reassigning it");
                    assign("repaired")
                }
            }
            Some(_) if !draining => Some(([(drain.clone(), Some("true".to_string()))].into(), "drained")),
            Some(_) => None,
        }
    }
}
