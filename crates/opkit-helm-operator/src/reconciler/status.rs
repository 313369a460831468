//! The status a reconcile writes to its custom resource: operator-sdk's conditions and
//! `status.deployedRelease`, written once at the end unless nothing changed.

use std::collections::BTreeMap;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

/// The status of one custom resource as a reconcile changes it, with the cached status it
/// started from.
pub(super) struct ResourceStatus {
    api: Api<DynamicObject>,
    name: String,
    value: Value,
    cached: Value,
}

impl ResourceStatus {
    /// The status of `object` (an empty map when it has none), written through `api`.
    pub(super) fn of(api: Api<DynamicObject>, object: &DynamicObject) -> ResourceStatus {
        let value = object.data.get("status").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
        let name = kube::ResourceExt::name_any(object);
        ResourceStatus { api, name, cached: value.clone(), value }
    }

    /// The manifest `status.deployedRelease` names, empty if none.
    pub(super) fn deployed_manifest(&self) -> &str {
        self.value.pointer("/deployedRelease/manifest").and_then(Value::as_str).unwrap_or_default()
    }

    /// Sets `status.deployedRelease` to `revision` of the release with `manifest`.
    pub(super) fn set_deployed_release(&mut self, manifest: &str, revision: i64) {
        self.value["deployedRelease"] = json!({ "name": self.name, "manifest": manifest, "revision": revision });
    }

    /// Drops `status.deployedRelease`.
    pub(super) fn clear_deployed_release(&mut self) {
        if let Some(s) = self.value.as_object_mut() {
            s.remove("deployedRelease");
        }
    }

    /// Sets an operator-sdk condition in `status.conditions`, keeping `lastTransitionTime`
    /// unless the status changed.
    pub(super) fn set_condition(&mut self, type_: &str, value: bool, reason: &str, message: &str) {
        let value = if value { "True" } else { "False" };
        let Some(conditions) = conditions_of(&mut self.value) else { return };
        let now = opkit::status::now();
        let mut condition =
            BTreeMap::from([("type", json!(type_)), ("status", json!(value)), ("lastTransitionTime", json!(now))]);
        if !reason.is_empty() {
            condition.insert("reason", json!(reason));
        }
        if !message.is_empty() {
            condition.insert("message", json!(message));
        }
        match conditions.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some(type_)) {
            Some(existing) => {
                if existing.get("status").and_then(Value::as_str) == Some(value)
                    && let Some(t) = existing.get("lastTransitionTime")
                {
                    condition.insert("lastTransitionTime", t.clone());
                }
                *existing = json!(condition);
            }
            None => conditions.push(json!(condition)),
        }
    }

    /// Drops the condition of `type_`.
    pub(super) fn remove_condition(&mut self, type_: &str) {
        if let Some(conditions) = conditions_of(&mut self.value) {
            conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some(type_));
        }
    }

    /// Writes the status to the status subresource unless it equals the cached one (so a
    /// reconcile that changed nothing does not cause another); a failure is logged (the
    /// next reconcile writes it again).
    pub(super) async fn write(&self) {
        if self.value == self.cached {
            return;
        }
        let patch = json!({ "status": self.value });
        if let Err(e) = self.api.patch_status(&self.name, &PatchParams::default(), &Patch::Merge(&patch)).await
            && !opkit::status::is_not_found(&e)
        {
            tracing::warn!(name = self.name, error = %e, "writing the release status");
        }
    }
}

fn conditions_of(status: &mut Value) -> Option<&mut Vec<Value>> {
    let list = status.as_object_mut()?.entry("conditions").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    list.as_array_mut()
}
