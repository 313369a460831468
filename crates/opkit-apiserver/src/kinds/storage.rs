//! Persistent volume claims: volume mode default and the Table printer.

use serde_json::{Value, json};

use super::Strategy;
use super::defaulting::{default, obj_mut};
use crate::table::{self, Printer};

/// The strategy of core/v1 persistent volume claims.
pub(super) struct PersistentVolumeClaims;

impl Strategy for PersistentVolumeClaims {
    /// kube's registry of this kind answers a DELETE with the deleted object.
    fn returns_deleted_object(&self) -> bool {
        true
    }

    fn default(&self, obj: &mut Value, _creating: bool) {
        default(obj_mut(obj, "spec"), "volumeMode", json!("Filesystem"));
    }

    fn table(&self) -> Option<Printer> {
        Some(table::storage::persistentvolumeclaims())
    }
}
