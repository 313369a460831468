//! Namespaces: create-time status, spec finalizers and name label, DNS-label names,
//! staged deletion (Terminating until the namespace controller empties and finalizes
//! them), the `finalize` subresource and the namespaces every cluster starts with. That
//! no new content is created in a missing or terminating namespace is the
//! NamespaceLifecycle admission plugin's rule (`admission/builtin/namespace_lifecycle.rs`).

use serde_json::{Value, json};

use super::Strategy;
use crate::error::ApiResult;
use crate::registry::meta::{meta_mut, validate_label};
use crate::registry::{Registry, WriteOptions};
use crate::schema::FieldError;
use crate::selector::{FieldLabels, scalar_at};
use crate::table::{self, Printer};

/// The strategy of core/v1 namespaces.
pub(super) struct Namespaces;

/// The namespaces every cluster starts with.
const INITIAL: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

impl Strategy for Namespaces {
    /// kube's registry of this kind answers a DELETE with the deleted object.
    fn returns_deleted_object(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, obj: &mut Value, _has_status: bool) {
        obj["status"] = json!({"phase": "Active"});
        obj["spec"] = json!({"finalizers": ["kubernetes"]});
        let name = obj["metadata"]["name"].clone();
        let labels = meta_mut(obj).entry("labels").or_insert_with(|| json!({}));
        if let Some(l) = labels.as_object_mut() {
            l.insert("kubernetes.io/metadata.name".into(), name);
        }
    }

    fn validate_name(&self, name: &str) -> Option<FieldError> {
        validate_label("metadata.name", name)
    }

    fn staged_deletion(&self) -> bool {
        true
    }

    fn mark_terminating(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Terminating"});
    }

    /// The namespace stays until its `spec.finalizers` are empty.
    fn holds_removal(&self, obj: &Value) -> bool {
        obj["spec"]["finalizers"].as_array().is_some_and(|a| !a.is_empty())
    }

    fn has_finalize(&self) -> bool {
        true
    }

    fn field_labels(&self) -> FieldLabels {
        NAMESPACE_FIELD_LABELS
    }

    fn table(&self) -> Option<Printer> {
        Some(table::core::namespaces())
    }
}

/// Creates the namespaces every cluster starts with.
pub(crate) async fn bootstrap(registry: &Registry) -> ApiResult<()> {
    let Some(info) = registry.catalog.snapshot().lookup("", "v1", "namespaces") else {
        return Ok(());
    };
    let target = registry.target(info, "v1".into(), None);
    for ns in INITIAL {
        if registry.store.get(&target.info.id, &target.key(ns)).await?.is_some() {
            continue;
        }
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        let opts = WriteOptions { field_manager: "kube-apiserver".into(), ..Default::default() };
        registry.create_if_missing(&target, body, &opts).await?;
    }
    Ok(())
}

/// The field labels of namespaces.
const NAMESPACE_FIELD_LABELS: FieldLabels = FieldLabels {
    names: Some(&["status.phase", "metadata.name"]),
    value: |obj, field| (field == "status.phase").then(|| scalar_at(obj, field)),
    unsupported: None,
};
