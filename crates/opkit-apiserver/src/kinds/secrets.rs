//! Secrets: `stringData` folded into `data`, `type` defaulted, and the Table printer.

use serde_json::Value;

use super::Strategy;
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

    fn table(&self) -> Option<Printer> {
        Some(table::core::secrets())
    }
}
