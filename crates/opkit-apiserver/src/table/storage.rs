//! Table printers for storage: persistent volumes, persistent volume claims and
//! storage classes.

use serde_json::Value;

use super::Printer;
use super::util::{access_modes, age, age_col, arr, at, col, name, name_col, obj, s, st, wide};

/// The printer of persistentvolumeclaims.
pub(crate) fn persistentvolumeclaims() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col("Status", "string", "phase represents the current phase of PersistentVolumeClaim."),
            col("Volume", "string", "volumeName is the binding reference to the PersistentVolume backing this claim."),
            col("Capacity", "string", "capacity represents the actual resources of the underlying volume."),
            col(
                "Access Modes",
                "string",
                "accessModes contains the actual access modes the volume backing the PVC has.",
            ),
            col("StorageClass", "string", "StorageClass of the pvc"),
            col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
            age_col(),
            wide("VolumeMode", "string", "volumeMode defines what type of volume is required by the claim."),
        ],
        pvc_row,
    ))
}

/// The printer of persistentvolumes.
pub(crate) fn persistentvolumes() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col("Capacity", "string", "capacity is the description of the persistent volume's resources and capacity."),
            col("Access Modes", "string", "accessModes contains all ways the volume can be mounted."),
            col(
                "Reclaim Policy",
                "string",
                "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim.",
            ),
            col(
                "Status",
                "string",
                "phase indicates if a volume is available, bound to a claim, or released by a claim.",
            ),
            col(
                "Claim",
                "string",
                "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim.",
            ),
            col("StorageClass", "string", "StorageClass of the pv"),
            col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
            col(
                "Reason",
                "string",
                "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
            ),
            age_col(),
            wide(
                "VolumeMode",
                "string",
                "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.",
            ),
        ],
        pv_row,
    ))
}

/// The printer of storage.k8s.io/storageclasses.
pub(crate) fn storageclasses() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col("Provisioner", "string", "provisioner indicates the type of the provisioner."),
            col(
                "ReclaimPolicy",
                "string",
                "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class.",
            ),
            col(
                "VolumeBindingMode",
                "string",
                "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.",
            ),
            col(
                "AllowVolumeExpansion",
                "string",
                "allowVolumeExpansion shows whether the storage class allow volume expand.",
            ),
            age_col(),
        ],
        storage_class_row,
    ))
}

fn storage_class_of(o: &Value) -> String {
    match obj(o, "metadata.annotations").and_then(|a| a.get("volume.beta.kubernetes.io/storage-class")) {
        Some(Value::String(c)) => c.clone(),
        _ => s(o, "spec.storageClassName").into(),
    }
}

fn terminating_phase(o: &Value) -> String {
    if at(o, "metadata.deletionTimestamp").is_some_and(|d| !d.is_null()) {
        "Terminating".into()
    } else {
        s(o, "status.phase").into()
    }
}

fn unset(o: &Value, path: &str) -> Value {
    st(at(o, path).and_then(Value::as_str).unwrap_or("<unset>"))
}

fn pvc_row(o: &Value, now: i64) -> Vec<Value> {
    let bound = !s(o, "spec.volumeName").is_empty();
    let (cap, modes) = if bound {
        (s(o, "status.capacity.storage").to_string(), access_modes(arr(o, "status.accessModes")))
    } else {
        (String::new(), String::new())
    };
    vec![
        name(o),
        st(terminating_phase(o)),
        st(s(o, "spec.volumeName")),
        st(cap),
        st(modes),
        st(storage_class_of(o)),
        unset(o, "spec.volumeAttributesClassName"),
        age(o, now),
        unset(o, "spec.volumeMode"),
    ]
}

fn pv_row(o: &Value, now: i64) -> Vec<Value> {
    let claim = match at(o, "spec.claimRef") {
        Some(c) if !c.is_null() => format!("{}/{}", s(c, "namespace"), s(c, "name")),
        _ => String::new(),
    };
    vec![
        name(o),
        st(s(o, "spec.capacity.storage")),
        st(access_modes(arr(o, "spec.accessModes"))),
        st(s(o, "spec.persistentVolumeReclaimPolicy")),
        st(terminating_phase(o)),
        st(claim),
        st(storage_class_of(o)),
        unset(o, "spec.volumeAttributesClassName"),
        st(s(o, "status.reason")),
        age(o, now),
        unset(o, "spec.volumeMode"),
    ]
}

fn storage_class_row(o: &Value, now: i64) -> Vec<Value> {
    let ann = obj(o, "metadata.annotations");
    let is_default =
        ["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"]
            .iter()
            .any(|k| ann.and_then(|a| a.get(*k)).and_then(Value::as_str) == Some("true"));
    let mut n = s(o, "metadata.name").to_string();
    if is_default {
        n.push_str(" (default)");
    }
    let reclaim = at(o, "reclaimPolicy").and_then(Value::as_str).unwrap_or("Delete");
    let binding = at(o, "volumeBindingMode").and_then(Value::as_str).unwrap_or("Immediate");
    let expand = at(o, "allowVolumeExpansion").and_then(Value::as_bool).unwrap_or(false);
    vec![st(n), st(s(o, "provisioner")), st(reclaim), st(binding), Value::Bool(expand), age(o, now)]
}
