//! The labels of stored objects, read from their JSON at most once per stored value and
//! kept with the entry, so a label-selector list matches on them instead of parsing
//! every object it visits.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value};

/// An object's `metadata.labels`, sorted by key. Labels whose value is not a string
/// count as absent, as they do for a selector matched against the parsed object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectLabels(Box<[(Box<str>, Box<str>)]>);

impl ObjectLabels {
    /// Reads the labels of a stored object; `None` when the bytes are not a JSON object
    /// (no selector matches such an object).
    pub fn parse(json: &[u8]) -> Option<ObjectLabels> {
        #[derive(Deserialize)]
        struct Metadata {
            #[serde(default)]
            labels: Option<Map<String, Value>>,
        }
        #[derive(Deserialize)]
        struct Object {
            #[serde(default)]
            metadata: Option<Metadata>,
        }
        let object: Object = serde_json::from_slice(json).ok()?;
        let labels = object.metadata.and_then(|m| m.labels).unwrap_or_default();
        let mut pairs: Vec<(Box<str>, Box<str>)> = labels
            .into_iter()
            .filter_map(|(k, v)| match v {
                Value::String(s) => Some((k.into_boxed_str(), s.into_boxed_str())),
                _ => None,
            })
            .collect();
        pairs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Some(ObjectLabels(pairs.into_boxed_slice()))
    }

    /// The value of label `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.binary_search_by(|(k, _)| k.as_ref().cmp(key)).ok().map(|i| self.0[i].1.as_ref())
    }
}

/// The labels of one stored value, read on first use. Clones share the result, so an
/// entry's labels are read once however many lists (and snapshots) visit it.
#[derive(Debug, Clone, Default)]
pub(crate) struct LabelCache(Arc<OnceLock<Option<ObjectLabels>>>);

impl LabelCache {
    /// The labels of `value`, which must be the value this cache belongs to.
    pub(crate) fn get(&self, value: &Bytes) -> Option<&ObjectLabels> {
        self.0.get_or_init(|| ObjectLabels::parse(value)).as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_string_labels_sorted_and_ignores_the_rest() {
        let json = br#"{"metadata":{"name":"x","labels":{"b":"2","a":"1","n":7}},"data":{"a":"z"}}"#;
        let labels = ObjectLabels::parse(json).expect("a JSON object");
        assert_eq!(labels.get("a"), Some("1"));
        assert_eq!(labels.get("b"), Some("2"));
        assert_eq!(labels.get("n"), None, "a non-string value is no label");
        assert_eq!(labels.get("name"), None);
        assert_eq!(ObjectLabels::parse(br#"{"metadata":{"name":"x"}}"#), Some(ObjectLabels::default()));
        assert_eq!(ObjectLabels::parse(br#"{"metadata":null}"#), Some(ObjectLabels::default()));
        assert_eq!(ObjectLabels::parse(b"{oops"), None);
        assert_eq!(ObjectLabels::parse(b"7"), None);
    }
}
