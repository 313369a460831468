//! Helm's own functions (its `funcMap()` in `pkg/engine/funcs.go`): `include`, `tpl`,
//! `required`, `lookup`, and YAML, JSON and TOML in and out, with Sprig's JSON variants
//! (`toPrettyJson`, `toRawJson`, `mustFromJson`, ...) beside Helm's, so each has one
//! implementation. Sprig's `fail` sits here too, next to `required`.

use std::collections::BTreeMap;

use super::{ANY, Args, Func, FuncError, FuncResult, func};
use crate::template::Exec;
use crate::value::Value;
use crate::yaml;

/// Helm's functions.
pub(super) const FUNCS: &[Func] = &[
    func("include", 2, 2, include),
    func("tpl", 2, 2, tpl),
    func("required", 2, 2, required),
    func("fail", 1, 1, fail),
    func("lookup", 0, ANY, lookup),
    func("toYaml", 1, 1, to_yaml),
    func("mustToYaml", 1, 1, to_yaml),
    func("toYamlPretty", 1, 1, to_yaml),
    func("fromYaml", 1, 1, from_yaml),
    func("fromYamlArray", 1, 1, from_yaml_array),
    func("toJson", 1, 1, to_json),
    func("mustToJson", 1, 1, to_json),
    func("fromJson", 1, 1, from_json),
    func("fromJsonArray", 1, 1, from_json_array),
    func("mustFromJson", 1, 1, from_json),
    func("toToml", 1, 1, to_toml),
    func("toPrettyJson", 1, 1, to_pretty_json),
    func("mustToPrettyJson", 1, 1, to_pretty_json),
    func("toRawJson", 1, 1, to_raw_json),
    func("mustToRawJson", 1, 1, to_raw_json),
];

fn include(ex: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(ex.include(&a.str(0), a.get(1)).map_err(FuncError::Message)?))
}

fn tpl(ex: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(ex.tpl(&a.str(0), a.get(1)).map_err(FuncError::Message)?))
}

fn required(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    match a.get(1) {
        Value::Nil => Err(a.str(0).into()),
        Value::Str(v) if v.is_empty() => Err(a.str(0).into()),
        v => Ok(v.clone()),
    }
}

fn fail(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Err(a.str(0).into())
}

/// `helm template` has no cluster: `lookup` finds nothing.
fn lookup(_: &mut Exec<'_>, _: Args<'_>) -> FuncResult {
    Ok(Value::map(BTreeMap::new()))
}

fn to_yaml(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let s = yaml::to_yaml(a.get(0));
    Ok(Value::str(s.strip_suffix('\n').unwrap_or(&s)))
}

fn from_yaml(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(match yaml::from_yaml_str(&a.str(0)) {
        Ok(Value::Map(m)) => Value::Map(m),
        Ok(Value::Nil) => Value::map(BTreeMap::new()),
        Ok(other) => error_map(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(&other)
        )),
        Err(e) => error_map(e),
    })
}

fn from_yaml_array(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(match yaml::from_yaml_str(&a.str(0)) {
        Ok(Value::List(l)) => Value::List(l),
        Ok(Value::Nil) => Value::list(Vec::new()),
        Ok(other) => Value::list(vec![Value::str(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type []interface {{}}",
            json_kind(&other)
        ))]),
        Err(e) => Value::list(vec![Value::str(e)]),
    })
}

fn to_json(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(crate::json::to_json(a.get(0), true, false)))
}

fn to_raw_json(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(crate::json::to_json(a.get(0), false, false)))
}

fn to_pretty_json(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(crate::json::to_json(a.get(0), true, true)))
}

/// `fromJson`, and `mustFromJson`, which fails where `fromJson` returns the error.
fn from_json(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(match serde_json::from_str::<serde_json::Value>(&a.str(0)) {
        Ok(v @ serde_json::Value::Object(_)) => Value::from_json(&v),
        Ok(_) => error_map("json: cannot unmarshal into Go value of type map[string]interface {}".into()),
        Err(e) => {
            if a.name() == "mustFromJson" {
                return Err(e.to_string().into());
            }
            error_map(e.to_string())
        }
    })
}

fn from_json_array(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(match serde_json::from_str::<serde_json::Value>(&a.str(0)) {
        Ok(v @ serde_json::Value::Array(_)) => Value::from_json(&v),
        Ok(_) => Value::list(vec![Value::str("json: cannot unmarshal into Go value of type []interface {}")]),
        Err(e) => Value::list(vec![Value::str(e.to_string())]),
    })
}

fn to_toml(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(crate::json::to_toml(a.get(0))))
}

/// Helm's failed `fromYaml`/`fromJson`: a map with the message under `Error`.
fn error_map(msg: String) -> Value {
    Value::map(BTreeMap::from([("Error".to_string(), Value::str(msg))]))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::List(_) => "array",
        Value::Str(_) => "string",
        Value::Bool(_) => "bool",
        Value::Int(_, _) | Value::Float(_) => "number",
        _ => "value",
    }
}
