//! ResourceQuota admission (kube's `ResourceQuota` plugin, the last validating plugin): a
//! create that would take a namespace's usage over a quota's `status.hard` is refused
//! with kube's `exceeded quota` message; a pod must state the requests and limits a quota
//! constrains; an admitted create is charged to the quotas' `status.used` at once (the
//! quota controller recomputes it from the objects present).

use opkit_apimachinery::quantity::parse_milli;
use opkit_apimachinery::quota::{self, Usage, format_amount};
use serde_json::{Value, json};

use super::super::{Attributes, Operation, Verdict};
use crate::auth::user::UserInfo;
use crate::error::{ApiError, ApiResult};
use crate::registry::{Registry, Subresource, WriteOptions, parse_stored};
use crate::storage::ResourceId;

/// How often a charge is retried when a quota's status changed meanwhile. Each round
/// lets at least one of the competing creates through, so this bounds how many creates
/// in one namespace may race for a quota at once.
const CHARGE_ATTEMPTS: usize = 100;

/// The quotas of a namespace, by name.
fn quotas(registry: &Registry, namespace: &str) -> Vec<Value> {
    let mut quotas: Vec<Value> = registry
        .store()
        .values(&ResourceId::new("", "resourcequotas"))
        .into_iter()
        .filter(|((ns, _), _)| ns == namespace)
        .filter_map(|(_, bytes)| parse_stored(&bytes).ok())
        .collect();
    quotas.sort_by(|a, b| a["metadata"]["name"].as_str().cmp(&b["metadata"]["name"].as_str()));
    quotas
}

/// A resource list (`status.hard`, `status.used`) in milli-units.
fn amounts(list: &Value) -> Usage {
    list.as_object().into_iter().flatten().filter_map(|(k, v)| Some((k.clone(), parse_milli(v.as_str()?)?))).collect()
}

/// kube's `prettyPrint`: `name=value` sorted by name, comma-separated.
fn pretty(list: &Usage) -> String {
    let parts: Vec<String> = list.iter().map(|(k, v)| format!("{k}={}", format_amount(k, *v))).collect();
    parts.join(",")
}

/// Checks a create against the namespace's quotas and charges it.
pub(super) async fn validate(registry: &Registry, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<Verdict> {
    let info = &attrs.target.info;
    if attrs.operation != Operation::Create || attrs.subresource.is_some() || !info.namespaced {
        return Ok(Verdict::default());
    }
    let Some(namespace) = attrs.target.namespace.as_deref() else {
        return Ok(Verdict::default());
    };
    for _ in 0..CHARGE_ATTEMPTS {
        let charges = check(registry, attrs, namespace, obj)?;
        if charges.is_empty() || attrs.opts.dry_run {
            return Ok(Verdict::default());
        }
        if charge(registry, namespace, charges).await? {
            return Ok(Verdict::default());
        }
    }
    Err(ApiError::internal("resource quota evaluation timed out"))
}

/// kube's `CheckRequest` for a create: the quotas this object counts for, each with its
/// new `status.used` (and the resourceVersion it was computed from).
fn check(registry: &Registry, attrs: &Attributes<'_>, namespace: &str, obj: &Value) -> ApiResult<Vec<(Value, Usage)>> {
    let info = &attrs.target.info;
    let quotas = quotas(registry, namespace);
    if quotas.is_empty() {
        return Ok(Vec::new());
    }
    let forbidden = |why: String| ApiError::forbidden_object(&info.group, &info.resource, attrs.name, &why);
    let is_pod = info.group.is_empty() && info.resource == "pods";
    let usage = quota::usage(&info.group, &info.resource, obj);
    let mut charges = Vec::new();
    for q in quotas {
        if !quota::in_scope(&q, &info.group, &info.resource, obj) {
            continue;
        }
        let name = q["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let hard = amounts(&q["status"]["hard"]);
        // The names of this quota that this kind of object can charge.
        let restricted: Vec<&str> = hard
            .keys()
            .map(String::as_str)
            .filter(|k| usage.contains_key(*k) || (is_pod && is_pod_resource(k)))
            .collect();
        if restricted.is_empty() {
            continue;
        }
        if is_pod && let Some(missing) = quota::pod_missing_constraints(obj, restricted.iter().copied()) {
            return Err(forbidden(format!("failed quota: {name}: {missing}")));
        }
        let used = amounts(&q["status"]["used"]);
        let unknown: Vec<&str> = restricted.iter().copied().filter(|k| !used.contains_key(*k)).collect();
        if !unknown.is_empty() {
            return Err(forbidden(format!("status unknown for quota: {name}, resources: {}", unknown.join(","))));
        }
        let requested: Usage =
            usage.iter().filter(|(k, v)| **v != 0 && hard.contains_key(*k)).map(|(k, v)| (k.clone(), *v)).collect();
        if requested.is_empty() {
            continue;
        }
        let exceeded: Vec<&String> = requested
            .iter()
            .filter(|(k, v)| used.get(*k).copied().unwrap_or(0) + **v > hard[*k])
            .map(|(k, _)| k)
            .collect();
        if !exceeded.is_empty() {
            let mask = |list: &Usage| -> Usage {
                exceeded.iter().map(|k| ((*k).clone(), list.get(*k).copied().unwrap_or(0))).collect()
            };
            return Err(forbidden(format!(
                "exceeded quota: {name}, requested: {}, used: {}, limited: {}",
                pretty(&mask(&requested)),
                pretty(&mask(&used)),
                pretty(&mask(&hard))
            )));
        }
        let mut new_used = used;
        for (k, v) in requested {
            *new_used.entry(k).or_default() += v;
        }
        charges.push((q, new_used));
    }
    Ok(charges)
}

/// Whether a quota name counts pod compute (`cpu`, `requests.memory`, `limits.nvidia.com/gpu`).
fn is_pod_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage")
        || name.starts_with("requests.")
        || name.starts_with("limits.")
}

/// Writes the new `status.used` of each quota, each guarded by the resourceVersion it was
/// computed from. False when one changed meanwhile (the check is made again).
async fn charge(registry: &Registry, namespace: &str, charges: Vec<(Value, Usage)>) -> ApiResult<bool> {
    let catalog = registry.catalog().snapshot();
    let Some(info) = catalog.lookup("", "v1", "resourcequotas") else {
        return Ok(true);
    };
    let target = registry.target(info, "v1".into(), Some(namespace.to_string()));
    let opts = WriteOptions {
        field_manager: "resourcequota-admission".into(),
        user: UserInfo::apiserver(),
        ..WriteOptions::default()
    };
    for (mut q, used) in charges {
        let name = q["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let list: serde_json::Map<String, Value> =
            used.iter().map(|(k, v)| (k.clone(), json!(format_amount(k, *v)))).collect();
        q["status"]["used"] = Value::Object(list);
        // Boxed: this write passes admission again (a status update, never charged).
        let write = Box::pin(registry.update(&target, &name, q, Subresource::Status, &opts));
        match write.await {
            Ok(_) => {}
            Err(e) if e.code == 409 => return Ok(false),
            // Deleted meanwhile: nothing to charge.
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}
