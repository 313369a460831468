//! Selectors as the API server uses them. Label selectors and the field-selector grammar are
//! `opkit_apimachinery`'s (re-exported here); this module adds what is the API server's own:
//! which fields each resource lets clients select on, and the values it exposes for them
//! ([`resource_fields`]).

mod resource_fields;

pub(crate) use opkit_apimachinery::selector::LabelSelector;
pub(crate) use resource_fields::ResourceFieldSelector;
pub(crate) use resource_fields::{FieldLabels, scalar_at, scalar_at_or};

/// The field selector of list and watch requests (kept under its historical name).
pub(crate) type FieldSelector = ResourceFieldSelector;
