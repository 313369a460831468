//! Config maps: key validation, kube's limit on the bytes of `data` and `binaryData`
//! together ([`MAX_DATA_BYTES`], shared with Secrets), and the Table printer.

use serde_json::Value;

use super::Strategy;
use crate::schema::{FieldError, FieldErrorReason};
use crate::table::{self, Printer};

/// The most bytes a ConfigMap's `data` and `binaryData` values, or a Secret's decoded
/// `data` values, may add up to (kube's `MaxSecretSize`, 1 MiB).
pub(super) const MAX_DATA_BYTES: usize = 1024 * 1024;

/// How many bytes the base64 `encoded` decodes to (its length less padding, 3 bytes per
/// 4 characters, when it does not decode: the type check reports that).
pub(super) fn decoded_len(encoded: &str) -> usize {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_or_else(|_| encoded.trim_end_matches('=').len() * 3 / 4, |bytes| bytes.len())
}

/// The strategy of core/v1 config maps.
pub(super) struct ConfigMaps;

impl Strategy for ConfigMaps {
    /// Every key of `data` and `binaryData` is a valid config key, and their values add up
    /// to at most [`MAX_DATA_BYTES`] (kube reports that on the whole object, field `[]`).
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let text: usize =
            obj["data"].as_object().map_or(0, |m| m.values().filter_map(Value::as_str).map(str::len).sum());
        let binary: usize =
            obj["binaryData"].as_object().map_or(0, |m| m.values().filter_map(Value::as_str).map(decoded_len).sum());
        if text + binary > MAX_DATA_BYTES {
            errs.push(FieldError::too_long("[]", MAX_DATA_BYTES as i64));
        }
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
