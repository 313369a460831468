//! Nodes: they may register with their status, as kubelets do; the node Table printer.

use serde_json::Value;

use super::Strategy;
use crate::selector::{FieldLabels, scalar_at_or};
use crate::table::{self, Printer};

/// The strategy of core/v1 nodes.
pub(super) struct Nodes;

impl Strategy for Nodes {
    /// Keeps the status a registering node sends.
    fn prepare_for_create(&self, _obj: &mut Value, _has_status: bool) {}

    fn field_labels(&self) -> FieldLabels {
        NODE_FIELD_LABELS
    }

    fn table(&self) -> Option<Printer> {
        Some(table::core::nodes())
    }
}

/// The field labels of nodes.
const NODE_FIELD_LABELS: FieldLabels = FieldLabels {
    names: Some(&["metadata.name", "spec.unschedulable"]),
    value: |obj, field| (field == "spec.unschedulable").then(|| scalar_at_or(obj, field, "false")),
    unsupported: None,
};
