//! Running a step's tasks, in order: Apply (render, enhance, server-side apply, then
//! health), Delete (delete, then wait until gone), Toggle (Apply or Delete by a boolean
//! parameter), Dummy, Pipe ([`super::pipe`]) and KudoOperator (an Instance of a
//! dependency's OperatorVersion, healthy when its deploy plan is COMPLETE). As KUDO: a
//! rendering error or a terminally failed object is fatal, an API error is an error that
//! is retried.

use std::collections::BTreeMap;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::{Client, ResourceExt};
use opkit::Context;
use serde_json::{Value, json};

use super::apply::{api_for, api_message, apply_objects, describe, health_of};
use super::step::{Outcome, StepMeta};
use super::{Engine, FIELD_MANAGER, OperatorVersion};
use crate::package::{Step, Task, TaskSpec};
use crate::render::{Variables, render_objects};
use crate::resources;

/// The template variables of a step.
pub(crate) fn variables(
    ov: &OperatorVersion,
    meta: &StepMeta,
    params: &BTreeMap<String, Option<String>>,
    pipes: &BTreeMap<String, String>,
) -> Variables {
    Variables {
        operator_name: ov.operator_name.clone(),
        name: meta.name(),
        namespace: meta.namespace(),
        app_version: ov.app_version.clone(),
        operator_version: ov.version.clone(),
        plan_name: meta.plan.clone(),
        phase_name: meta.phase.clone(),
        step_name: meta.step.clone(),
        params: crate::params::template_params(&ov.parameters, params),
        pipes: pipes.clone(),
    }
}

/// Renders the templates `files` for a task.
pub(crate) fn render_files(ov: &OperatorVersion, files: &[String], vars: &Variables) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for file in files {
        let Some(source) = ov.templates.get(file) else {
            return Err(format!("template {file:?} is not defined by {}", ov.name));
        };
        out.extend(render_objects(file, source, vars)?);
    }
    Ok(out)
}

/// Runs the tasks of `step`, in order, until one is not done.
pub(crate) async fn run_step(
    engine: &Engine,
    ctx: &Context<DynamicObject>,
    ov: &OperatorVersion,
    meta: &StepMeta,
    step: &Step,
    params: &BTreeMap<String, Option<String>>,
    pipes: &BTreeMap<String, String>,
) -> Outcome {
    for task_name in &step.tasks {
        let Some(task) = ov.tasks.iter().find(|t| &t.name == task_name) else {
            return Outcome::Fatal(format!("task {task_name:?} is not defined"));
        };
        let outcome = run_task(engine, ctx, ov, meta, task, params, pipes).await;
        if outcome != Outcome::Done {
            return outcome;
        }
    }
    Outcome::Done
}

async fn run_task(
    engine: &Engine,
    ctx: &Context<DynamicObject>,
    ov: &OperatorVersion,
    meta: &StepMeta,
    task: &Task,
    params: &BTreeMap<String, Option<String>>,
    pipes: &BTreeMap<String, String>,
) -> Outcome {
    let vars = variables(ov, meta, params, pipes);
    let prefix = |m: String| format!("task {}: {m}", task.name);
    match task.kind.as_str() {
        "Apply" => apply_task(engine, &ctx.client, ov, meta, &task.spec.resources, &vars).await,
        "Delete" => delete_task(engine, &ctx.client, ov, meta, &task.spec.resources, &vars).await,
        "Toggle" => {
            let value = params.get(&task.spec.parameter).cloned().flatten().unwrap_or_default();
            match value.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "t" => apply_task(engine, &ctx.client, ov, meta, &task.spec.resources, &vars).await,
                "false" | "0" | "f" | "" => {
                    delete_task(engine, &ctx.client, ov, meta, &task.spec.resources, &vars).await
                }
                other => Outcome::Fatal(prefix(format!(
                    "parameter {:?} of a Toggle task must be a boolean, not {other:?}",
                    task.spec.parameter
                ))),
            }
        }
        "Dummy" => {
            if task.spec.want_err {
                let m = prefix("dummy error".into());
                if task.spec.fatal { Outcome::Fatal(m) } else { Outcome::Error(m) }
            } else if task.spec.done {
                Outcome::Done
            } else {
                Outcome::Waiting(prefix("dummy task is not done".into()))
            }
        }
        "Pipe" => super::pipe::run(engine, &ctx.client, ov, meta, task, &vars).await,
        "KudoOperator" => kudo_operator(engine, &ctx.client, ov, meta, task, &vars).await,
        other => Outcome::Fatal(prefix(format!("unknown task kind {other:?}"))),
    }
}

async fn apply_task(
    engine: &Engine,
    client: &Client,
    ov: &OperatorVersion,
    meta: &StepMeta,
    files: &[String],
    vars: &Variables,
) -> Outcome {
    let objects = match render_files(ov, files, vars) {
        Ok(o) => o,
        Err(e) => return Outcome::Fatal(e),
    };
    match apply_objects(engine, client, meta, ov, objects).await {
        Ok(applied) => health_of(&applied),
        Err(outcome) => outcome,
    }
}

async fn delete_task(
    engine: &Engine,
    client: &Client,
    ov: &OperatorVersion,
    meta: &StepMeta,
    files: &[String],
    vars: &Variables,
) -> Outcome {
    let objects = match render_files(ov, files, vars) {
        Ok(o) => o,
        Err(e) => return Outcome::Fatal(e),
    };
    let namespace = meta.namespace();
    let mut waiting = Vec::new();
    for obj in &objects {
        // A kind no longer served has nothing left to delete.
        let Ok((api, _)) = api_for(engine, client, &namespace, obj).await else { continue };
        let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        match api.delete(name, &DeleteParams::background()).await {
            Ok(either) => {
                if either.is_left() {
                    waiting.push(describe(obj));
                }
            }
            Err(e) if opkit::status::is_not_found(&e) => {}
            Err(e) => return Outcome::Error(format!("deleting {}: {}", describe(obj), api_message(&e))),
        }
    }
    if waiting.is_empty() { Outcome::Done } else { Outcome::Waiting(format!("{} is not deleted", waiting.join(", "))) }
}

/// KudoOperator: an Instance of the dependency, healthy when its deploy plan completed.
async fn kudo_operator(
    engine: &Engine,
    client: &Client,
    ov: &OperatorVersion,
    meta: &StepMeta,
    task: &Task,
    vars: &Variables,
) -> Outcome {
    let _ = engine;
    let namespace = meta.namespace();
    let spec = &task.spec;
    let ov_name = match dependency_operator_version(client, &namespace, task).await {
        Ok(name) => name,
        Err(outcome) => return outcome,
    };
    let parameters = match dependency_parameters(ov, spec, vars) {
        Ok(parameters) => parameters,
        Err(outcome) => return outcome,
    };
    let instance_name = if spec.instance_name.is_empty() {
        format!("{}-{}", meta.name(), spec.package)
    } else {
        spec.instance_name.clone()
    };
    let mut child = resources::instance(&spec.package, &ov_name, &instance_name, &namespace, &parameters);
    let owner = &meta.instance;
    child["metadata"]["ownerReferences"] = json!([{
        "apiVersion": resources::API_VERSION,
        "kind": "Instance",
        "name": owner.name_any(),
        "uid": owner.uid().unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    }]);
    let instances: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &resources::api_resource("Instance"));
    match instances.patch(&instance_name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&child)).await {
        Ok(live) => dependency_outcome(&instance_name, &live),
        Err(e) => Outcome::Error(format!("applying Instance/{instance_name}: {}", api_message(&e))),
    }
}

/// The installed OperatorVersion a KudoOperator task's dependency runs: the one its
/// versions name, else the only (or last listed) one of that operator (and app version).
async fn dependency_operator_version(client: &Client, namespace: &str, task: &Task) -> Result<String, Outcome> {
    let spec = &task.spec;
    let ovs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resources::api_resource("OperatorVersion"));
    let dependency = if spec.operator_version.is_empty() {
        let list = ovs.list(&Default::default()).await.map_err(|e| Outcome::Error(api_message(&e)))?;
        list.items
            .into_iter()
            .filter(|o| o.data.pointer("/spec/operator/name").and_then(Value::as_str) == Some(spec.package.as_str()))
            .filter(|o| {
                spec.app_version.is_empty()
                    || o.data.pointer("/spec/appVersion").and_then(Value::as_str) == Some(spec.app_version.as_str())
            })
            .map(|o| o.name_any())
            .next_back()
    } else {
        Some(resources::operator_version_name(&spec.package, &spec.app_version, &spec.operator_version))
    };
    let Some(ov_name) = dependency else {
        return Err(Outcome::Error(format!(
            "task {}: no OperatorVersion of operator {:?} is installed in {namespace}",
            task.name, spec.package
        )));
    };
    match ovs.get_opt(&ov_name).await {
        Ok(Some(_)) => Ok(ov_name),
        Ok(None) => Err(Outcome::Error(format!(
            "task {}: operator version {ov_name} (package {:?}) is not installed in {namespace}",
            task.name, spec.package
        ))),
        Err(e) => Err(Outcome::Error(api_message(&e))),
    }
}

/// The dependency's parameters: its parameter file rendered, a YAML map whose values
/// become strings (lists and maps as YAML); none without a parameter file.
fn dependency_parameters(
    ov: &OperatorVersion,
    spec: &TaskSpec,
    vars: &Variables,
) -> Result<BTreeMap<String, String>, Outcome> {
    let mut parameters = BTreeMap::new();
    if spec.parameter_file.is_empty() {
        return Ok(parameters);
    }
    let Some(source) = ov.templates.get(&spec.parameter_file) else {
        return Err(Outcome::Fatal(format!("template {:?} is not defined", spec.parameter_file)));
    };
    let text = crate::render::render(&spec.parameter_file, source, vars).map_err(Outcome::Fatal)?;
    match serde_saphyr::from_str_with_options::<Value>(&text, opkit_helm::yaml::parse_options()) {
        Ok(Value::Object(m)) => {
            for (k, v) in m {
                let v = match v {
                    Value::String(s) => s,
                    Value::Array(_) | Value::Object(_) => serde_saphyr::to_string(&v).unwrap_or_default(),
                    other => other.to_string(),
                };
                parameters.insert(k, v);
            }
            Ok(parameters)
        }
        Ok(Value::Null) => Ok(parameters),
        Ok(_) | Err(_) => Err(Outcome::Fatal(format!("{}: the parameter file is not a YAML map", spec.parameter_file))),
    }
}

/// How the dependency Instance is doing: done when its deploy plan is COMPLETE and no plan
/// runs, fatal when the deploy plan failed, waiting otherwise.
fn dependency_outcome(instance_name: &str, live: &DynamicObject) -> Outcome {
    let deploy = live.data.pointer("/status/planStatus/deploy/status").and_then(Value::as_str).unwrap_or_default();
    let active = live.data.pointer("/spec/planExecution/planName").and_then(Value::as_str).unwrap_or_default();
    match deploy {
        crate::plan::state::COMPLETE if active.is_empty() => Outcome::Done,
        crate::plan::state::FATAL_ERROR => {
            Outcome::Fatal(format!("dependency instance {instance_name}: deploy plan failed"))
        }
        s => Outcome::Waiting(format!(
            "dependency instance {instance_name}: deploy plan is {}",
            if s.is_empty() { "not started" } else { s }
        )),
    }
}
