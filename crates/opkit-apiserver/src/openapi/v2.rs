//! The swagger 2.0 document served at `/openapi/v2`, plus the definition set shared with the
//! v3 builder (the kinds of the served resources, their lists, CRD kinds and the closure of
//! every referenced built-in definition).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::builtin::builtin_definitions;
use super::crd::{self, Flavor};
use super::params::Param;
use super::paths::{Operation, PathSpec, resource_paths};
use super::refs::{closure, ref_v2};
use super::{ResourceDoc, SchemaSource, names};

/// The swagger 2.0 document for `resources`: paths with their operations (every write
/// operation carrying the `dryRun`, `fieldManager` and `fieldValidation` query parameters),
/// and definitions with `x-kubernetes-group-version-kind` on every kind, CRD kinds named like
/// kube's (e.g. "com.flights.v1.FlightTicket") and the list kinds.
pub(crate) fn v2_document(resources: &[ResourceDoc], server_version: &str) -> Value {
    let mut paths = Map::new();
    for r in resources {
        for spec in resource_paths(r) {
            merge_path(&mut paths, &spec.path, render_path(&spec));
        }
    }
    let definitions = document_definitions(resources, Flavor::V2);
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": server_version},
        "paths": paths,
        "definitions": definitions.into_iter().collect::<Map<String, Value>>(),
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "type": "apiKey",
                "name": "authorization",
                "in": "header"
            }
        },
        "security": [{"BearerToken": []}],
    })
}

/// Inserts a rendered path item, merging operations when two resources share a path.
pub(crate) fn merge_path(paths: &mut Map<String, Value>, path: &str, item: Value) {
    match (paths.get_mut(path), item) {
        (Some(Value::Object(existing)), Value::Object(new)) => {
            for (k, v) in new {
                existing.entry(k).or_insert(v);
            }
        }
        (_, item) => {
            paths.insert(path.to_string(), item);
        }
    }
}

/// Every definition a document for `resources` needs, keyed by name, with references in the
/// v2 form (`#/definitions/...`); v3 callers convert each value.
pub(crate) fn document_definitions(resources: &[ResourceDoc], flavor: Flavor) -> BTreeMap<String, Value> {
    let builtins = builtin_definitions();
    let mut custom: BTreeMap<String, Value> = BTreeMap::new();
    let mut roots: BTreeSet<String> =
        [names::STATUS, names::DELETE_OPTIONS, names::PATCH].into_iter().map(String::from).collect();
    for r in resources {
        let kind_name = r.definition_name();
        let list_name = r.list_definition_name();
        let builtin_kind = matches!(r.schema, SchemaSource::Builtin) && builtins.contains_key(&kind_name);
        if builtin_kind {
            roots.insert(kind_name);
        } else {
            let schema = match &r.schema {
                SchemaSource::Crd(s) => s.clone(),
                SchemaSource::Builtin => Value::Null,
            };
            custom.insert(kind_name, crd::kind_definition(r, &schema, flavor));
        }
        if r.has_verb("list") || r.has_verb("watch") {
            if builtin_kind && builtins.contains_key(&list_name) {
                roots.insert(list_name);
            } else {
                custom.insert(list_name, crd::list_definition(r));
            }
        }
        if r.has_verb("watch") {
            roots.insert(names::WATCH_EVENT.to_string());
        }
        if r.has_subresource("scale") {
            roots.insert(names::SCALE.to_string());
        }
    }
    for def in custom.values() {
        let mut found = BTreeSet::new();
        super::refs::collect_refs(def, &mut found);
        roots.extend(found);
    }
    let lookup = |n: &str| builtins.get(n);
    let needed = closure(roots, &lookup);
    let mut out: BTreeMap<String, Value> = needed
        .into_iter()
        .filter(|n| !custom.contains_key(n))
        .filter_map(|n| builtins.get(&n).map(|d| (n.clone(), published_builtin(&n, d))))
        .collect();
    out.extend(custom);
    out
}

/// A built-in definition in the form kube-apiserver publishes it.
fn published_builtin(name: &str, def: &Value) -> Value {
    let mut def = def.clone();
    if let Some(obj) = def.as_object_mut() {
        if name == names::INT_OR_STRING {
            obj.remove("x-kubernetes-int-or-string");
            obj.insert("type".into(), Value::String("string".into()));
            obj.insert("format".into(), Value::String("int-or-string".into()));
        } else if name == names::QUANTITY {
            obj.remove("x-kubernetes-int-or-string");
            obj.insert("type".into(), Value::String("string".into()));
        }
    }
    def
}

/// Renders one path item in swagger 2.0 form.
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
    m.insert("uniqueItems".into(), Value::Bool(true));
    m.insert("type".into(), Value::String(p.ty.name().into()));
    m.insert("description".into(), Value::String(p.description.clone()));
    m.insert("name".into(), Value::String(p.name.into()));
    m.insert("in".into(), Value::String(p.location.into()));
    if p.required {
        m.insert("required".into(), Value::Bool(true));
    }
    Value::Object(m)
}

/// The description of an HTTP status code in kube's documents.
pub(crate) fn status_text(code: &str) -> &'static str {
    match code {
        "200" => "OK",
        "201" => "Created",
        "202" => "Accepted",
        "401" => "Unauthorized",
        _ => "",
    }
}

fn render_operation(op: &Operation) -> Value {
    let mut params = Vec::new();
    if let Some((def, required)) = &op.body {
        let mut b = Map::new();
        b.insert("name".into(), Value::String("body".into()));
        b.insert("in".into(), Value::String("body".into()));
        if *required {
            b.insert("required".into(), Value::Bool(true));
        }
        b.insert("schema".into(), ref_v2(def));
        params.push(Value::Object(b));
    }
    params.extend(op.params.iter().map(render_param));
    let mut responses = Map::new();
    for (code, def) in &op.responses {
        let mut r = Map::new();
        r.insert("description".into(), Value::String(status_text(code).into()));
        if let Some(def) = def {
            r.insert("schema".into(), ref_v2(def));
        }
        responses.insert((*code).to_string(), Value::Object(r));
    }
    json!({
        "description": op.description,
        "consumes": op.consumes,
        "produces": op.produces,
        "schemes": ["https"],
        "tags": [op.tag],
        "operationId": op.id,
        "parameters": params,
        "responses": responses,
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": op.gvk,
    })
}
