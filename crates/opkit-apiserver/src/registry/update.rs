//! Update (PUT) and patch (JSON, merge, strategic, apply): each reads the object,
//! computes the new body and hands it to the shared commit step, retrying when the
//! object changed meanwhile. A server-side apply of a missing object creates it.

use serde_json::{Value, json};

use super::commit::{CommitError, UpdateRequest, field_manager, list_semantics};
use super::meta::{meta_mut, meta_str, now_rfc3339};
use super::{Outcome, PatchType, Registry, Subresource, Target, WriteOptions, parse_stored};
use crate::error::{ApiError, ApiResult, Cause};
use crate::patch::{self, ListSemantics, PatchError};
use crate::schema::{FieldError, FieldErrorReason};
use crate::storage::Entry;

/// A patch request.
struct PatchRequest<'a> {
    kind: PatchType,
    body: &'a Value,
    sub: Subresource,
    opts: &'a WriteOptions,
}

fn patch_error(e: PatchError, target: &Target, name: &str) -> ApiError {
    match e {
        PatchError::Conflicts(c) => {
            let causes = c
                .iter()
                .map(|x| Cause {
                    reason: "FieldManagerConflict".into(),
                    message: format!("conflict with \"{}\" using {}", x.manager, x.api_version),
                    field: x.field.clone(),
                })
                .collect();
            ApiError::conflict_msg(&target.info.group, &target.info.resource, name, patch::conflict_message(&c), causes)
        }
        other => {
            if other.status_code() == 400 {
                ApiError::bad_request(other.to_string())
            } else {
                let mut e = ApiError::invalid(&target.info.group, &target.info.kind, name, &[]);
                e.message = other.to_string();
                e
            }
        }
    }
}

/// Refuses a patch result that is not an object (a JSON patch may replace the whole
/// document, path "", with a number, string, array or null). kube-apiserver answers 422
/// Invalid on the field `patch` when the patched document does not decode as an object.
fn require_object(target: &Target, name: &str, patched: &Value) -> ApiResult<()> {
    let kind = match patched {
        Value::Object(_) => return Ok(()),
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
    };
    let shown = patched.to_string();
    let shown = if shown.len() > 100 { format!("{}...", &shown[..shown.floor_char_boundary(100)]) } else { shown };
    Err(ApiError::invalid(
        &target.info.group,
        &target.info.kind,
        name,
        &[FieldError {
            field: "patch".into(),
            reason: FieldErrorReason::Invalid,
            message: format!(
                "Invalid value: {shown:?}: the patched object is {kind}, not an object: cannot unmarshal into {}",
                target.info.kind
            ),
        }],
    ))
}

/// Refuses a body naming another object than the URL.
fn check_name(body: &Value, name: &str) -> ApiResult<()> {
    match meta_str(body, "name") {
        Some(n) if !n.is_empty() && n != name => Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        ))),
        _ => Ok(()),
    }
}

/// Refuses patches the resource or request cannot take: strategic merge on a custom
/// resource, apply without a field manager.
fn check_patch_request(target: &Target, req: &PatchRequest<'_>) -> ApiResult<()> {
    if req.kind == PatchType::Strategic && !target.info.builtin {
        return Err(ApiError::unsupported_media_type("application/strategic-merge-patch+json"));
    }
    if req.kind == PatchType::Apply && req.opts.field_manager.is_empty() {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "PatchOptions",
            "",
            &[FieldError {
                field: "fieldManager".into(),
                reason: FieldErrorReason::Required,
                message: "Required value: is required for apply patch".into(),
            }],
        ));
    }
    Ok(())
}

impl Registry {
    /// Replaces an object (PUT), on the object or its status.
    pub async fn update(
        &self,
        target: &Target,
        name: &str,
        mut body: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> ApiResult<Outcome> {
        if !body.is_object() {
            return Err(ApiError::bad_request("the request body must be a JSON or YAML object"));
        }
        check_name(&body, name)?;
        meta_mut(&mut body).insert("name".into(), json!(name));
        let precondition = meta_str(&body, "resourceVersion").filter(|s| !s.is_empty()).map(String::from);
        loop {
            let (old, entry) = self.current(target, name).await?;
            if let Some(p) = &precondition
                && *p != entry.rev.to_string()
            {
                return Err(ApiError::conflict(&target.info.group, &target.info.resource, name));
            }
            match self.commit(target, name, (old, entry.rev), body.clone(), sub, opts).await {
                Ok(o) => return Ok(o),
                Err(CommitError::Retry) if precondition.is_none() => continue,
                Err(CommitError::Retry) => {
                    return Err(ApiError::conflict(&target.info.group, &target.info.resource, name));
                }
                Err(CommitError::Api(e)) => return Err(e),
            }
        }
    }

    /// The `finalize` subresource: replaces the object's `spec.finalizers` (a
    /// resourceVersion in `body` is a precondition).
    pub async fn finalize(&self, target: &Target, name: &str, body: &Value, opts: &WriteOptions) -> ApiResult<Outcome> {
        let (stored, _) = self.current(target, name).await?;
        let mut obj = self.at_requested_version(target, stored).await?;
        obj["spec"]["finalizers"] = body["spec"]["finalizers"].clone();
        if let Some(rv) = body["metadata"]["resourceVersion"].as_str() {
            obj["metadata"]["resourceVersion"] = json!(rv);
        }
        self.update(target, name, obj, Subresource::Main, opts).await
    }

    /// Applies a patch to an object or its status.
    pub async fn patch(
        &self,
        target: &Target,
        name: &str,
        kind: PatchType,
        patch_body: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> ApiResult<Outcome> {
        let req = PatchRequest { kind, body: &patch_body, sub, opts };
        check_patch_request(target, &req)?;
        let lists = list_semantics(target);
        loop {
            let current = match self.current(target, name).await {
                Ok(c) => Some(c),
                Err(e) if e.code == 404 && kind == PatchType::Apply && sub == Subresource::Main => None,
                Err(e) => return Err(e),
            };
            let live = match &current {
                Some((stored, _)) => Some(self.at_requested_version(target, stored.clone()).await?),
                None => None,
            };
            let patched = self.patched(target, name, &req, live.as_ref(), &lists)?;
            let Some((old, entry)) = current else {
                return self.create_by_apply(target, name, patched, opts).await;
            };
            if meta_str(&patched, "resourceVersion").is_some_and(|rv| !rv.is_empty() && *rv != entry.rev.to_string()) {
                return Err(ApiError::conflict(&target.info.group, &target.info.resource, name));
            }
            let mut body = patched;
            meta_mut(&mut body).insert("resourceVersion".into(), json!(entry.rev.to_string()));
            let tracked = kind != PatchType::Apply;
            let update = UpdateRequest { target, name, sub, opts };
            match self.commit_inner(&update, (old, entry.rev), body, tracked).await {
                Ok(o) => return Ok(o),
                Err(CommitError::Retry) => continue,
                Err(CommitError::Api(e)) => return Err(e),
            }
        }
    }

    /// The object `live` becomes with the patch applied (None: apply creates it).
    fn patched(
        &self,
        target: &Target,
        name: &str,
        req: &PatchRequest<'_>,
        live: Option<&Value>,
        lists: &ListSemantics,
    ) -> ApiResult<Value> {
        let patched = match (req.kind, live) {
            (PatchType::Json, Some(l)) => patch::json_patch(l, req.body),
            (PatchType::Merge, Some(l)) => patch::merge_patch(l, req.body),
            (PatchType::Strategic, Some(l)) => patch::strategic_merge_patch(l, req.body, lists),
            (PatchType::Apply, l) => {
                if let Some(n) = meta_str(req.body, "name")
                    && n != name
                {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({n}) does not match the name on the URL ({name})"
                    )));
                }
                let now = now_rfc3339();
                let api_version = target.api_version();
                let fm = field_manager(req.opts, req.sub, &now, &api_version);
                patch::server_side_apply(l, req.body, &fm, req.opts.force, lists)
            }
            (_, None) => return Err(ApiError::not_found(&target.info.group, &target.info.resource, name)),
        };
        let patched = patched.map_err(|e| patch_error(e, target, name))?;
        require_object(target, name, &patched)?;
        Ok(patched)
    }

    /// Creates the object a server-side apply describes, keeping the Apply ownership
    /// computed for it.
    async fn create_by_apply(
        &self,
        target: &Target,
        name: &str,
        mut obj: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Outcome> {
        meta_mut(&mut obj).insert("name".into(), json!(name));
        let fields = obj["metadata"]["managedFields"].clone();
        let fields = (!fields.is_null()).then_some(fields);
        self.create_with(target, obj, opts, fields).await
    }

    /// Reads the current object and its entry, or 404.
    pub(crate) async fn current(&self, target: &Target, name: &str) -> ApiResult<(Value, Entry)> {
        match self.store.get(&target.info.id, &target.key(name)).await? {
            Some(e) => Ok((parse_stored(&e.value)?, e)),
            None => Err(ApiError::not_found(&target.info.group, &target.info.resource, name)),
        }
    }
}
