//! The cluster a run talks to: a kube client with a map of resolved kinds (an
//! [`opkit::discovery::RestMapper`], refreshed when a kind is missing, so CRDs created by
//! a step are found), the kubeconfig path
//! commands get as `$KUBECONFIG`, and the object operations kuttl makes: create or
//! merge-patch, get, list by labels and delete.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;
use kube::{Client, Config};
use opkit::discovery::{MappingError, RestMapper};
use serde_json::Value;

use crate::KuttlError;

/// A resolved kind: how to reach it and whether it is namespaced.
#[derive(Debug, Clone)]
pub(crate) struct Kind {
    /// The resource.
    pub(crate) resource: ApiResource,
    /// Whether objects of the kind live in a namespace.
    pub(crate) namespaced: bool,
}

/// A cluster to run tests against.
pub struct Cluster {
    client: Client,
    kubeconfig: PathBuf,
    mapper: RestMapper,
}

impl Cluster {
    /// A cluster reached with `client`; commands get `kubeconfig` as `$KUBECONFIG`.
    pub fn new(client: Client, kubeconfig: impl Into<PathBuf>) -> Cluster {
        Cluster { mapper: RestMapper::new(client.clone()), client, kubeconfig: kubeconfig.into() }
    }

    /// A cluster from a kubeconfig file (its current context).
    pub async fn from_kubeconfig(path: &Path) -> Result<Cluster, KuttlError> {
        let kubeconfig = kube::config::Kubeconfig::read_from(path)
            .map_err(|e| KuttlError::Kubeconfig(format!("{}: {e}", path.display())))?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| KuttlError::Kubeconfig(format!("{}: {e}", path.display())))?;
        let client = Client::try_from(config).map_err(KuttlError::Kube)?;
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(Cluster::new(client, absolute))
    }

    /// The client.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The kubeconfig commands use.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Resolves `apiVersion`/`kind` through discovery (kept once found).
    pub(crate) async fn resolve(&self, api_version: &str, kind: &str) -> Result<Kind, String> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, caps) = self.mapper.rest_mapping(&gvk).await.map_err(|e| {
            let why = match &e {
                MappingError::Discovery { source, .. } => short(source),
                other => other.to_string(),
            };
            format!("retrieving API resource for {} failed: {why}", go_gvk(api_version, kind))
        })?;
        Ok(Kind { resource, namespaced: caps.scope == Scope::Namespaced })
    }

    /// kuttl's `Namespaced`: resolves the object's kind and, when it is namespaced and
    /// names no namespace, sets `namespace`. Returns the kind and the namespace used.
    pub(crate) async fn namespaced(
        &self,
        object: &mut Value,
        namespace: &str,
    ) -> Result<(Kind, Option<String>), String> {
        let api_version = object["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind_name = object["kind"].as_str().unwrap_or_default().to_string();
        if !matches!(object.get("metadata"), None | Some(Value::Object(_)) | Some(Value::Null)) {
            return Err(format!("{}: metadata is not a map", go_gvk(&api_version, &kind_name)));
        }
        let kind = self.resolve(&api_version, &kind_name).await?;
        if let Some(ns) = object["metadata"]["namespace"].as_str().filter(|n| !n.is_empty()) {
            return Ok((kind, Some(ns.to_string())));
        }
        if !kind.namespaced {
            return Ok((kind, None));
        }
        match &object["metadata"] {
            Value::Object(_) => {}
            Value::Null => object["metadata"] = Value::Object(serde_json::Map::new()),
            _ => return Err(format!("{}: metadata is not a map", go_gvk(&api_version, &kind_name))),
        }
        object["metadata"]["namespace"] = Value::String(namespace.to_string());
        Ok((kind, Some(namespace.to_string())))
    }

    /// The API for a kind in a namespace (or cluster-wide).
    pub(crate) fn api(&self, kind: &Kind, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace.filter(|_| kind.namespaced) {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &kind.resource),
            None => Api::all_with(self.client.clone(), &kind.resource),
        }
    }

    /// The object, or `None` when it does not exist.
    pub(crate) async fn get(&self, kind: &Kind, namespace: Option<&str>, name: &str) -> Result<Option<Value>, String> {
        let found = self.api(kind, namespace).get_opt(name).await.map_err(|e| short(&e))?;
        found.map(|o| to_value(&o)).transpose()
    }

    /// The objects of a kind in a namespace (everywhere when `None`) with these labels.
    pub(crate) async fn list(
        &self,
        kind: &Kind,
        namespace: Option<&str>,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<Value>, String> {
        let selector: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut params = ListParams::default();
        if !selector.is_empty() {
            params = params.labels(&selector.join(","));
        }
        let list = self.api(kind, namespace).list(&params).await.map_err(|e| short(&e))?;
        list.items
            .iter()
            .map(|o| {
                let mut value = to_value(o)?;
                // Items of a list carry no type; kuttl's unstructured list sets it.
                value["apiVersion"] = Value::String(kind.resource.api_version.clone());
                value["kind"] = Value::String(kind.resource.kind.clone());
                Ok(value)
            })
            .collect()
    }

    /// kuttl's `CreateOrUpdate`: creates the object, or when it exists sends it as a
    /// JSON merge patch carrying the current resourceVersion (retried on a conflict).
    /// Returns whether it was updated.
    pub(crate) async fn create_or_update(
        &self,
        kind: &Kind,
        namespace: Option<&str>,
        object: &Value,
    ) -> Result<bool, String> {
        let api = self.api(kind, namespace);
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let result = match api
                .get_opt(name)
                .await
                .map_err(|e| format!("failed to check object's existence: {}", short(&e)))?
            {
                Some(actual) => {
                    let mut patch = object.clone();
                    patch["metadata"]["resourceVersion"] =
                        Value::String(actual.metadata.resource_version.clone().unwrap_or_default());
                    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(|_| true)
                        .map_err(|e| (is_conflict(&e), format!("failed to patch object: {}", short(&e))))
                }
                None => {
                    let dynamic: DynamicObject = serde_json::from_value(object.clone()).map_err(|e| e.to_string())?;
                    api.create(&PostParams::default(), &dynamic)
                        .await
                        .map(|_| false)
                        .map_err(|e| (is_conflict(&e), format!("failed to create object: {}", short(&e))))
                }
            };
            match result {
                Ok(updated) => return Ok(updated),
                Err((true, _)) if attempts < 5 => continue,
                Err((_, message)) => return Err(message),
            }
        }
    }

    /// Deletes an object; `Ok(false)` when it was already gone.
    pub(crate) async fn delete(&self, kind: &Kind, namespace: Option<&str>, name: &str) -> Result<bool, String> {
        match self.api(kind, namespace).delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
            Err(e) => Err(short(&e)),
        }
    }
}

/// A conflict (409) that kuttl retries: a stale resourceVersion, or an object created
/// between the check and the create.
fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// A group/version/kind as Go prints `schema.GroupVersionKind`: `apps/v1, Kind=Deployment`.
pub(crate) fn go_gvk(api_version: &str, kind: &str) -> String {
    let with_group = if api_version.contains('/') { api_version.to_string() } else { format!("/{api_version}") };
    format!("{with_group}, Kind={kind}")
}

fn to_value(object: &DynamicObject) -> Result<Value, String> {
    serde_json::to_value(object).map_err(|e| e.to_string())
}

/// A client error as the server words it (its Status message), else as kube says it.
pub(crate) fn short(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}
