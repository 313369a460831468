//! Deletion: preconditions, admission (the object being deleted is sent to admission as
//! `oldObject`), propagation policies (their finalizers), graceful and staged deletion as
//! the kind's strategy says (pods, namespaces), finalizers holding deletion, and
//! deletecollection.

use serde_json::{Value, json};

use super::admission::{Attributes, Operation};
use super::commit::serialize_with_rev;
use super::meta::{finalizers, meta_mut, now_rfc3339};
use super::read::ListOptions;
use super::{Outcome, Registry, Target, WriteOptions, at_version, parse_stored};
use crate::auth::user::UserInfo;
use crate::error::{ApiError, ApiResult};
use crate::storage::{Revision, Write};

/// Finalizer that makes the garbage collector delete dependents first.
pub(super) const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// Finalizer that makes the garbage collector orphan dependents.
pub(super) const ORPHAN_FINALIZER: &str = "orphan";

/// `propagationPolicy` of `DeleteOptions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Propagation {
    Orphan,
    Background,
    Foreground,
}

/// What a delete does to the stored object.
enum Deletion {
    /// Remove it now.
    Remove,
    /// Store it marked for deletion (terminating).
    Mark(Value),
    /// It is already marked as it would be: nothing to write.
    Unchanged,
}

/// The propagation policy of `options` (`orphanDependents` is the deprecated form).
fn propagation(options: &Value) -> ApiResult<Option<Propagation>> {
    match options["propagationPolicy"].as_str() {
        Some("Orphan") => Ok(Some(Propagation::Orphan)),
        Some("Background") => Ok(Some(Propagation::Background)),
        Some("Foreground") => Ok(Some(Propagation::Foreground)),
        Some(other) => Err(ApiError::bad_request(format!(
            "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
        ))),
        None => Ok((options["orphanDependents"].as_bool() == Some(true)).then_some(Propagation::Orphan)),
    }
}

/// Refuses the delete when the uid or resourceVersion preconditions do not hold.
fn check_preconditions(target: &Target, name: &str, old: &Value, rev: Revision, pre: &Value) -> ApiResult<()> {
    let info = &target.info;
    if let Some(uid) = pre["uid"].as_str()
        && old["metadata"]["uid"].as_str() != Some(uid)
    {
        return Err(ApiError::conflict_msg(
            &info.group,
            &info.resource,
            name,
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                info.resource,
                old["metadata"]["uid"].as_str().unwrap_or_default()
            ),
            Vec::new(),
        ));
    }
    if let Some(rv) = pre["resourceVersion"].as_str()
        && rv != rev.to_string()
    {
        return Err(ApiError::conflict_msg(
            &info.group,
            &info.resource,
            name,
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                info.resource, rev
            ),
            Vec::new(),
        ));
    }
    Ok(())
}

/// The finalizers a deleted object carries under `policy`.
fn finalizers_for(old: &Value, policy: Option<Propagation>) -> Vec<String> {
    let mut fins = finalizers(old);
    match policy {
        Some(Propagation::Orphan) if !fins.iter().any(|f| f == ORPHAN_FINALIZER) => fins.push(ORPHAN_FINALIZER.into()),
        Some(Propagation::Foreground) if !fins.iter().any(|f| f == FOREGROUND_FINALIZER) => {
            fins.push(FOREGROUND_FINALIZER.into())
        }
        _ => {}
    }
    if policy == Some(Propagation::Background) {
        fins.retain(|f| f != ORPHAN_FINALIZER);
    }
    fins
}

/// The time by which an object deleted now with `grace` seconds should be gone (as
/// kube-apiserver; `grace` is never negative here). A grace period beyond the representable time range (any client may
/// send `gracePeriodSeconds` up to i64::MAX) saturates at the latest representable time.
fn deletion_timestamp(grace: i64) -> String {
    let now = jiff::Timestamp::now();
    let at = now.checked_add(jiff::SignedDuration::from_secs(grace)).unwrap_or(jiff::Timestamp::MAX);
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Decides what a delete does: remove at once, or mark terminating (with a deletion
/// timestamp, grace period and finalizers) when finalizers, a grace period or the
/// kind's staged deletion hold the object.
fn plan(target: &Target, old: &Value, options: &Value, policy: Option<Propagation>) -> Deletion {
    let fins = finalizers_for(old, policy);
    let graceful = target.strategy.grace_period(old, options);
    if fins.is_empty() && graceful.is_none() && !target.strategy.staged_deletion() {
        return Deletion::Remove;
    }
    let deleting = old["metadata"]["deletionTimestamp"].is_string();
    let mut new = old.clone();
    let m = meta_mut(&mut new);
    if !deleting {
        m.insert("deletionTimestamp".into(), json!(deletion_timestamp(graceful.unwrap_or(0))));
        m.insert("deletionGracePeriodSeconds".into(), json!(graceful.unwrap_or(0)));
        if let Some(g) = m.get("generation").and_then(Value::as_i64)
            && target.info.generation
        {
            m.insert("generation".into(), json!(g + 1));
        }
    }
    if deleting && graceful.is_none() && m.contains_key("deletionGracePeriodSeconds") {
        // A later delete may shorten the grace period, down to 0.
        m.insert("deletionGracePeriodSeconds".into(), json!(0));
    } else if let (true, Some(g)) = (deleting, graceful) {
        m.insert("deletionGracePeriodSeconds".into(), json!(g));
    }
    if fins.is_empty() {
        m.remove("finalizers");
    } else {
        m.insert("finalizers".into(), json!(fins));
    }
    target.strategy.mark_terminating(&mut new);
    if !deleting || new != *old { Deletion::Mark(new) } else { Deletion::Unchanged }
}

/// What a DELETE that removed `obj` answers: the object where the kind's kube registry
/// returns it, else kube's `Status` of `Success` whose details name the object, with the
/// resource (not the kind) in `details.kind`, as kube's generic store writes it.
fn removed(obj: Value, target: &Target) -> Value {
    if target.strategy.returns_deleted_object() {
        return at_version(obj, target);
    }
    let mut details =
        json!({"name": obj["metadata"]["name"], "kind": target.info.resource, "uid": obj["metadata"]["uid"]});
    if !target.info.group.is_empty() {
        details["group"] = json!(target.info.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

impl Registry {
    /// Deletes an object, honouring `DeleteOptions` (`options` may be null). The delete
    /// passes admission on behalf of `user` (None for the server's own deletes, which
    /// kube makes without admission: an eviction's, a CRD's cleanup). An object removed
    /// at once is answered as [`removed`] says; one only marked for deletion (finalizers,
    /// a grace period) is answered with the object as marked.
    pub async fn delete(
        &self,
        target: &Target,
        name: &str,
        options: &Value,
        dry_run: bool,
        user: Option<&UserInfo>,
    ) -> ApiResult<Outcome> {
        let policy = propagation(options)?;
        let mut warnings = Vec::new();
        let mut admitted = user.is_none();
        loop {
            let (old, entry) = self.current(target, name).await?;
            check_preconditions(target, name, &old, entry.rev, &options["preconditions"])?;
            if let Some(user) = user.filter(|_| !admitted) {
                warnings = self.admit_delete(target, name, &old, dry_run, user).await?;
                admitted = true;
            }
            let (remove, obj) = match plan(target, &old, options, policy) {
                Deletion::Remove if dry_run => {
                    return Ok(Outcome { object: removed(old, target), code: 200, warnings });
                }
                Deletion::Unchanged => {
                    return Ok(Outcome { object: at_version(old, target), code: 202, warnings });
                }
                Deletion::Mark(new) if dry_run => {
                    return Ok(Outcome { object: at_version(new, target), code: 202, warnings });
                }
                Deletion::Remove => (true, old.clone()),
                Deletion::Mark(new) => (false, new),
            };
            let Some(stored) = self.write_deletion(target, name, entry.rev, obj, remove).await? else {
                continue;
            };
            if remove {
                target.strategy.after_remove(self, &stored);
                return Ok(Outcome { object: removed(stored, target), code: 200, warnings });
            }
            if let Some(after) = target.strategy.before_commit(&mut stored.clone(), Some(&old), &now_rfc3339())? {
                after(self, &stored);
            }
            return Ok(Outcome { object: at_version(stored, target), code: 202, warnings });
        }
    }

    /// Admission of a delete, as kube's: both phases see the stored object (at the
    /// requested version) as `oldObject` and no new object. Returns warnings.
    async fn admit_delete(
        &self,
        target: &Target,
        name: &str,
        stored: &Value,
        dry_run: bool,
        user: &UserInfo,
    ) -> ApiResult<Vec<String>> {
        let old = at_version(stored.clone(), target);
        let opts = WriteOptions { dry_run, user: user.clone(), ..WriteOptions::default() };
        let attrs =
            Attributes { target, operation: Operation::Delete, name, subresource: None, old: Some(&old), opts: &opts };
        let mut verdict = self.admission_mutate(&attrs, &mut old.clone()).await?;
        verdict.merge(self.admission_validate(&attrs, &old).await?);
        self.admission.record(&verdict);
        Ok(verdict.warnings)
    }

    /// Removes the object, or stores it marked, if it is still at `rev`; None if it changed.
    async fn write_deletion(
        &self,
        target: &Target,
        name: &str,
        rev0: Revision,
        mut obj: Value,
        remove: bool,
    ) -> ApiResult<Option<Value>> {
        let result = self
            .store
            .write(&target.info.id, &target.key(name), |cur, rev| match cur {
                Some(c) if c.rev == rev0 => {
                    let b = serialize_with_rev(&mut obj, rev);
                    Ok(if remove { Write::Delete(b) } else { Write::Put(b) })
                }
                _ => Err(()),
            })
            .await?;
        match result {
            Ok(w) => Ok(Some(parse_stored(&w.value)?)),
            Err(()) => Ok(None),
        }
    }

    /// Deletes every object matching `list`, each passing admission on behalf of `user`
    /// as [`Self::delete`] says; returns the list of deleted objects.
    pub async fn delete_collection(
        &self,
        target: &Target,
        list: &ListOptions,
        options: &Value,
        dry_run: bool,
        user: Option<&UserInfo>,
    ) -> ApiResult<Value> {
        let page = self.list(target, list).await?;
        let mut items = Vec::new();
        for obj in page.items {
            let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let ns = obj["metadata"]["namespace"].as_str().map(String::from);
            let t = Target { namespace: ns.or(target.namespace.clone()), ..target.clone() };
            // kube answers a collection delete with the objects as they were listed.
            match self.delete(&t, &name, options, dry_run, user).await {
                Ok(_) => items.push(obj),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(json!({
            "apiVersion": target.api_version(),
            "kind": target.info.list_kind,
            "metadata": {"resourceVersion": self.store.revision().to_string()},
            "items": items,
        }))
    }
}
