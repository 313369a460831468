//! The compiled, typed form of one openAPIV3Schema node (kube's `schema.Structural` plus its
//! value validations), built from JSON with regexes and CEL rules compiled up front.

use regex::Regex;
use serde_json::Value;

use super::cel::CelRules;
use super::errors::FieldError;

/// `additionalProperties`: either a bool or a schema.
#[derive(Debug)]
pub(crate) enum AdditionalProperties {
    /// `additionalProperties: true|false` (pruned like an unspecified schema).
    Bool,
    /// `additionalProperties: {schema}`.
    Schema(Box<Schema>),
}

/// One schema node.
#[derive(Debug, Default)]
pub(crate) struct Schema {
    /// `type` ("" when absent).
    pub ty: String,
    pub nullable: bool,
    pub format: String,
    pub default: Option<Value>,
    pub properties: Vec<(String, Schema)>,
    pub additional_properties: Option<AdditionalProperties>,
    pub items: Option<Box<Schema>>,
    pub required: Vec<String>,
    pub enum_values: Option<Vec<Value>>,
    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub multiple_of: Option<f64>,
    pub max_length: Option<i64>,
    pub min_length: Option<i64>,
    pub pattern: Option<(String, Regex)>,
    pub max_items: Option<i64>,
    pub min_items: Option<i64>,
    pub unique_items: bool,
    pub max_properties: Option<i64>,
    pub min_properties: Option<i64>,
    pub all_of: Vec<Schema>,
    pub any_of: Vec<Schema>,
    pub one_of: Vec<Schema>,
    pub not: Option<Box<Schema>>,
    pub int_or_string: bool,
    pub preserve_unknown_fields: bool,
    pub embedded_resource: bool,
    pub list_type: Option<String>,
    pub list_map_keys: Vec<String>,
    pub cel: Option<CelRules>,
}

impl Schema {
    /// Looks up a declared property.
    pub(crate) fn property(&self, name: &str) -> Option<&Schema> {
        self.properties.iter().find(|(k, _)| k == name).map(|(_, s)| s)
    }

    /// The schema of the `additionalProperties` if it is a schema.
    pub(crate) fn additional_schema(&self) -> Option<&Schema> {
        match &self.additional_properties {
            Some(AdditionalProperties::Schema(s)) => Some(s),
            _ => None,
        }
    }

    /// Compiles a schema node from JSON. `path` is the kube-style path of this node used in
    /// error messages (e.g. `spec.versions[0].schema.openAPIV3Schema.properties[spec]`).
    pub(crate) fn compile(v: &Value, path: &str, errs: &mut Vec<FieldError>) -> Schema {
        Self::compile_inner(v, path, errs, 0)
    }

    fn compile_inner(v: &Value, path: &str, errs: &mut Vec<FieldError>, depth: usize) -> Schema {
        let mut s = Schema::default();
        let Some(obj) = v.as_object() else {
            return s;
        };
        if depth > 64 {
            errs.push(FieldError::forbidden(path, "schema nesting is too deep"));
            return s;
        }
        let str_of = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let bool_of = |k: &str| obj.get(k).and_then(Value::as_bool).unwrap_or(false);
        let f64_of = |k: &str| obj.get(k).and_then(Value::as_f64);
        let i64_of = |k: &str| obj.get(k).and_then(|x| x.as_i64().or_else(|| x.as_f64().map(|f| f as i64)));
        s.ty = str_of("type");
        s.nullable = bool_of("nullable");
        s.format = str_of("format");
        s.default = obj.get("default").cloned();
        if let Some(props) = obj.get("properties").and_then(Value::as_object) {
            for (k, pv) in props {
                let child = Self::compile_inner(pv, &format!("{path}.properties[{k}]"), errs, depth + 1);
                s.properties.push((k.clone(), child));
            }
        }
        s.additional_properties = match obj.get("additionalProperties") {
            Some(Value::Bool(_)) => Some(AdditionalProperties::Bool),
            Some(ap @ Value::Object(_)) => Some(AdditionalProperties::Schema(Box::new(Self::compile_inner(
                ap,
                &format!("{path}.additionalProperties"),
                errs,
                depth + 1,
            )))),
            _ => None,
        };
        if let Some(items) = obj.get("items").filter(|i| i.is_object()) {
            s.items = Some(Box::new(Self::compile_inner(items, &format!("{path}.items"), errs, depth + 1)));
        }
        if let Some(req) = obj.get("required").and_then(Value::as_array) {
            s.required = req.iter().filter_map(|r| r.as_str().map(str::to_string)).collect();
        }
        s.enum_values = obj.get("enum").and_then(Value::as_array).cloned();
        s.maximum = f64_of("maximum");
        s.exclusive_maximum = bool_of("exclusiveMaximum");
        s.minimum = f64_of("minimum");
        s.exclusive_minimum = bool_of("exclusiveMinimum");
        s.multiple_of = f64_of("multipleOf");
        s.max_length = i64_of("maxLength");
        s.min_length = i64_of("minLength");
        s.max_items = i64_of("maxItems");
        s.min_items = i64_of("minItems");
        s.max_properties = i64_of("maxProperties");
        s.min_properties = i64_of("minProperties");
        s.unique_items = bool_of("uniqueItems");
        s.pattern = obj.get("pattern").and_then(Value::as_str).and_then(|p| compile_pattern(p, path, errs));
        for (key, dst) in [("allOf", &mut s.all_of), ("anyOf", &mut s.any_of), ("oneOf", &mut s.one_of)] {
            if let Some(arr) = obj.get(key).and_then(Value::as_array) {
                for (i, sub) in arr.iter().enumerate() {
                    dst.push(Self::compile_inner(sub, &format!("{path}.{key}[{i}]"), errs, depth + 1));
                }
            }
        }
        if let Some(not) = obj.get("not").filter(|n| n.is_object()) {
            s.not = Some(Box::new(Self::compile_inner(not, &format!("{path}.not"), errs, depth + 1)));
        }
        s.int_or_string = bool_of("x-kubernetes-int-or-string");
        s.preserve_unknown_fields = bool_of("x-kubernetes-preserve-unknown-fields");
        s.embedded_resource = bool_of("x-kubernetes-embedded-resource");
        s.list_type = obj.get("x-kubernetes-list-type").and_then(Value::as_str).map(str::to_string);
        if let Some(keys) = obj.get("x-kubernetes-list-map-keys").and_then(Value::as_array) {
            s.list_map_keys = keys.iter().filter_map(|k| k.as_str().map(str::to_string)).collect();
        }
        if obj.get("x-kubernetes-validations").and_then(Value::as_array).is_some_and(|a| !a.is_empty()) {
            s.cel = CelRules::compile(v, &s, path, errs);
        }
        s
    }

    /// The type name kube uses as the bad value of CEL errors (`sts.Type`).
    pub(crate) fn type_name(&self) -> &str {
        &self.ty
    }
}

/// First line of a (possibly multi-line) error text.
pub(crate) fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// A schema's `pattern` compiled, or kube's error when it is no regular expression.
fn compile_pattern(p: &str, path: &str, errs: &mut Vec<FieldError>) -> Option<(String, Regex)> {
    match Regex::new(p) {
        Ok(re) => Some((p.to_string(), re)),
        Err(e) => {
            errs.push(FieldError::invalid_str(
                &format!("{path}.pattern"),
                p,
                &format!("must be a valid regular expression, but isn't: {}", first_line(&e.to_string())),
            ));
            None
        }
    }
}
