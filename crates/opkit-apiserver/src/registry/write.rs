//! Writes: create, update, patch (JSON, merge, strategic, apply) and the shared commit
//! step that enforces optimistic concurrency, generation and status-subresource rules,
//! finalizers and field management.

use bytes::Bytes;
use serde_json::{Value, json};

use super::meta::{finalizers, meta_mut, meta_str, now_rfc3339, random_suffix, same_object, spec_part};
use super::{Outcome, PatchType, Registry, Subresource, Target, WriteOptions, at_version, parse_stored};
use crate::error::{ApiError, ApiResult, Cause};
use crate::patch::{self, FieldManager, ListSemantics, PatchError};
use crate::schema::{FieldError, FieldErrorReason};
use crate::storage::{Entry, Revision, Write};

/// Why a commit did not happen.
pub(super) enum CommitError {
    /// The object changed since it was read: read again and retry.
    Retry,
    /// A client-facing error.
    Api(ApiError),
}

impl From<ApiError> for CommitError {
    fn from(e: ApiError) -> Self {
        CommitError::Api(e)
    }
}

pub(super) fn serialize_with_rev(obj: &mut Value, rev: Revision) -> Bytes {
    meta_mut(obj).insert("resourceVersion".into(), Value::String(rev.to_string()));
    Bytes::from(serde_json::to_vec(obj).unwrap_or_default())
}

pub(super) fn list_semantics(target: &Target) -> ListSemantics {
    if target.info.builtin {
        ListSemantics::for_builtin(&target.info.group, &target.info.kind)
    } else {
        match target.version_info().ok().and_then(|v| v.raw_schema.as_ref()) {
            Some(s) => ListSemantics::from_crd_schema(s),
            None => ListSemantics::from_crd_schema(&Value::Null),
        }
    }
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

impl Registry {
    fn field_manager<'a>(
        &self,
        target: &'a Target,
        opts: &'a WriteOptions,
        sub: Subresource,
        time: &'a str,
        api_version: &'a str,
    ) -> FieldManager<'a> {
        let _ = target;
        FieldManager {
            manager: &opts.field_manager,
            api_version,
            subresource: (sub == Subresource::Status).then_some("status"),
            time,
        }
    }

    async fn namespace_open(&self, target: &Target) -> ApiResult<()> {
        if !target.info.namespaced {
            return Ok(());
        }
        let ns = target.namespace.clone().unwrap_or_default();
        let id = crate::storage::ResourceId::new("", "namespaces");
        match self.store.get(&id, &(String::new(), ns.clone())).await? {
            None => Err(ApiError::not_found("", "namespaces", &ns)),
            Some(e) => {
                let v = parse_stored(&e.value)?;
                if v["metadata"]["deletionTimestamp"].is_string() {
                    Err(ApiError::forbidden(
                        &target.info.group,
                        &target.info.resource,
                        "",
                        format!("unable to create new content in namespace {ns} because it is being terminated"),
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Creates an object.
    pub async fn create(&self, target: &Target, obj: Value, opts: &WriteOptions) -> ApiResult<Outcome> {
        self.create_with(target, obj, opts, None).await
    }

    /// Creates an object; `applied_fields` are the managedFields of a server-side apply
    /// that creates it (recorded as an `Apply` operation instead of tracking an update).
    async fn create_with(
        &self,
        target: &Target,
        mut obj: Value,
        opts: &WriteOptions,
        applied_fields: Option<Value>,
    ) -> ApiResult<Outcome> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the request body must be a JSON or YAML object"));
        }
        let info = target.info.clone();
        let m = meta_mut(&mut obj);
        if info.namespaced {
            let want = target.namespace.clone().unwrap_or_default();
            match m.get("namespace").and_then(Value::as_str) {
                Some(ns) if !ns.is_empty() && ns != want => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    m.insert("namespace".into(), json!(want));
                }
            }
        } else {
            m.remove("namespace");
        }
        let generate = m.get("generateName").and_then(Value::as_str).map(String::from).filter(|s| !s.is_empty());
        let given = m.get("name").and_then(Value::as_str).map(String::from).filter(|s| !s.is_empty());
        if given.is_none() && generate.is_none() {
            return Err(ApiError::invalid(
                &info.group,
                &info.kind,
                "",
                &[FieldError {
                    field: "metadata.name".into(),
                    reason: FieldErrorReason::Required,
                    message: "Required value: name or generateName is required".into(),
                }],
            ));
        }
        self.namespace_open(target).await?;
        for attempt in 0..8 {
            let mut obj = obj.clone();
            let name = match (&given, &generate) {
                (Some(n), _) => n.clone(),
                (None, Some(g)) => format!("{g}{}", random_suffix()),
                (None, None) => unreachable!("checked above"),
            };
            let now = now_rfc3339();
            {
                let m = meta_mut(&mut obj);
                m.insert("name".into(), json!(name));
                m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
                m.insert("creationTimestamp".into(), json!(now));
                for f in ["resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"] {
                    m.remove(f);
                }
                if info.generation {
                    m.insert("generation".into(), json!(1));
                } else {
                    m.remove("generation");
                }
            }
            let mut warnings = self.admit(target, &mut obj, None, opts)?;
            self.prepare_create(target, &mut obj, &now)?;
            let api_version = target.api_version();
            let fm = self.field_manager(target, opts, Subresource::Main, &now, &api_version);
            match &applied_fields {
                Some(fields) => {
                    meta_mut(&mut obj).insert("managedFields".into(), fields.clone());
                }
                None => {
                    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove("managedFields");
                    }
                    patch::track_update(None, &mut obj, &fm, &list_semantics(target));
                }
            }
            let hook = self.before_commit(target, &mut obj, None, &now)?;
            if opts.dry_run {
                return Ok(Outcome { object: at_version(obj, target), code: 201, warnings });
            }
            let key = target.key(&name);
            let result = self
                .store
                .write(&info.id, &key, |cur, rev| {
                    if cur.is_some() {
                        return Err(());
                    }
                    {
                        super::convert::to_storage(target, &mut obj);
                        Ok(Write::Put(serialize_with_rev(&mut obj, rev)))
                    }
                })
                .await?;
            match result {
                Ok(w) => {
                    let stored = parse_stored(&w.value)?;
                    self.after_commit(target, hook, &stored);
                    warnings.dedup();
                    return Ok(Outcome { object: at_version(stored, target), code: 201, warnings });
                }
                Err(()) if given.is_none() && attempt < 7 => continue,
                Err(()) => {
                    return Err(ApiError::already_exists(&info.group, &info.resource, &name));
                }
            }
        }
        Err(ApiError::already_exists(&info.group, &info.resource, given.as_deref().unwrap_or_default()))
    }

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
        match meta_str(&body, "name") {
            Some(n) if !n.is_empty() && n != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            _ => {
                meta_mut(&mut body).insert("name".into(), json!(name));
            }
        }
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
        if kind == PatchType::Strategic && !target.info.builtin {
            return Err(ApiError::unsupported_media_type("application/strategic-merge-patch+json"));
        }
        if kind == PatchType::Apply && opts.field_manager.is_empty() {
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
        let lists = list_semantics(target);
        loop {
            let current = match self.current(target, name).await {
                Ok(c) => Some(c),
                Err(e) if e.code == 404 && kind == PatchType::Apply && sub == Subresource::Main => None,
                Err(e) => return Err(e),
            };
            let live = current.as_ref().map(|(v, _)| at_version(v.clone(), target));
            let now = now_rfc3339();
            let api_version = target.api_version();
            let patched = match (kind, &live) {
                (PatchType::Json, Some(l)) => patch::json_patch(l, &patch_body),
                (PatchType::Merge, Some(l)) => patch::merge_patch(l, &patch_body),
                (PatchType::Strategic, Some(l)) => patch::strategic_merge_patch(l, &patch_body, &lists),
                (PatchType::Apply, l) => {
                    if let Some(n) = meta_str(&patch_body, "name")
                        && n != name
                    {
                        return Err(ApiError::bad_request(format!(
                            "the name of the object ({n}) does not match the name on the URL ({name})"
                        )));
                    }
                    let fm = self.field_manager(target, opts, sub, &now, &api_version);
                    patch::server_side_apply(l.as_ref(), &patch_body, &fm, opts.force, &lists)
                }
                (_, None) => return Err(ApiError::not_found(&target.info.group, &target.info.resource, name)),
            }
            .map_err(|e| patch_error(e, target, name))?;
            let Some((old, entry)) = current else {
                let mut obj = patched;
                meta_mut(&mut obj).insert("name".into(), json!(name));
                // Creation through apply keeps the Apply ownership computed above.
                let fields = obj["metadata"]["managedFields"].clone();
                let fields = (!fields.is_null()).then_some(fields);
                return self.create_with(target, obj, opts, fields).await;
            };
            let explicit_rv = meta_str(&patched, "resourceVersion")
                .filter(|rv| !rv.is_empty() && *rv != entry.rev.to_string())
                .is_some();
            if explicit_rv {
                return Err(ApiError::conflict(&target.info.group, &target.info.resource, name));
            }
            let mut body = patched;
            meta_mut(&mut body).insert("resourceVersion".into(), json!(entry.rev.to_string()));
            let opts = WriteOptions { field_manager: opts.field_manager.clone(), ..opts.clone() };
            let tracked = kind != PatchType::Apply;
            match self.commit_inner(target, name, (old, entry.rev), body, sub, &opts, tracked).await {
                Ok(o) => return Ok(o),
                Err(CommitError::Retry) => continue,
                Err(CommitError::Api(e)) => return Err(e),
            }
        }
    }

    /// Reads the current object and its entry, or 404.
    pub(super) async fn current(&self, target: &Target, name: &str) -> ApiResult<(Value, Entry)> {
        match self.store.get(&target.info.id, &target.key(name)).await? {
            Some(e) => Ok((parse_stored(&e.value)?, e)),
            None => Err(ApiError::not_found(&target.info.group, &target.info.resource, name)),
        }
    }

    pub(super) async fn commit(
        &self,
        target: &Target,
        name: &str,
        old: (Value, Revision),
        body: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<Outcome, CommitError> {
        self.commit_inner(target, name, old, body, sub, opts, true).await
    }

    /// The shared update step: merges server-owned fields, validates, tracks fields and
    /// writes if the object is still at `old`'s revision.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn commit_inner(
        &self,
        target: &Target,
        name: &str,
        (old, old_rev): (Value, Revision),
        body: Value,
        sub: Subresource,
        opts: &WriteOptions,
        track: bool,
    ) -> Result<Outcome, CommitError> {
        let info = target.info.clone();
        let version = target.version_info()?.clone();
        let old_at = at_version(old.clone(), target);
        let mut new = match sub {
            Subresource::Status => {
                let mut n = old_at.clone();
                n["status"] = body["status"].clone();
                if let (Some(mf), Some(m)) =
                    (body["metadata"]["managedFields"].as_array(), n["metadata"].as_object_mut())
                {
                    m.insert("managedFields".into(), Value::Array(mf.clone()));
                }
                n
            }
            Subresource::Main => {
                let mut n = body;
                if version.status {
                    match old_at.get("status") {
                        Some(s) => n["status"] = s.clone(),
                        None => {
                            if let Some(o) = n.as_object_mut() {
                                o.remove("status");
                            }
                        }
                    }
                }
                n
            }
        };
        {
            let old_meta = &old["metadata"];
            let m = meta_mut(&mut new);
            for f in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "namespace",
                "generation",
            ] {
                match old_meta.get(f) {
                    Some(v) => {
                        m.insert(f.into(), v.clone());
                    }
                    None => {
                        m.remove(f);
                    }
                }
            }
            m.insert("name".into(), json!(name));
        }
        let mut warnings =
            if sub == Subresource::Main { self.admit(target, &mut new, Some(&old_at), opts)? } else { Vec::new() };
        if sub == Subresource::Status
            && !info.builtin
            && let Some(schema) = &version.schema
        {
            let errs = schema.validate(&new, Some(&old_at));
            if !errs.is_empty() {
                return Err(ApiError::invalid(&info.group, &info.kind, name, &errs).into());
            }
        }
        if info.generation {
            let changed = if version.status {
                spec_part(&new) != spec_part(&old_at)
            } else {
                let strip = |v: &Value| {
                    let mut v = v.clone();
                    if let Some(o) = v.as_object_mut() {
                        o.remove("metadata");
                        o.remove("apiVersion");
                        o.remove("kind");
                    }
                    v
                };
                strip(&new) != strip(&old_at)
            };
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
            meta_mut(&mut new).insert("generation".into(), json!(if changed { generation + 1 } else { generation }));
        }
        let deleting = old["metadata"]["deletionTimestamp"].is_string();
        if deleting {
            let before = finalizers(&old);
            let added: Vec<String> = finalizers(&new).into_iter().filter(|f| !before.contains(f)).collect();
            if !added.is_empty() {
                return Err(ApiError::invalid(
                    &info.group,
                    &info.kind,
                    name,
                    &[FieldError {
                        field: "metadata.finalizers".into(),
                        reason: FieldErrorReason::Forbidden,
                        message: format!("Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"),
                    }],
                )
                .into());
            }
        }
        let now = now_rfc3339();
        if track {
            let api_version = target.api_version();
            let fm = self.field_manager(target, opts, sub, &now, &api_version);
            patch::track_update(Some(&old_at), &mut new, &fm, &list_semantics(target));
        }
        let hook = self.before_commit(target, &mut new, Some(&old_at), &now)?;
        let finished = deleting && self.ready_to_remove(target, &new);
        if same_object(&new, &old_at) && !finished {
            return Ok(Outcome { object: old_at, code: 200, warnings });
        }
        if opts.dry_run {
            return Ok(Outcome { object: new, code: 200, warnings });
        }
        let result = self
            .store
            .write(&info.id, &target.key(name), |cur, rev| match cur {
                Some(c) if c.rev == old_rev => {
                    super::convert::to_storage(target, &mut new);
                    let bytes = serialize_with_rev(&mut new, rev);
                    Ok(if finished { Write::Delete(bytes) } else { Write::Put(bytes) })
                }
                _ => Err(()),
            })
            .await
            .map_err(ApiError::from)?;
        match result {
            Ok(w) => {
                let stored = parse_stored(&w.value).map_err(CommitError::Api)?;
                if finished {
                    self.after_remove(target, &stored);
                } else {
                    self.after_commit(target, hook, &stored);
                }
                warnings.dedup();
                Ok(Outcome { object: at_version(stored, target), code: 200, warnings })
            }
            Err(()) => Err(CommitError::Retry),
        }
    }

    /// Whether an object being deleted has nothing left holding it.
    pub(super) fn ready_to_remove(&self, target: &Target, obj: &Value) -> bool {
        if !finalizers(obj).is_empty() {
            return false;
        }
        if target.info.group.is_empty() && target.info.resource == "namespaces" {
            return obj["spec"]["finalizers"].as_array().is_none_or(|a| a.is_empty());
        }
        if target.info.group.is_empty() && target.info.resource == "pods" {
            // A terminating pod goes away when its kubelet confirms (a delete with grace 0).
            return obj["metadata"]["deletionGracePeriodSeconds"].as_i64().unwrap_or(0) == 0;
        }
        true
    }
}
