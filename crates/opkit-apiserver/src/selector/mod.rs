//! Selectors as the API server uses them. Label selectors and the field-selector grammar are
//! `opkit_apimachinery`'s (re-exported here); this module adds what is the API server's own:
//! which fields each resource lets clients select on, and the values it exposes for them
//! ([`resource_fields`]).

mod resource_fields;

pub use opkit_apimachinery::selector::{
    FieldSelector as FieldSelectorGrammar, LabelSelector, Operator, Requirement, SelectorError, label_value_errors,
    qualified_name_errors,
};
pub use resource_fields::{ResourceFieldSelector, field_value};

/// The field selector of list and watch requests (kept under its historical name).
pub type FieldSelector = ResourceFieldSelector;
