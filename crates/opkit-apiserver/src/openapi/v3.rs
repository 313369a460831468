//! The OpenAPI 3.0 documents served under `/openapi/v3`: the index of group-versions and one
//! document per group-version, with every operation carrying
//! `x-kubernetes-group-version-kind` (kubectl's field-validation check and `kubectl explain`
//! look operations and component schemas up by it).

use serde_json::{Map, Value, json};

use super::ResourceDoc;
use super::crd::Flavor;
use super::params::Param;
use super::paths::{Operation, PathSpec, resource_paths};
use super::refs::{ref_v3, to_v3_schema};
use super::v2::{document_definitions, merge_path, status_text};

/// The `/openapi/v3` index: `{"paths":{"apis/apps/v1":{"serverRelativeURL":
/// "/openapi/v3/apis/apps/v1?hash=..."}}}` for each group-version path ("api/v1",
/// "apis/apps/v1", ...), with the hash computed by `hash_of(group_version_path)`.
pub(crate) fn v3_index(group_versions: &[String], hash_of: &dyn Fn(&str) -> String) -> Value {
    let mut paths = Map::new();
    for gv in group_versions {
        let gv = gv.trim_matches('/');
        if gv.is_empty() {
            continue;
        }
        paths.insert(gv.to_string(), json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash={}", hash_of(gv))}));
    }
    json!({ "paths": paths })
}

/// Splits "apps/v1", "v1", "api/v1" or "apis/apps/v1" into (group, version).
fn parse_group_version(gv: &str) -> (String, String) {
    let gv = gv.trim_matches('/');
    let gv = gv.strip_prefix("apis/").or_else(|| gv.strip_prefix("api/")).unwrap_or(gv);
    match gv.rsplit_once('/') {
        Some((group, version)) => (group.to_string(), version.to_string()),
        None => (String::new(), gv.to_string()),
    }
}

/// The OpenAPI 3.0 document of one group-version ("apps/v1", or "v1" for the core group; the
/// "apis/apps/v1" / "api/v1" forms are accepted too), built from the resources of `resources`
/// that belong to it.
pub(crate) fn v3_document(group_version: &str, resources: &[ResourceDoc], server_version: &str) -> Value {
    let (group, version) = parse_group_version(group_version);
    let selected: Vec<ResourceDoc> =
        resources.iter().filter(|r| r.group == group && r.version == version).cloned().collect();
    let mut paths = Map::new();
    for r in &selected {
        for spec in resource_paths(r) {
            merge_path(&mut paths, &spec.path, render_path(&spec));
        }
    }
    let schemas: Map<String, Value> =
        document_definitions(&selected, Flavor::V3).into_iter().map(|(name, def)| (name, to_v3_schema(&def))).collect();
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": server_version},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "BearerToken": {
                    "type": "apiKey",
                    "description": "Bearer Token authentication",
                    "name": "authorization",
                    "in": "header"
                }
            }
        },
        "security": [{"BearerToken": []}],
    })
}

fn render_path(spec: &PathSpec) -> Value {
    let mut item = Map::new();
    for op in &spec.ops {
        item.insert(op.method.to_string(), render_operation(op));
    }
    item.insert("parameters".into(), Value::Array(spec.params.iter().map(render_param).collect()));
    Value::Object(item)
}

fn render_param(p: &Param) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), Value::String(p.name.into()));
    m.insert("in".into(), Value::String(p.location.into()));
    m.insert("description".into(), Value::String(p.description.clone()));
    if p.required {
        m.insert("required".into(), Value::Bool(true));
    }
    m.insert("schema".into(), json!({"type": p.ty.name(), "uniqueItems": true}));
    Value::Object(m)
}

fn media(types: &[&str], schema: &Value) -> Value {
    Value::Object(types.iter().map(|t| ((*t).to_string(), json!({ "schema": schema }))).collect())
}

fn render_operation(op: &Operation) -> Value {
    let mut out = Map::new();
    out.insert("tags".into(), json!([op.tag]));
    out.insert("description".into(), Value::String(op.description.clone()));
    out.insert("operationId".into(), Value::String(op.id.clone()));
    out.insert("parameters".into(), Value::Array(op.params.iter().map(render_param).collect()));
    if let Some((def, required)) = &op.body {
        let mut body = Map::new();
        body.insert("content".into(), media(&op.consumes, &ref_v3(def)));
        if *required {
            body.insert("required".into(), Value::Bool(true));
        }
        out.insert("requestBody".into(), Value::Object(body));
    }
    let mut responses = Map::new();
    for (code, def) in &op.responses {
        let mut r = Map::new();
        r.insert("description".into(), Value::String(status_text(code).into()));
        if let Some(def) = def {
            r.insert("content".into(), media(&op.produces, &ref_v3(def)));
        }
        responses.insert((*code).to_string(), Value::Object(r));
    }
    out.insert("responses".into(), Value::Object(responses));
    out.insert("x-kubernetes-action".into(), Value::String(op.action.into()));
    out.insert("x-kubernetes-group-version-kind".into(), op.gvk.clone());
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_group_version_parsing() {
        let idx = v3_index(&["api/v1".to_string(), "apis/apps/v1".to_string()], &|gv: &str| format!("H{}", gv.len()));
        assert_eq!(idx["paths"]["apis/apps/v1"]["serverRelativeURL"], "/openapi/v3/apis/apps/v1?hash=H12");
        assert_eq!(idx["paths"]["api/v1"]["serverRelativeURL"], "/openapi/v3/api/v1?hash=H6");
        assert_eq!(parse_group_version("v1"), (String::new(), "v1".to_string()));
        assert_eq!(parse_group_version("api/v1"), (String::new(), "v1".to_string()));
        assert_eq!(parse_group_version("apis/flights.com/v1"), ("flights.com".to_string(), "v1".to_string()));
        assert_eq!(parse_group_version("apps/v1"), ("apps".to_string(), "v1".to_string()));
    }
}
