//! KUDO's API objects: what `kubectl kudo install` creates from a package (an
//! `Operator`, an `OperatorVersion` named `NAME-APPVERSION-VERSION` and an `Instance`
//! named `NAME-instance` by default), their resources, and the labels and annotations KUDO
//! puts on what it deploys.

use std::collections::BTreeMap;

use kube::api::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::KudoError;
use crate::package::Package;

/// KUDO's API group.
pub const GROUP: &str = "kudo.dev";
/// KUDO's API version.
pub const VERSION: &str = "v1beta1";
/// `kudo.dev/v1beta1`.
pub const API_VERSION: &str = "kudo.dev/v1beta1";

/// Label: the operator's name.
pub const OPERATOR_LABEL: &str = "kudo.dev/operator";
/// Label: the Instance's name.
pub const INSTANCE_LABEL: &str = "kudo.dev/instance";
/// Label: `kudo`.
pub const HERITAGE_LABEL: &str = "heritage";
/// Annotation: the operator version.
pub const OPERATOR_VERSION_ANNOTATION: &str = "kudo.dev/operator-version";
/// Annotation: the plan that applied the object.
pub const PLAN_ANNOTATION: &str = "kudo.dev/plan";
/// Annotation: the phase that applied the object.
pub const PHASE_ANNOTATION: &str = "kudo.dev/phase";
/// Annotation: the step that applied the object.
pub const STEP_ANNOTATION: &str = "kudo.dev/step";
/// Annotation: the plan execution that last applied the object.
pub const PLAN_UID_ANNOTATION: &str = "kudo.dev/last-plan-execution-uid";
/// Annotation on pod templates: the hash of the ConfigMaps and Secrets they use.
pub const DEPENDENCIES_HASH_ANNOTATION: &str = "kudo.dev/dependencies-hash";
/// Annotation: leave this object out of dependency hashes.
pub const SKIP_HASH_ANNOTATION: &str = "kudo.dev/skip-hash-calculation";

/// The resource of a KUDO kind (`Operator`, `OperatorVersion`, `Instance`).
pub fn api_resource(kind: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk(GROUP, VERSION, kind);
    ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()))
}

/// KUDO's `OperatorVersionName`.
pub fn operator_version_name(operator: &str, app_version: &str, version: &str) -> String {
    if app_version.is_empty() { format!("{operator}-{version}") } else { format!("{operator}-{app_version}-{version}") }
}

/// KUDO's default Instance name, `NAME-instance`.
pub fn default_instance_name(operator: &str) -> String {
    format!("{operator}-instance")
}

/// The `Operator` of a package.
pub fn operator(pkg: &Package, namespace: &str) -> Value {
    let op = &pkg.operator;
    let maintainers: Vec<Value> = op.maintainers.iter().map(|m| json!({"name": m.name, "email": m.email})).collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": "Operator",
        "metadata": {"name": op.name, "namespace": namespace},
        "spec": {
            "kudoVersion": op.kudo_version,
            "kubernetesVersion": op.kubernetes_version,
            "maintainers": maintainers,
            "url": op.url,
        }
    })
}

/// The `OperatorVersion` of a package; `dependencies` maps a KudoOperator task's
/// `package` (a local path) to the dependency's operator name and version.
pub fn operator_version(
    pkg: &Package,
    namespace: &str,
    dependencies: &BTreeMap<String, (String, String)>,
) -> Result<Value, KudoError> {
    let op = &pkg.operator;
    let mut tasks = Vec::new();
    for task in &op.tasks {
        let mut task = task.clone();
        if let Some((name, version)) = dependencies.get(&task.spec.package) {
            task.spec.package = name.clone();
            if task.spec.operator_version.is_empty() {
                task.spec.operator_version = version.clone();
            }
        }
        tasks.push(serde_json::to_value(&task).map_err(|e| KudoError::Package {
            file: pkg.source.join("operator.yaml").display().to_string(),
            message: e.to_string(),
        })?);
    }
    let mut parameters = Vec::new();
    for p in &pkg.params.parameters {
        parameters.push(crate::params::to_api(p).map_err(|message| KudoError::Package {
            file: pkg.source.join("params.yaml").display().to_string(),
            message: format!("parameter {:?}: {message}", p.name),
        })?);
    }
    Ok(json!({
        "apiVersion": API_VERSION,
        "kind": "OperatorVersion",
        "metadata": {
            "name": operator_version_name(&op.name, &op.app_version, &op.operator_version),
            "namespace": namespace,
        },
        "spec": {
            "operator": {"kind": "Operator", "name": op.name},
            "version": op.operator_version,
            "appVersion": op.app_version,
            "templates": pkg.templates,
            "tasks": tasks,
            "parameters": parameters,
            "plans": serde_json::to_value(&op.plans).unwrap_or_else(|_| json!({})),
        }
    }))
}

/// An `Instance` of an OperatorVersion.
pub fn instance(
    operator: &str,
    operator_version: &str,
    name: &str,
    namespace: &str,
    parameters: &BTreeMap<String, String>,
) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "Instance",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {OPERATOR_LABEL: operator},
        },
        "spec": {
            "operatorVersion": {"name": operator_version},
            "parameters": parameters,
        }
    })
}
