//! The disruption controller (kube-controller-manager's `disruption`): keeps every
//! PodDisruptionBudget's status current: `currentHealthy` (Ready pods it selects that are
//! not being deleted), `desiredHealthy`, `expectedPods`, `disruptionsAllowed`,
//! `observedGeneration` and the `DisruptionAllowed` condition (`SufficientPods`,
//! `InsufficientPods`, or `SyncFailed` when the expected count cannot be known). The
//! counts follow kube's rules in [`budget`], which a `pods/eviction` check can share.

pub(crate) mod budget;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use opkit::{Action, Cache, Context, Controller, Manager, ReconcileResult, Request};
use serde_json::json;

use crate::ControllersConfig;
use budget::{Budget, Health};
use opkit_apimachinery::selector::LabelSelector;

/// Registers the disruption controller with `mgr`.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled("disruption") {
        return Ok(());
    }
    let cache = mgr.cache().clone();
    Controller::new(mgr, reconcile)
        .client(crate::identity::client_for(mgr, cfg, "disruption"))
        .named("disruption")
        .watches::<Pod>(move |p| budgets_selecting(&cache, p))
        .build()
}

/// The budgets in the pod's namespace whose selector matches it.
fn budgets_selecting(cache: &Cache, pod: &Pod) -> Vec<Request> {
    cache
        .list::<PodDisruptionBudget>()
        .iter()
        .filter(|b| b.metadata.namespace == pod.metadata.namespace)
        .filter(|b| selects(b, pod))
        .map(|b| Request::from_object(&**b))
        .collect()
}

/// Whether the budget selects the pod (policy/v1: no selector selects nothing, an empty
/// one every pod of the namespace).
fn selects(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    let sel = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
    pdb.metadata.namespace == pod.metadata.namespace
        && sel.is_some_and(|s| {
            LabelSelector::from_k8s(Some(s)).is_ok_and(|s| s.matches_labels(pod.metadata.labels.as_ref()))
        })
}

fn is_ready(p: &Pod) -> bool {
    let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The scale of the controller that owns `pod` (Deployment through its ReplicaSet,
/// StatefulSet, ReplicaSet, ReplicationController), keyed by the controller's uid.
fn controller_scale(cache: &Cache, pod: &Pod) -> Option<(String, i32)> {
    let ns = pod.metadata.namespace.as_deref();
    let owner = pod.owner_references().iter().find(|o| o.controller == Some(true))?.clone();
    match owner.kind.as_str() {
        "ReplicaSet" => {
            let rs = cache.get::<ReplicaSet>(&owner.name, ns)?;
            let deployment =
                rs.owner_references().iter().find(|o| o.controller == Some(true) && o.kind == "Deployment").cloned();
            if let Some(d) = deployment.and_then(|d| cache.get::<Deployment>(&d.name, ns)) {
                return Some((d.uid().unwrap_or_default(), d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)));
            }
            Some((owner.uid, rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)))
        }
        "StatefulSet" => {
            let sts = cache.get::<StatefulSet>(&owner.name, ns)?;
            Some((owner.uid, sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)))
        }
        "ReplicationController" => {
            let rc = cache.get::<ReplicationController>(&owner.name, ns)?;
            Some((owner.uid, rc.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)))
        }
        _ => None,
    }
}

async fn reconcile(ctx: Context<PodDisruptionBudget>) -> ReconcileResult {
    let Some(pdb) = ctx.object.clone() else { return Ok(Action::done()) };
    if pdb.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let spec = pdb.spec.clone().unwrap_or_default();
    let pods: Vec<_> = ctx.cache.list::<Pod>().into_iter().filter(|p| selects(&pdb, p)).collect();
    let disrupted = pending_disruptions(&pdb, &pods);
    let healthy = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && !disrupted.contains_key(&p.name_any()) && is_ready(p))
        .count();
    let mut scales: BTreeMap<String, i32> = BTreeMap::new();
    let mut unmanaged = None;
    for p in &pods {
        match controller_scale(&ctx.cache, p) {
            Some((uid, scale)) => {
                scales.insert(uid, scale);
            }
            None => unmanaged = unmanaged.or_else(|| Some(p.name_any())),
        }
    }
    let health = Health {
        pods: pods.len(),
        healthy,
        controllers_scale: unmanaged
            .map_or(Ok(scales.values().sum()), |pod| Err(format!("found no controllers for pod {pod:?}"))),
    };
    let budget = Budget::from_spec(&spec);
    let status = match budget.evaluate(&health) {
        Ok(s) => json!({
            "currentHealthy": s.current_healthy, "desiredHealthy": s.desired_healthy, "expectedPods": s.expected_pods,
            "disruptionsAllowed": s.disruptions_allowed, "observedGeneration": pdb.metadata.generation,
            "conditions": [condition(&pdb, if s.disruptions_allowed > 0 { ("True", "SufficientPods", "") } else { ("False", "InsufficientPods", "") })],
        }),
        Err(why) => json!({
            "currentHealthy": healthy, "desiredHealthy": 0, "expectedPods": 0, "disruptionsAllowed": 0,
            "observedGeneration": pdb.metadata.generation,
            "conditions": [condition(&pdb, ("False", "SyncFailed", why.as_str()))],
        }),
    };
    let mut status = status;
    status["disruptedPods"] = disrupted_patch(&pdb, &disrupted);
    let current = serde_json::to_value(&pdb.status).unwrap_or_default();
    let recorded = current["disruptedPods"].as_object().map_or(0, |m| m.len());
    let same = ["currentHealthy", "desiredHealthy", "expectedPods", "disruptionsAllowed", "observedGeneration"]
        .iter()
        .all(|k| current[k] == status[k])
        && recorded == disrupted.len()
        && current["conditions"][0]["reason"] == status["conditions"][0]["reason"];
    if !same {
        let api: Api<PodDisruptionBudget> = ctx.api_for();
        api.patch_status(&pdb.name_any(), &PatchParams::default(), &Patch::Merge(&json!({"status": status}))).await?;
    }
    Ok(Action::done())
}

/// How long an eviction's pod may take to go before the budget counts it again (kube's
/// `DeletionTimeout`).
const DELETION_TIMEOUT: Duration = Duration::from_secs(120);

/// The budget's `disruptedPods` still pending: evicted pods (by the API server's eviction)
/// that exist, are not yet being deleted, and were evicted less than
/// [`DELETION_TIMEOUT`] ago. They do not count as healthy.
fn pending_disruptions(pdb: &PodDisruptionBudget, pods: &[std::sync::Arc<Pod>]) -> BTreeMap<String, Time> {
    let recorded = pdb.status.as_ref().and_then(|s| s.disrupted_pods.clone()).unwrap_or_default();
    let now = k8s_openapi::jiff::Timestamp::now();
    recorded
        .into_iter()
        .filter(|(name, _)| pods.iter().any(|p| p.name_any() == *name && p.metadata.deletion_timestamp.is_none()))
        .filter(|(_, at)| now.duration_since(at.0).unsigned_abs() < DELETION_TIMEOUT)
        .collect()
}

/// A merge patch of `disruptedPods` that keeps `pending` and removes every other entry.
fn disrupted_patch(pdb: &PodDisruptionBudget, pending: &BTreeMap<String, Time>) -> serde_json::Value {
    let recorded = pdb.status.as_ref().and_then(|s| s.disrupted_pods.clone()).unwrap_or_default();
    let mut patch = serde_json::Map::new();
    for name in recorded.keys().filter(|n| !pending.contains_key(*n)) {
        patch.insert(name.clone(), serde_json::Value::Null);
    }
    for (name, at) in pending {
        patch.insert(name.clone(), json!(at));
    }
    serde_json::Value::Object(patch)
}

/// The `DisruptionAllowed` condition, keeping its transition time while its status holds.
fn condition(pdb: &PodDisruptionBudget, (status, reason, message): (&str, &str, &str)) -> serde_json::Value {
    let current = pdb
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "DisruptionAllowed"));
    let since = match current {
        Some(c) if c.status == status => json!(c.last_transition_time),
        _ => json!(crate::common::now()),
    };
    json!({"type": "DisruptionAllowed", "status": status, "reason": reason, "message": message,
        "lastTransitionTime": since, "observedGeneration": pdb.metadata.generation})
}
