//! CustomResourceDefinitions: the cleanup finalizer, validation, the computed status,
//! serving a CRD's resource as soon as it is stored (and again after a restart),
//! deleting a terminating CRD's objects, and no longer serving a removed CRD.

use std::time::Duration;

use serde_json::{Value, json};

use super::{AfterCommit, Strategy};
use crate::catalog::{crd_status, resource_from_crd};
use crate::error::{ApiError, ApiResult};
use crate::registry::meta::{finalizers, meta_mut};
use crate::registry::{PatchType, Registry, Subresource, WriteOptions, parse_stored};
use crate::schema::{FieldError, FieldErrorReason};
use crate::storage::{ListRange, ResourceId};

/// The finalizer kube-apiserver puts on CRDs so their objects are removed first.
const CRD_CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The strategy of apiextensions.k8s.io/v1 CustomResourceDefinitions.
pub(super) struct CustomResourceDefinitions;

impl Strategy for CustomResourceDefinitions {
    /// Adds the cleanup finalizer; the status is computed before each commit.
    fn prepare_for_create(&self, obj: &mut Value, _has_status: bool) {
        let m = meta_mut(obj);
        let f = m.entry("finalizers").or_insert_with(|| json!([]));
        if let Some(a) = f.as_array_mut()
            && !a.iter().any(|x| x == CRD_CLEANUP_FINALIZER)
        {
            a.push(json!(CRD_CLEANUP_FINALIZER));
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        crate::schema::validate_crd(obj)
    }

    /// Compiles the CRD, refuses a change of its group or plural, computes its status,
    /// and serves (or re-serves) its resource once committed.
    fn before_commit(&self, obj: &mut Value, old: Option<&Value>, now: &str) -> ApiResult<Option<AfterCommit>> {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let info = resource_from_crd(obj)
            .map_err(|errs| ApiError::invalid("apiextensions.k8s.io", "CustomResourceDefinition", &name, &errs))?;
        if let Some(old) = old
            && (old["spec"]["group"] != obj["spec"]["group"]
                || old["spec"]["names"]["plural"] != obj["spec"]["names"]["plural"])
        {
            return Err(ApiError::invalid(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                &name,
                &[FieldError {
                    field: "spec.group".into(),
                    reason: FieldErrorReason::Invalid,
                    message: "Invalid value: field is immutable".into(),
                }],
            ));
        }
        let mut with_old_status = obj.clone();
        if let Some(o) = old {
            with_old_status["status"] = o["status"].clone();
        }
        obj["status"] = crd_status(&with_old_status, now);
        Ok(Some(Box::new(move |registry: &Registry, stored: &Value| {
            registry.catalog.put_crd(&name, info);
            if stored["metadata"]["deletionTimestamp"].is_string() {
                spawn_cleanup(registry, name, stored.clone());
            }
        })))
    }

    fn after_remove(&self, registry: &Registry, stored: &Value) {
        if let Some(name) = stored["metadata"]["name"].as_str() {
            registry.catalog.remove_crd(name);
        }
    }
}

/// Re-serves every stored CRD (after a restart) and resumes pending cleanups.
pub(crate) async fn restore(registry: &Registry) -> ApiResult<()> {
    let id = ResourceId::new("apiextensions.k8s.io", "customresourcedefinitions");
    let page = registry.store.list(&id, &ListRange::default(), &mut |_| true).await?;
    for b in page.items {
        let crd = match parse_stored(&b) {
            Ok(crd) => crd,
            Err(e) => {
                tracing::error!(error = %e.message, "stored CRD cannot be read; not served");
                continue;
            }
        };
        let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
        match resource_from_crd(&crd) {
            Ok(info) => {
                registry.catalog.put_crd(&name, info);
                if crd["metadata"]["deletionTimestamp"].is_string() {
                    spawn_cleanup(registry, name, crd);
                }
            }
            Err(e) => {
                tracing::warn!(crd = %name, errors = e.len(), "stored CRD no longer compiles; not served")
            }
        }
    }
    Ok(())
}

/// Deletes every object of a terminating CRD, then drops the cleanup finalizer.
fn spawn_cleanup(registry: &Registry, crd_name: String, crd: Value) {
    let registry = registry.clone();
    tokio::spawn(async move {
        if delete_objects(&registry, &crd).await {
            drop_cleanup_finalizer(&registry, &crd_name).await;
        }
    });
}

/// Deletes the objects of `crd` until none is left; false if its resource is not served.
async fn delete_objects(registry: &Registry, crd: &Value) -> bool {
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
    let Some(info) = registry.catalog.snapshot().by_resource(group, plural) else {
        return false;
    };
    let version = info.storage_version().to_string();
    loop {
        let keys = registry.store.keys(&info.id, None);
        if keys.is_empty() {
            break;
        }
        for (ns, name) in keys {
            let t = registry.target(info.clone(), version.clone(), Some(ns));
            let _ = registry.delete(&t, &name, &Value::Null, false, None).await;
        }
        // Objects with finalizers stay until their controllers remove them: wait for
        // the next change of the resource, bounded so that shutdown is never blocked.
        let rev = registry.store.revision();
        if let Ok(mut sub) = registry.store.watch(&info.id, rev) {
            let _ = tokio::time::timeout(Duration::from_secs(5), sub.next()).await;
        }
    }
    true
}

/// Removes the cleanup finalizer from the CRD `crd_name`, retrying on conflicts.
async fn drop_cleanup_finalizer(registry: &Registry, crd_name: &str) {
    let crds = registry.catalog.snapshot().lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions");
    let Some(crd_info) = crds else { return };
    let t = registry.target(crd_info, "v1".into(), None);
    let opts = WriteOptions { field_manager: "kube-apiserver".into(), ..Default::default() };
    for _ in 0..16 {
        let Ok((cur, _)) = registry.current(&t, crd_name).await else {
            return;
        };
        let left: Vec<String> = finalizers(&cur).into_iter().filter(|f| f != CRD_CLEANUP_FINALIZER).collect();
        let patch = json!({"metadata": {"finalizers": left, "resourceVersion": cur["metadata"]["resourceVersion"]}});
        match registry.patch(&t, crd_name, PatchType::Merge, patch, Subresource::Main, &opts).await {
            Ok(_) => return,
            Err(e) if e.code == 409 => continue,
            Err(_) => return,
        }
    }
}
