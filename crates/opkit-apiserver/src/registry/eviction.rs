//! The `pods/eviction` subresource (kube's `EvictionREST`): a pod is deleted only if the
//! PodDisruptionBudget that selects it allows one more disruption, and that budget's
//! `disruptionsAllowed` is taken down by one (the pod recorded in `disruptedPods`) in the
//! same step, so concurrent evictions cannot overdraw it. A refused eviction is kube's
//! 429 with a `DisruptionBudget` cause; a pod selected by two budgets is a 500, as kube
//! answers. Pods already terminal, pending or being deleted, and pods that are not Ready
//! while their budget is met, are deleted without consulting the budget's allowance.

use opkit_apimachinery::selector::LabelSelector;
use serde_json::{Value, json};

use super::meta::now_rfc3339;
use super::{Registry, Subresource, Target, WriteOptions, parse_stored};
use crate::error::{ApiError, ApiResult};
use crate::storage::ResourceId;

/// kube's refusal message.
const REFUSED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

fn is_ready(pod: &Value) -> bool {
    let conditions = pod["status"]["conditions"].as_array().cloned().unwrap_or_default();
    conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Whether the budget's allowance does not apply to the pod (kube's `canIgnorePDB`).
fn ignores_budgets(pod: &Value) -> bool {
    matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed" | "Pending"))
        || pod["metadata"]["deletionTimestamp"].is_string()
}

/// Whether `budget` (policy/v1) selects `pod`: a budget without a selector selects nothing.
fn selects(budget: &Value, pod: &Value) -> bool {
    let selector = &budget["spec"]["selector"];
    !selector.is_null()
        && LabelSelector::from_label_selector_json(selector)
            .is_ok_and(|s| s.matches(pod["metadata"]["labels"].as_object()))
}

impl Registry {
    /// Evicts the pod `name` (`target` is the pods resource in its namespace), with the
    /// Eviction's `deleteOptions`. Returns the Status kube answers on success.
    pub async fn evict(&self, target: &Target, name: &str, eviction: &Value, dry_run: bool) -> ApiResult<Value> {
        if let Some(named) = eviction["metadata"]["name"].as_str()
            && named != name
        {
            return Err(ApiError::bad_request(format!(
                "name in URL does not match name in Eviction object: {name:?} vs {named:?}"
            )));
        }
        let pod = self.get(target, name).await?;
        let options = eviction.get("deleteOptions").cloned().unwrap_or(Value::Null);
        if !ignores_budgets(&pod) {
            self.take_disruption(target, &pod, dry_run).await?;
        }
        // kube deletes an evicted pod without admission (the eviction itself was admitted).
        self.delete(target, name, &options, dry_run, None).await?;
        Ok(json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}))
    }

    /// Checks the budget that selects `pod` and takes one disruption from it.
    async fn take_disruption(&self, pods: &Target, pod: &Value, dry_run: bool) -> ApiResult<()> {
        let Some(info) = self.catalog.snapshot().lookup("policy", "v1", "poddisruptionbudgets") else {
            return Ok(());
        };
        let budgets = self.target(info, "v1".into(), pods.namespace.clone());
        let namespace = pods.namespace.clone().unwrap_or_default();
        loop {
            let stored = self.store.values(&ResourceId::new("policy", "poddisruptionbudgets"));
            let selecting: Vec<Value> = stored
                .into_iter()
                .filter(|((ns, _), _)| *ns == namespace)
                .filter_map(|(_, bytes)| parse_stored(&bytes).ok())
                .filter(|b| selects(b, pod))
                .collect();
            let budget = match selecting.as_slice() {
                [] => return Ok(()),
                [budget] => budget.clone(),
                _ => {
                    return Err(ApiError::internal(
                        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                    ));
                }
            };
            let status = &budget["status"];
            let (current, desired) =
                (status["currentHealthy"].as_i64().unwrap_or(0), status["desiredHealthy"].as_i64().unwrap_or(0));
            let budget_name = budget["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let unhealthy_may_go =
                budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow" || (current >= desired && desired > 0);
            if !is_ready(pod) && unhealthy_may_go {
                return Ok(());
            }
            if status["observedGeneration"].as_i64().unwrap_or(0)
                < budget["metadata"]["generation"].as_i64().unwrap_or(0)
            {
                let cause = format!("The disruption budget {budget_name} is still being processed by the server.");
                return Err(ApiError::too_many_requests(REFUSED, Some(10), &[("DisruptionBudget", cause)]));
            }
            let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0);
            if allowed <= 0 {
                let cause = format!(
                    "The disruption budget {budget_name} needs {desired} healthy pods and has {current} currently"
                );
                return Err(ApiError::too_many_requests(REFUSED, None, &[("DisruptionBudget", cause)]));
            }
            if dry_run {
                return Ok(());
            }
            let mut updated = budget.clone();
            updated["status"]["disruptionsAllowed"] = json!(allowed - 1);
            let pod_name = pod["metadata"]["name"].as_str().unwrap_or_default();
            if !updated["status"]["disruptedPods"].is_object() {
                updated["status"]["disruptedPods"] = json!({});
            }
            updated["status"]["disruptedPods"][pod_name] = json!(now_rfc3339());
            if allowed - 1 == 0 {
                insufficient(&mut updated);
            }
            let opts = WriteOptions { field_manager: "kube-apiserver".into(), ..Default::default() };
            match self.update(&budgets, &budget_name, updated, Subresource::Status, &opts).await {
                Ok(_) => return Ok(()),
                Err(e) if e.code == 409 => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Sets the budget's `DisruptionAllowed` condition to `False`/`InsufficientPods`.
fn insufficient(budget: &mut Value) {
    let generation = budget["metadata"]["generation"].clone();
    let conditions = budget["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let mut kept: Vec<Value> = conditions.into_iter().filter(|c| c["type"] != "DisruptionAllowed").collect();
    kept.push(json!({"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods", "message": "",
        "lastTransitionTime": now_rfc3339(), "observedGeneration": generation}));
    budget["status"]["conditions"] = json!(kept);
}
