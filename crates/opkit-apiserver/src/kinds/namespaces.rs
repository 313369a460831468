//! Namespaces: create-time status, spec finalizers and name label, DNS-label names,
//! staged deletion (Terminating until the namespace controller empties and finalizes
//! them), the `finalize` subresource, the namespaces every cluster starts with, and
//! the rule that no new content is created in a missing or terminating namespace.

use serde_json::{Value, json};

use super::Strategy;
use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::meta::{meta_mut, validate_label};
use crate::registry::{Registry, Target, WriteOptions, parse_stored};
use crate::schema::FieldError;
use crate::storage::ResourceId;
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

    fn table(&self) -> Option<Printer> {
        Some(table::core::namespaces())
    }
}

/// Creates the namespaces every cluster starts with.
pub(crate) async fn bootstrap(registry: &Registry) -> ApiResult<()> {
    let Some(info) = registry.catalog.snapshot().lookup("", "v1", "namespaces") else {
        return Ok(());
    };
    let target = Target::new(info, "v1".into(), None);
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

/// Refuses to create objects of a namespaced `target` in a namespace that does not
/// exist or is being terminated (kube's NamespaceLifecycle admission: a 403 naming the
/// object `name`, empty for a generated name, with the `NamespaceTerminating` cause
/// controllers look for).
pub(crate) async fn check_open(registry: &Registry, target: &Target, name: &str) -> ApiResult<()> {
    if !target.info.namespaced {
        return Ok(());
    }
    let ns = target.namespace.clone().unwrap_or_default();
    let id = ResourceId::new("", "namespaces");
    let Some(entry) = registry.store.get(&id, &(String::new(), ns.clone())).await? else {
        return Err(ApiError::not_found("", "namespaces", &ns));
    };
    if parse_stored(&entry.value)?["metadata"]["deletionTimestamp"].is_string() {
        let why = format!("unable to create new content in namespace {ns} because it is being terminated");
        let mut refused = ApiError::forbidden_object(&target.info.group, &target.info.resource, name, &why);
        refused.details.causes.push(Cause {
            reason: "NamespaceTerminating".into(),
            message: format!("namespace {ns} is being terminated"),
            field: "metadata.namespace".into(),
        });
        return Err(refused);
    }
    Ok(())
}
