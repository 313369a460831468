//! The scheduler's volume binding (kube-scheduler's VolumeBinding plugin, for
//! PersistentVolumeClaims): a pod whose claim is missing, being deleted, or unbound with an
//! `Immediate` class stays Pending with kube's message; a bound claim whose volume is
//! pinned to a node (local-path) pins the pod there; a claim of a `WaitForFirstConsumer`
//! class is given the chosen node (`volume.kubernetes.io/selected-node`) and the pod is
//! bound only once the claim is.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use opkit::Cache;

use crate::volume::SELECTED_NODE;

/// What a pod's claims allow.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum VolumeCheck {
    /// Every claim is bound; the pod must go to this node, if one is required.
    Ready(Option<String>),
    /// Some claims wait for their first consumer: the pod goes to `node` (if a claim
    /// already chose one), those claims get the chosen node, and binding waits for them.
    WaitForFirstConsumer {
        /// The claims to annotate with the chosen node.
        unbound: Vec<String>,
        /// The node a claim already chose, or a bound volume pins.
        node: Option<String>,
    },
    /// The pod cannot be placed: kube's reason, without the node counts.
    Unschedulable(String),
}

/// The node a volume's required node affinity names (`kubernetes.io/hostname In [x]`).
fn pinned_node(pv: &PersistentVolume) -> Option<String> {
    let terms = pv.spec.as_ref()?.node_affinity.as_ref()?.required.as_ref()?.node_selector_terms.clone();
    terms.iter().flat_map(|t| t.match_expressions.iter().flatten()).find_map(|e| {
        (e.key == "kubernetes.io/hostname" && e.operator == "In")
            .then(|| e.values.iter().flatten().next().cloned())
            .flatten()
    })
}

/// Checks the claims `pod` uses against the cache.
pub(super) fn check(cache: &Cache, pod: &Pod) -> VolumeCheck {
    let ns = pod.metadata.namespace.as_deref();
    let claims: Vec<String> = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref().map(|c| c.claim_name.clone()))
        .collect();
    let mut node: Option<String> = None;
    let mut unbound = Vec::new();
    for name in claims {
        let Some(pvc) = cache.get::<PersistentVolumeClaim>(&name, ns) else {
            return VolumeCheck::Unschedulable(format!("persistentvolumeclaim \"{name}\" not found"));
        };
        if pvc.metadata.deletion_timestamp.is_some() {
            return VolumeCheck::Unschedulable(format!("persistentvolumeclaim \"{name}\" is being deleted"));
        }
        let bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        let volume = pvc.spec.as_ref().and_then(|s| s.volume_name.clone()).filter(|v| !v.is_empty());
        if let (true, Some(volume)) = (bound, volume) {
            if let Some(pinned) = cache.get::<PersistentVolume>(&volume, None).and_then(|pv| pinned_node(&pv)) {
                node = Some(pinned);
            }
            continue;
        }
        let class = pvc.spec.as_ref().and_then(|s| s.storage_class_name.clone()).unwrap_or_default();
        let waits = cache
            .get::<StorageClass>(&class, None)
            .is_some_and(|c| c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"));
        if !waits {
            return VolumeCheck::Unschedulable("pod has unbound immediate PersistentVolumeClaims".into());
        }
        if let Some(selected) = pvc.metadata.annotations.as_ref().and_then(|a| a.get(SELECTED_NODE)) {
            node = Some(selected.clone());
        }
        unbound.push(name);
    }
    if unbound.is_empty() { VolumeCheck::Ready(node) } else { VolumeCheck::WaitForFirstConsumer { unbound, node } }
}
