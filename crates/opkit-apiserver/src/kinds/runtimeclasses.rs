//! node.k8s.io RuntimeClasses (kube's `runtimeclass` strategy and validation): `handler`
//! is required and a DNS label; the Table shows NAME, HANDLER, AGE.

use serde_json::Value;

use super::Strategy;
use crate::registry::meta::validate_label;
use crate::schema::FieldError;
use crate::table::{self, Printer};

/// The strategy of node.k8s.io/v1 RuntimeClasses.
pub(super) struct RuntimeClasses;

impl Strategy for RuntimeClasses {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        match obj["handler"].as_str() {
            None | Some("") => vec![FieldError::required("handler", "")],
            Some(handler) => validate_label("handler", handler).into_iter().collect(),
        }
    }

    fn table(&self) -> Option<Printer> {
        Some(table::node::runtimeclasses())
    }
}
