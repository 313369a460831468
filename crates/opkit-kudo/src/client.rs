//! What `kubectl kudo` does against a cluster, for the CLI, the tests and the benchmark:
//! install a package (its `Operator`, `OperatorVersion`, local KudoOperator dependencies,
//! and unless skipped an `Instance`), upgrade an Instance to another package version,
//! update its parameters, trigger, cancel or retry a plan, uninstall it, and wait for a
//! plan to end.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::KudoError;
use crate::engine::{CANCEL_ANNOTATION, RETRY_ANNOTATION};
use crate::package::{self, Package};
use crate::plan::{PlanStatus, state};
use crate::resources::{self, api_resource};

/// The field manager the CLI writes with.
pub const FIELD_MANAGER: &str = "kubectl-kudo";

/// What `install` is told.
#[derive(Debug, Clone, Default)]
pub struct InstallOptions {
    /// The namespace.
    pub namespace: String,
    /// The Instance's name (default `NAME-instance`).
    pub instance: Option<String>,
    /// `-p` / `-P` parameters.
    pub parameters: BTreeMap<String, String>,
    /// `--skip-instance`: only the Operator and OperatorVersion.
    pub skip_instance: bool,
}

/// What `install` created.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Installed {
    /// The Operator.
    pub operator: String,
    /// The OperatorVersion.
    pub operator_version: String,
    /// The Instance, unless skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// OperatorVersions of local dependencies installed with it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
}

fn api(client: &Client, namespace: &str, kind: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &api_resource(kind))
}

fn to_object(v: Value) -> Result<DynamicObject, KudoError> {
    serde_json::from_value(v).map_err(|e| KudoError::Params(format!("internal: {e}")))
}

/// Server-side applies an Operator or OperatorVersion.
async fn apply(client: &Client, namespace: &str, kind: &str, body: Value) -> Result<(), KudoError> {
    let name = body.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    api(client, namespace, kind)
        .patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&to_object(body)?))
        .await?;
    Ok(())
}

/// Installs the Operator and OperatorVersion of `pkg` and of its KudoOperator
/// dependencies given as local paths (relative to the package); returns the OperatorVersion's
/// name and the dependencies' ones.
async fn install_operator(
    client: &Client,
    pkg: &Package,
    namespace: &str,
    depth: usize,
) -> Result<(String, Vec<String>), KudoError> {
    if depth > 8 {
        return Err(KudoError::Params(format!("{}: dependencies nest too deep (a cycle?)", pkg.source.display())));
    }
    let base = if pkg.source.is_dir() {
        pkg.source.clone()
    } else {
        pkg.source.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    let mut local = BTreeMap::new();
    let mut installed = Vec::new();
    for task in pkg.operator.tasks.iter().filter(|t| t.kind == "KudoOperator") {
        let path = base.join(&task.spec.package);
        if task.spec.package.is_empty() || !(path.is_dir() || path.is_file()) {
            continue;
        }
        let dep = package::load(&path)?;
        let (ov, nested) = Box::pin(install_operator(client, &dep, namespace, depth + 1)).await?;
        local.insert(task.spec.package.clone(), (dep.operator.name.clone(), dep.operator.operator_version.clone()));
        installed.extend(nested);
        installed.push(ov);
    }
    apply(client, namespace, "Operator", resources::operator(pkg, namespace)).await?;
    let ov = resources::operator_version(pkg, namespace, &local)?;
    let name = ov.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    apply(client, namespace, "OperatorVersion", ov).await?;
    Ok((name, installed))
}

/// `kubectl kudo install`.
pub async fn install(client: &Client, pkg: &Package, options: &InstallOptions) -> Result<Installed, KudoError> {
    let ns = options.namespace.as_str();
    let instance = options.instance.clone().unwrap_or_else(|| resources::default_instance_name(&pkg.operator.name));
    if !options.skip_instance {
        check_parameters(pkg, &options.parameters)?;
        if api(client, ns, "Instance").get_opt(&instance).await?.is_some() {
            return Err(KudoError::Params(format!("instance {instance} in namespace {ns} already exists")));
        }
    }
    let (ov_name, dependencies) = install_operator(client, pkg, ns, 0).await?;
    let mut installed = Installed {
        operator: pkg.operator.name.clone(),
        operator_version: ov_name.clone(),
        instance: None,
        dependencies,
    };
    if !options.skip_instance {
        let body = resources::instance(&pkg.operator.name, &ov_name, &instance, ns, &options.parameters);
        api(client, ns, "Instance").create(&PostParams::default(), &to_object(body)?).await?;
        installed.instance = Some(instance);
    }
    Ok(installed)
}

/// Checks `-p` parameters against the package: each declared, of its type, and every
/// required one given or defaulted.
pub fn check_parameters(pkg: &Package, given: &BTreeMap<String, String>) -> Result<(), KudoError> {
    for name in given.keys() {
        if pkg.parameter(name).is_none() {
            return Err(KudoError::Params(format!(
                "parameter {name:?} is not defined by {} {}",
                pkg.operator.name, pkg.operator.operator_version
            )));
        }
    }
    crate::params::effective(&pkg.params.parameters, given).map(|_| ()).map_err(KudoError::Params)
}

async fn get_instance(client: &Client, ns: &str, name: &str) -> Result<DynamicObject, KudoError> {
    api(client, ns, "Instance")
        .get_opt(name)
        .await?
        .ok_or_else(|| KudoError::Params(format!("instance {ns}/{name} does not exist")))
}

async fn get_ov(client: &Client, ns: &str, instance: &DynamicObject) -> Result<DynamicObject, KudoError> {
    let name = instance.data.pointer("/spec/operatorVersion/name").and_then(Value::as_str).unwrap_or_default();
    api(client, ns, "OperatorVersion")
        .get_opt(name)
        .await?
        .ok_or_else(|| KudoError::Params(format!("operator version {ns}/{name} does not exist")))
}

/// `kubectl kudo upgrade`: installs the package's OperatorVersion and points the Instance
/// at it (the engine runs `upgrade`, else `update`, else `deploy`).
pub async fn upgrade(
    client: &Client,
    pkg: &Package,
    ns: &str,
    instance: &str,
    parameters: &BTreeMap<String, String>,
) -> Result<String, KudoError> {
    let current = get_instance(client, ns, instance).await?;
    let operator = current.data.pointer("/metadata/labels/kudo.dev~1operator").and_then(Value::as_str);
    if let Some(op) = operator
        && op != pkg.operator.name
    {
        return Err(KudoError::Params(format!("instance {instance} runs operator {op}, not {}", pkg.operator.name)));
    }
    let old = get_ov(client, ns, &current).await.ok();
    let new_name =
        resources::operator_version_name(&pkg.operator.name, &pkg.operator.app_version, &pkg.operator.operator_version);
    if old.as_ref().is_some_and(|o| kube::ResourceExt::name_any(o) == new_name) {
        return Err(KudoError::Params(format!("instance {instance} already runs {new_name}")));
    }
    let mut merged: BTreeMap<String, String> = current
        .data
        .pointer("/spec/parameters")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string()))).collect())
        .unwrap_or_default();
    merged.extend(parameters.clone());
    merged.retain(|k, _| pkg.parameter(k).is_some());
    check_parameters(pkg, &merged)?;
    let (ov_name, _) = install_operator(client, pkg, ns, 0).await?;
    let patch = json!({"spec": {"operatorVersion": {"name": ov_name}, "parameters": parameters}});
    api(client, ns, "Instance").patch(instance, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(ov_name)
}

/// `kubectl kudo update`: new parameter values (checked against the OperatorVersion;
/// immutable ones refused).
pub async fn update(
    client: &Client,
    ns: &str,
    instance: &str,
    parameters: &BTreeMap<String, String>,
) -> Result<(), KudoError> {
    let current = get_instance(client, ns, instance).await?;
    let ov = get_ov(client, ns, &current).await?;
    let declared: Vec<crate::params::Parameter> = ov
        .data
        .pointer("/spec/parameters")
        .and_then(Value::as_array)
        .map(|ps| ps.iter().map(crate::params::from_api).collect())
        .unwrap_or_default();
    let old: BTreeMap<String, String> = current
        .data
        .pointer("/spec/parameters")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string()))).collect())
        .unwrap_or_default();
    for (k, v) in parameters {
        let Some(p) = declared.iter().find(|p| &p.name == k) else {
            return Err(KudoError::Params(format!(
                "parameter {k:?} is not defined by {}",
                kube::ResourceExt::name_any(&ov)
            )));
        };
        if p.immutable == Some(true) && old.get(k) != Some(v) {
            return Err(KudoError::Params(format!("parameter {k:?} is immutable and cannot be updated")));
        }
        crate::params::check_value(p, v)
            .map_err(|e| KudoError::Params(format!("parameter {k:?} has an invalid value {v:?}: {e}")))?;
    }
    let patch = json!({"spec": {"parameters": parameters}});
    api(client, ns, "Instance").patch(instance, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// `kubectl kudo uninstall`: deletes the Instance (its cleanup plan runs first).
pub async fn uninstall(client: &Client, ns: &str, instance: &str) -> Result<(), KudoError> {
    get_instance(client, ns, instance).await?;
    api(client, ns, "Instance").delete(instance, &DeleteParams::foreground()).await?;
    Ok(())
}

/// `kubectl kudo plan trigger`: asks the engine to run `plan`.
pub async fn trigger(client: &Client, ns: &str, instance: &str, plan: &str) -> Result<(), KudoError> {
    let current = get_instance(client, ns, instance).await?;
    let ov = get_ov(client, ns, &current).await?;
    if ov.data.pointer(&format!("/spec/plans/{}", plan.replace('~', "~0").replace('/', "~1"))).is_none() {
        return Err(KudoError::Params(format!("plan {plan:?} is not defined by {}", kube::ResourceExt::name_any(&ov))));
    }
    let patch = json!({"spec": {"planExecution": {"planName": plan, "uid": "", "status": ""}}});
    api(client, ns, "Instance").patch(instance, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// `opkit kudo plan cancel` (beyond KUDO): ends the active plan (or `plan` only).
pub async fn cancel(client: &Client, ns: &str, instance: &str, plan: Option<&str>) -> Result<String, KudoError> {
    let current = get_instance(client, ns, instance).await?;
    let statuses = plan_statuses(&current);
    let active = statuses
        .values()
        .find(|p| matches!(p.status.as_str(), state::PENDING | state::IN_PROGRESS | state::ERROR))
        .filter(|p| plan.is_none_or(|want| want == p.name))
        .map(|p| p.name.clone())
        .ok_or_else(|| {
            KudoError::Params(format!(
                "instance {ns}/{instance} has no active plan{}",
                plan.map(|p| format!(" {p}")).unwrap_or_default()
            ))
        })?;
    let patch = json!({"metadata": {"annotations": {CANCEL_ANNOTATION: active}}});
    api(client, ns, "Instance").patch(instance, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(active)
}

/// `opkit kudo plan retry` (beyond KUDO): resumes a failed or cancelled plan from its
/// failed steps.
pub async fn retry(client: &Client, ns: &str, instance: &str, plan: &str) -> Result<(), KudoError> {
    let current = get_instance(client, ns, instance).await?;
    let statuses = plan_statuses(&current);
    match statuses.get(plan).map(|p| p.status.as_str()) {
        Some(state::ERROR | state::FATAL_ERROR) => {}
        Some(other) => {
            return Err(KudoError::Params(format!(
                "plan {plan} of {ns}/{instance} is {other}, not ERROR or FATAL_ERROR"
            )));
        }
        None => return Err(KudoError::Params(format!("plan {plan} of {ns}/{instance} never ran"))),
    }
    let patch = json!({"metadata": {"annotations": {RETRY_ANNOTATION: plan}}});
    api(client, ns, "Instance").patch(instance, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// An Instance's `status.planStatus`.
pub fn plan_statuses(instance: &DynamicObject) -> BTreeMap<String, PlanStatus> {
    instance
        .data
        .pointer("/status/planStatus")
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

/// Reads an Instance (`None` when it does not exist).
pub async fn instance(client: &Client, ns: &str, name: &str) -> Result<Option<DynamicObject>, KudoError> {
    Ok(api(client, ns, "Instance").get_opt(name).await?)
}

/// Reads an Instance's OperatorVersion.
pub async fn operator_version_of(
    client: &Client,
    ns: &str,
    instance: &DynamicObject,
) -> Result<DynamicObject, KudoError> {
    get_ov(client, ns, instance).await
}

/// Waits until `plan` (else the active or last plan) of the Instance ends (COMPLETE, or
/// FATAL_ERROR) — not a plan that ended before `since_uid` changed — or `timeout` passes.
pub async fn wait_for_plan(
    client: &Client,
    ns: &str,
    instance: &str,
    plan: &str,
    previous_uid: Option<&str>,
    timeout: Duration,
) -> Result<PlanStatus, KudoError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let current = get_instance(client, ns, instance).await?;
        if let Some(s) = plan_statuses(&current).get(plan)
            && Some(s.uid.as_str()) != previous_uid
            && matches!(s.status.as_str(), state::COMPLETE | state::FATAL_ERROR)
        {
            return Ok(s.clone());
        }
        if tokio::time::Instant::now() >= deadline {
            let seen =
                plan_statuses(&current).get(plan).map(|s| s.status.clone()).unwrap_or_else(|| "not started".into());
            return Err(KudoError::Params(format!(
                "timed out after {}s waiting for plan {plan} of {ns}/{instance} to finish (it is {seen})",
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
