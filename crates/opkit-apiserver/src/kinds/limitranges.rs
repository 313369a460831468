//! LimitRanges: kube's `SetDefaults_LimitRangeItem` for `Container` items (a `max`
//! without a `default` is the default limit; a `default`, else a `min`, is the default
//! request), so the LimitRanger admission plugin reads them as kube stores them.

use serde_json::{Value, json};

use super::Strategy;

/// The strategy of core/v1 limit ranges.
pub(super) struct LimitRanges;

impl Strategy for LimitRanges {
    fn default(&self, obj: &mut Value, _creating: bool) {
        let Some(items) = obj["spec"]["limits"].as_array_mut() else { return };
        for item in items.iter_mut().filter(|i| i["type"] == "Container") {
            for field in ["default", "defaultRequest"] {
                if !item[field].is_object() {
                    item[field] = json!({});
                }
            }
            fill(item, "max", "default");
            fill(item, "default", "defaultRequest");
            fill(item, "min", "defaultRequest");
            for field in ["default", "defaultRequest"] {
                if item[field].as_object().is_some_and(serde_json::Map::is_empty) {
                    item.as_object_mut().map(|i| i.remove(field));
                }
            }
        }
    }
}

/// Copies each resource of `item[from]` into `item[to]` where `to` lacks it.
fn fill(item: &mut Value, from: &str, to: &str) {
    let Some(source) = item[from].as_object().cloned() else { return };
    for (k, v) in source {
        if item[to].get(&k).is_none() {
            item[to][&k] = v;
        }
    }
}
