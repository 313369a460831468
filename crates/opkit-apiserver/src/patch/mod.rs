//! Patch types and server-side apply of kube-apiserver, on `serde_json::Value` objects:
//! JSON patch (RFC 6902), JSON merge patch (RFC 7386), strategic merge patch, managed-fields
//! tracking for writes (`track_update`) and server-side apply (`server_side_apply`).
//!
//! Submodules: `fieldset` (field paths, FieldsV1), `schema` (list semantics, re-exported from
//! `opkit_apimachinery`), `typed` (schema-aware compare/merge/prune), `smp` (strategic merge
//! patch: `opkit_apimachinery`'s, with API-server errors), `managed` (managedFields bookkeeping
//! and apply).

pub(crate) mod fieldset;
mod managed;
pub(crate) mod schema;
mod smp;
mod typed;

use serde_json::Value;

use crate::depth::{self, MAX_OBJECT_DEPTH};

pub(crate) use managed::{server_side_apply, track_update};
pub(crate) use schema::ListSemantics;
pub(crate) use smp::strategic_merge_patch;

/// Most operations a JSON patch may carry (kube-apiserver's limit).
pub(crate) const MAX_JSON_PATCH_OPERATIONS: usize = 10000;

/// Errors of patching and applying.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PatchError {
    /// The patch could not be applied to the document (kube answers 422 Unprocessable Entity,
    /// reason `Invalid`), e.g. a failed JSON patch `test` operation.
    #[error("{0}")]
    Invalid(String),
    /// The patch is malformed (kube answers 400 BadRequest).
    #[error("{0}")]
    BadRequest(String),
    /// The patch has too many operations (413 RequestEntityTooLarge).
    #[error("{0}")]
    TooLarge(String),
    /// Server-side apply conflicts with other field managers (409 Conflict).
    #[error("{}", conflict_message(.0))]
    Conflicts(Vec<ApplyConflict>),
    /// Stored managed fields could not be processed (500).
    #[error("{0}")]
    Internal(String),
}

impl PatchError {
    /// The HTTP status kube-apiserver answers with.
    pub(crate) fn status_code(&self) -> u16 {
        match self {
            PatchError::Invalid(_) => 422,
            PatchError::BadRequest(_) => 400,
            PatchError::TooLarge(_) => 413,
            PatchError::Conflicts(_) => 409,
            PatchError::Internal(_) => 500,
        }
    }
}

/// One server-side apply conflict: a field owned by another manager whose value would change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ApplyConflict {
    /// The other manager's name.
    pub manager: String,
    /// The API version the other manager used.
    pub api_version: String,
    /// The field, e.g. `.spec.replicas`.
    pub field: String,
    /// The other manager's operation (`Apply` or `Update`).
    pub operation: String,
    /// The other manager's subresource, if any.
    pub subresource: Option<String>,
}

impl ApplyConflict {
    /// The manager as kube prints it: `"name"`, plus ` with subresource "status"`, plus
    /// ` using apps/v1` for Update managers.
    pub(crate) fn manager_description(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = self.subresource.as_deref().filter(|s| !s.is_empty()) {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

/// The field manager performing a write.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FieldManager<'a> {
    /// Manager name (`fieldManager` query parameter or the user-agent derived default).
    pub manager: &'a str,
    /// API version of the request, e.g. `apps/v1`.
    pub api_version: &'a str,
    /// Subresource written (`status`, `scale`), if any.
    pub subresource: Option<&'a str>,
    /// Time of the operation (RFC3339).
    pub time: &'a str,
}

/// The 409 message kube-apiserver gives, e.g.
/// `Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas`.
pub(crate) fn conflict_message(conflicts: &[ApplyConflict]) -> String {
    if conflicts.len() == 1 {
        let c = &conflicts[0];
        return format!("Apply failed with 1 conflict: conflict with {}: {}", c.manager_description(), c.field);
    }
    let mut managers: Vec<String> = conflicts.iter().map(|c| c.manager_description()).collect();
    managers.sort();
    managers.dedup();
    let mut lines = Vec::new();
    for m in &managers {
        lines.push(format!("conflicts with {m}:"));
        for c in conflicts.iter().filter(|c| &c.manager_description() == m) {
            lines.push(format!("- {}", c.field));
        }
    }
    format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
}

/// The most bytes the `copy` operations of one JSON patch may add together (kube-apiserver's
/// `JSONPatchMaxCopyBytes`, 3 MiB): each copy can double the document, so a small patch
/// could otherwise build a huge object.
pub(crate) const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;

/// Applies an RFC 6902 JSON patch.
pub(crate) fn json_patch(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| PatchError::BadRequest(format!("invalid JSON patch: {e}")))?;
    if ops.0.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooLarge(format!(
            "The allowed maximum operations in a JSON patch is {}, got {}",
            MAX_JSON_PATCH_OPERATIONS,
            ops.0.len()
        )));
    }
    // Applied to a copy that is dropped on failure, so no undo is needed: json-patch's
    // undo (`json_patch::patch`) hits an `unreachable!` when a failed operation follows
    // a move it cannot reverse, which would panic on client input. One operation at a
    // time, so that no operation can nest the document deeper than the stored-object
    // limit (moves and adds under long paths could otherwise build a document deep
    // enough to overflow the stack of every recursive walk over it).
    let mut out = doc.clone();
    let mut copied = 0usize;
    for op in &ops.0 {
        check_op_depth(&out, op)?;
        if let json_patch::PatchOperation::Copy(c) = op {
            copied += out.pointer(c.from.as_str()).map_or(0, crate::json::encoded_len);
            if copied > MAX_JSON_PATCH_COPY_BYTES {
                return Err(PatchError::Invalid(format!(
                    "Unable to complete the copy, the accumulated size increase of copy is {copied}, exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}"
                )));
            }
        }
        json_patch::patch_unsafe(&mut out, std::slice::from_ref(op)).map_err(|e| op_error(&e, op))?;
    }
    Ok(out)
}

/// Refuses an operation that would place a value deeper than [`MAX_OBJECT_DEPTH`]: a
/// value inside `n` containers (an `n`-token path) with its own depth `d` nests `n + d`
/// deep.
fn check_op_depth(doc: &Value, op: &json_patch::PatchOperation) -> Result<(), PatchError> {
    use json_patch::PatchOperation as Op;
    let (path, placed) = match op {
        Op::Add(a) => (&a.path, Some(&a.value)),
        Op::Replace(r) => (&r.path, Some(&r.value)),
        Op::Move(m) => (&m.path, doc.pointer(m.from.as_str())),
        Op::Copy(c) => (&c.path, doc.pointer(c.from.as_str())),
        Op::Remove(_) | Op::Test(_) => return Ok(()),
    };
    let budget = MAX_OBJECT_DEPTH.saturating_sub(path.count());
    let placed_depth = placed.map_or(0, |v| depth::nesting_depth(v, budget));
    if path.count() > MAX_OBJECT_DEPTH || placed_depth > budget {
        return Err(PatchError::Invalid(format!(
            "{} operation does not apply: path {:?}: {}",
            op_name(op),
            truncated(path.as_str()),
            depth::too_deep_message()
        )));
    }
    Ok(())
}

/// The `op` of a JSON patch operation.
fn op_name(op: &json_patch::PatchOperation) -> &'static str {
    use json_patch::PatchOperation as Op;
    match op {
        Op::Add(_) => "add",
        Op::Remove(_) => "remove",
        Op::Replace(_) => "replace",
        Op::Move(_) => "move",
        Op::Copy(_) => "copy",
        Op::Test(_) => "test",
    }
}

/// At most the first 100 characters of `s`.
fn truncated(s: &str) -> String {
    if s.len() <= 100 { s.to_string() } else { format!("{}...", &s[..s.floor_char_boundary(100)]) }
}

/// kube-apiserver's message for a JSON patch operation that failed.
fn op_error(e: &json_patch::PatchError, op: &json_patch::PatchOperation) -> PatchError {
    let path = e.path.to_string();
    let msg = match (&e.kind, op) {
        (json_patch::PatchErrorKind::TestFailed, _) => format!("testing value {path} failed: test failed"),
        (_, json_patch::PatchOperation::Remove(_)) => {
            format!("remove operation does not apply: doc is missing path: {path:?}: missing value")
        }
        (_, json_patch::PatchOperation::Replace(_)) => {
            format!("replace operation does not apply: doc is missing key: {path}: missing value")
        }
        (_, json_patch::PatchOperation::Add(_)) => {
            format!("add operation does not apply: doc is missing path: {path:?}: missing value")
        }
        (_, json_patch::PatchOperation::Move(m)) => {
            format!("move operation does not apply: doc is missing from path: {:?}: missing value", m.from.to_string())
        }
        (_, json_patch::PatchOperation::Copy(c)) => {
            format!("copy operation does not apply: doc is missing from path: {:?}: missing value", c.from.to_string())
        }
        _ => e.to_string(),
    };
    PatchError::Invalid(msg)
}

/// Applies an RFC 7386 JSON merge patch (the patch must be an object).
pub(crate) fn merge_patch(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    if !patch.is_object() {
        return Err(PatchError::BadRequest("Invalid JSON Patch".to_string()));
    }
    let mut out = doc.clone();
    json_patch::merge(&mut out, patch);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_null_deletes() {
        let doc = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": 1}});
        let out = merge_patch(&doc, &json!({"metadata": {"labels": {"a": null}}, "spec": {"y": 2}})).unwrap();
        assert_eq!(out, json!({"metadata": {"labels": {"b": "2"}}, "spec": {"x": 1, "y": 2}}));
        assert!(matches!(merge_patch(&doc, &json!([1])), Err(PatchError::BadRequest(_))));
    }

    #[test]
    fn json_patch_ops_and_test_failure() {
        let doc = json!({"spec": {"replicas": 1}});
        let ok = json_patch(
            &doc,
            &json!([{"op": "test", "path": "/spec/replicas", "value": 1},
                    {"op": "replace", "path": "/spec/replicas", "value": 3}]),
        )
        .unwrap();
        assert_eq!(ok["spec"]["replicas"], 3);
        let err = json_patch(&doc, &json!([{"op": "test", "path": "/spec/replicas", "value": 2}])).unwrap_err();
        assert_eq!(err.status_code(), 422);
        assert_eq!(err.to_string(), "testing value /spec/replicas failed: test failed");
        let err = json_patch(&doc, &json!([{"op": "remove", "path": "/nope"}])).unwrap_err();
        assert_eq!(err.status_code(), 422);
        let bad = json_patch(&doc, &json!([{"op": "frobnicate", "path": "/a"}])).unwrap_err();
        assert_eq!(bad.status_code(), 400);
    }

    #[test]
    fn a_failing_operation_after_a_move_is_an_error_not_a_panic() {
        let doc = json!({"metadata": {"name": "x"}, "spec": {"a": {"b": 1}}});
        // Undoing the move (moving /spec/a back into /spec/a/b, inside itself) is impossible.
        for failing in [json!({"op": "test", "path": "/spec", "value": 0}), json!({"op": "remove", "path": "/nope"})] {
            let err = json_patch(&doc, &json!([{"op": "move", "from": "/spec/a/b", "path": "/spec/a"}, failing]))
                .unwrap_err();
            assert_eq!(err.status_code(), 422);
        }
    }

    #[test]
    fn conflict_messages() {
        let c = ApplyConflict {
            manager: "kubectl-client-side-apply".into(),
            api_version: "apps/v1".into(),
            field: ".spec.replicas".into(),
            operation: "Update".into(),
            subresource: None,
        };
        assert_eq!(
            conflict_message(std::slice::from_ref(&c)),
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
        );
        let d = ApplyConflict {
            manager: "other".into(),
            operation: "Apply".into(),
            field: ".spec.paused".into(),
            ..c.clone()
        };
        assert_eq!(
            conflict_message(&[c.clone(), d]),
            "Apply failed with 2 conflicts: conflicts with \"kubectl-client-side-apply\" using apps/v1:\n- .spec.replicas\nconflicts with \"other\":\n- .spec.paused"
        );
        let e = PatchError::Conflicts(vec![c]);
        assert_eq!(e.status_code(), 409);
    }
}
