//! Writing the arbitrary objects a bundle carries: each one's resource found through
//! discovery (a [`RestMapper`]), applied server-side as OLM's field manager, and CRDs
//! waited on until established.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::Scope;
use opkit::discovery::RestMapper;
use serde_json::Value;

use crate::{FIELD_MANAGER, OlmError};

/// The kinds' resources, learnt from discovery as objects of them are written.
pub(crate) struct Resources {
    mapper: RestMapper,
}

impl Resources {
    /// Resources resolved through `client`'s discovery.
    pub(crate) fn new(client: Client) -> Resources {
        Resources { mapper: RestMapper::new(client) }
    }

    /// The resource and scope of `apiVersion`/`kind`.
    pub(crate) async fn resolve(&self, api_version: &str, kind: &str) -> Result<(ApiResource, Scope), OlmError> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, caps) = self.mapper.rest_mapping(&gvk).await.map_err(|e| OlmError::KindNotServed {
            api_version: api_version.into(),
            kind: kind.into(),
            message: e.to_string(),
        })?;
        Ok((resource, caps.scope))
    }

    /// Applies `object` (server-side, forced) in `namespace` when its kind is namespaced.
    pub(crate) async fn apply(
        &self,
        client: &Client,
        object: &Value,
        namespace: &str,
    ) -> Result<DynamicObject, OlmError> {
        let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
        let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        if api_version.is_empty() || kind.is_empty() || name.is_empty() {
            return Err(OlmError::Catalog(format!("an object without apiVersion, kind or name: {kind} {name:?}")));
        }
        let (resource, scope) = self.resolve(api_version, kind).await?;
        let mut body = object.clone();
        let api: Api<DynamicObject> = match scope {
            Scope::Namespaced => {
                if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert("namespace".into(), Value::String(namespace.into()));
                }
                Api::namespaced_with(client.clone(), namespace, &resource)
            }
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in ["resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"] {
                meta.remove(field);
            }
        }
        if let Some(map) = body.as_object_mut() {
            map.remove("status");
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(name, &params, &Patch::Apply(&body)).await.map_err(|e| OlmError::Apply {
            kind: kind.into(),
            name: name.into(),
            message: opkit_error_text(&e),
        })
    }
}

/// A kube error as its Status message, else its text.
pub(crate) fn opkit_error_text(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// Whether CRD `name` exists and is established.
pub(crate) fn crd_established(crd: Option<&CustomResourceDefinition>) -> bool {
    crd.and_then(|c| c.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
}

/// Waits until CRD `name` is established.
pub(crate) async fn wait_crd_established(client: &Client, name: &str, timeout: Duration) -> Result<(), OlmError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let established = kube::runtime::wait::await_condition(api, name, crd_established);
    tokio::time::timeout(timeout, established)
        .await
        .map_err(|_| OlmError::Timeout(format!("CRD {name} to be established")))?
        .map_err(|e| OlmError::Timeout(format!("CRD {name} to be established: {e}")))?;
    Ok(())
}
