//! The cluster a release's objects are written to: each object's API (its kind mapped to
//! a resource, in the release's namespace unless it names one or is cluster-scoped),
//! written as Helm writes it (labelled, annotated with its release, owned by the custom
//! resource) by server-side apply or, for `--force`, by replacing it, and deleted unless
//! Helm's `resource-policy: keep` keeps it.

use kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::discovery::Scope;
use kube::{Client, ResourceExt};
use opkit::discovery::RestMapper;
use serde_json::{Value, json};

use crate::OperatorError;
use crate::manifest::{RenderedObject, split};

/// The field manager the operator applies objects with.
pub(crate) const FIELD_MANAGER: &str = "helm-operator";

/// How an object of a release is written to the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApplyMode {
    /// Server-side apply (force) by [`FIELD_MANAGER`]: fields other managers own are
    /// kept, as Helm's three-way patch keeps them.
    Patch,
    /// `helm upgrade --force` / `helm rollback --force`: the object is replaced (PUT) with
    /// the rendered one, created if missing; whatever the manifest does not say is gone.
    Replace,
}

impl ApplyMode {
    /// [`ApplyMode::Replace`] when `force`, else [`ApplyMode::Patch`].
    pub(crate) fn forced_if(force: bool) -> ApplyMode {
        if force { ApplyMode::Replace } else { ApplyMode::Patch }
    }
}

/// The API server as one release in `namespace` sees it.
#[derive(Clone, Copy)]
pub(super) struct Cluster<'a> {
    /// The client requests go through.
    pub client: &'a Client,
    /// Maps each object's kind to its resource.
    pub mapper: &'a RestMapper,
    /// The release's namespace: that of objects that name none.
    pub namespace: &'a str,
}

impl Cluster<'_> {
    /// The API of `object`'s kind, in its namespace (the release's unless it names one),
    /// and whether the kind is namespaced.
    pub(super) async fn api_for(&self, object: &RenderedObject) -> Result<(Api<DynamicObject>, bool), OperatorError> {
        let (resource, caps) = self.mapper.rest_mapping(&object.gvk()).await?;
        Ok(match caps.scope {
            Scope::Namespaced => (
                Api::namespaced_with(self.client.clone(), object.namespace().unwrap_or(self.namespace), &resource),
                true,
            ),
            Scope::Cluster => (Api::all_with(self.client.clone(), &resource), false),
        })
    }

    /// Writes one object as `mode` says (only as a dry run when `dry_run`), labelled and
    /// annotated as Helm does, owned by the custom resource when it is namespaced in the
    /// same namespace.
    pub(super) async fn apply(
        &self,
        owner: &DynamicObject,
        object: &RenderedObject,
        mode: ApplyMode,
        dry_run: bool,
    ) -> Result<(), OperatorError> {
        let (api, namespaced) = self.api_for(object).await?;
        let body = self.helm_object(owner, object, namespaced)?;
        let written = match mode {
            ApplyMode::Patch => {
                let mut params = PatchParams::apply(FIELD_MANAGER).force();
                params.dry_run = dry_run;
                api.patch(object.name(), &params, &Patch::Apply(&body)).await.map(|_| ())
            }
            ApplyMode::Replace => replace(&api, object.name(), body, dry_run).await,
        };
        match written {
            Ok(()) => Ok(()),
            Err(kube::Error::Api(status)) => Err(OperatorError::Apply {
                kind: object.gvk().kind,
                name: object.name().to_string(),
                message: status.message.clone(),
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// `object` as Helm writes it: in the release's namespace when it is `namespaced` and
    /// names none, labelled `managed-by: Helm`, annotated with its release and owned by
    /// `owner` when in the same namespace.
    fn helm_object(
        &self,
        owner: &DynamicObject,
        object: &RenderedObject,
        namespaced: bool,
    ) -> Result<Value, OperatorError> {
        let namespace = self.namespace;
        let mut body = object.object.clone();
        let meta = body
            .as_object_mut()
            .map(|o| o.entry("metadata").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut)
            .ok_or_else(|| OperatorError::Manifest(format!("{}: metadata is not a map", object.source)))?;
        if namespaced && object.namespace().is_none() {
            meta.insert("namespace".into(), json!(namespace));
        }
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert("app.kubernetes.io/managed-by".into(), json!("Helm"));
        }
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert("meta.helm.sh/release-name".into(), json!(owner.name_any()));
            annotations.insert("meta.helm.sh/release-namespace".into(), json!(namespace));
        }
        if namespaced && object.namespace().is_none_or(|ns| ns == namespace) {
            let types = owner.types.clone().unwrap_or_default();
            meta.insert(
                "ownerReferences".into(),
                json!([{
                    "apiVersion": types.api_version,
                    "kind": types.kind,
                    "name": owner.name_any(),
                    "uid": owner.uid().unwrap_or_default(),
                    "controller": true,
                    "blockOwnerDeletion": true,
                }]),
            );
        }
        Ok(body)
    }

    /// Deletes one object of a release (background propagation) unless it is annotated
    /// `helm.sh/resource-policy: keep`; whether it was deleted (or already gone).
    pub(super) async fn delete(&self, object: &RenderedObject) -> Result<bool, OperatorError> {
        if keeps(object) {
            return Ok(false);
        }
        let (api, _) = self.api_for(object).await?;
        match api.delete(object.name(), &DeleteParams::background()).await {
            Ok(_) => Ok(true),
            Err(e) if opkit::status::is_not_found(&e) => Ok(true),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes the objects of `old_manifest` that `objects` no longer has, as `helm
    /// upgrade` and `helm rollback` do.
    pub(super) async fn delete_dropped(
        &self,
        old_manifest: &str,
        objects: &[RenderedObject],
    ) -> Result<(), OperatorError> {
        let kept: Vec<(GroupVersionKind, String)> =
            objects.iter().filter(|o| !o.is_hook()).map(|o| (o.gvk(), o.name().to_string())).collect();
        for object in split(old_manifest)?.iter().filter(|o| !kept.contains(&(o.gvk(), o.name().to_string()))) {
            self.delete(object).await?;
        }
        Ok(())
    }
}

/// Whether `object` is annotated `helm.sh/resource-policy: keep` (Helm leaves it on
/// uninstall).
pub(super) fn keeps(object: &RenderedObject) -> bool {
    object.object.pointer("/metadata/annotations/helm.sh~1resource-policy").and_then(Value::as_str) == Some("keep")
}

/// The API server's message of a failed request, or the error's text.
pub(super) fn status_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message.clone(),
        e => e.to_string(),
    }
}

/// Helm's `--force` update of one object: replaced (PUT, at the live object's
/// resourceVersion) by `body`, or created when it does not exist.
async fn replace(api: &Api<DynamicObject>, name: &str, mut body: Value, dry_run: bool) -> Result<(), kube::Error> {
    let post = PostParams { dry_run, field_manager: Some(FIELD_MANAGER.to_string()) };
    let Some(live) = api.get_opt(name).await? else {
        let body: DynamicObject = serde_json::from_value(body).map_err(kube::Error::SerdeError)?;
        return api.create(&post, &body).await.map(|_| ());
    };
    if let (Some(meta), Some(version)) =
        (body.get_mut("metadata").and_then(Value::as_object_mut), live.resource_version())
    {
        meta.insert("resourceVersion".into(), json!(version));
    }
    let body: DynamicObject = serde_json::from_value(body).map_err(kube::Error::SerdeError)?;
    api.replace(name, &post, &body).await.map(|_| ())
}
