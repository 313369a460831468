//! Which PersistentVolume a claim may bind to, and the volume the local-path provisioner
//! makes for a claim (kube's `FindMatchingVolume` and rancher local-path-provisioner's
//! volume shape), as pure functions over the objects.

use std::path::Path;

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference, PersistentVolume,
    PersistentVolumeClaim, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use opkit_apimachinery::quantity::parse_milli;
use opkit_apimachinery::selector::LabelSelector;

use super::{ANN_PROVISIONED_BY, LOCAL_PATH, PV_PROTECTION};

/// The storage a claim requests, in thousandths of a byte.
fn requested(pvc: &PersistentVolumeClaim) -> i128 {
    let resources = pvc.spec.as_ref().and_then(|s| s.resources.as_ref());
    let storage = resources.and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage"));
    storage.and_then(|q| parse_milli(&q.0)).unwrap_or(0)
}

/// A volume's capacity, in thousandths of a byte.
fn capacity(pv: &PersistentVolume) -> i128 {
    let storage = pv.spec.as_ref().and_then(|s| s.capacity.as_ref()).and_then(|c| c.get("storage"));
    storage.and_then(|q| parse_milli(&q.0)).unwrap_or(0)
}

/// The claim's class name ("" for none).
pub(super) fn class_of(pvc: &PersistentVolumeClaim) -> &str {
    pvc.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or_default()
}

fn pv_class(pv: &PersistentVolume) -> &str {
    pv.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or_default()
}

/// Whether `pv` is reserved for `pvc` (its `claimRef` names the claim).
pub(super) fn reserved_for(pv: &PersistentVolume, pvc: &PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else { return false };
    r.name == pvc.metadata.name
        && r.namespace == pvc.metadata.namespace
        && (r.uid.is_none() || r.uid == pvc.metadata.uid)
}

/// Whether an unreserved, available `pv` satisfies `pvc`: same class, every requested
/// access mode, enough capacity, and the claim's label selector.
fn satisfies(pv: &PersistentVolume, pvc: &PersistentVolumeClaim) -> bool {
    let spec = pvc.spec.clone().unwrap_or_default();
    let pv_spec = pv.spec.clone().unwrap_or_default();
    let phase = pv.status.as_ref().and_then(|s| s.phase.as_deref());
    let modes = pv_spec.access_modes.unwrap_or_default();
    // No selector selects every volume.
    let selected = spec.selector.as_ref().is_none_or(|sel| {
        LabelSelector::from_k8s(Some(sel)).is_ok_and(|s| s.matches_labels(pv.metadata.labels.as_ref()))
    });
    pv_spec.claim_ref.is_none()
        && phase == Some("Available")
        && pv.metadata.deletion_timestamp.is_none()
        && pv_class(pv) == class_of(pvc)
        && spec.access_modes.unwrap_or_default().iter().all(|m| modes.contains(m))
        && capacity(pv) >= requested(pvc)
        && selected
}

/// The volume `pvc` should bind to: the one named by `spec.volumeName`, one reserved for
/// it, else the smallest available one that satisfies it.
pub(super) fn matching_volume<'a>(
    pvc: &PersistentVolumeClaim,
    volumes: &'a [std::sync::Arc<PersistentVolume>],
) -> Option<&'a PersistentVolume> {
    let named = pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).filter(|n| !n.is_empty());
    if let Some(name) = named {
        return volumes.iter().map(|v| &**v).find(|v| {
            v.metadata.name.as_deref() == Some(name)
                && (reserved_for(v, pvc) || v.spec.as_ref().is_some_and(|s| s.claim_ref.is_none()))
        });
    }
    if let Some(v) = volumes.iter().find(|v| reserved_for(v, pvc)) {
        return Some(v);
    }
    volumes.iter().map(|v| &**v).filter(|v| satisfies(v, pvc)).min_by_key(|v| capacity(v))
}

/// The local-path volume for `pvc` on `node` (none for an Immediate class), as
/// local-path-provisioner names and shapes it: `pvc-<uid>`, a hostPath directory
/// `<root>/pvc-<uid>_<namespace>_<name>`, the claim's size and modes, the class's reclaim
/// policy, reserved for the claim and pinned to the node.
pub(super) fn provisioned_volume(
    pvc: &PersistentVolumeClaim,
    class: &StorageClass,
    node: Option<&str>,
    root: &Path,
) -> PersistentVolume {
    let uid = pvc.metadata.uid.clone().unwrap_or_default();
    let (ns, name) =
        (pvc.metadata.namespace.clone().unwrap_or_default(), pvc.metadata.name.clone().unwrap_or_default());
    let spec = pvc.spec.clone().unwrap_or_default();
    let storage =
        spec.resources.and_then(|r| r.requests).and_then(|r| r.get("storage").cloned()).unwrap_or(Quantity("0".into()));
    let node_affinity = node.map(|node| VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: "kubernetes.io/hostname".into(),
                    operator: "In".into(),
                    values: Some(vec![node.to_string()]),
                }]),
                ..Default::default()
            }],
        }),
    });
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(format!("pvc-{uid}")),
            annotations: Some([(ANN_PROVISIONED_BY.to_string(), LOCAL_PATH.to_string())].into()),
            finalizers: Some(vec![PV_PROTECTION.into()]),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            access_modes: spec.access_modes,
            capacity: Some([("storage".to_string(), storage)].into()),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                namespace: Some(ns.clone()),
                name: Some(name.clone()),
                uid: Some(uid.clone()),
                resource_version: pvc.metadata.resource_version.clone(),
                ..Default::default()
            }),
            host_path: Some(HostPathVolumeSource {
                path: root.join(format!("pvc-{uid}_{ns}_{name}")).to_string_lossy().into_owned(),
                type_: Some("DirectoryOrCreate".into()),
            }),
            node_affinity,
            persistent_volume_reclaim_policy: Some(class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into())),
            storage_class_name: class.metadata.name.clone(),
            volume_mode: spec.volume_mode.or(Some("Filesystem".into())),
            ..Default::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn pvc(size: &str, class: &str) -> PersistentVolumeClaim {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "data", "namespace": "ns", "uid": "u1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class, "resources": {"requests": {"storage": size}}}}))
        .expect("claim")
    }

    fn pv(name: &str, size: &str, class: &str) -> Arc<PersistentVolume> {
        Arc::new(
            serde_json::from_value(serde_json::json!({"metadata": {"name": name},
                "spec": {"accessModes": ["ReadWriteOnce", "ReadOnlyMany"], "storageClassName": class, "capacity": {"storage": size}},
                "status": {"phase": "Available"}}))
            .expect("volume"),
        )
    }

    #[test]
    fn the_smallest_volume_that_fits_is_chosen() {
        let volumes = [
            pv("big", "10Gi", "manual"),
            pv("small", "2Gi", "manual"),
            pv("tiny", "500Mi", "manual"),
            pv("other", "2Gi", "fast"),
        ];
        let chosen = matching_volume(&pvc("1Gi", "manual"), &volumes).and_then(|v| v.metadata.name.clone());
        assert_eq!(chosen.as_deref(), Some("small"));
        assert!(matching_volume(&pvc("20Gi", "manual"), &volumes).is_none());
    }

    #[test]
    fn provisioned_volumes_are_reserved_and_pinned() {
        let class: StorageClass = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "standard"}, "provisioner": LOCAL_PATH, "reclaimPolicy": "Retain"}),
        )
        .expect("class");
        let v = provisioned_volume(&pvc("1Gi", "standard"), &class, Some("node-1"), Path::new("/data"));
        assert_eq!(v.metadata.name.as_deref(), Some("pvc-u1"));
        let spec = v.spec.clone().unwrap_or_default();
        assert_eq!(spec.host_path.map(|h| h.path).as_deref(), Some("/data/pvc-u1_ns_data"));
        assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Retain"));
        assert!(reserved_for(&v, &pvc("1Gi", "standard")));
    }
}
