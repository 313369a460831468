//! Deletion: preconditions, propagation policies (their finalizers), graceful pod and
//! namespace termination, finalizers holding deletion, and deletecollection.

use serde_json::{Value, json};

use super::meta::{finalizers, meta_mut, now_rfc3339};
use super::read::ListOptions;
use super::write::serialize_with_rev;
use super::{Outcome, Registry, Target, at_version, parse_stored};
use crate::error::{ApiError, ApiResult};
use crate::storage::Write;

/// Finalizer that makes the garbage collector delete dependents first.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// Finalizer that makes the garbage collector orphan dependents.
pub const ORPHAN_FINALIZER: &str = "orphan";

impl Registry {
    /// Deletes an object, honouring `DeleteOptions` (`options` may be null).
    pub async fn delete(&self, target: &Target, name: &str, options: &Value, dry_run: bool) -> ApiResult<Outcome> {
        let info = target.info.clone();
        let policy = match options["propagationPolicy"].as_str() {
            Some(p @ ("Orphan" | "Background" | "Foreground")) => Some(p),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
                )));
            }
            None => match options["orphanDependents"].as_bool() {
                Some(true) => Some("Orphan"),
                _ => None,
            },
        };
        loop {
            let (old, entry) = self.current(target, name).await?;
            let pre = &options["preconditions"];
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
                && rv != entry.rev.to_string()
            {
                return Err(ApiError::conflict_msg(
                    &info.group,
                    &info.resource,
                    name,
                    format!(
                        "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        info.resource, entry.rev
                    ),
                    Vec::new(),
                ));
            }
            let mut new = old.clone();
            let mut fins = finalizers(&old);
            match policy {
                Some("Orphan") if !fins.iter().any(|f| f == ORPHAN_FINALIZER) => fins.push(ORPHAN_FINALIZER.into()),
                Some("Foreground") if !fins.iter().any(|f| f == FOREGROUND_FINALIZER) => {
                    fins.push(FOREGROUND_FINALIZER.into())
                }
                _ => {}
            }
            if policy == Some("Background") || policy == Some("Foreground") {
                fins.retain(|f| f != ORPHAN_FINALIZER || policy != Some("Background"));
            }
            let graceful = self.graceful_seconds(target, &old, options);
            let deleting = old["metadata"]["deletionTimestamp"].is_string();
            let namespace = info.group.is_empty() && info.resource == "namespaces";
            let immediate = fins.is_empty() && graceful.is_none() && !namespace;
            let write = if immediate {
                None
            } else {
                let m = meta_mut(&mut new);
                if !deleting {
                    // As kube-apiserver: the time by which the object should be gone.
                    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(graceful.unwrap_or(0));
                    m.insert("deletionTimestamp".into(), json!(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()));
                    m.insert("deletionGracePeriodSeconds".into(), json!(graceful.unwrap_or(0)));
                    if let Some(g) = m.get("generation").and_then(Value::as_i64)
                        && info.generation
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
                m.insert("finalizers".into(), json!(fins));
                if fins.is_empty() {
                    m.remove("finalizers");
                }
                if namespace {
                    new["status"] = json!({"phase": "Terminating"});
                }
                if !deleting || new != old { Some(new.clone()) } else { None }
            };
            if immediate && dry_run {
                return Ok(Outcome { object: at_version(old, target), code: 200, warnings: vec![] });
            }
            if !immediate && write.is_none() {
                return Ok(Outcome { object: at_version(old, target), code: 202, warnings: vec![] });
            }
            if dry_run {
                return Ok(Outcome { object: at_version(new, target), code: 202, warnings: vec![] });
            }
            let rev0 = entry.rev;
            let mut final_obj = if immediate { old.clone() } else { new.clone() };
            let result = self
                .store
                .write(&info.id, &target.key(name), |cur, rev| match cur {
                    Some(c) if c.rev == rev0 => {
                        let b = serialize_with_rev(&mut final_obj, rev);
                        Ok(if immediate { Write::Delete(b) } else { Write::Put(b) })
                    }
                    _ => Err(()),
                })
                .await?;
            match result {
                Ok(w) => {
                    let stored = parse_stored(&w.value)?;
                    if immediate {
                        self.after_remove(target, &stored);
                        return Ok(Outcome { object: at_version(stored, target), code: 200, warnings: vec![] });
                    }
                    let hook = self.before_commit(target, &mut stored.clone(), Some(&old), &now_rfc3339())?;
                    self.after_commit(target, hook, &stored);
                    return Ok(Outcome { object: at_version(stored, target), code: 202, warnings: vec![] });
                }
                Err(()) => continue,
            }
        }
    }

    /// The grace period of a graceful deletion, or None to delete at once. Only pods
    /// bound to a node terminate gracefully (their kubelet confirms with a 0-second delete).
    fn graceful_seconds(&self, target: &Target, obj: &Value, options: &Value) -> Option<i64> {
        if !(target.info.group.is_empty() && target.info.resource == "pods") {
            return None;
        }
        if obj["spec"]["nodeName"].as_str().is_none_or(str::is_empty) {
            return None;
        }
        let phase = obj["status"]["phase"].as_str().unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            return None;
        }
        let grace = options["gracePeriodSeconds"]
            .as_i64()
            .or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(30);
        if grace <= 0 {
            return None;
        }
        if obj["metadata"]["deletionTimestamp"].is_string() {
            let current = obj["metadata"]["deletionGracePeriodSeconds"].as_i64().unwrap_or(grace);
            return Some(current.min(grace));
        }
        Some(grace)
    }

    /// Deletes every object matching `list`; returns the list of deleted objects.
    pub async fn delete_collection(
        &self,
        target: &Target,
        list: &ListOptions,
        options: &Value,
        dry_run: bool,
    ) -> ApiResult<Value> {
        let page = self.list(target, list).await?;
        let mut items = Vec::new();
        for obj in page.items {
            let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let ns = obj["metadata"]["namespace"].as_str().map(String::from);
            let t = Target { namespace: ns.or(target.namespace.clone()), ..target.clone() };
            match self.delete(&t, &name, options, dry_run).await {
                Ok(o) => items.push(o.object),
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
