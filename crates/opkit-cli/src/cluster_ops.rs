//! Applying and deleting manifests against any cluster through kube-rs: server-side apply
//! with CRDs first (waiting until Established), deletion in reverse order, and watch-based waits
//! (in `wait`) for CRDs and Deployments.

mod wait;

pub use wait::{wait_crds_established, wait_crds_gone, wait_deployment_available, wait_pod_ready};

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;
use opkit::discovery::{MappingError, RestMapper};
use serde_json::Value;

/// How long [`apply`] waits for the CRDs it applied to become Established, and [`delete`] with
/// `wait` waits for objects to disappear.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Identifies one object in progress messages, errors and results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    /// `apiVersion` of the object.
    pub api_version: String,
    /// Kind of the object.
    pub kind: String,
    /// Name of the object.
    pub name: String,
    /// Namespace, for namespaced objects (after defaulting).
    pub namespace: Option<String>,
}

impl ObjectRef {
    /// API group (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
    }

    fn from_value(obj: &Value) -> Option<ObjectRef> {
        let s = |p: &str| obj.pointer(p).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
        Some(ObjectRef {
            api_version: s("/apiVersion")?,
            kind: s("/kind")?,
            name: s("/metadata/name")?,
            namespace: s("/metadata/namespace"),
        })
    }

    fn gvk(&self) -> GroupVersionKind {
        let version = self.api_version.rsplit_once('/').map(|(_, v)| v).unwrap_or(&self.api_version);
        GroupVersionKind::gvk(self.group(), version, &self.kind)
    }
}

/// kubectl's form: `deployment.apps/foo`, `configmap/bar` (namespace not shown).
impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.kind.to_lowercase();
        match self.group() {
            "" => write!(f, "{kind}/{}", self.name),
            g => write!(f, "{kind}.{g}/{}", self.name),
        }
    }
}

/// Errors from applying, deleting or waiting.
#[derive(Debug, thiserror::Error)]
pub enum ClusterOpsError {
    /// The API server rejected a request; carries its Status.
    #[error("{verb} {object}: {code} {reason}: {message}")]
    Api {
        /// `apply`, `delete`, ...
        verb: &'static str,
        /// The object.
        object: Box<ObjectRef>,
        /// HTTP status code.
        code: u16,
        /// Status reason (`Invalid`, `Forbidden`, ...).
        reason: String,
        /// Status message.
        message: String,
    },
    /// The request failed without an API Status (transport, decoding, ...).
    #[error("{verb} {object}: {message}")]
    Request {
        /// `apply`, `delete`, ...
        verb: &'static str,
        /// The object.
        object: Box<ObjectRef>,
        /// What failed.
        message: String,
    },
    /// The cluster does not serve the object's kind.
    #[error("{verb} {object}: no matches for kind {:?} in version {:?}: {message}", object.kind, object.api_version)]
    UnknownKind {
        /// `apply`, `delete`, ...
        verb: &'static str,
        /// The object.
        object: Box<ObjectRef>,
        /// Discovery's answer.
        message: String,
    },
    /// An object in the input lacks apiVersion, kind or metadata.name.
    #[error("object #{index} in the input has no apiVersion, kind or metadata.name")]
    InvalidObject {
        /// 0-based position in the input.
        index: usize,
    },
    /// A wait did not finish in time.
    #[error("timed out after {}s waiting for {what}", timeout.as_secs())]
    Timeout {
        /// What was being waited for.
        what: String,
        /// The limit.
        timeout: Duration,
    },
    /// The watch behind a wait failed.
    #[error("waiting for {what}: {message}")]
    Wait {
        /// What was being waited for.
        what: String,
        /// The watch error.
        message: String,
    },
}

impl ClusterOpsError {
    fn from_kube(verb: &'static str, object: &ObjectRef, err: kube::Error) -> Self {
        match err {
            kube::Error::Api(status) => ClusterOpsError::Api {
                verb,
                object: Box::new(object.clone()),
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
            },
            other => ClusterOpsError::Request { verb, object: Box::new(object.clone()), message: other.to_string() },
        }
    }
}

fn is_crd(r: &ObjectRef) -> bool {
    r.kind == "CustomResourceDefinition" && r.group() == "apiextensions.k8s.io"
}

/// Resolves object kinds to API resources through a [`RestMapper`], knowing the kinds
/// defined by CRDs in the same stream (so they need no discovery round-trip).
struct Resolver<'a> {
    client: &'a kube::Client,
    mapper: RestMapper,
    /// The kinds of the stream's CRDs, by `(apiVersion, kind)`, with whether each is namespaced.
    stream_kinds: HashMap<(String, String), (ApiResource, bool)>,
}

impl<'a> Resolver<'a> {
    fn new(client: &'a kube::Client) -> Self {
        Resolver { client, mapper: RestMapper::new(client.clone()), stream_kinds: HashMap::new() }
    }

    /// Registers every served version of a CRD object's kind.
    fn learn_crd(&mut self, crd: &Value) {
        let s = |p: &str| crd.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
        let (group, kind, plural) = (s("/spec/group"), s("/spec/names/kind"), s("/spec/names/plural"));
        let namespaced = s("/spec/scope") != "Cluster";
        for v in crd.pointer("/spec/versions").and_then(Value::as_array).into_iter().flatten() {
            let Some(version) = v.get("name").and_then(Value::as_str) else { continue };
            let gvk = GroupVersionKind::gvk(&group, version, &kind);
            let ar = ApiResource::from_gvk_with_plural(&gvk, &plural);
            self.stream_kinds.insert((ar.api_version.clone(), kind.clone()), (ar, namespaced));
        }
    }

    /// `Ok(None)` when the kind is not served.
    async fn resolve(&self, r: &ObjectRef) -> Result<Option<(ApiResource, bool)>, String> {
        if let Some(hit) = self.stream_kinds.get(&(r.api_version.clone(), r.kind.clone())) {
            return Ok(Some(hit.clone()));
        }
        match self.mapper.rest_mapping(&r.gvk()).await {
            Ok((ar, caps)) => Ok(Some((ar, caps.scope == Scope::Namespaced))),
            Err(MappingError::Discovery { source, .. }) => Err(source.to_string()),
            Err(_) => Ok(None),
        }
    }

    async fn api_for(
        &self,
        verb: &'static str,
        r: &mut ObjectRef,
    ) -> Result<Option<Api<DynamicObject>>, ClusterOpsError> {
        let resolved = self.resolve(r).await.map_err(|message| ClusterOpsError::Request {
            verb,
            object: Box::new(r.clone()),
            message,
        })?;
        let Some((ar, namespaced)) = resolved else { return Ok(None) };
        if namespaced {
            let ns = r.namespace.get_or_insert_with(|| self.client.default_namespace().to_string()).clone();
            Ok(Some(Api::namespaced_with(self.client.clone(), &ns, &ar)))
        } else {
            r.namespace = None;
            Ok(Some(Api::all_with(self.client.clone(), &ar)))
        }
    }
}

/// Splits indices into apply phases: CRDs and Namespaces first, then everything else, each in
/// input order.
fn apply_phases(refs: &[ObjectRef]) -> (Vec<usize>, Vec<usize>) {
    let first = |r: &ObjectRef| is_crd(r) || (r.kind == "Namespace" && r.group().is_empty());
    (0..refs.len()).partition(|&i| first(&refs[i]))
}

fn refs_of(objs: &[Value]) -> Result<Vec<ObjectRef>, ClusterOpsError> {
    objs.iter()
        .enumerate()
        .map(|(index, o)| ObjectRef::from_value(o).ok_or(ClusterOpsError::InvalidObject { index }))
        .collect()
}

/// Server-side applies (with force) every object as `field_manager`. CRDs and Namespaces go
/// first; the CRDs are then awaited until Established (up to `timeout`) before the remaining
/// objects, so a stream holding a CRD and objects of its kind works, and so every CRD is
/// Established when this returns. Namespaced
/// objects without a namespace go to the client's default namespace. `progress` gets one line per
/// object (`<ref> serverside-applied`). Returns the applied objects in application order.
pub async fn apply(
    client: &kube::Client,
    objs: &[Value],
    field_manager: &str,
    progress: &dyn Fn(&str),
    timeout: Duration,
) -> Result<Vec<ObjectRef>, ClusterOpsError> {
    let refs = refs_of(objs)?;
    let mut resolver = Resolver::new(client);
    let (early, late) = apply_phases(&refs);
    let params = PatchParams::apply(field_manager).force();
    let mut applied = Vec::with_capacity(objs.len());
    let mut crd_names = Vec::new();
    for (phase, indices) in [early, late].into_iter().enumerate() {
        if phase == 1 && !crd_names.is_empty() {
            wait_crds_established(client, &crd_names, timeout).await?;
        }
        for i in indices {
            let mut r = refs[i].clone();
            let Some(api) = resolver.api_for("apply", &mut r).await? else {
                return Err(ClusterOpsError::UnknownKind {
                    verb: "apply",
                    object: Box::new(r),
                    message: "the server does not serve this kind (is its CRD installed?)".into(),
                });
            };
            let mut body = objs[i].clone();
            if let (Some(ns), Some(meta)) = (&r.namespace, body.get_mut("metadata").and_then(Value::as_object_mut)) {
                meta.insert("namespace".into(), Value::String(ns.clone()));
            }
            api.patch(&r.name, &params, &Patch::Apply(&body))
                .await
                .map_err(|e| ClusterOpsError::from_kube("apply", &r, e))?;
            if is_crd(&r) {
                resolver.learn_crd(&objs[i]);
                crd_names.push(r.name.clone());
            }
            progress(&format!("{r} serverside-applied"));
            applied.push(r);
        }
    }
    Ok(applied)
}

/// Deletes the objects in the reverse of [`apply`]'s order (so CRDs and Namespaces go last) with
/// background propagation. Objects already gone, and
/// objects whose kind is no longer served (their CRD was deleted first), are skipped without
/// error. With `wait`, returns only once every deleted object has disappeared (up to that
/// long each). Returns the objects a delete was issued for.
pub async fn delete(
    client: &kube::Client,
    objs: &[Value],
    progress: &dyn Fn(&str),
    wait: Option<Duration>,
) -> Result<Vec<ObjectRef>, ClusterOpsError> {
    let refs = refs_of(objs)?;
    let resolver = Resolver::new(client);
    let params = DeleteParams::background();
    let mut deleted = Vec::new();
    let mut pending = Vec::new();
    let (early, late) = apply_phases(&refs);
    for i in early.into_iter().chain(late).rev() {
        let mut r = refs[i].clone();
        let Some(api) = resolver.api_for("delete", &mut r).await? else {
            progress(&format!("{r} skipped (kind not served)"));
            continue;
        };
        match api.delete(&r.name, &params).await {
            Ok(_) => {
                progress(&format!("{r} deleted"));
                pending.push((api, r.clone()));
                deleted.push(r);
            }
            Err(kube::Error::Api(s)) if s.is_not_found() => progress(&format!("{r} not found")),
            Err(e) => return Err(ClusterOpsError::from_kube("delete", &r, e)),
        }
    }
    if let Some(timeout) = wait {
        for (api, r) in pending {
            wait::wait_gone(api, &r, timeout).await?;
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn object_ref_display_and_group() {
        let r =
            ObjectRef::from_value(&json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "foo"}}))
                .expect("ref");
        assert_eq!(r.to_string(), "deployment.apps/foo");
        assert_eq!(r.group(), "apps");
        let r = ObjectRef::from_value(
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "n"}}),
        )
        .expect("ref");
        assert_eq!(r.to_string(), "configmap/x");
        assert_eq!(r.namespace.as_deref(), Some("n"));
        assert!(ObjectRef::from_value(&json!({"kind": "ConfigMap", "metadata": {"name": "x"}})).is_none());
        assert!(matches!(refs_of(&[json!({"apiVersion": "v1"})]), Err(ClusterOpsError::InvalidObject { index: 0 })));
    }

    #[test]
    fn api_error_message_names_object_and_status() {
        let object = ObjectRef {
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            name: "memcacheds.cache.example.com".into(),
            namespace: None,
        };
        let e = ClusterOpsError::Api {
            verb: "apply",
            object: Box::new(object),
            code: 422,
            reason: "Invalid".into(),
            message: "spec.names.plural: Required value".into(),
        };
        assert_eq!(
            e.to_string(),
            "apply customresourcedefinition.apiextensions.k8s.io/memcacheds.cache.example.com: 422 Invalid: spec.names.plural: Required value"
        );
        let t = ClusterOpsError::Timeout {
            what: "deployment ns/x to become available".into(),
            timeout: Duration::from_secs(5),
        };
        assert_eq!(t.to_string(), "timed out after 5s waiting for deployment ns/x to become available");
    }
}
