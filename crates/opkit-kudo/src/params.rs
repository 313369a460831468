//! Parameters as KUDO types them: values travel as strings (the Instance's
//! `spec.parameters` is `map[string]string`, an OperatorVersion's defaults are strings),
//! `array` and `map` values are YAML inside those strings and reach templates as lists and
//! maps, every other type reaches them as the string. A declared type checks defaults and
//! given values (`integer`, `number`, `boolean`); a parameter is required unless written
//! `required: false`, and a default satisfies it (an `array` or `map` parameter always
//! has one: KUDO writes a missing default as YAML `null`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One parameter of `params.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Parameter {
    /// Its name (`.Params.NAME`).
    pub name: String,
    /// A name for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The default, as written (any YAML value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// Required (KUDO: unless written `false`; a default satisfies it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// The plan a change runs (default `update`, else `deploy`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub trigger: String,
    /// `string` (default), `integer`, `number`, `boolean`, `array` or `map` (`dict`).
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// Cannot change after install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immutable: Option<bool>,
    /// The allowed values.
    #[serde(default, rename = "enum", skip_serializing_if = "Option::is_none")]
    pub enum_values: Option<Vec<Value>>,
}

/// The types KUDO knows (`dict` is read as `map`).
pub(crate) const TYPES: &[&str] = &["string", "integer", "number", "boolean", "array", "map", "dict"];

/// Whether `type_` is a structured type (YAML inside the string).
fn is_structured(type_: &str) -> bool {
    matches!(type_, "array" | "map" | "dict")
}

/// Checks a parameter's declaration in `params.yaml`: a known type, a default of that
/// type, an enum with values.
pub(crate) fn check_declaration(p: &Parameter) -> Result<(), String> {
    if p.name.is_empty() {
        return Err("a parameter has no name".into());
    }
    if !p.type_.is_empty() && !TYPES.contains(&p.type_.as_str()) {
        return Err(format!("unknown type {:?} (one of {})", p.type_, TYPES.join(", ")));
    }
    if let Some(default) = wrap(p, p.default.as_ref())? {
        check_value(p, &default)?;
    }
    if let Some(values) = &p.enum_values
        && values.is_empty()
    {
        return Err("is an enum but has no allowed values".into());
    }
    if p.immutable == Some(true) && p.required != Some(true) && p.default.is_none() {
        return Err("is immutable but is not marked as required or has a default value".into());
    }
    Ok(())
}

/// KUDO's `WrapParamValue`: a YAML value as the string stored in the API (`array`/`map`
/// as YAML, anything else as Go's `%v`). An `array` or `map` is always written, `null`
/// when there is no value, so such a parameter always has a default and is never
/// required; for any other type no value is no default.
pub fn wrap(p: &Parameter, value: Option<&Value>) -> Result<Option<String>, String> {
    if is_structured(&p.type_) {
        let value = value.unwrap_or(&Value::Null);
        return serde_saphyr::to_string(value).map(Some).map_err(|e| format!("cannot write the default as YAML: {e}"));
    }
    let Some(value) = value else { return Ok(None) };
    if value.is_null() {
        return Ok(None);
    }
    Ok(Some(match value {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => serde_saphyr::to_string(other).map_err(|e| e.to_string())?.trim_end().to_string(),
    }))
}

/// Checks a string value against the parameter's type and enum.
pub(crate) fn check_value(p: &Parameter, value: &str) -> Result<(), String> {
    let bad = |what: &str| Err(format!("type is {:?} but format of {value:?} is invalid{what}", p.type_));
    match p.type_.as_str() {
        "integer" if value.trim().parse::<i64>().is_err() => return bad(""),
        "number" if value.trim().parse::<f64>().is_err() => return bad(""),
        "boolean"
            if !matches!(
                value.trim(),
                "true" | "false" | "True" | "False" | "TRUE" | "FALSE" | "1" | "0" | "t" | "f" | "T" | "F"
            ) =>
        {
            return bad("");
        }
        "array" => match serde_saphyr::from_str::<Value>(value) {
            Ok(Value::Array(_)) | Ok(Value::Null) => {}
            _ => return bad(": not a YAML list"),
        },
        "map" | "dict" => match serde_saphyr::from_str::<Value>(value) {
            Ok(Value::Object(_)) | Ok(Value::Null) => {}
            _ => return bad(": not a YAML map"),
        },
        _ => {}
    }
    if let Some(allowed) = &p.enum_values {
        let allowed: Vec<String> = allowed.iter().filter_map(|v| wrap(p, Some(v)).ok().flatten()).collect();
        if !allowed.iter().any(|a| a == value) {
            return Err(format!("value {value:?} is not one of the allowed values {allowed:?}"));
        }
    }
    Ok(())
}

/// The value a template sees for a string value of a parameter of `type_`.
pub(crate) fn template_value(type_: &str, value: Option<&str>) -> Value {
    match value {
        None => Value::Null,
        Some(v) if is_structured(type_) => {
            serde_saphyr::from_str_with_options::<Value>(v, opkit_helm::yaml::parse_options())
                .unwrap_or(Value::String(v.to_string()))
        }
        Some(v) => Value::String(v.to_string()),
    }
}

/// A parameter as an OperatorVersion declares it (`spec.parameters[]`; the type is
/// `value-type` there, as in KUDO's CRD).
pub fn to_api(p: &Parameter) -> Result<Value, String> {
    let mut out = serde_json::Map::new();
    out.insert("name".into(), Value::String(p.name.clone()));
    if !p.display_name.is_empty() {
        out.insert("displayName".into(), Value::String(p.display_name.clone()));
    }
    if !p.description.is_empty() {
        out.insert("description".into(), Value::String(p.description.clone()));
    }
    if let Some(required) = p.required {
        out.insert("required".into(), Value::Bool(required));
    }
    if let Some(default) = wrap(p, p.default.as_ref())? {
        out.insert("default".into(), Value::String(default));
    }
    if !p.trigger.is_empty() {
        out.insert("trigger".into(), Value::String(p.trigger.clone()));
    }
    let type_ = if p.type_ == "dict" { "map" } else { p.type_.as_str() };
    out.insert("value-type".into(), Value::String(if type_.is_empty() { "string".into() } else { type_.into() }));
    if let Some(immutable) = p.immutable {
        out.insert("immutable".into(), Value::Bool(immutable));
    }
    if let Some(values) = &p.enum_values {
        let wrapped: Vec<Value> =
            values.iter().filter_map(|v| wrap(p, Some(v)).ok().flatten()).map(Value::String).collect();
        out.insert("enum".into(), Value::Array(wrapped));
    }
    Ok(Value::Object(out))
}

/// A parameter read back from an OperatorVersion's `spec.parameters[]` (an `array` or
/// `map` default, stored as YAML text, read back as the value it writes).
pub fn from_api(v: &Value) -> Parameter {
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let type_ = if v.get("value-type").is_some() { s("value-type") } else { s("type") };
    let stored = v.get("default").filter(|d| !d.is_null());
    let default = match stored {
        Some(Value::String(text)) if is_structured(&type_) => {
            Some(template_value(&type_, Some(text))).filter(|d| !d.is_null())
        }
        other => other.cloned(),
    };
    Parameter {
        name: s("name"),
        display_name: s("displayName"),
        description: s("description"),
        default,
        required: v.get("required").and_then(Value::as_bool),
        trigger: s("trigger"),
        type_,
        immutable: v.get("immutable").and_then(Value::as_bool),
        enum_values: v.get("enum").and_then(Value::as_array).cloned(),
    }
}

/// The values a plan runs with: the declared defaults overlaid with `given` (the
/// Instance's `spec.parameters`); an error names the first required parameter without a
/// value, or a value of the wrong type.
pub fn effective(
    declared: &[Parameter],
    given: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, Option<String>>, String> {
    let mut out = BTreeMap::new();
    for p in declared {
        let default = wrap(p, p.default.as_ref())?;
        let value = given.get(&p.name).cloned().or_else(|| default.clone());
        // KUDO: a required parameter without a default needs a non-empty value; a default
        // (even "") satisfies it.
        if p.required == Some(true) && default.is_none() && value.as_deref().is_none_or(str::is_empty) {
            return Err(format!("parameter {:?} is required but has no value", p.name));
        }
        if let Some(v) = &value {
            check_value(p, v).map_err(|e| format!("parameter {:?} has an invalid value {v:?}: {e}", p.name))?;
        }
        out.insert(p.name.clone(), value);
    }
    Ok(out)
}

/// The `.Params` map templates see.
pub fn template_params(declared: &[Parameter], values: &BTreeMap<String, Option<String>>) -> Value {
    let mut out = serde_json::Map::new();
    for p in declared {
        let v = values.get(&p.name).and_then(|v| v.as_deref());
        out.insert(p.name.clone(), template_value(&p.type_, v));
    }
    Value::Object(out)
}

/// The plan a change of parameter `p` triggers: its `trigger`, else `update` when the
/// operator has it, else `deploy` (KUDO's rule).
pub fn trigger_plan(p: Option<&Parameter>, has_plan: impl Fn(&str) -> bool) -> String {
    match p.map(|p| p.trigger.as_str()).filter(|t| !t.is_empty()) {
        Some(t) => t.to_string(),
        None if has_plan("update") => "update".to_string(),
        None => "deploy".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn param(name: &str, type_: &str, default: Option<Value>) -> Parameter {
        Parameter { name: name.into(), type_: type_.into(), default, ..Parameter::default() }
    }

    #[test]
    fn defaults_are_wrapped_as_kudo_does() {
        assert_eq!(wrap(&param("a", "", None), Some(&json!(2))).unwrap(), Some("2".into()));
        assert_eq!(wrap(&param("a", "boolean", None), Some(&json!(true))).unwrap(), Some("true".into()));
        let list = wrap(&param("a", "array", None), Some(&json!(["x", "y"]))).unwrap().unwrap();
        assert_eq!(template_value("array", Some(&list)), json!(["x", "y"]));
        assert_eq!(template_value("string", Some("3")), json!("3"));
    }

    #[test]
    fn structured_defaults_survive_the_operator_version() {
        for default in [None, Some(json!(["x", "y"]))] {
            let p = param("a", "array", default);
            let back = from_api(&to_api(&p).unwrap());
            assert_eq!(wrap(&back, back.default.as_ref()).unwrap(), wrap(&p, p.default.as_ref()).unwrap());
        }
    }

    #[test]
    fn required_and_typed_values_are_checked() {
        let mut required = param("r", "", None);
        required.required = Some(true);
        let err = effective(&[required], &BTreeMap::new()).unwrap_err();
        assert_eq!(err, "parameter \"r\" is required but has no value");
        let int = param("n", "integer", Some(json!(1)));
        let given = BTreeMap::from([("n".to_string(), "x".to_string())]);
        assert!(effective(std::slice::from_ref(&int), &given).unwrap_err().contains("invalid value"));
        assert!(check_declaration(&param("n", "integer", Some(json!("two")))).is_err());
        assert_eq!(effective(&[int], &BTreeMap::new()).unwrap()["n"], Some("1".into()));
    }
}
