//! The CatalogSource controller: a CatalogSource serves a file-based catalog from a
//! ConfigMap (`sourceType: configmap`, `spec.configMap`; plain or gzipped keys) or from a
//! directory on the machine running OLM (the [`DIRECTORY_ANNOTATION`]). Its status says
//! whether the catalog could be read (`connectionState.lastObservedState` READY or
//! TRANSIENT_FAILURE), as OLM reports a registry's connection. The catalogs read are kept
//! in [`Olm::catalogs`] for resolution.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use opkit::{Action, Context, ReconcileResult};
use serde_json::{Value, json};

use super::{Olm, now};
use crate::fbc::Catalog;
use crate::types::CatalogSource;

/// Annotation on a CatalogSource naming a directory holding its file-based catalog.
pub(crate) const DIRECTORY_ANNOTATION: &str = "catalog.opkit.dev/directory";

/// Reconciles one CatalogSource.
pub(crate) async fn reconcile(ctx: Context<CatalogSource, Olm>) -> ReconcileResult {
    let Some(source) = ctx.object.clone() else { return Ok(Action::done()) };
    let api: Api<CatalogSource> = ctx.api();
    let (state, message) = match load(&ctx.client, &ctx.state, &source).await {
        Ok(catalog) => {
            let problems = catalog.validate();
            if problems.is_empty() { ("READY", None) } else { ("TRANSIENT_FAILURE", Some(problems.join("; "))) }
        }
        Err(e) => ("TRANSIENT_FAILURE", Some(e)),
    };
    let ns = source.namespace().unwrap_or_default();
    // The ConfigMap's version, so every change of the catalog changes the status and the
    // subscriptions of this source resolve again (OLM's `configMapReference`).
    let reference = source.spec.config_map.as_deref().and_then(|name| {
        let cm = ctx.cache.get::<ConfigMap>(name, Some(&ns))?;
        Some(json!({
            "name": name, "namespace": ns, "resourceVersion": cm.resource_version(), "uid": cm.uid(),
        }))
    });
    let current = source.status.as_ref();
    let current_state = current
        .and_then(|s| s.connection_state.as_ref())
        .and_then(|c| c.get("lastObservedState"))
        .and_then(Value::as_str);
    let current_reference = current.and_then(|s| s.extra.get("configMapReference")).map(|r| {
        let mut r = r.clone();
        if let Some(o) = r.as_object_mut() {
            o.remove("lastUpdateTime");
        }
        r
    });
    if current_state == Some(state)
        && current.and_then(|s| s.message.clone()) == message
        && current_reference == reference
    {
        return Ok(Action::done());
    }
    let reference = reference.map(|mut r| {
        r["lastUpdateTime"] = json!(now());
        r
    });
    let address = match (&source.spec.config_map, source.annotations().get(DIRECTORY_ANNOTATION)) {
        (_, Some(dir)) => format!("file://{dir}"),
        (Some(cm), None) => format!("configmap://{ns}/{cm}"),
        (None, None) => String::new(),
    };
    let patch = json!({"status": {
        "connectionState": {"address": address, "lastConnect": now(), "lastObservedState": state},
        "message": message,
        "reason": message.as_ref().map(|_| "CatalogUnreadable"),
        "configMapReference": reference,
    }});
    api.patch_status(&source.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(Action::done())
}

/// The catalog a CatalogSource serves, read again only when its ConfigMap changed.
pub(crate) async fn load(client: &Client, olm: &Olm, source: &CatalogSource) -> Result<Arc<Catalog>, String> {
    let ns = source.namespace().unwrap_or_default();
    let key = format!("{ns}/{}", source.name_any());
    if let Some(dir) = source.annotations().get(DIRECTORY_ANNOTATION) {
        let catalog = Arc::new(Catalog::load_dir(dir.as_ref()).map_err(|e| e.to_string())?);
        if let Ok(mut catalogs) = olm.catalogs.lock() {
            catalogs.insert(key, (String::new(), catalog.clone()));
        }
        return Ok(catalog);
    }
    let Some(name) = source.spec.config_map.as_deref() else {
        return Err(format!(
            "sourceType {:?} without spec.configMap or the {DIRECTORY_ANNOTATION} annotation: no catalog to serve",
            source.spec.source_type
        ));
    };
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm = config_maps
        .get_opt(name)
        .await
        .map_err(|e| format!("reading ConfigMap {ns}/{name}: {e}"))?
        .ok_or_else(|| format!("ConfigMap {ns}/{name} not found"))?;
    let version = cm.resource_version().unwrap_or_default();
    if let Some((seen, catalog)) = olm.catalogs.lock().ok().and_then(|c| c.get(&key).cloned())
        && seen == version
    {
        return Ok(catalog);
    }
    let binary = cm.binary_data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
    let catalog = Catalog::from_config_map(&cm.data.unwrap_or_default(), &binary, &format!("ConfigMap {ns}/{name}"))
        .map_err(|e| e.to_string())?;
    let catalog = Arc::new(catalog);
    if let Ok(mut catalogs) = olm.catalogs.lock() {
        catalogs.insert(key, (version, catalog.clone()));
    }
    Ok(catalog)
}
