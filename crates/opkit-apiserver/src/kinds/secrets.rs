//! Secrets: `stringData` folded into `data`, `type` defaulted, kube's limit on the decoded
//! bytes of `data`, and the Table printer.

use serde_json::Value;

use super::Strategy;
use super::configmaps::{MAX_DATA_BYTES, decoded_len};
use crate::schema::FieldError;
use crate::selector::{FieldLabels, scalar_at};
use crate::table::{self, Printer};

/// The strategy of core/v1 secrets.
pub(super) struct Secrets;

impl Strategy for Secrets {
    /// Merges `stringData` into `data` (base64) and defaults `type` to `Opaque`, as the
    /// Secret conversion and defaulting of kube-apiserver do.
    fn default(&self, obj: &mut Value, _creating: bool) {
        use base64::Engine;
        if let Some(Value::Object(strings)) = obj.as_object_mut().and_then(|o| o.remove("stringData")) {
            if !obj["data"].is_object() {
                obj["data"] = Value::Object(Default::default());
            }
            for (k, v) in strings {
                let text = v.as_str().map(String::from).unwrap_or_else(|| v.to_string());
                obj["data"][k] = Value::String(base64::engine::general_purpose::STANDARD.encode(text));
            }
        }
        if obj["type"].as_str().is_none_or(str::is_empty) {
            obj["type"] = Value::String("Opaque".into());
        }
    }

    /// The decoded values of `data` add up to at most [`MAX_DATA_BYTES`].
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let total: usize =
            obj["data"].as_object().map_or(0, |m| m.values().filter_map(Value::as_str).map(decoded_len).sum());
        if total > MAX_DATA_BYTES {
            return vec![FieldError::too_long("data", MAX_DATA_BYTES as i64)];
        }
        Vec::new()
    }

    fn field_labels(&self) -> FieldLabels {
        SECRET_FIELD_LABELS
    }

    fn table(&self) -> Option<Printer> {
        Some(table::core::secrets())
    }
}

/// The field labels of secrets.
const SECRET_FIELD_LABELS: FieldLabels = FieldLabels {
    names: Some(&["type", "metadata.namespace", "metadata.name"]),
    value: |obj, field| (field == "type").then(|| scalar_at(obj, field)),
    unsupported: None,
};
