//! Applying rendered objects: finding each kind's `Api` (a removed API version is applied
//! at its successor), enhancing them (owner, labels, annotations, dependency hashes),
//! server-side apply as KUDO's field manager, and judging the applied objects' health.

use kube::Client;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::Scope;
use opkit::discovery::MappingError;
use serde_json::Value;

use super::step::{Outcome, StepMeta};
use super::{Engine, FIELD_MANAGER, OperatorVersion, enhance, removed_apis};
use crate::health::{self, Health};

/// The `Api` for an object's kind (namespaced ones in the Instance's namespace); the
/// error says when the kind is not served (e.g. an API version Kubernetes removed).
pub(crate) async fn api_for(
    engine: &Engine,
    client: &Client,
    namespace: &str,
    obj: &Value,
) -> Result<(Api<DynamicObject>, bool), String> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (resource, caps) =
        engine.mapper.rest_mapping(&GroupVersionKind::gvk(group, version, kind)).await.map_err(|e| {
            let why = match &e {
                MappingError::Discovery { source, .. } => api_message(source),
                other => other.to_string(),
            };
            format!("{api_version} {kind} is not served by the API server ({why})")
        })?;
    Ok(match caps.scope {
        Scope::Namespaced => (Api::namespaced_with(client.clone(), namespace, &resource), true),
        Scope::Cluster => (Api::all_with(client.clone(), &resource), false),
    })
}

/// `Kind/name` of an object.
pub(crate) fn describe(obj: &Value) -> String {
    format!(
        "{}/{}",
        obj.get("kind").and_then(Value::as_str).unwrap_or_default(),
        obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
    )
}

pub(crate) fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        e => e.to_string(),
    }
}

/// Applies the enhanced objects; returns them as the API server has them.
pub(crate) async fn apply_objects(
    engine: &Engine,
    client: &Client,
    meta: &StepMeta,
    ov: &OperatorVersion,
    mut objects: Vec<Value>,
) -> Result<Vec<Value>, Outcome> {
    let namespace = meta.namespace();
    let mut scoped = Vec::new();
    for obj in &mut objects {
        let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
        if let Some(successor) = removed_apis::successor(&api_version, &kind)
            && api_for(engine, client, &namespace, obj).await.is_err()
        {
            tracing::warn!(%kind, from = %api_version, to = %successor, "applying an object of a removed API version at its successor");
            obj["apiVersion"] = Value::String(successor.to_string());
        }
        let obj = &*obj;
        let (_, namespaced) = api_for(engine, client, &namespace, obj)
            .await
            .map_err(|e| Outcome::Error(format!("{}: {e}", describe(obj))))?;
        scoped.push(namespaced);
    }
    enhance::enhance(&mut objects, &scoped, meta, ov);
    enhance::add_dependency_hashes(client, &namespace, &mut objects).await;
    let mut applied = Vec::new();
    for obj in objects {
        let (api, _) = api_for(engine, client, &namespace, &obj)
            .await
            .map_err(|e| Outcome::Error(format!("{}: {e}", describe(&obj))))?;
        let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match api.patch(&name, &params, &Patch::Apply(&obj)).await {
            Ok(live) => applied.push(serde_json::to_value(&live).unwrap_or(Value::Null)),
            Err(e) => return Err(Outcome::Error(format!("applying {}: {}", describe(&obj), api_message(&e)))),
        }
    }
    Ok(applied)
}

/// The health of applied objects: Done, the first reason to wait, or a terminal failure.
pub(crate) fn health_of(applied: &[Value]) -> Outcome {
    for obj in applied {
        match health::check(obj) {
            Health::Healthy => {}
            Health::Waiting(m) => return Outcome::Waiting(m),
            Health::Failed(m) => return Outcome::Fatal(m),
        }
    }
    Outcome::Done
}
