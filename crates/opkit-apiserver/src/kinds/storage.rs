//! Persistent volume claims and persistent volumes: the admission kube applies to them
//! (DefaultStorageClass names the default class on a claim without one;
//! StorageObjectInUseProtection adds the `kubernetes.io/pvc-protection` and
//! `kubernetes.io/pv-protection` finalizers), their initial `Pending` phase, the volume
//! mode default and their Table printers.

use serde_json::{Value, json};

use super::Strategy;
use super::defaulting::{default, obj_mut};
use crate::registry::meta::meta_mut;
use crate::registry::parse_stored;
use crate::registry::view::StoreView;
use crate::schema::FieldError;
use crate::storage::ResourceId;
use crate::table::{self, Printer};

/// The strategy of core/v1 persistent volume claims.
pub(super) struct PersistentVolumeClaims;
/// The strategy of core/v1 persistent volumes.
pub(super) struct PersistentVolumes;

/// The annotation marking the default StorageClass.
const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// A new object starts `Pending` and carries `finalizer` (kube's defaulting and its
/// StorageObjectInUseProtection admission).
fn prepare_storage_object(obj: &mut Value, finalizer: &str) {
    obj["status"] = json!({"phase": "Pending"});
    let meta = meta_mut(obj);
    let finalizers = meta.entry("finalizers").or_insert_with(|| json!([]));
    if let Some(list) = finalizers.as_array_mut()
        && !list.iter().any(|f| f == finalizer)
    {
        list.push(json!(finalizer));
    }
}

impl Strategy for PersistentVolumeClaims {
    /// kube's registry of this kind answers a DELETE with the deleted object.
    fn returns_deleted_object(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, obj: &mut Value, _has_status: bool) {
        prepare_storage_object(obj, "kubernetes.io/pvc-protection");
    }

    fn default(&self, obj: &mut Value, _creating: bool) {
        default(obj_mut(obj, "spec"), "volumeMode", json!("Filesystem"));
    }

    /// kube's DefaultStorageClass admission: a new claim that names no class (the field
    /// absent, not `""`) gets the default class, the newest if several are marked.
    fn allocate(&self, view: &StoreView<'_>, obj: &mut Value, old: Option<&Value>) -> Vec<FieldError> {
        if old.is_some() || obj["spec"].get("storageClassName").is_some() {
            return Vec::new();
        }
        if let Some(class) = default_class(view) {
            obj_mut(obj, "spec").insert("storageClassName".into(), json!(class));
        }
        Vec::new()
    }

    fn table(&self) -> Option<Printer> {
        Some(table::storage::persistentvolumeclaims())
    }
}

/// The name of the default StorageClass: the most recently created of those marked.
fn default_class(view: &StoreView<'_>) -> Option<String> {
    let classes = view.values(&ResourceId::new("storage.k8s.io", "storageclasses"));
    classes
        .into_iter()
        .filter_map(|(_, bytes)| parse_stored(&bytes).ok())
        .filter(|c| c["metadata"]["annotations"][DEFAULT_CLASS_ANNOTATION] == "true")
        .max_by(|a, b| a["metadata"]["creationTimestamp"].as_str().cmp(&b["metadata"]["creationTimestamp"].as_str()))
        .and_then(|c| c["metadata"]["name"].as_str().map(String::from))
}

impl Strategy for PersistentVolumes {
    /// kube's registry of this kind answers a DELETE with the deleted object.
    fn returns_deleted_object(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, obj: &mut Value, _has_status: bool) {
        prepare_storage_object(obj, "kubernetes.io/pv-protection");
    }

    fn table(&self) -> Option<Printer> {
        Some(table::storage::persistentvolumes())
    }
}
