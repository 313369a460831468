//! Admission of incoming objects: type checks, unknown-field handling (`fieldValidation`),
//! pruning and defaulting, schema and CEL validation, the kind's own rules (its
//! [`super::strategy::Strategy`]) and the admission chain the registry was given
//! ([`super::admission::Admission`]).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;
use serde_json::Value;

use super::admission::{Attributes, Operation};
use super::meta::validate_meta_maps;
use super::{FieldValidation, Registry, Target, WriteOptions};
use crate::depth;
use crate::error::{ApiError, ApiResult};
use crate::schema::{CrdSchema, FieldError, FieldErrorReason};

/// Refuses a final object nested deeper than the server can read back
/// ([`depth::MAX_OBJECT_DEPTH`]); every write checks it just before storing.
pub(super) fn check_depth(target: &Target, name: &str, obj: &Value) -> ApiResult<()> {
    if !depth::too_deep(obj) {
        return Ok(());
    }
    Err(ApiError::invalid(
        &target.info.group,
        &target.info.kind,
        name,
        &[FieldError {
            field: depth::too_deep_field(obj),
            reason: FieldErrorReason::Invalid,
            message: depth::too_deep_message(),
        }],
    ))
}

/// Compiled schemas by group, then kind, then version: looked up by borrowed names under
/// a read lock, so a request builds no key and waits on no other request.
type SchemaCache = RwLock<HashMap<String, HashMap<String, HashMap<String, Option<Arc<CrdSchema>>>>>>;

/// The compiled schema of a built-in kind, for pruning and unknown-field detection.
fn builtin_schema(group: &str, kind: &str, version: &str) -> Option<Arc<CrdSchema>> {
    static CACHE: OnceLock<SchemaCache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(s) = cache.read().get(group).and_then(|k| k.get(kind)).and_then(|v| v.get(version)) {
        return s.clone();
    }
    let compiled = crate::openapi::builtin_inline_schema(group, version, kind)
        .and_then(|raw| CrdSchema::new(&raw).ok())
        .map(Arc::new);
    cache
        .write()
        .entry(group.to_string())
        .or_default()
        .entry(kind.to_string())
        .or_default()
        .insert(version.to_string(), compiled.clone());
    compiled
}

impl Registry {
    /// Checks and normalises an incoming object before it is stored: type metadata,
    /// unknown fields, defaults, the kind's admission, the mutating admission phase,
    /// validation, then the validating admission phase. Returns warnings.
    pub(crate) async fn admit(
        &self,
        target: &Target,
        obj: &mut Value,
        old: Option<&Value>,
        opts: &WriteOptions,
    ) -> ApiResult<Vec<String>> {
        let info = &target.info;
        let schema = match target.version_info()?.schema.clone() {
            Some(s) => Some(s),
            None if info.builtin => builtin_schema(&info.group, &info.kind, &target.version),
            None => None,
        };
        let mut warnings = normalize(target, schema.as_deref(), obj, old, opts)?;
        target.strategy.admit(&self.view(), obj, old, &opts.user)?;
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let operation = if old.is_some() { Operation::Update } else { Operation::Create };
        let attrs = Attributes { target, operation, name: &name, subresource: None, old, opts };
        let mutated = self.admission_mutate(&attrs, obj).await?;
        if mutated.mutated {
            // A mutating plugin or webhook changed the object: it is decoded again, as
            // kube decodes a patched object (type checks, pruning, defaults).
            warnings.extend(normalize(target, schema.as_deref(), obj, old, opts)?);
        }
        self.admission.record(&mutated);
        warnings.extend(mutated.warnings);
        let mut errors = validate(target, schema.as_deref(), obj, old);
        if errors.is_empty() {
            errors = target.strategy.allocate(&self.view(), obj, old);
        }
        if !errors.is_empty() {
            return Err(ApiError::invalid(&info.group, &info.kind, &name, &errors));
        }
        let validated = self.admission_validate(&attrs, obj).await?;
        self.admission.record(&validated);
        warnings.extend(validated.warnings);
        Ok(warnings)
    }
}

/// Type metadata, unknown fields (as `fieldValidation` says), schema defaults, the shape
/// of a built-in object and the kind's defaults. Returns warnings.
fn normalize(
    target: &Target,
    schema: Option<&CrdSchema>,
    obj: &mut Value,
    old: Option<&Value>,
    opts: &WriteOptions,
) -> ApiResult<Vec<String>> {
    let info = &target.info;
    check_type_meta(target, obj)?;
    let mut warnings = Vec::new();
    if let Some(schema) = schema {
        warnings = drop_unknown_fields(target, schema, obj, opts.field_validation)?;
        if !info.builtin {
            schema.apply_defaults(obj);
        }
    }
    if info.builtin {
        check_builtin_shape(target, obj)?;
    }
    target.strategy.default(obj, old.is_none());
    Ok(warnings)
}

/// Checks `kind` and `apiVersion` against the target (when given) and sets them.
fn check_type_meta(target: &Target, obj: &mut Value) -> ApiResult<()> {
    let info = &target.info;
    if !obj.is_object() {
        return Err(ApiError::bad_request("the request body must be a JSON or YAML object"));
    }
    if let Some(k) = obj["kind"].as_str()
        && k != info.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k:?}) does not match the expected kind ({:?})",
            info.kind
        )));
    }
    if let Some(v) = obj["apiVersion"].as_str()
        && v != target.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({})",
            target.api_version()
        )));
    }
    obj["kind"] = Value::String(info.kind.clone());
    obj["apiVersion"] = Value::String(target.api_version());
    Ok(())
}

/// Prunes fields the schema does not know, as `fieldValidation` says: an error
/// (Strict), warnings (Warn) or silently (Ignore).
fn drop_unknown_fields(
    target: &Target,
    schema: &CrdSchema,
    obj: &mut Value,
    validation: FieldValidation,
) -> ApiResult<Vec<String>> {
    let unknown = schema.unknown_fields(obj);
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    let list: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
    let warnings = match validation {
        FieldValidation::Strict => {
            return Err(ApiError::bad_request(format!(
                "{kind} in version \"{v}\" cannot be handled as a {kind}: strict decoding error: {}",
                list.join(", "),
                kind = target.info.kind,
                v = target.version
            )));
        }
        FieldValidation::Warn => list,
        FieldValidation::Ignore => Vec::new(),
    };
    schema.prune(obj);
    Ok(warnings)
}

/// Refuses a built-in object whose JSON shape cannot decode into its Go type.
fn check_builtin_shape(target: &Target, obj: &Value) -> ApiResult<()> {
    let info = &target.info;
    if let Some(raw) = crate::openapi::builtin_inline_schema(&info.group, &target.version, &info.kind)
        && let Some(problem) = shape_error(&raw, obj, &info.kind)
    {
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{v}\" cannot be handled as a {kind}: {problem}",
            kind = info.kind,
            v = target.version
        )));
    }
    Ok(())
}

/// Every validation error of the object: metadata, name, a CRD's schema and CEL rules,
/// and the kind's own rules.
fn validate(target: &Target, schema: Option<&CrdSchema>, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let mut errors = validate_meta_maps(obj);
    if !name.is_empty()
        && let Some(fe) = target.strategy.validate_name(name)
    {
        errors.push(fe);
    }
    if let Some(schema) = schema
        && !target.info.builtin
    {
        errors.extend(schema.validate(obj, old));
    }
    errors.extend(target.strategy.validate(obj));
    errors
}

/// Finds a value that cannot decode into the built-in Go type, reported as Go's decoder
/// reports it: an object where a string is expected, a string where an integer is, a
/// number past its `int32`/`int64` range or with a fraction, a number where a string is,
/// or `format: byte` data that is not base64. Quantities and IntOrStrings
/// (`x-kubernetes-int-or-string`) take both numbers and strings, as in Go.
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
        let go_type = go_type_name(expected, schema["format"].as_str());
        let fail = |found: String| {
            Some(format!(
                "json: cannot unmarshal {found} into Go struct field {kind}.{} of type {go_type}",
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
            ("array", Value::Array(items)) => items.iter().find_map(|i| walk(&schema["items"], i, path, kind)),
            ("integer", Value::Number(n)) if !integer_fits(n, schema["format"].as_str()) => fail(format!("number {n}")),
            ("integer" | "number", Value::Number(_)) | ("boolean", Value::Bool(_)) => None,
            ("string", Value::String(s)) if schema["format"] == "byte" => base64_error(s),
            ("string", Value::String(_)) => None,
            _ => fail(crate::json::go_json_kind(v).to_string()),
        }
    }
    walk(schema, obj, &mut Vec::new(), kind)
}

/// The Go type an OpenAPI type and format decode into, as Go's decoder names it.
fn go_type_name(openapi_type: &str, format: Option<&str>) -> &'static str {
    match (openapi_type, format) {
        ("integer", Some("int32")) => "int32",
        ("integer", _) => "int64",
        ("number", _) => "float64",
        ("boolean", _) => "bool",
        ("string", Some("byte")) => "[]uint8",
        ("string", _) => "string",
        ("array", _) => "slice",
        _ => "map",
    }
}

/// Whether a JSON number decodes into a Go integer of the given format: whole, and in
/// range (`int32` for format int32, `int64` otherwise).
fn integer_fits(n: &serde_json::Number, format: Option<&str>) -> bool {
    let Some(i) = n.as_i64() else { return false };
    format != Some("int32") || i32::try_from(i).is_ok()
}

/// Go's error for `format: byte` data that standard base64 does not decode.
fn base64_error(s: &str) -> Option<String> {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    // Go's decoder skips line breaks inside the data.
    let compact: String = s.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    let offset = match STANDARD.decode(&compact) {
        Ok(_) => return None,
        Err(base64::DecodeError::InvalidByte(at, _)) | Err(base64::DecodeError::InvalidLastSymbol(at, _)) => at,
        Err(base64::DecodeError::InvalidLength(len)) => len - len % 4,
        Err(base64::DecodeError::InvalidPadding) => compact.find('=').unwrap_or(compact.len()),
    };
    Some(format!("illegal base64 data at input byte {offset}"))
}
