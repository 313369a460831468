//! apiregistration.k8s.io APIServices, the aggregation layer's registry (kube-aggregator's
//! `apiservice` strategy and validation): the name is `<version>.<group>`; an APIService
//! without `spec.service` is served locally and is always available; the server creates
//! one for every built-in group/version when it starts, as kube-apiserver's autoregister
//! controller does. The availability of a service-backed APIService is the cluster
//! controllers' `apiservice` controller's to report.

use serde_json::{Value, json};

use super::Strategy;
use crate::error::ApiResult;
use crate::registry::meta::{now_rfc3339, validate_path_segment};
use crate::registry::{Registry, WriteOptions};
use crate::schema::FieldError;
use crate::table::{self, Printer};

/// The strategy of apiregistration.k8s.io/v1 APIServices.
pub(super) struct ApiServices;

/// kube's label on the local APIServices made at start-up.
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

impl Strategy for ApiServices {
    /// A local APIService is available from the start ("Local APIServices are always
    /// available"); any other starts without status, for the availability controller.
    fn prepare_for_create(&self, obj: &mut Value, _has_status: bool) {
        obj["status"] = if obj["spec"]["service"].is_null() { local_status() } else { json!({}) };
    }

    fn validate_name(&self, name: &str) -> Option<FieldError> {
        validate_path_segment("metadata.name", name)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let spec = &obj["spec"];
        let mut errs = Vec::new();
        let (group, version) =
            (spec["group"].as_str().unwrap_or_default(), spec["version"].as_str().unwrap_or_default());
        let required = format!("{version}.{group}");
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        if name != required {
            errs.push(FieldError::invalid_str(
                "metadata.name",
                name,
                &format!("must be `spec.version+\".\"+spec.group`: {required:?}"),
            ));
        }
        if version.is_empty() {
            errs.push(FieldError::required("spec.version", ""));
        }
        let group_priority = spec["groupPriorityMinimum"].as_i64().unwrap_or(0);
        if !(1..=20000).contains(&group_priority) {
            errs.push(FieldError::invalid(
                "spec.groupPriorityMinimum",
                &spec["groupPriorityMinimum"],
                "must be positive and less than 20000",
            ));
        }
        if spec["versionPriority"].as_i64().unwrap_or(0) <= 0 {
            errs.push(FieldError::invalid("spec.versionPriority", &spec["versionPriority"], "must be positive"));
        }
        if spec["insecureSkipTLSVerify"] == true && spec["caBundle"].as_str().is_some_and(|c| !c.is_empty()) {
            errs.push(FieldError::invalid(
                "spec.insecureSkipTLSVerify",
                &json!(true),
                "may not be true if caBundle is present",
            ));
        }
        errs
    }

    fn table(&self) -> Option<Printer> {
        Some(table::aggregation::apiservices())
    }
}

fn local_status() -> Value {
    json!({"conditions": [{
        "type": "Available", "status": "True", "lastTransitionTime": now_rfc3339(),
        "reason": "Local", "message": "Local APIServices are always available",
    }]})
}

/// kube-apiserver's group and version priorities of a built-in group/version (its
/// `apiVersionPriorities` table); other groups get the lowest.
fn priorities(group: &str, version: &str) -> (i64, i64) {
    let group_priority = match group {
        "" => 18000,
        "apps" => 17800,
        "events.k8s.io" => 17750,
        "authentication.k8s.io" => 17700,
        "authorization.k8s.io" => 17600,
        "autoscaling" => 17500,
        "batch" => 17400,
        "certificates.k8s.io" => 17300,
        "networking.k8s.io" => 17200,
        "policy" => 17100,
        "rbac.authorization.k8s.io" => 17000,
        "storage.k8s.io" => 16800,
        "apiextensions.k8s.io" | "admissionregistration.k8s.io" => 16700,
        "scheduling.k8s.io" => 16600,
        "coordination.k8s.io" => 16500,
        "node.k8s.io" => 16300,
        "discovery.k8s.io" => 16200,
        "flowcontrol.apiserver.k8s.io" => 16100,
        _ => 1000,
    };
    let version_priority = match (group, version) {
        ("", _) => 1,
        ("autoscaling", "v2") => 30,
        _ => 15,
    };
    (group_priority, version_priority)
}

/// Creates a local APIService for every built-in group/version that has none.
pub(crate) async fn bootstrap(registry: &Registry) -> ApiResult<()> {
    let catalog = registry.catalog.snapshot();
    let Some(info) = catalog.lookup("apiregistration.k8s.io", "v1", "apiservices") else {
        return Ok(());
    };
    let target = registry.target(info, "v1".into(), None);
    let opts = WriteOptions { field_manager: "kube-apiserver".into(), ..Default::default() };
    for (group, versions) in catalog.groups() {
        for version in versions {
            let name = if group.is_empty() { format!("{version}.") } else { format!("{version}.{group}") };
            if registry.store.get(&target.info.id, &target.key(&name)).await?.is_some() {
                continue;
            }
            let (group_priority, version_priority) = priorities(&group, &version);
            let body = json!({
                "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": name, "labels": {AUTOMANAGED: "onstart"}},
                "spec": {"group": group, "version": version, "groupPriorityMinimum": group_priority,
                    "versionPriority": version_priority, "service": null},
            });
            registry.create_if_missing(&target, body, &opts).await?;
        }
    }
    Ok(())
}
