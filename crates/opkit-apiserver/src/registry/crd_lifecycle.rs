//! Per-kind lifecycle hooks: create-time defaults (pods, namespaces, CRDs), serving a
//! CRD's resource as soon as it is stored, and removing a deleted CRD's objects.

use std::time::Duration;

use serde_json::{Value, json};

use super::meta::{finalizers, meta_mut};
use super::{Registry, Target, WriteOptions, parse_stored};
use crate::catalog::crd_status as catalog_crd_status;
use crate::catalog::{ResourceInfo, resource_from_crd};
use crate::error::{ApiError, ApiResult};
use crate::storage::ListRange;

/// The finalizer kube-apiserver puts on CRDs so their objects are removed first.
pub(super) const CRD_CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Work to do once a write is committed.
pub(crate) enum Hook {
    /// Nothing.
    None,
    /// Serve (or re-serve) this CRD's resource.
    ServeCrd(String, Box<ResourceInfo>),
}

fn is_crd(target: &Target) -> bool {
    target.info.group == "apiextensions.k8s.io" && target.info.resource == "customresourcedefinitions"
}

impl Registry {
    /// Create-time defaults of particular kinds.
    pub(super) fn prepare_create(&self, target: &Target, obj: &mut Value, _now: &str) -> ApiResult<()> {
        let info = &target.info;
        let has_status = target.version_info()?.status;
        match (info.group.as_str(), info.resource.as_str()) {
            ("", "pods") => {
                let phase = json!({"phase": "Pending", "qosClass": "BestEffort"});
                obj["status"] = phase;
                if obj["spec"]["restartPolicy"].is_null() {
                    obj["spec"]["restartPolicy"] = json!("Always");
                }
                if obj["spec"]["serviceAccountName"].is_null() {
                    obj["spec"]["serviceAccountName"] = json!("default");
                }
                if obj["spec"]["terminationGracePeriodSeconds"].is_null() {
                    obj["spec"]["terminationGracePeriodSeconds"] = json!(30);
                }
            }
            ("", "namespaces") => {
                obj["status"] = json!({"phase": "Active"});
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
                let name = obj["metadata"]["name"].clone();
                let labels = meta_mut(obj).entry("labels").or_insert_with(|| json!({}));
                if let Some(l) = labels.as_object_mut() {
                    l.insert("kubernetes.io/metadata.name".into(), name);
                }
            }
            ("apiextensions.k8s.io", "customresourcedefinitions") => {
                let m = meta_mut(obj);
                let f = m.entry("finalizers").or_insert_with(|| json!([]));
                if let Some(a) = f.as_array_mut()
                    && !a.iter().any(|x| x == CRD_CLEANUP_FINALIZER)
                {
                    a.push(json!(CRD_CLEANUP_FINALIZER));
                }
            }
            // Nodes may register with their status, as kubelets do.
            ("", "nodes") => {}
            _ if has_status => {
                if let Some(o) = obj.as_object_mut() {
                    o.remove("status");
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Computes server-set state just before a write (a CRD's status) and what to do after.
    pub(super) fn before_commit(
        &self,
        target: &Target,
        obj: &mut Value,
        old: Option<&Value>,
        now: &str,
    ) -> ApiResult<Hook> {
        if !is_crd(target) {
            return Ok(Hook::None);
        }
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
                &[crate::schema::FieldError {
                    field: "spec.group".into(),
                    reason: crate::schema::FieldErrorReason::Invalid,
                    message: "Invalid value: field is immutable".into(),
                }],
            ));
        }
        let mut with_old_status = obj.clone();
        if let Some(o) = old {
            with_old_status["status"] = o["status"].clone();
        }
        obj["status"] = catalog_crd_status(&with_old_status, now);
        Ok(Hook::ServeCrd(name, Box::new(info)))
    }

    /// Runs a hook once its write is committed.
    pub(super) fn after_commit(&self, target: &Target, hook: Hook, stored: &Value) {
        if let Hook::ServeCrd(name, info) = hook {
            self.catalog.put_crd(&name, *info);
            if stored["metadata"]["deletionTimestamp"].is_string() && is_crd(target) {
                self.spawn_crd_cleanup(name, stored.clone());
            }
        }
    }

    /// Runs after an object is finally removed.
    pub(super) fn after_remove(&self, target: &Target, stored: &Value) {
        if is_crd(target)
            && let Some(name) = stored["metadata"]["name"].as_str()
        {
            self.catalog.remove_crd(name);
        }
    }

    /// Re-serves every stored CRD (after a restart) and resumes pending cleanups.
    pub(super) async fn restore(&self) -> ApiResult<()> {
        let id = crate::storage::ResourceId::new("apiextensions.k8s.io", "customresourcedefinitions");
        let page = self.store.list(&id, &ListRange::default(), &mut |_| true).await?;
        for b in page.items {
            let crd = parse_stored(&b)?;
            let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
            match resource_from_crd(&crd) {
                Ok(info) => {
                    self.catalog.put_crd(&name, info);
                    if crd["metadata"]["deletionTimestamp"].is_string() {
                        self.spawn_crd_cleanup(name, crd);
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
    fn spawn_crd_cleanup(&self, crd_name: String, crd: Value) {
        let registry = self.clone();
        tokio::spawn(async move {
            let group = crd["spec"]["group"].as_str().unwrap_or_default().to_string();
            let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default().to_string();
            let Some(info) = registry.catalog.snapshot().by_resource(&group, &plural) else {
                return;
            };
            let version = info.storage_version().to_string();
            let opts = WriteOptions { field_manager: "kube-apiserver".into(), ..Default::default() };
            loop {
                let keys = registry.store.keys(&info.id, None);
                if keys.is_empty() {
                    break;
                }
                for (ns, name) in keys {
                    let t = Target { info: info.clone(), version: version.clone(), namespace: Some(ns) };
                    let _ = registry.delete(&t, &name, &Value::Null, false).await;
                }
                // Objects with finalizers stay until their controllers remove them: wait for
                // the next change of the resource, bounded so that shutdown is never blocked.
                let rev = registry.store.revision();
                if let Ok(mut sub) = registry.store.watch(&info.id, rev) {
                    let _ = tokio::time::timeout(Duration::from_secs(5), sub.next()).await;
                }
            }
            let crds = registry.catalog.snapshot().lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions");
            let Some(crd_info) = crds else { return };
            let t = Target { info: crd_info, version: "v1".into(), namespace: None };
            for _ in 0..16 {
                let Ok((cur, _)) = registry.current(&t, &crd_name).await else {
                    return;
                };
                let left: Vec<String> = finalizers(&cur).into_iter().filter(|f| f != CRD_CLEANUP_FINALIZER).collect();
                let patch =
                    json!({"metadata": {"finalizers": left, "resourceVersion": cur["metadata"]["resourceVersion"]}});
                match registry
                    .patch(&t, &crd_name, super::PatchType::Merge, patch, super::Subresource::Main, &opts)
                    .await
                {
                    Ok(_) => return,
                    Err(e) if e.code == 409 => continue,
                    Err(_) => return,
                }
            }
        });
    }
}
