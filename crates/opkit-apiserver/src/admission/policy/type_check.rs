//! `status.typeChecking` of a policy, as kube's type-checking controller writes it: each
//! expression's reads of `object` / `oldObject` are checked against the schema of every
//! kind its `matchConstraints` name exactly, and a field the schema lacks is a warning.
//! The status is written after a write that changed the policy's generation.

use std::sync::Arc;

use serde_json::{Value, json};

use super::expr::{object_paths, parse};
use crate::catalog::ResourceInfo;
use crate::registry::{Registry, Subresource, WriteOptions};

/// The kinds a policy's `matchConstraints` name without wildcards, with their schemas.
fn matched_schemas(registry: &Registry, policy: &Value) -> Vec<(String, Arc<Value>)> {
    let catalog = registry.catalog().snapshot();
    let mut out = Vec::new();
    for rule in policy["spec"]["matchConstraints"]["resourceRules"].as_array().into_iter().flatten() {
        let list = |k: &str| -> Vec<String> {
            rule[k].as_array().into_iter().flatten().filter_map(|s| s.as_str().map(String::from)).collect()
        };
        for group in list("apiGroups").iter().filter(|g| *g != "*") {
            for version in list("apiVersions").iter().filter(|v| *v != "*") {
                for resource in list("resources").iter().filter(|r| *r != "*" && !r.contains('/')) {
                    let Some(info) = catalog.lookup(group, version, resource) else { continue };
                    if let Some(schema) = schema_of(&info, version) {
                        let gv = if group.is_empty() { version.clone() } else { format!("{group}/{version}") };
                        out.push((format!("{gv}, Kind={}", info.kind), schema));
                    }
                }
            }
        }
    }
    out
}

fn schema_of(info: &ResourceInfo, version: &str) -> Option<Arc<Value>> {
    if info.builtin {
        return crate::openapi::builtin_inline_schema(&info.group, version, &info.kind);
    }
    info.version(version).and_then(|v| v.raw_schema.clone()).map(Arc::new)
}

/// The schema of `field` under `node`; Some(None) when the node accepts any field.
fn child<'a>(node: &'a Value, field: &str) -> Option<Option<&'a Value>> {
    if node["x-kubernetes-preserve-unknown-fields"] == true || node["x-kubernetes-int-or-string"] == true {
        return Some(None);
    }
    if field == "[]" {
        return match (&node["items"], &node["additionalProperties"]) {
            (Value::Object(_), _) => Some(Some(&node["items"])),
            (_, Value::Object(_)) => Some(Some(&node["additionalProperties"])),
            _ => Some(None),
        };
    }
    if let Some(props) = node["properties"].as_object() {
        if let Some(p) = props.get(field) {
            return Some(Some(p));
        }
        // The metadata of an object is always there, though a CRD schema may omit it.
        return if field == "apiVersion" || field == "kind" || field == "metadata" { Some(None) } else { None };
    }
    match &node["additionalProperties"] {
        Value::Object(_) => Some(Some(&node["additionalProperties"])),
        Value::Bool(false) => None,
        _ => Some(None),
    }
}

/// The first field of `path` the schema lacks (None when all are there, or a node on
/// the way accepts any field).
fn missing_field(schema: &Value, path: &[String]) -> Option<String> {
    let mut node = schema;
    for field in path {
        match child(node, field) {
            None => return Some(field.clone()),
            Some(None) => return None,
            Some(Some(next)) => node = next,
        }
    }
    None
}

/// The type-checking warnings of a policy: `[{fieldRef, warning}]`.
pub(crate) fn expression_warnings(registry: &Registry, policy: &Value) -> Vec<Value> {
    let schemas = matched_schemas(registry, policy);
    if schemas.is_empty() {
        return Vec::new();
    }
    let spec = &policy["spec"];
    let mut expressions: Vec<(String, String)> = Vec::new();
    let mut add = |list: &str, key: &str| {
        for (i, item) in spec[list].as_array().into_iter().flatten().enumerate() {
            if let Some(e) = item[key].as_str() {
                expressions.push((format!("spec.{list}[{i}].{key}"), e.to_string()));
            }
        }
    };
    add("validations", "expression");
    add("validations", "messageExpression");
    add("auditAnnotations", "valueExpression");
    add("matchConditions", "expression");
    add("variables", "expression");
    let mut out = Vec::new();
    for (field_ref, source) in expressions {
        let Ok((program, _)) = parse(&source) else { continue };
        let paths = object_paths(program.expression());
        let mut lines = Vec::new();
        for (gvk, schema) in &schemas {
            for path in &paths {
                if let Some(field) = missing_field(schema, path) {
                    let column = source.find(&format!(".{field}")).map_or(1, |i| i + 1);
                    let caret = format!("{}^", ".".repeat(column.saturating_sub(1)));
                    lines.push(format!(
                        "{gvk}: ERROR: <input>:1:{column}: undefined field '{field}'\n | {source}\n | {caret}"
                    ));
                    break;
                }
            }
        }
        if !lines.is_empty() {
            out.push(json!({"fieldRef": field_ref, "warning": lines.join("\n")}));
        }
    }
    out
}

/// After a write of `stored`: unless its status already describes this generation,
/// writes `status.observedGeneration` and `status.typeChecking` in the background.
pub(crate) fn spawn_status_update(registry: &Registry, stored: &Value) {
    let generation = stored["metadata"]["generation"].as_i64().unwrap_or(0);
    if stored["status"]["observedGeneration"].as_i64() == Some(generation)
        || stored["metadata"]["deletionTimestamp"].is_string()
    {
        return;
    }
    let registry = registry.clone();
    let name = stored["metadata"]["name"].as_str().unwrap_or_default().to_string();
    tokio::spawn(async move {
        let (group, resource) = super::model::POLICIES;
        let Some(info) = registry.catalog().snapshot().by_resource(group, resource) else { return };
        let target = registry.target(info, "v1".into(), None);
        let opts = WriteOptions { field_manager: "kube-apiserver".into(), ..Default::default() };
        for _ in 0..8 {
            let Ok(current) = registry.get(&target, &name).await else { return };
            let generation = current["metadata"]["generation"].as_i64().unwrap_or(0);
            if current["status"]["observedGeneration"].as_i64() == Some(generation) {
                return;
            }
            let mut updated = current.clone();
            updated["status"] = json!({
                "observedGeneration": generation,
                "typeChecking": {"expressionWarnings": expression_warnings(&registry, &current)},
            });
            match registry.update(&target, &name, updated, Subresource::Status, &opts).await {
                Err(e) if e.code == 409 => continue,
                Err(e) => {
                    tracing::warn!(policy = %name, error = %e.message, "writing the policy's type checking failed");
                    return;
                }
                Ok(_) => return,
            }
        }
    });
}
