//! Checks that a CRD version's openAPIV3Schema is structural and otherwise acceptable
//! (apiextensions `ValidateStructural` invariants plus the OpenAPI-schema rules of CRD validation).

use serde_json::{Map, Value};

use super::errors::FieldError;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

fn get_str<'a>(m: &'a Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or("")
}

fn get_bool(m: &Map<String, Value>, k: &str) -> bool {
    m.get(k).and_then(Value::as_bool).unwrap_or(false)
}

/// Validates `schema` (at `path`) and returns kube's errors, sorted like `ValidateStructural`.
pub(crate) fn validate_schema(schema: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    invariants(schema, Level::Root, path, &mut errs);
    errs.sort_by_key(|e| e.to_message());
    errs
}

fn is_int_or_string_any_of(any_of: Option<&Value>) -> bool {
    let Some(arr) = any_of.and_then(Value::as_array) else {
        return false;
    };
    arr.len() == 2
        && arr[0].as_object().is_some_and(|m| m.len() == 1 && get_str(m, "type") == "integer")
        && arr[1].as_object().is_some_and(|m| m.len() == 1 && get_str(m, "type") == "string")
}

/// The `x-kubernetes-*` flags of one schema node.
#[derive(Clone, Copy)]
struct Extensions {
    embedded: bool,
    preserve: bool,
    int_or_string: bool,
}

fn invariants(v: &Value, lvl: Level, path: &str, errs: &mut Vec<FieldError>) {
    let Some(m) = v.as_object() else { return };
    let ty = get_str(m, "type");
    type_and_children(m, ty, path, errs);
    let props = m.get("properties").and_then(Value::as_object);
    let ext = Extensions {
        embedded: get_bool(m, "x-kubernetes-embedded-resource"),
        preserve: get_bool(m, "x-kubernetes-preserve-unknown-fields"),
        int_or_string: get_bool(m, "x-kubernetes-int-or-string"),
    };
    if let Some(ap) = m.get("additionalProperties") {
        additional_properties_checks(ap, lvl, props, path, errs);
    }
    extension_checks(m, ext, path, errs);
    list_type_checks(m, ty, path, errs);
    junctor_checks(m, path, errs);
    type_checks(m, ty, lvl, ext, path, errs);
    if let Some(props) = props {
        meta_field_checks(props, lvl == Level::Root || ext.embedded, lvl, path, errs);
    }
    if ext.embedded && !ext.preserve && props.is_none_or(|p| p.is_empty()) {
        errs.push(FieldError::required(
            &format!("{path}.properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// The node's type is a supported one and `$ref` is not used; then the checks of its
/// `items` and `properties`.
fn type_and_children(m: &Map<String, Value>, ty: &str, path: &str, errs: &mut Vec<FieldError>) {
    if !ty.is_empty() && !["object", "array", "string", "integer", "number", "boolean"].contains(&ty) {
        let supported: Vec<String> =
            ["array", "boolean", "integer", "number", "object", "string"].iter().map(|s| s.to_string()).collect();
        errs.push(FieldError::not_supported(&format!("{path}.type"), &Value::from(ty), &supported));
    }
    if m.contains_key("$ref") {
        errs.push(FieldError::forbidden(&format!("{path}.$ref"), "$ref is not supported"));
    }
    if ty == "array" && !m.get("items").is_some_and(Value::is_object) {
        errs.push(FieldError::required(&format!("{path}.items"), "must be specified"));
    }
    if let Some(items) = m.get("items") {
        invariants(items, Level::Item, &format!("{path}.items"), errs);
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        for (k, p) in props {
            invariants(p, Level::Field, &format!("{path}.properties[{k}]"), errs);
        }
    }
}

/// `additionalProperties` (`ap`): not at the root, not with properties, not false; a
/// schema in it is checked as a field's.
fn additional_properties_checks(
    ap: &Value,
    lvl: Level,
    props: Option<&Map<String, Value>>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if lvl == Level::Root {
        errs.push(FieldError::forbidden(&format!("{path}.additionalProperties"), "must not be used at the root"));
    }
    if props.is_some_and(|p| !p.is_empty()) {
        errs.push(FieldError::forbidden(
            &format!("{path}.additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if ap == &Value::Bool(false) {
        errs.push(FieldError::forbidden(&format!("{path}.additionalProperties"), "must not be false"));
    }
    if ap.is_object() {
        invariants(ap, Level::Field, &format!("{path}.additionalProperties"), errs);
    }
}

/// The `x-kubernetes-*` flags that exclude each other, a false
/// `x-kubernetes-preserve-unknown-fields`, and `uniqueItems`.
fn extension_checks(m: &Map<String, Value>, ext: Extensions, path: &str, errs: &mut Vec<FieldError>) {
    if ext.int_or_string && ext.preserve {
        errs.push(FieldError::invalid(
            &format!("{path}.x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if ext.int_or_string && ext.embedded {
        errs.push(FieldError::invalid(
            &format!("{path}.x-kubernetes-embedded-resource"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errs.push(FieldError::invalid(
            &format!("{path}.x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(false),
            "must be true or undefined",
        ));
    }
    if get_bool(m, "uniqueItems") {
        errs.push(FieldError::forbidden(
            &format!("{path}.uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
}

/// The value validations (junctors `anyOf`, `allOf`, `oneOf`, `not`), except the
/// int-or-string `anyOf` pattern.
fn junctor_checks(m: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    let skip_any_of = is_int_or_string_any_of(m.get("anyOf"));
    let skip_first_all_of_any_of = m
        .get("allOf")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .is_some_and(|f| is_int_or_string_any_of(f.get("anyOf")));
    if !skip_any_of {
        nested_list(m.get("anyOf"), "anyOf", path, false, errs);
    }
    nested_list(m.get("allOf"), "allOf", path, skip_first_all_of_any_of, errs);
    nested_list(m.get("oneOf"), "oneOf", path, false, errs);
    if let Some(not) = m.get("not") {
        nested(not, false, &format!("{path}.not"), errs);
    }
}

/// The type a node must have: object when embedded or at the root, some type unless it
/// is int-or-string or preserves unknown fields.
fn type_checks(m: &Map<String, Value>, ty: &str, lvl: Level, ext: Extensions, path: &str, errs: &mut Vec<FieldError>) {
    if ext.embedded && ty != "object" {
        if ty.is_empty() {
            errs.push(FieldError::required(
                &format!("{path}.type"),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        } else {
            errs.push(FieldError::invalid_str(
                &format!("{path}.type"),
                ty,
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        }
    } else if ty.is_empty() && !ext.int_or_string && !ext.preserve {
        let detail = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(&format!("{path}.type"), detail));
    }
    if ext.embedded && m.contains_key("additionalProperties") {
        errs.push(FieldError::forbidden(
            &format!("{path}.additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !ty.is_empty() && ty != "object" {
        errs.push(FieldError::invalid_str(&format!("{path}.type"), ty, "must be object at the root"));
    }
}

/// `kind`, `apiVersion` and `metadata` among the properties of the root or of an
/// embedded resource (`check_meta`).
fn meta_field_checks(props: &Map<String, Value>, check_meta: bool, lvl: Level, path: &str, errs: &mut Vec<FieldError>) {
    for k in ["kind", "apiVersion"] {
        if let Some(p) = props.get(k).and_then(Value::as_object)
            && check_meta
            && get_str(p, "type") != "string"
        {
            errs.push(FieldError::invalid_str(
                &format!("{path}.properties[{k}].type"),
                get_str(p, "type"),
                "must be string",
            ));
        }
    }
    if let Some(meta) = props.get("metadata").and_then(Value::as_object) {
        metadata_checks(meta, check_meta, lvl, &format!("{path}.properties[metadata]"), errs);
    }
}

fn metadata_checks(meta: &Map<String, Value>, check_meta: bool, lvl: Level, path: &str, errs: &mut Vec<FieldError>) {
    let ty = get_str(meta, "type");
    if check_meta && ty != "object" {
        errs.push(FieldError::invalid_str(&format!("{path}.type"), ty, "must be object"));
    }
    if lvl == Level::Root {
        let only_names = meta.iter().all(|(k, v)| match k.as_str() {
            "type" | "description" | "default" => true,
            "properties" => v.as_object().is_some_and(|p| p.keys().all(|n| n == "name" || n == "generateName")),
            _ => false,
        });
        if !only_names {
            errs.push(FieldError::forbidden(
                path,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
}

fn list_type_checks(m: &Map<String, Value>, ty: &str, path: &str, errs: &mut Vec<FieldError>) {
    let lt = m.get("x-kubernetes-list-type").and_then(Value::as_str);
    let keys = m.get("x-kubernetes-list-map-keys").and_then(Value::as_array);
    if let Some(lt) = lt {
        let p = format!("{path}.x-kubernetes-list-type");
        if ty != "array" {
            errs.push(FieldError::invalid_str(&p, lt, "must only be used if type is array"));
        } else if !["atomic", "set", "map"].contains(&lt) {
            let supported: Vec<String> = ["atomic", "set", "map"].iter().map(|s| s.to_string()).collect();
            errs.push(FieldError::not_supported(&p, &Value::from(lt), &supported));
        } else if lt == "map" && keys.is_none_or(|k| k.is_empty()) {
            errs.push(FieldError::required(
                &format!("{path}.x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        } else if lt == "map" {
            let item_props = m.get("items").and_then(|i| i.get("properties")).and_then(Value::as_object);
            for (i, k) in keys.into_iter().flatten().enumerate() {
                let name = k.as_str().unwrap_or("");
                if item_props.is_none_or(|p| !p.contains_key(name)) {
                    errs.push(FieldError::invalid_str(
                        &format!("{path}.x-kubernetes-list-map-keys[{i}]"),
                        name,
                        "entries must all be names of item properties",
                    ));
                }
            }
        }
    }
    if keys.is_some_and(|k| !k.is_empty()) && lt != Some("map") {
        errs.push(FieldError::required(
            &format!("{path}.x-kubernetes-list-type"),
            "must be map if x-kubernetes-list-map-keys is non-empty",
        ));
    }
}

fn nested_list(v: Option<&Value>, key: &str, path: &str, skip_first_any_of: bool, errs: &mut Vec<FieldError>) {
    if let Some(arr) = v.and_then(Value::as_array) {
        for (i, sub) in arr.iter().enumerate() {
            nested(sub, skip_first_any_of && i == 0, &format!("{path}.{key}[{i}]"), errs);
        }
    }
}

/// `validateNestedValueValidation`: inside anyOf/allOf/oneOf/not only value validations
/// (CRDs allow no nested `x-kubernetes-validations` either).
fn nested(v: &Value, skip_any_of: bool, path: &str, errs: &mut Vec<FieldError>) {
    let Some(m) = v.as_object() else { return };
    if !skip_any_of {
        nested_list(m.get("anyOf"), "anyOf", path, false, errs);
    }
    nested_list(m.get("allOf"), "allOf", path, false, errs);
    nested_list(m.get("oneOf"), "oneOf", path, false, errs);
    if let Some(not) = m.get("not") {
        nested(not, false, &format!("{path}.not"), errs);
    }
    if let Some(items) = m.get("items") {
        nested(items, false, &format!("{path}.items"), errs);
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        for (k, p) in props {
            nested(p, false, &format!("{path}.properties[{k}]"), errs);
        }
        if props.contains_key("metadata") {
            errs.push(FieldError::forbidden(
                &format!("{path}.properties[metadata]"),
                "must not be specified in a nested context",
            ));
        }
    }
    let forbidden: [(&str, &str); 12] = [
        ("type", "must be empty to be structural"),
        ("additionalProperties", "must be undefined to be structural"),
        ("default", "must be undefined to be structural"),
        ("title", "must be empty to be structural"),
        ("description", "must be empty to be structural"),
        ("nullable", "must be false to be structural"),
        ("externalDocs", "must be undefined to be structural"),
        ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
        ("x-kubernetes-embedded-resource", "must be false to be structural"),
        ("x-kubernetes-int-or-string", "must be false to be structural"),
        ("x-kubernetes-list-map-keys", "must be empty to be structural"),
        ("x-kubernetes-list-type", "must be undefined to be structural"),
    ];
    for (k, msg) in forbidden {
        let set = match m.get(k) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => false,
            Some(Value::String(s)) => !s.is_empty() || k == "x-kubernetes-list-type",
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
        };
        if set {
            errs.push(FieldError::forbidden(&format!("{path}.{k}"), msg));
        }
    }
    if m.contains_key("x-kubernetes-map-type") {
        errs.push(FieldError::forbidden(
            &format!("{path}.x-kubernetes-map-type"),
            "must be undefined to be structural",
        ));
    }
    if m.get("x-kubernetes-validations").and_then(Value::as_array).is_some_and(|a| !a.is_empty()) {
        errs.push(FieldError::forbidden(&format!("{path}.x-kubernetes-validations"), "must be empty to be structural"));
    }
}
