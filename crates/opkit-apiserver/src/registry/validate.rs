//! Admission of incoming objects: type checks, unknown-field handling (`fieldValidation`),
//! pruning and defaulting, schema and CEL validation, and a few built-in kinds' rules.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use serde_json::Value;

use super::meta::{validate_label, validate_meta_maps, validate_subdomain};
use super::{FieldValidation, Registry, Target, WriteOptions};
use crate::error::{ApiError, ApiResult};
use crate::schema::{CrdSchema, FieldError, FieldErrorReason};

type SchemaCache = Mutex<HashMap<(String, String), Option<Arc<CrdSchema>>>>;

/// The compiled schema of a built-in kind, for pruning and unknown-field detection.
fn builtin_schema(group: &str, kind: &str, version: &str) -> Option<Arc<CrdSchema>> {
    static CACHE: OnceLock<SchemaCache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = (group.to_string(), kind.to_string());
    if let Some(s) = cache.lock().get(&key) {
        return s.clone();
    }
    let compiled = crate::openapi::builtin_inline_schema(group, version, kind)
        .and_then(|raw| CrdSchema::new(&raw).ok())
        .map(Arc::new);
    cache.lock().insert(key, compiled.clone());
    compiled
}

fn required(field: &str) -> FieldError {
    FieldError { field: field.into(), reason: FieldErrorReason::Required, message: "Required value".into() }
}

impl Registry {
    /// Checks and normalises an incoming object before it is stored. Returns warnings.
    pub(crate) fn admit(
        &self,
        target: &Target,
        obj: &mut Value,
        old: Option<&Value>,
        opts: &WriteOptions,
    ) -> ApiResult<Vec<String>> {
        let info = &target.info;
        if !obj.is_object() {
            return Err(ApiError::bad_request("the request body must be a JSON or YAML object"));
        }
        match obj["kind"].as_str() {
            Some(k) if k != info.kind => {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({k:?}) does not match the expected kind ({:?})",
                    info.kind
                )));
            }
            _ => {}
        }
        match obj["apiVersion"].as_str() {
            Some(v) if v != target.api_version() => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({v}) does not match the expected API version ({})",
                    target.api_version()
                )));
            }
            _ => {}
        }
        obj["kind"] = Value::String(info.kind.clone());
        obj["apiVersion"] = Value::String(target.api_version());
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();

        let schema = match target.version_info()?.schema.clone() {
            Some(s) => Some(s),
            None if info.builtin => builtin_schema(&info.group, &info.kind, &target.version),
            None => None,
        };
        let mut warnings = Vec::new();
        if let Some(schema) = &schema {
            let unknown = schema.unknown_fields(obj);
            if !unknown.is_empty() {
                let list: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
                match opts.field_validation {
                    FieldValidation::Strict => {
                        return Err(ApiError::bad_request(format!(
                            "{kind} in version \"{v}\" cannot be handled as a {kind}: strict decoding error: {}",
                            list.join(", "),
                            kind = info.kind,
                            v = target.version
                        )));
                    }
                    FieldValidation::Warn => warnings.extend(list),
                    FieldValidation::Ignore => {}
                }
                schema.prune(obj);
            }
            if !info.builtin {
                schema.apply_defaults(obj);
            }
        }
        if info.builtin {
            if let Some(raw) = crate::openapi::builtin_inline_schema(&info.group, &target.version, &info.kind)
                && let Some(problem) = shape_error(&raw, obj, &info.kind)
            {
                return Err(ApiError::bad_request(format!(
                    "{kind} in version \"{v}\" cannot be handled as a {kind}: {problem}",
                    kind = info.kind,
                    v = target.version
                )));
            }
            if info.group.is_empty() && info.resource == "secrets" {
                normalize_secret(obj);
            }
            super::defaults::apply(&info.group, &info.resource, obj, old.is_none());
        }
        let mut errors = validate_meta_maps(obj);
        if let Some(fe) = match info.resource.as_str() {
            "namespaces" => validate_label("metadata.name", &name),
            _ => validate_subdomain("metadata.name", &name),
        } && !name.is_empty()
        {
            errors.push(fe);
        }
        if let Some(schema) = &schema
            && !info.builtin
        {
            errors.extend(schema.validate(obj, old));
        }
        errors.extend(validate_builtin(&info.group, &info.resource, obj));
        if info.group == "apiextensions.k8s.io" && info.resource == "customresourcedefinitions" {
            errors.extend(crate::schema::validate_crd(obj));
        }
        if !errors.is_empty() {
            return Err(ApiError::invalid(&info.group, &info.kind, &name, &errors));
        }
        Ok(warnings)
    }
}

/// Merges `stringData` into `data` (base64) and defaults `type` to `Opaque`, as the
/// Secret conversion and defaulting of kube-apiserver do.
fn normalize_secret(obj: &mut Value) {
    use base64::Engine;
    if let Some(Value::Object(strings)) = obj.as_object_mut().and_then(|o| o.remove("stringData")) {
        if !obj["data"].is_object() {
            obj["data"] = Value::Object(Default::default());
        }
        for (k, v) in strings {
            let text = v.as_str().map(String::from).unwrap_or_else(|| v.to_string());
            obj["data"][k] = Value::String(base64::engine::general_purpose::STANDARD.encode(text));
        }
    }
    if obj["type"].as_str().is_none_or(str::is_empty) {
        obj["type"] = Value::String("Opaque".into());
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Finds a value whose JSON shape cannot decode into the built-in type (an object where a
/// string is expected, a scalar where a list is expected …), reported like Go's decoder.
/// Numbers and strings are not told apart: kube accepts numbers for quantities.
fn shape_error(schema: &Value, obj: &Value, kind: &str) -> Option<String> {
    fn walk(schema: &Value, v: &Value, path: &mut Vec<String>, kind: &str) -> Option<String> {
        if v.is_null()
            || schema["x-kubernetes-int-or-string"] == true
            || schema["x-kubernetes-preserve-unknown-fields"] == true
        {
            return None;
        }
        let expected = match &schema["type"] {
            Value::String(t) => t.as_str(),
            _ => return None,
        };
        let fail = |want: &str| {
            Some(format!(
                "json: cannot unmarshal {} into Go struct field {kind}.{} of type {want}",
                json_kind(v),
                path.join(".")
            ))
        };
        match (expected, v) {
            ("object", Value::Object(m)) => {
                for (k, child) in m {
                    let sub = schema["properties"]
                        .get(k)
                        .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
                    if let Some(sub) = sub {
                        path.push(k.clone());
                        let r = walk(sub, child, path, kind);
                        path.pop();
                        if r.is_some() {
                            return r;
                        }
                    }
                }
                None
            }
            ("object", _) => fail("object"),
            ("array", Value::Array(items)) => items.iter().find_map(|i| walk(&schema["items"], i, path, kind)),
            ("array", _) => fail("array"),
            ("string" | "integer" | "number" | "boolean", Value::Object(_) | Value::Array(_)) => fail(expected),
            ("boolean", Value::String(_) | Value::Number(_)) => fail("bool"),
            _ => None,
        }
    }
    walk(schema, obj, &mut Vec::new(), kind)
}

/// The handful of built-in rules operators and kubectl users run into most.
fn validate_builtin(group: &str, resource: &str, obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let containers = |errs: &mut Vec<FieldError>, spec: &Value, path: &str| match spec["containers"].as_array() {
        Some(cs) if !cs.is_empty() => {
            for (i, c) in cs.iter().enumerate() {
                if c["name"].as_str().is_none_or(str::is_empty) {
                    errs.push(required(&format!("{path}.containers[{i}].name")));
                }
                if c["image"].as_str().is_none_or(str::is_empty) {
                    errs.push(required(&format!("{path}.containers[{i}].image")));
                }
            }
        }
        _ => errs.push(required(&format!("{path}.containers"))),
    };
    match (group, resource) {
        ("", "pods") => containers(&mut errs, &obj["spec"], "spec"),
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets") => {
            let sel = &obj["spec"]["selector"];
            if !sel.is_object() {
                errs.push(required("spec.selector"));
            } else if let Ok(s) = crate::selector::LabelSelector::from_label_selector_json(sel) {
                if s.is_empty() {
                    errs.push(FieldError {
                        field: "spec.selector".into(),
                        reason: FieldErrorReason::Invalid,
                        message: "Invalid value: \"null\": empty selector is invalid for deployment".into(),
                    });
                } else if !s.matches(obj["spec"]["template"]["metadata"]["labels"].as_object()) {
                    errs.push(FieldError {
                        field: "spec.template.metadata.labels".into(),
                        reason: FieldErrorReason::Invalid,
                        message: format!(
                            "Invalid value: {}: `selector` does not match template `labels`",
                            obj["spec"]["template"]["metadata"]["labels"]
                        ),
                    });
                }
            }
            containers(&mut errs, &obj["spec"]["template"]["spec"], "spec.template.spec");
            if let Some(r) = obj["spec"]["replicas"].as_i64()
                && r < 0
            {
                errs.push(FieldError {
                    field: "spec.replicas".into(),
                    reason: FieldErrorReason::Invalid,
                    message: format!("Invalid value: {r}: must be greater than or equal to 0"),
                });
            }
        }
        ("batch", "jobs") => containers(&mut errs, &obj["spec"]["template"]["spec"], "spec.template.spec"),
        ("", "configmaps") => {
            for field in ["data", "binaryData"] {
                if let Some(m) = obj[field].as_object() {
                    for k in m.keys() {
                        let ok = !k.is_empty()
                            && k.len() <= 253
                            && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
                        if !ok {
                            errs.push(FieldError {
                                field: format!("{field}[{k}]"),
                                reason: FieldErrorReason::Invalid,
                                message: format!("Invalid value: {k:?}: a valid config key must consist of alphanumeric characters, '-', '_' or '.'"),
                            });
                        }
                    }
                }
            }
        }
        _ => {}
    }
    errs
}
