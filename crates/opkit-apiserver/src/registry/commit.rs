//! The shared update step of update, patch and scale: merges what the client may not
//! change, admits, maintains generation, refuses new finalizers on a terminating
//! object, tracks managed fields, and writes if the object is still at the revision it
//! was read at (removing it when a terminating object is released). The object is read,
//! admitted and answered at the requested version, and stored at the storage version.

use bytes::Bytes;
use serde_json::{Value, json};

use super::admission::{Attributes, Operation};
use super::meta::{finalizers, meta_mut, now_rfc3339, same_object, spec_part};
use super::validate::check_depth;
use super::{Outcome, Registry, Subresource, Target, WriteOptions, parse_stored};
use crate::catalog::VersionInfo;
use crate::error::ApiError;
use crate::patch::{self, FieldManager, ListSemantics};
use crate::schema::{FieldError, FieldErrorReason};
use crate::storage::{Revision, Write};

/// What one update writes to, and how: the parts of an update that stay the same when
/// it is retried on a newer revision.
pub(super) struct UpdateRequest<'r> {
    /// The resource.
    pub target: &'r Target,
    /// The object's name.
    pub name: &'r str,
    /// The part of the object written.
    pub sub: Subresource,
    /// The request's options (user, dry run, field manager).
    pub opts: &'r WriteOptions,
}

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

/// Sets `metadata.resourceVersion` to `rev` and serializes the object for storage.
pub(super) fn serialize_with_rev(obj: &mut Value, rev: Revision) -> Bytes {
    meta_mut(obj).insert("resourceVersion".into(), Value::String(rev.to_string()));
    Bytes::from(serde_json::to_vec(obj).expect("a JSON value always serializes"))
}

/// How lists of `target`'s objects merge (strategic merge patch, apply, field sets).
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

/// The field manager of a write to `sub` at `time`.
pub(super) fn field_manager<'a>(
    opts: &'a WriteOptions,
    sub: Subresource,
    time: &'a str,
    api_version: &'a str,
) -> FieldManager<'a> {
    FieldManager { manager: &opts.field_manager, api_version, subresource: sub.name(), time }
}

/// Metadata an update never changes.
const IMMUTABLE_META: [&str; 6] =
    ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "namespace", "generation"];

/// The object an update would store before admission: the body with what the client may
/// not change (the other half of the status split, immutable metadata) taken from `old`.
fn merge_for_update(
    target: &Target,
    name: &str,
    body: Value,
    old: &Value,
    sub: Subresource,
    has_status: bool,
) -> Value {
    let mut new = match sub {
        Subresource::Status => target.strategy.prepare_for_status_update(&body, old),
        Subresource::OfKind(sub) => target.strategy.prepare_for_subresource_update(sub, &body, old),
        Subresource::Main => {
            let mut n = body;
            target.strategy.prepare_for_update(&mut n, old, has_status);
            n
        }
    };
    let m = meta_mut(&mut new);
    for f in IMMUTABLE_META {
        match old["metadata"].get(f) {
            Some(v) => {
                m.insert(f.into(), v.clone());
            }
            None => {
                m.remove(f);
            }
        }
    }
    m.insert("name".into(), json!(name));
    new
}

/// Increments `metadata.generation` when the spec changed (everything but metadata and
/// type when there is no status subresource).
fn set_generation(new: &mut Value, old: &Value, has_status: bool) {
    let changed = if has_status {
        spec_part(new) != spec_part(old)
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
        strip(new) != strip(old)
    };
    let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
    meta_mut(new).insert("generation".into(), json!(if changed { generation + 1 } else { generation }));
}

/// Refuses finalizers added to an object that is being deleted.
fn forbid_new_finalizers(target: &Target, name: &str, old: &Value, new: &Value) -> Result<(), ApiError> {
    let before = finalizers(old);
    let added: Vec<String> = finalizers(new).into_iter().filter(|f| !before.contains(f)).collect();
    if added.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        &target.info.group,
        &target.info.kind,
        name,
        &[FieldError {
            field: "metadata.finalizers".into(),
            reason: FieldErrorReason::Forbidden,
            message: format!(
                "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
            ),
        }],
    ))
}

impl Registry {
    /// The shared update step with managed fields tracked.
    pub(super) async fn commit(
        &self,
        target: &Target,
        name: &str,
        old: (Value, Revision),
        body: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<Outcome, CommitError> {
        self.commit_inner(&UpdateRequest { target, name, sub, opts }, old, body, true).await
    }

    /// The shared update step: merges server-owned fields, validates, tracks fields (when
    /// `track`) and writes if the object is still at `old`'s revision.
    pub(super) async fn commit_inner(
        &self,
        req: &UpdateRequest<'_>,
        (old, old_rev): (Value, Revision),
        body: Value,
        track: bool,
    ) -> Result<Outcome, CommitError> {
        let UpdateRequest { target, name, sub, opts } = *req;
        let version = target.version_info()?.clone();
        let old_at = self.at_requested_version(target, old.clone()).await?;
        let _allocating = self.allocation_guard(target).await;
        let mut new = merge_for_update(target, name, body, &old_at, sub, version.status);
        let mut warnings = self.admit_update(req, &mut new, &old_at, &version).await?;
        if target.info.generation {
            set_generation(&mut new, &old_at, version.status);
        }
        let deleting = old["metadata"]["deletionTimestamp"].is_string();
        if deleting {
            forbid_new_finalizers(target, name, &old, &new)?;
        }
        let now = now_rfc3339();
        if track {
            let api_version = target.api_version();
            let fm = field_manager(opts, sub, &now, &api_version);
            patch::track_update(Some(&old_at), &mut new, &fm, &list_semantics(target));
        }
        let after_commit = target.strategy.before_commit(&mut new, Some(&old_at), &now)?;
        check_depth(target, name, &new)?;
        let finished = deleting && self.ready_to_remove(target, &new);
        if same_object(&new, &old_at) && !finished {
            return Ok(Outcome { object: old_at, code: 200, warnings });
        }
        if opts.dry_run {
            return Ok(Outcome { object: new, code: 200, warnings });
        }
        let new = self.at_storage_version(target, new).await?;
        let stored = self.replace(target, name, old_rev, new, finished).await?;
        if finished {
            target.strategy.after_remove(self, &stored);
        } else if let Some(after) = after_commit {
            after(self, &stored);
        }
        warnings.dedup();
        let object = self.at_requested_version(target, stored).await?;
        Ok(Outcome { object, code: 200, warnings })
    }

    /// Admits an update: the whole admission for the main resource; for a status, the
    /// built-in kind's admission and status rules or the custom resource's schema; for a
    /// kind's own subresource, its defaults, admission and rules. Subresources pass the
    /// admission phases too (webhooks and policies match `pods/status`).
    async fn admit_update(
        &self,
        req: &UpdateRequest<'_>,
        new: &mut Value,
        old: &Value,
        version: &VersionInfo,
    ) -> Result<Vec<String>, ApiError> {
        let UpdateRequest { target, name, sub, opts } = *req;
        let Some(subresource) = sub.name() else {
            return self.admit(target, new, Some(old), opts).await;
        };
        let attrs = Attributes {
            target,
            operation: Operation::Update,
            name,
            subresource: Some(subresource),
            old: Some(old),
            opts,
        };
        let mut verdict = self.admission_mutate(&attrs, new).await?;
        let errs = match sub {
            Subresource::Main => Vec::new(),
            Subresource::OfKind(sub) => {
                target.strategy.default(new, false);
                target.strategy.admit(&self.view(), new, Some(old), &opts.user)?;
                target.strategy.validate_subresource_update(sub, new, old)
            }
            Subresource::Status if target.info.builtin => {
                target.strategy.admit(&self.view(), new, Some(old), &opts.user)?;
                target.strategy.validate_status_update(new, old)
            }
            Subresource::Status => version.schema.as_ref().map(|s| s.validate(new, Some(old))).unwrap_or_default(),
        };
        if !errs.is_empty() {
            return Err(ApiError::invalid(&target.info.group, &target.info.kind, name, &errs));
        }
        verdict.merge(self.admission_validate(&attrs, new).await?);
        self.admission.record(&verdict);
        Ok(verdict.warnings)
    }

    /// Stores `new` (or removes the object, when `remove`) if it is still at `old_rev`.
    async fn replace(
        &self,
        target: &Target,
        name: &str,
        old_rev: Revision,
        mut new: Value,
        remove: bool,
    ) -> Result<Value, CommitError> {
        let result = self
            .store
            .write(&target.info.id, &target.key(name), |cur, rev| match cur {
                Some(c) if c.rev == old_rev => {
                    target.strategy.convert_to_storage(&mut new, &target.version);
                    let bytes = serialize_with_rev(&mut new, rev);
                    Ok(if remove { Write::Delete(bytes) } else { Write::Put(bytes) })
                }
                _ => Err(()),
            })
            .await
            .map_err(ApiError::from)?;
        match result {
            Ok(w) => Ok(parse_stored(&w.value)?),
            Err(()) => Err(CommitError::Retry),
        }
    }

    /// Whether an object being deleted has nothing left holding it.
    pub(super) fn ready_to_remove(&self, target: &Target, obj: &Value) -> bool {
        finalizers(obj).is_empty() && !target.strategy.holds_removal(obj)
    }
}
