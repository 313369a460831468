//! Sharding: several replicas of one operator share its objects, each reconciling only
//! its own, as timebertt/kubernetes-controller-sharding does.
//!
//! - Each replica holds a shard Lease, `<ring>-shard-<id>`. Its leader-only runnables
//!   (the sharded controllers) run while it holds that lease, and its cache of each
//!   sharded kind is restricted to objects labelled `shard.opkit.dev/<ring>=<id>`.
//! - One replica, under the Lease `<ring>-coordinator`, assigns objects to the live
//!   shards with a consistent-hash ring by setting that label. Objects that follow an
//!   owner get their controller owner's shard.
//! - An object moves between two live shards with a drain handshake: the coordinator adds
//!   `drain.shard.opkit.dev/<ring>`; the old shard, once no reconcile of the object runs,
//!   removes both labels; only then does the coordinator assign the new shard. A dead
//!   shard's objects (its lease expired or released) are reassigned at once: it stopped
//!   reconciling before its lease could expire (renew deadline < lease duration).

mod coordinator;
mod guard;
mod plan;
mod ring;
mod view;

use std::time::Duration;

use kube::core::{ApiResource, ObjectMeta};

use crate::leader::LeaderElectionConfig;

pub(crate) use coordinator::{Coordinator, unique_identity};

/// Errors of a sharding configuration.
#[derive(Debug, thiserror::Error)]
pub enum ShardingError {
    /// A name is not usable.
    #[error("invalid sharding config: {0}")]
    InvalidConfig(String),
}

/// A kind whose objects are sharded.
#[derive(Debug, Clone)]
pub(crate) struct ShardedResource {
    /// The kind.
    pub resource: ApiResource,
    /// A controller reconciles its objects (a `For` kind): an object that follows no
    /// owner is placed by the hash of its own key, and moves with the drain handshake.
    pub hashed: bool,
    /// Its objects follow their controller owner's shard (an `Owns` kind), when the
    /// owner is of a sharded kind.
    pub follows_owner: bool,
}

/// How this replica takes part in a ring of shards.
#[derive(Debug, Clone)]
pub struct ShardingConfig {
    /// The ring's name (a DNS label): the operator's, shared by all its replicas.
    pub ring: String,
    /// The namespace of the shard and coordinator Leases.
    pub namespace: String,
    /// This replica's shard ID (a DNS label); by default the host name (the pod's name).
    /// Two replicas started with the same ID do not both run: the second waits for the
    /// first's shard lease, as a standby.
    pub shard_id: String,
    /// How long a shard (or coordinator) lease is valid after its last renewal.
    pub lease_duration: Duration,
    /// How long a shard keeps retrying to renew before it stops its controllers.
    pub renew_deadline: Duration,
    /// How often leases are renewed, and how often the coordinator checks for expired
    /// shards.
    pub retry_period: Duration,
    /// On shutdown, release the shard lease so its objects move at once.
    pub release_on_cancel: bool,
    /// Shard every controller the manager builds: its `For` kind is sharded
    /// and its `Owns` kinds follow their owner, without naming them here (for the Helm,
    /// Ansible and KUDO operators, whose kinds come from their watches). See
    /// [`ShardingConfig::every_controller`].
    pub every_controller: bool,
    /// The coordinator applies a ValidatingAdmissionPolicy that refuses moving a
    /// reconciled object between shards without the drain handshake (on by default; it
    /// needs create and patch on `validatingadmissionpolicies` and their bindings, and
    /// logs a warning without them).
    pub guard_label: bool,
    kinds: Vec<ShardedResource>,
}

impl ShardingConfig {
    /// A ring `ring` with its Leases in `namespace`, this replica's shard named after the
    /// host, controller-runtime's lease timings (15 s / 10 s / 2 s) and release on cancel.
    pub fn new(ring: impl Into<String>, namespace: impl Into<String>) -> ShardingConfig {
        ShardingConfig {
            ring: ring.into(),
            namespace: namespace.into(),
            shard_id: crate::hostname::hostname().to_lowercase(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
            every_controller: false,
            guard_label: true,
            kinds: Vec::new(),
        }
    }

    /// Shards the kinds of every controller built with the manager: each controller's
    /// `For` kind by its objects' keys, and its `Owns` kinds by their owner. A kind must
    /// be registered before anything creates its informer (build the controllers before
    /// reading the cache); a kind the cache already watched unrestricted is refused when
    /// the controller is built ([`BuildError::NotSharded`](crate::BuildError::NotSharded)).
    /// Every controller's view of a sharded kind is its shard's share, including
    /// controllers that only `Watches` it.
    #[must_use]
    pub fn every_controller(mut self) -> Self {
        self.every_controller = true;
        self
    }

    /// This replica's shard ID.
    #[must_use]
    pub fn shard_id(mut self, id: impl Into<String>) -> Self {
        self.shard_id = id.into();
        self
    }

    /// Shards the objects of `K` (a controller's `For` kind) by their namespace and name.
    #[must_use]
    pub fn shards<K: kube::Resource<DynamicType = ()>>(self) -> Self {
        self.shards_resource(&ApiResource::erase::<K>(&()))
    }

    /// Shards the objects of `resource` (a dynamic `For` kind, as the Helm, Ansible and
    /// KUDO operators watch).
    #[must_use]
    pub fn shards_resource(mut self, resource: &ApiResource) -> Self {
        self.add_kind(resource, true, false);
        self
    }

    /// Objects of `C` (an `Owns` kind) follow their controller owner's shard.
    #[must_use]
    pub fn follows<C: kube::Resource<DynamicType = ()>>(self) -> Self {
        self.follows_resource(&ApiResource::erase::<C>(&()))
    }

    /// Objects of `resource` follow their controller owner's shard.
    #[must_use]
    pub fn follows_resource(mut self, resource: &ApiResource) -> Self {
        self.add_kind(resource, false, true);
        self
    }

    /// Adds `resource` with these roles, or adds the roles to it; true if it was new.
    pub(crate) fn add_kind(&mut self, resource: &ApiResource, hashed: bool, follows_owner: bool) -> bool {
        if let Some(k) = self.kinds.iter_mut().find(|k| same_kind(&k.resource, resource)) {
            k.hashed |= hashed;
            k.follows_owner |= follows_owner;
            return false;
        }
        self.kinds.push(ShardedResource { resource: resource.clone(), hashed, follows_owner });
        true
    }

    /// Whether `resource` is sharded (in any role).
    pub(crate) fn has_kind(&self, resource: &ApiResource) -> bool {
        self.kinds.iter().any(|k| same_kind(&k.resource, resource))
    }

    /// The label naming an object's shard: `shard.opkit.dev/<ring>`.
    pub fn shard_label(&self) -> String {
        format!("shard.opkit.dev/{}", self.ring)
    }

    /// The label asking an object's shard to let go of it: `drain.shard.opkit.dev/<ring>`.
    pub fn drain_label(&self) -> String {
        format!("drain.shard.opkit.dev/{}", self.ring)
    }

    /// The selector of this shard's objects: `shard.opkit.dev/<ring>=<id>`.
    pub fn shard_selector(&self) -> String {
        format!("{}={}", self.shard_label(), self.shard_id)
    }

    /// The name of shard `id`'s Lease.
    pub fn shard_lease_name(&self, id: &str) -> String {
        format!("{}-shard-{id}", self.ring)
    }

    /// The name of the coordinator's Lease.
    pub fn coordinator_lease_name(&self) -> String {
        format!("{}-coordinator", self.ring)
    }

    /// Checks the names (DNS labels, so that labels and Lease names are valid), that some
    /// kind is sharded, and the lease timings.
    pub fn validate(&self) -> Result<(), ShardingError> {
        let bad = |m: String| Err(ShardingError::InvalidConfig(m));
        for (what, value) in [("ring", &self.ring), ("shard ID", &self.shard_id)] {
            if !opkit_apimachinery::names::is_dns1123_label(value) {
                return bad(format!(
                    "the {what} {value:?} must be a DNS label (lowercase letters, digits and '-', at most 63)"
                ));
            }
        }
        if !self.kinds.iter().any(|k| k.hashed) {
            return bad(if self.every_controller {
                "no kind is sharded: build a leader-only controller before running the manager".into()
            } else {
                "no kind is sharded: call `shards::<K>()` for the controllers' kinds, or `every_controller()`".into()
            });
        }
        self.lease_config(self.shard_lease_name(&self.shard_id), self.shard_id.clone())
            .validate()
            .or_else(|e| bad(e.to_string()))
    }

    /// Whether `resource` is sharded by its own key.
    pub(crate) fn shards_kind(&self, resource: &ApiResource) -> bool {
        self.kinds.iter().any(|k| k.hashed && same_kind(&k.resource, resource))
    }

    pub(crate) fn kinds(&self) -> &[ShardedResource] {
        &self.kinds
    }

    /// Whether `meta` asks this shard to let go of the object.
    pub(crate) fn drains(&self, meta: &ObjectMeta) -> bool {
        let labels = meta.labels.as_ref();
        labels.is_some_and(|l| l.contains_key(&self.drain_label()))
            && labels.and_then(|l| l.get(&self.shard_label())) == Some(&self.shard_id)
    }

    /// The leader-election config of the Lease `name`, held as `identity`.
    pub(crate) fn lease_config(&self, name: String, identity: String) -> LeaderElectionConfig {
        LeaderElectionConfig {
            identity,
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
            release_on_cancel: self.release_on_cancel,
            ..LeaderElectionConfig::new(name, self.namespace.clone())
        }
    }
}

fn same_kind(a: &ApiResource, b: &ApiResource) -> bool {
    a.group == b.group && a.kind == b.kind
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn names_labels_and_validation() {
        let cfg = ShardingConfig::new("memcached", "ops").shard_id("shard-1").shards::<ConfigMap>();
        assert_eq!(cfg.shard_selector(), "shard.opkit.dev/memcached=shard-1");
        assert_eq!(cfg.drain_label(), "drain.shard.opkit.dev/memcached");
        assert_eq!(cfg.shard_lease_name("shard-1"), "memcached-shard-shard-1");
        assert!(cfg.validate().is_ok());
        assert!(cfg.clone().shard_id("Shard_1").validate().is_err());
        assert!(ShardingConfig::new("memcached", "ops").validate().is_err(), "no kind sharded");
        let mut meta =
            ObjectMeta { labels: Some([(cfg.shard_label(), "shard-1".to_string())].into()), ..ObjectMeta::default() };
        assert!(!cfg.drains(&meta));
        meta.labels.as_mut().unwrap().insert(cfg.drain_label(), "true".into());
        assert!(cfg.drains(&meta));
        assert!(!cfg.clone().shard_id("shard-2").drains(&meta), "another shard's drain");
    }
}
