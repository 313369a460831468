//! Strategic merge patch for PATCH requests: `opkit_apimachinery`'s implementation, with its
//! errors turned into the API server's [`PatchError`] (400 BadRequest or 422 Invalid).

use opkit_apimachinery::patch::StrategicMergeError;
use serde_json::Value;

use super::{ListSemantics, PatchError};

/// Applies a strategic merge patch to `doc` (see `opkit_apimachinery::patch::strategic`).
pub(crate) fn strategic_merge_patch(doc: &Value, patch: &Value, lists: &ListSemantics) -> Result<Value, PatchError> {
    opkit_apimachinery::patch::strategic_merge_patch(doc, patch, lists).map_err(PatchError::from)
}

impl From<StrategicMergeError> for PatchError {
    fn from(e: StrategicMergeError) -> Self {
        match e {
            StrategicMergeError::BadRequest(m) => PatchError::BadRequest(m),
            StrategicMergeError::Invalid(m) => PatchError::Invalid(m),
        }
    }
}
