//! Object metadata rules: names, generateName, uid and timestamps, generation, the
//! status-subresource split, and the no-op comparison.

use opkit_apimachinery::names::is_dns1123_label;
use rand::Rng;
use serde_json::{Map, Value, json};

use crate::schema::{FieldError, FieldErrorReason};

/// Now, as an RFC 3339 timestamp with second precision, as Kubernetes writes them.
pub(crate) fn now_rfc3339() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Seconds since the Unix epoch.
pub(crate) fn now_unix() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// The five random characters kube-apiserver appends for `generateName`.
pub(crate) fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}

/// Mutable `metadata`, created when absent.
pub(crate) fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata").and_then(Value::as_object_mut) {
        Some(m) => m,
        None => unreachable!("metadata was just made an object"),
    }
}

/// A string field of metadata.
pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj["metadata"][field].as_str()
}

/// Validates an RFC 1123 subdomain (most object names).
pub(crate) fn validate_subdomain(field: &str, name: &str) -> Option<FieldError> {
    let ok = name.len() <= 253 && !name.is_empty() && name.split('.').all(is_dns1123_label);
    (!ok).then(|| FieldError {
        field: field.to_string(),
        reason: FieldErrorReason::Invalid,
        message: format!(
            "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ),
    })
}

/// Validates an RFC 1123 label (namespace names, services).
pub(crate) fn validate_label(field: &str, name: &str) -> Option<FieldError> {
    (!is_dns1123_label(name)).then(|| FieldError {
        field: field.to_string(),
        reason: FieldErrorReason::Invalid,
        message: format!(
            "Invalid value: \"{name}\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        ),
    })
}

/// Validates an RFC 1035 label (kube's `NameIsDNS1035Label`: Service names).
pub(crate) fn validate_dns1035_label(field: &str, name: &str) -> Option<FieldError> {
    let ok = is_dns1123_label(name) && name.starts_with(|c: char| c.is_ascii_lowercase());
    (!ok).then(|| FieldError {
        field: field.to_string(),
        reason: FieldErrorReason::Invalid,
        message: format!(
            "Invalid value: \"{name}\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
        ),
    })
}

/// Validates a name that only has to be safe as one URL path segment (kube's
/// `path.ValidatePathSegmentName`: RBAC object names such as `system:controller:x`).
pub(crate) fn validate_path_segment(field: &str, name: &str) -> Option<FieldError> {
    let problem = match name {
        "." => Some("may not be '.'".to_string()),
        ".." => Some("may not be '..'".to_string()),
        _ => ["/", "%"].iter().find(|bad| name.contains(**bad)).map(|bad| format!("may not contain '{bad}'")),
    }?;
    Some(FieldError {
        field: field.to_string(),
        reason: FieldErrorReason::Invalid,
        message: format!("Invalid value: \"{name}\": {problem}"),
    })
}

/// The object without metadata and status: what `generation` tracks.
pub(crate) fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
        m.remove("apiVersion");
        m.remove("kind");
    }
    v
}

/// True when two versions of an object differ only in fields the server manages
/// (resourceVersion, managedFields timestamps): such an update is a no-op.
pub(crate) fn same_object(a: &Value, b: &Value) -> bool {
    fn strip(v: &Value) -> Value {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            if let Some(Value::Array(mf)) = m.get_mut("managedFields") {
                for e in mf.iter_mut() {
                    if let Some(o) = e.as_object_mut() {
                        o.remove("time");
                    }
                }
            }
        }
        v
    }
    strip(a) == strip(b)
}

/// Finalizers of an object.
pub(crate) fn finalizers(obj: &Value) -> Vec<String> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|a| a.iter().filter_map(|f| f.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// kube's `TotalAnnotationSizeLimitB`: the most bytes all annotation keys and values of
/// one object may add up to.
pub(crate) const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// kube's `ValidateOwnerReferences`: every entry names its owner's apiVersion (with a
/// version), kind, name and uid; errors on `metadata.ownerReferences.<field>`, as kube
/// reports them (without the entry's index).
fn validate_owner_references(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(refs) = obj["metadata"]["ownerReferences"].as_array() else { return errs };
    for r in refs {
        let text = |field: &str| r[field].as_str().unwrap_or_default();
        let api_version = text("apiVersion");
        // schema.FromAPIVersionAndKind: `v1`, `group/v1`; anything else has no version.
        let version = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [version] | [_, version] => *version,
            _ => "",
        };
        if version.is_empty() {
            errs.push(FieldError::invalid_str(
                "metadata.ownerReferences.apiVersion",
                api_version,
                "version must not be empty",
            ));
        }
        for field in ["kind", "name", "uid"] {
            if text(field).is_empty() {
                errs.push(FieldError::invalid_str(
                    &format!("metadata.ownerReferences.{field}"),
                    text(field),
                    "must not be empty",
                ));
            }
        }
    }
    errs
}

/// kube's `ValidateFinalizers`: each finalizer is a qualified name
/// (`ValidateFinalizerName`), and `orphan` and `foregroundDeletion` are not both set.
fn validate_finalizers(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let names = finalizers(obj);
    for name in &names {
        for problem in opkit_apimachinery::selector::qualified_name_errors(name) {
            errs.push(FieldError::invalid_str("metadata.finalizers", name, &problem));
        }
    }
    if names.iter().any(|f| f == "orphan") && names.iter().any(|f| f == "foregroundDeletion") {
        let listed: Vec<String> = names.iter().map(|f| format!("{f:?}")).collect();
        errs.push(FieldError {
            field: "metadata.finalizers".into(),
            reason: FieldErrorReason::Invalid,
            message: format!(
                "Invalid value: []string{{{}}}: finalizer orphan and foregroundDeletion cannot be both set",
                listed.join(", ")
            ),
        });
    }
    errs
}

/// Checks that labels and annotations are string maps with valid keys, that the
/// annotations stay within [`TOTAL_ANNOTATION_SIZE_LIMIT`], and that owner references
/// and finalizers are valid as kube's object-meta validation requires.
pub(crate) fn validate_meta_maps(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_owner_references(obj);
    errs.extend(validate_finalizers(obj));
    if let Some(annotations) = obj["metadata"]["annotations"].as_object() {
        let total: usize = annotations.iter().map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum();
        if total > TOTAL_ANNOTATION_SIZE_LIMIT {
            errs.push(FieldError::too_long("metadata.annotations", TOTAL_ANNOTATION_SIZE_LIMIT as i64));
        }
    }
    for field in ["labels", "annotations"] {
        let v = &obj["metadata"][field];
        if v.is_null() {
            continue;
        }
        let Some(m) = v.as_object() else {
            errs.push(FieldError {
                field: format!("metadata.{field}"),
                reason: FieldErrorReason::TypeInvalid,
                message: "Invalid value: must be a map of strings".into(),
            });
            continue;
        };
        for (k, val) in m {
            if !val.is_string() {
                errs.push(FieldError {
                    field: format!("metadata.{field}"),
                    reason: FieldErrorReason::TypeInvalid,
                    message: format!("Invalid value: {val}: values must be strings (key {k:?})"),
                });
            }
            let (prefix, name) = match k.rsplit_once('/') {
                Some((p, n)) => (Some(p), n),
                None => (None, k.as_str()),
            };
            let name_ok = !name.is_empty()
                && name.len() <= 63
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
                && name.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
                && name.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric);
            let prefix_ok = prefix.is_none_or(|p| validate_subdomain("", p).is_none());
            if !name_ok || !prefix_ok {
                errs.push(FieldError {
                    field: format!("metadata.{field}"),
                    reason: FieldErrorReason::Invalid,
                    message: format!("Invalid value: {k:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
                });
            }
            if field == "labels"
                && let Some(s) = val.as_str()
            {
                let ok = s.is_empty()
                    || (s.len() <= 63
                        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
                        && s.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
                        && s.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric));
                if !ok {
                    errs.push(FieldError {
                            field: "metadata.labels".to_string(),
                            reason: FieldErrorReason::Invalid,
                            message: format!("Invalid value: {s:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
                        });
                }
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_subdomain("metadata.name", "flights.com").is_none());
        assert!(validate_subdomain("metadata.name", "Bad_Name").is_some());
        assert!(validate_label("metadata.name", "a.b").is_some());
        assert!(validate_dns1035_label("metadata.name", "web-1").is_none());
        assert!(validate_dns1035_label("metadata.name", "1web").is_some());
        assert!(validate_path_segment("metadata.name", "system:controller:Foo").is_none());
        for bad in [".", "..", "a/b", "a%b"] {
            assert!(validate_path_segment("metadata.name", bad).is_some(), "{bad}");
        }
        assert_eq!(random_suffix().len(), 5);
    }

    #[test]
    fn noop_ignores_server_fields() {
        let a =
            json!({"metadata": {"resourceVersion": "1", "managedFields": [{"manager": "x", "time": "t1"}]}, "spec": 1});
        let b =
            json!({"metadata": {"resourceVersion": "2", "managedFields": [{"manager": "x", "time": "t2"}]}, "spec": 1});
        assert!(same_object(&a, &b));
        assert!(!same_object(&a, &json!({"metadata": {}, "spec": 2})));
    }

    #[test]
    fn label_keys_validated() {
        let bad = json!({"metadata": {"labels": {"-x": "y", "ok": "bad value"}}});
        assert_eq!(validate_meta_maps(&bad).len(), 2);
        assert!(validate_meta_maps(&json!({"metadata": {"labels": {"app.kubernetes.io/name": "web"}}})).is_empty());
    }

    #[test]
    fn annotations_total_size_is_limited() {
        let at_limit = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT - 1);
        assert!(validate_meta_maps(&json!({"metadata": {"annotations": {"a": at_limit}}})).is_empty());
        let over = json!({"metadata": {"annotations": {"a": at_limit, "b": ""}}});
        let errs = validate_meta_maps(&over);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].to_message(), "metadata.annotations: Too long: may not be more than 262144 bytes");
    }
}
