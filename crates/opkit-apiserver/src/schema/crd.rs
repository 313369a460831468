//! Validation of a whole CustomResourceDefinition (apiextensions.k8s.io/v1) on create/update,
//! after kube's `ValidateCustomResourceDefinition`.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::CrdSchema;
use super::cel::resolve_field_path;
use super::crd_schema::validate_schema;
use super::errors::{FieldError, FieldErrorReason};

const DNS1123_SUBDOMAIN_FMT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";

static DNS1123_SUBDOMAIN: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(&format!("^{DNS1123_SUBDOMAIN_FMT}$")).ok());
static DNS1035_LABEL: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(&format!("^{DNS1035_LABEL_FMT}$")).ok());

/// `IsDNS1123Subdomain` messages.
pub(crate) fn dns1123_subdomain_errors(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    if v.len() > 253 {
        out.push("must be no more than 253 characters".to_string());
    }
    if !DNS1123_SUBDOMAIN.as_ref().is_none_or(|r| r.is_match(v)) {
        out.push(format!(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '{DNS1123_SUBDOMAIN_FMT}')"
        ));
    }
    out
}

/// `IsDNS1035Label` messages.
pub(crate) fn dns1035_label_errors(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    if v.len() > 63 {
        out.push("must be no more than 63 characters".to_string());
    }
    if !DNS1035_LABEL.as_ref().is_none_or(|r| r.is_match(v)) {
        out.push(format!(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '{DNS1035_LABEL_FMT}')"
        ));
    }
    out
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|x| x.to_string()).collect()
}

/// Validate a whole CustomResourceDefinition object (apiextensions.k8s.io/v1, as JSON) the way
/// kube-apiserver validates it on create/update. Missing `names.singular`/`names.listKind` are
/// treated as defaulted (kube defaults them before validating).
pub(crate) fn validate_crd(crd: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
    let group = s(&spec, "group");
    let names = spec.get("names").cloned().unwrap_or(Value::Null);
    let plural = s(&names, "plural");

    // metadata.name
    let name = crd.get("metadata").map_or("", |m| s(m, "name"));
    if name.is_empty() {
        errs.push(FieldError::required("metadata.name", "name or generateName is required"));
    } else {
        for msg in dns1123_subdomain_errors(name) {
            errs.push(FieldError::invalid_str("metadata.name", name, &msg));
        }
        if name != format!("{plural}.{group}") {
            errs.push(FieldError::invalid_str("metadata.name", name, "must be spec.names.plural+\".\"+spec.group"));
        }
    }

    // spec.group
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else {
        let e = dns1123_subdomain_errors(group);
        if !e.is_empty() {
            errs.push(FieldError::invalid_str("spec.group", group, &e.join(",")));
        } else if group.split('.').count() < 2 {
            errs.push(FieldError::invalid_str("spec.group", group, "should be a domain with at least one dot"));
        }
    }

    // spec.scope
    let scope = s(&spec, "scope");
    if scope.is_empty() {
        errs.push(FieldError::required("spec.scope", ""));
    } else if scope != "Cluster" && scope != "Namespaced" {
        errs.push(FieldError::not_supported("spec.scope", &Value::from(scope), &strings(&["Cluster", "Namespaced"])));
    }

    validate_names(&names, &mut errs);
    validate_versions(&spec, &mut errs);

    if spec.get("preserveUnknownFields").and_then(Value::as_bool) == Some(true) {
        errs.push(FieldError::invalid(
            "spec.preserveUnknownFields",
            &Value::Bool(true),
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }
    if let Some(conv) = spec.get("conversion").filter(|c| c.is_object()) {
        let strategy = s(conv, "strategy");
        match strategy {
            "None" => errs.extend(validate_no_conversion_webhook(&conv["webhook"])),
            "Webhook" => errs.extend(validate_conversion_webhook(&conv["webhook"])),
            "" => errs.push(FieldError::required("spec.conversion.strategy", "")),
            other => errs.push(FieldError::not_supported(
                "spec.conversion.strategy",
                &Value::from(other),
                &strings(&["None", "Webhook"]),
            )),
        }
    }
    errs
}

/// kube's checks of the webhook of a `Webhook` conversion, reported at the paths of
/// kube's internal type (`spec.conversion.webhookClientConfig`,
/// `spec.conversion.conversionReviewVersions`), as kube-apiserver reports them.
fn validate_conversion_webhook(webhook: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let config = &webhook["clientConfig"];
    let set = |k: &str| config.get(k).is_some_and(|v| !v.is_null());
    if !config.is_object() {
        errs.push(FieldError::required(
            "spec.conversion.webhookClientConfig",
            "required when strategy is set to Webhook",
        ));
    } else if set("url") == set("service") {
        errs.push(FieldError::required(
            "spec.conversion.webhookClientConfig",
            "exactly one of url or service is required",
        ));
    }
    let field = "spec.conversion.conversionReviewVersions";
    let versions: Vec<&str> = webhook["conversionReviewVersions"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if versions.is_empty() {
        errs.push(FieldError::required(field, ""));
        return errs;
    }
    let mut seen = HashSet::new();
    for (i, v) in versions.iter().enumerate() {
        if !seen.insert(*v) {
            errs.push(FieldError::invalid(&format!("{field}[{i}]"), &Value::from(*v), "duplicate version"));
        }
    }
    if !versions.iter().any(|v| matches!(*v, "v1" | "v1beta1")) {
        // Go prints the list as `%#v`: []string{"v2", "v3"}.
        let shown: Vec<String> = versions.iter().map(|v| format!("{v:?}")).collect();
        errs.push(FieldError {
            field: field.into(),
            reason: FieldErrorReason::Invalid,
            message: format!(
                "Invalid value: []string{{{}}}: must include at least one of v1, v1beta1",
                shown.join(", ")
            ),
        });
    }
    errs
}

/// kube refuses a conversion webhook's settings when the strategy is `None`.
fn validate_no_conversion_webhook(webhook: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let why = "should not be set when strategy is not set to Webhook";
    if webhook["clientConfig"].is_object() {
        errs.push(FieldError::forbidden("spec.conversion.webhookClientConfig", why));
    }
    if webhook["conversionReviewVersions"].as_array().is_some_and(|a| !a.is_empty()) {
        errs.push(FieldError::forbidden("spec.conversion.conversionReviewVersions", why));
    }
    errs
}

fn validate_names(names: &Value, errs: &mut Vec<FieldError>) {
    let plural = s(names, "plural");
    let singular = s(names, "singular");
    let kind = s(names, "kind");
    let list_kind = s(names, "listKind");
    if plural.is_empty() {
        errs.push(FieldError::required("spec.names.plural", ""));
    }
    if kind.is_empty() {
        errs.push(FieldError::required("spec.names.kind", ""));
    }
    let label = |field: &str, v: &str, prefix: &str, errs: &mut Vec<FieldError>| {
        let lower = if prefix.is_empty() { v.to_string() } else { v.to_lowercase() };
        let e = dns1035_label_errors(&lower);
        if !v.is_empty() && !e.is_empty() {
            errs.push(FieldError::invalid_str(field, v, &format!("{prefix}{}", e.join(","))));
        }
    };
    label("spec.names.plural", plural, "", errs);
    label("spec.names.singular", singular, "", errs);
    label("spec.names.kind", kind, "may have mixed case, but should otherwise match: ", errs);
    label("spec.names.listKind", list_kind, "may have mixed case, but should otherwise match: ", errs);
    for key in ["shortNames", "categories"] {
        if let Some(arr) = names.get(key).and_then(Value::as_array) {
            for (i, x) in arr.iter().enumerate() {
                label(&format!("spec.names.{key}[{i}]"), x.as_str().unwrap_or(""), "", errs);
            }
        }
    }
    if !kind.is_empty() && kind == list_kind {
        errs.push(FieldError::invalid_str("spec.names.listKind", list_kind, "kind and listKind may not be the same"));
    }
}

fn validate_versions(spec: &Value, errs: &mut Vec<FieldError>) {
    let versions = spec.get("versions").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut seen = HashSet::new();
    let mut storage = 0;
    for (i, v) in versions.iter().enumerate() {
        let p = format!("spec.versions[{i}]");
        let name = s(v, "name");
        if name.is_empty() {
            errs.push(FieldError::required(&format!("{p}.name"), ""));
        } else {
            let e = dns1035_label_errors(name);
            if !e.is_empty() {
                errs.push(FieldError::invalid_str(&format!("{p}.name"), name, &e.join(",")));
            }
            if !seen.insert(name.to_string()) {
                errs.push(FieldError::duplicate(&format!("{p}.name"), &Value::from(name)));
            }
        }
        if v.get("storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        let schema_path = format!("{p}.schema.openAPIV3Schema");
        let compiled = match v.get("schema").and_then(|x| x.get("openAPIV3Schema")).filter(|x| x.is_object()) {
            None => {
                errs.push(FieldError::required(&schema_path, "schemas are required"));
                None
            }
            Some(schema) => {
                let structural = validate_schema(schema, &schema_path);
                if structural.is_empty() {
                    match CrdSchema::compile_at(schema, &schema_path) {
                        Ok(c) => {
                            errs.extend(super::cel_cost::cost_errors(schema, &schema_path));
                            Some(c)
                        }
                        Err(e) => {
                            errs.extend(e);
                            None
                        }
                    }
                } else {
                    errs.extend(structural);
                    None
                }
            }
        };
        validate_columns(v, &p, errs);
        validate_selectable_fields(v, &p, compiled.as_ref(), errs);
        validate_scale(v, &p, errs);
    }
    if versions.is_empty() {
        errs.push(FieldError::required("spec.versions", "must have exactly one version marked as storage version"));
    } else if storage != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            &Value::Array(versions),
            "must have exactly one version marked as storage version",
        ));
    }
}

/// `validateSimpleJSONPath`.
fn simple_json_path_errors(path: &str, field: &str, errs: &mut Vec<FieldError>) {
    if path.is_empty() {
        errs.push(FieldError::invalid_str(field, path, "must not be empty"));
    } else if !path.starts_with('.') {
        errs.push(FieldError::invalid_str(field, path, "must be a simple json path starting with ."));
    }
}

fn validate_columns(v: &Value, p: &str, errs: &mut Vec<FieldError>) {
    let Some(cols) = v.get("additionalPrinterColumns").and_then(Value::as_array) else {
        return;
    };
    const TYPES: &str = "boolean,date,integer,number,string";
    const FORMATS: &str = "byte,date,date-time,double,float,int32,int64,password";
    for (i, c) in cols.iter().enumerate() {
        let cp = format!("{p}.additionalPrinterColumns[{i}]");
        if s(c, "name").is_empty() {
            errs.push(FieldError::required(&format!("{cp}.name"), ""));
        }
        let ty = s(c, "type");
        if ty.is_empty() {
            errs.push(FieldError::required(&format!("{cp}.type"), &format!("must be one of {TYPES}")));
        } else if !TYPES.split(',').any(|t| t == ty) {
            errs.push(FieldError::invalid_str(&format!("{cp}.type"), ty, &format!("must be one of {TYPES}")));
        }
        let format = s(c, "format");
        if !format.is_empty() && !FORMATS.split(',').any(|f| f == format) {
            errs.push(FieldError::invalid_str(&format!("{cp}.format"), format, &format!("must be one of {FORMATS}")));
        }
        let jp = s(c, "jsonPath");
        if jp.is_empty() {
            errs.push(FieldError::required(&format!("{cp}.JSONPath"), ""));
        } else {
            simple_json_path_errors(jp, &format!("{cp}.JSONPath"), errs);
        }
    }
}

fn validate_selectable_fields(v: &Value, p: &str, schema: Option<&CrdSchema>, errs: &mut Vec<FieldError>) {
    let Some(fields) = v.get("selectableFields").and_then(Value::as_array) else {
        return;
    };
    let fp = format!("{p}.selectableFields");
    if fields.len() > 8 {
        errs.push(FieldError::too_many(&fp, fields.len() as i64, 8));
    }
    let mut unique = HashSet::new();
    for (i, f) in fields.iter().enumerate() {
        let jp_field = format!("{fp}[{i}].jsonPath");
        let jp = s(f, "jsonPath");
        if jp.is_empty() {
            errs.push(FieldError::required(&jp_field, ""));
            continue;
        }
        let Some(schema) = schema else { continue };
        match resolve_field_path(jp, &schema.root, false) {
            Err(e) => errs.push(FieldError::invalid_str(&jp_field, jp, &format!("is an invalid path: {e}"))),
            Ok((path, node)) => {
                if path == "metadata" || path.starts_with("metadata.") {
                    errs.push(FieldError::invalid_str(&jp_field, jp, "must not point to fields in metadata"));
                }
                if !matches!(node.ty.as_str(), "string" | "integer" | "boolean") {
                    errs.push(FieldError::invalid_str(
                        &jp_field,
                        jp,
                        "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
                    ));
                }
                if !unique.insert(path) {
                    errs.push(FieldError::duplicate(&jp_field, &Value::from(jp)));
                }
            }
        }
    }
}

fn validate_scale(v: &Value, p: &str, errs: &mut Vec<FieldError>) {
    let Some(scale) = v.get("subresources").and_then(|x| x.get("scale")).filter(|x| x.is_object()) else {
        return;
    };
    let sp = format!("{p}.subresources.scale");
    for (key, prefix, required) in [
        ("specReplicasPath", ".spec.", true),
        ("statusReplicasPath", ".status.", true),
        ("labelSelectorPath", "", false),
    ] {
        let val = s(scale, key);
        let field = format!("{sp}.{key}");
        if val.is_empty() {
            if required {
                errs.push(FieldError::required(&field, ""));
            }
            continue;
        }
        let before = errs.len();
        simple_json_path_errors(val, &field, errs);
        if errs.len() == before && !prefix.is_empty() && !val.starts_with(prefix) {
            let under = prefix.trim_end_matches('.');
            errs.push(FieldError::invalid_str(&field, val, &format!("should be a json path under {under}")));
        }
    }
}
