//! Strategic merge patch (`application/strategic-merge-patch+json`) and the list semantics it
//! merges by: [`list_semantics`] says which lists are keyed by which merge key, which are sets
//! and which are atomic; [`strategic`] applies a patch with those semantics.

pub mod list_semantics;
pub mod strategic;

pub use list_semantics::{ListSemantics, ListType, MapKey, SchemaNode, child};
pub use strategic::{StrategicMergeError, strategic_merge_patch};
