//! `kubectl kudo package verify`: the checks of KUDO's verifier
//! (`pkg/kudoctl/packages/verifier`) — the mandatory `deploy` plan, plans and tasks that
//! refer to missing tasks, templates or plans, parameters used in templates but not
//! declared, and (as warnings) parameters, tasks and templates declared but not used. Each
//! finding names the package file it is about.

use std::collections::BTreeSet;
use std::fmt;

use crate::package::{Package, Task};
use crate::render::referenced;

/// The task kinds KUDO runs.
pub(crate) const TASK_KINDS: &[&str] = &["Apply", "Delete", "Toggle", "Pipe", "Dummy", "KudoOperator"];

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The package is not valid (KUDO refuses it).
    Error,
    /// Worth a look; the package is valid.
    Warning,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// The file, relative to the package (`operator.yaml`, `params.yaml`, `templates/x.yaml`).
    pub file: String,
    /// KUDO's message.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{severity}: {}: {}", self.file, self.message)
    }
}

/// Every finding about `pkg`, errors first.
pub fn verify(pkg: &Package) -> Vec<Finding> {
    let mut out = Vec::new();
    check_plans(pkg, &mut out);
    check_tasks(pkg, &mut out);
    check_plan_tasks(pkg, &mut out);
    check_template_parameters(pkg, &mut out);
    warn_unused_parameters(pkg, &mut out);
    warn_unused_tasks(pkg, &mut out);
    warn_unused_templates(pkg, &mut out);
    out
}

fn error(file: &str, message: String) -> Finding {
    Finding { severity: Severity::Error, file: file.to_string(), message }
}

fn warning(file: &str, message: String) -> Finding {
    Finding { severity: Severity::Warning, file: file.to_string(), message }
}

/// The mandatory `deploy` plan, and the plans parameters trigger.
fn check_plans(pkg: &Package, out: &mut Vec<Finding>) {
    let op = &pkg.operator;
    if !op.plans.contains_key("deploy") {
        out.push(error("operator.yaml", "an operator is required to have 'deploy' plan".into()));
    }
    for p in &pkg.params.parameters {
        if !p.trigger.is_empty() && !op.plans.contains_key(&p.trigger) {
            out.push(error(
                "params.yaml",
                format!("plan {:?} used in parameter {:?} is not defined", p.trigger, p.name),
            ));
        }
    }
}

/// Each task, defined once.
fn check_tasks(pkg: &Package, out: &mut Vec<Finding>) {
    let tasks = &pkg.operator.tasks;
    for (i, task) in tasks.iter().enumerate() {
        if tasks[..i].iter().any(|t| t.name == task.name) {
            out.push(error("operator.yaml", format!("task {:?} is defined more than once", task.name)));
        }
        check_task(pkg, task, out);
    }
}

/// One task: a known kind with the fields it needs, valid pipe entries,
/// defined templates and (Toggle) a defined parameter.
fn check_task(pkg: &Package, task: &Task, out: &mut Vec<Finding>) {
    let mut fail = |message: String| out.push(error("operator.yaml", message));
    if !TASK_KINDS.contains(&task.kind.as_str()) {
        fail(format!("task {:?} has an unknown kind {:?}", task.name, task.kind));
    }
    let needs = match task.kind.as_str() {
        "Apply" | "Delete" | "Toggle" if task.spec.resources.is_empty() => Some("spec.resources"),
        "Toggle" if task.spec.parameter.is_empty() => Some("spec.parameter"),
        "Pipe" if task.spec.pod.is_empty() => Some("spec.pod"),
        "Pipe" if task.spec.pipe.is_empty() => Some("spec.pipe"),
        "KudoOperator" if task.spec.package.is_empty() => Some("spec.package"),
        _ => None,
    };
    if let Some(field) = needs {
        fail(format!("task {:?} of kind {} has no {field}", task.name, task.kind));
    }
    for pipe in &task.spec.pipe {
        if pipe.kind != "ConfigMap" && pipe.kind != "Secret" {
            fail(format!("task {:?}: pipe file kind {:?} is not ConfigMap or Secret", task.name, pipe.kind));
        }
        if pipe.file.is_empty() == pipe.env_file.is_empty() {
            fail(format!("task {:?}: a pipe entry needs exactly one of file and envFile", task.name));
        }
    }
    for template in task_templates(task) {
        if !pkg.templates.contains_key(template) {
            fail(format!("template {template:?} required by {} but is not defined", task.name));
        }
    }
    if task.kind == "Toggle" && !task.spec.parameter.is_empty() && pkg.parameter(&task.spec.parameter).is_none() {
        fail(format!("parameter {:?} in ToggleTask {} is not defined", task.spec.parameter, task.name));
    }
}

/// The tasks plans' steps name are defined.
fn check_plan_tasks(pkg: &Package, out: &mut Vec<Finding>) {
    for (plan_name, plan) in &pkg.operator.plans {
        let named = plan.phases.iter().flat_map(|p| &p.steps).flat_map(|s| &s.tasks);
        for task in named.filter(|t| pkg.task(t).is_none()) {
            out.push(error("operator.yaml", format!("task {task:?} in plan {plan_name:?} is not defined")));
        }
    }
}

/// The parameters templates use are declared.
fn check_template_parameters(pkg: &Package, out: &mut Vec<Finding>) {
    let declared: BTreeSet<&str> = pkg.params.parameters.iter().map(|p| p.name.as_str()).collect();
    for (file, source) in &pkg.templates {
        for param in referenced(source, "Params").into_iter().filter(|p| !declared.contains(p.as_str())) {
            out.push(error(
                &format!("templates/{file}"),
                format!("parameter {param:?} in template {file} is not defined"),
            ));
        }
    }
}

/// Parameters no template and no Toggle task uses.
fn warn_unused_parameters(pkg: &Package, out: &mut Vec<Finding>) {
    let mut used: BTreeSet<String> = pkg.templates.values().flat_map(|source| referenced(source, "Params")).collect();
    used.extend(pkg.operator.tasks.iter().filter(|t| t.kind == "Toggle").map(|t| t.spec.parameter.clone()));
    for p in pkg.params.parameters.iter().filter(|p| !used.contains(&p.name)) {
        out.push(warning("params.yaml", format!("parameter {:?} defined but not used.", p.name)));
    }
}

/// Tasks no plan runs.
fn warn_unused_tasks(pkg: &Package, out: &mut Vec<Finding>) {
    let op = &pkg.operator;
    let planned: BTreeSet<&str> = op
        .plans
        .values()
        .flat_map(|p| &p.phases)
        .flat_map(|p| &p.steps)
        .flat_map(|s| &s.tasks)
        .map(String::as_str)
        .collect();
    for task in op.tasks.iter().filter(|t| !planned.contains(t.name.as_str())) {
        out.push(warning("operator.yaml", format!("task {:?} defined but not used", task.name)));
    }
}

/// Templates no task uses.
fn warn_unused_templates(pkg: &Package, out: &mut Vec<Finding>) {
    let templated: BTreeSet<&str> = pkg.operator.tasks.iter().flat_map(task_templates).collect();
    for file in pkg.templates.keys().filter(|f| !templated.contains(f.as_str())) {
        out.push(warning(&format!("templates/{file}"), format!("template {file:?} is not referenced from any task")));
    }
}

/// The templates a task uses.
pub(crate) fn task_templates(task: &Task) -> Vec<&str> {
    let mut out: Vec<&str> = task.spec.resources.iter().map(String::as_str).collect();
    for extra in [&task.spec.pod, &task.spec.parameter_file] {
        if !extra.is_empty() {
            out.push(extra);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::package::from_files;
    use std::path::Path;

    #[test]
    fn reports_kudos_findings_with_their_files() {
        let op = "apiVersion: kudo.dev/v1beta1\nname: bad\noperatorVersion: 0.1.0\ntasks:\n- name: app\n  kind: Apply\n  spec:\n    resources: [a.yaml, missing.yaml]\n- name: spare\n  kind: Dummy\nplans:\n  deploy:\n    phases:\n    - name: p\n      steps:\n      - name: s\n        tasks: [app, ghost]\n";
        let params = "apiVersion: kudo.dev/v1beta1\nparameters:\n- name: used\n- name: unused\n  trigger: nowhere\n";
        let files = vec![
            ("operator.yaml".to_string(), op.as_bytes().to_vec()),
            ("params.yaml".to_string(), params.as_bytes().to_vec()),
            ("templates/a.yaml".to_string(), b"x: {{ .Params.used }} {{ .Params.UNKNOWN }}".to_vec()),
            ("templates/orphan.yaml".to_string(), b"x: 1".to_vec()),
        ];
        let pkg = from_files(Path::new("bad"), files).expect("loads");
        let text: Vec<String> = verify(&pkg).iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "error: params.yaml: plan \"nowhere\" used in parameter \"unused\" is not defined",
                "error: operator.yaml: template \"missing.yaml\" required by app but is not defined",
                "error: operator.yaml: task \"ghost\" in plan \"deploy\" is not defined",
                "error: templates/a.yaml: parameter \"UNKNOWN\" in template a.yaml is not defined",
                "warning: params.yaml: parameter \"unused\" defined but not used.",
                "warning: operator.yaml: task \"spare\" defined but not used",
                "warning: templates/orphan.yaml: template \"orphan.yaml\" is not referenced from any task",
            ]
        );
    }
}
