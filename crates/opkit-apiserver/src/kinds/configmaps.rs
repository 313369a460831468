//! Config maps: key validation and the Table printer.

use serde_json::Value;

use super::Strategy;
use crate::schema::{FieldError, FieldErrorReason};
use crate::table::{self, Printer};

/// The strategy of core/v1 config maps.
pub(super) struct ConfigMaps;

impl Strategy for ConfigMaps {
    /// Every key of `data` and `binaryData` is a valid config key.
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for field in ["data", "binaryData"] {
            let Some(m) = obj[field].as_object() else { continue };
            for k in m.keys() {
                let ok = !k.is_empty()
                    && k.len() <= 253
                    && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
                if !ok {
                    errs.push(FieldError {
                        field: format!("{field}[{k}]"),
                        reason: FieldErrorReason::Invalid,
                        message: format!("Invalid value: {k:?}: a valid config key must consist of alphanumeric characters, '-', '_' or '.'"),
                    });
                }
            }
        }
        errs
    }

    fn table(&self) -> Option<Printer> {
        Some(table::core::configmaps())
    }
}
