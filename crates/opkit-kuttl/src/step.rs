//! One test step: loading its files (objects to apply, a `TestStep`, asserts with a
//! `TestAssert`, errors) and running it as kuttl's `Step.Run` does: delete what
//! `TestStep.delete` names and wait until it is gone, run the step's commands, create or
//! update its objects, then poll the asserts and errors until they hold or the step's
//! timeout passes, and on failure run the assert's collectors.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::KuttlError;
use crate::api::{TestAssert, TestStep, is_harness_kind};
use crate::cluster::{Cluster, go_gvk};
use crate::command::{CommandEnv, run_commands};
use crate::diff::{pretty_diff, resource_id};
use crate::files::{FileName, FileRole, StepFiles, yaml_files_at};
use crate::log::CaseLog;
use crate::subset::is_subset;

/// How long the check loop waits at most between two checks.
const MAX_POLL: Duration = Duration::from_secs(1);

/// A loaded test step.
#[derive(Debug, Clone, Default)]
pub(crate) struct Step {
    /// Its index (from the file names, or `TestStep.index`).
    pub index: i64,
    /// Its name (the first apply file's, the directory's, or `TestStep`'s).
    pub name: String,
    /// The test case's directory (commands run there; paths are relative to it).
    pub dir: PathBuf,
    /// The step's `TestStep`, if one of its files has one.
    pub test_step: Option<TestStep>,
    /// The step's `TestAssert`, if its assert file has one.
    pub test_assert: Option<TestAssert>,
    /// Objects to create or update.
    pub apply: Vec<Value>,
    /// Objects that must match.
    pub asserts: Vec<Value>,
    /// Objects that must not match.
    pub errors: Vec<Value>,
}

/// The objects of a YAML file (documents without a kind are skipped, as kuttl does).
pub fn load_objects(path: &Path) -> Result<Vec<Value>, KuttlError> {
    let text = std::fs::read_to_string(path).map_err(|source| KuttlError::Io { path: path.to_path_buf(), source })?;
    parse_objects(path, &text)
}

/// The objects of YAML text read from `path`.
fn parse_objects(path: &Path, text: &str) -> Result<Vec<Value>, KuttlError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple_with_options(text, opkit_helm::yaml::parse_options())
        .map_err(|e| KuttlError::Yaml { path: path.to_path_buf(), message: e.to_string() })?;
    Ok(docs.into_iter().filter(|d| d["kind"].as_str().is_some_and(|k| !k.is_empty())).collect())
}

/// What a `.gotmpl.yaml` file sees: `.Namespace` (the test's) and `.Vars`
/// (`--template-var name=value`), with Sprig's functions (through `opkit-helm`).
#[derive(Debug, Clone, Default)]
pub(crate) struct TemplateEnv {
    /// The test's namespace.
    pub namespace: String,
    /// The run's template variables.
    pub vars: serde_json::Map<String, Value>,
}

impl TemplateEnv {
    /// Expands a template file.
    pub(crate) fn expand(&self, path: &Path) -> Result<String, KuttlError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| KuttlError::Io { path: path.to_path_buf(), source })?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("template");
        let data = serde_json::json!({ "Namespace": self.namespace, "Vars": Value::Object(self.vars.clone()) });
        let mut templates = opkit_helm::template::Templates::new();
        let expanded = templates.add(name, &text).and_then(|()| {
            opkit_helm::template::Exec::new(&templates).execute(name, &opkit_helm::value::Value::from_json(&data))
        });
        expanded.map_err(|e| KuttlError::Load(format!("{}: {e}", path.display())))
    }
}

fn harness_object<T: serde::de::DeserializeOwned>(path: &Path, object: Value) -> Result<T, KuttlError> {
    serde_json::from_value(object).map_err(|e| KuttlError::Yaml { path: path.to_path_buf(), message: e.to_string() })
}

impl Step {
    /// Loads a step from its files.
    pub(crate) fn load(
        index: i64,
        files: &StepFiles,
        case_dir: &Path,
        template: &TemplateEnv,
    ) -> Result<Step, KuttlError> {
        let mut step = Step { index, dir: case_dir.to_path_buf(), ..Step::default() };
        if let Some(name) = &files.dir_name {
            step.name = name.clone();
        }
        for file in &files.files {
            let base = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let parsed = FileName::parse(base)
                .map_err(|e| KuttlError::Load(format!("populating step: unrecognized file {}: {e}", file.display())))?;
            let objects =
                if parsed.template { parse_objects(file, &template.expand(file)?)? } else { load_objects(file)? };
            step.add_file(file, &parsed, objects)?;
        }
        if let Some(test_step) = step.test_step.clone() {
            step.add_listed(&test_step.apply, FileRole::Apply)?;
            step.add_listed(&test_step.assert, FileRole::Assert)?;
            step.add_listed(&test_step.error, FileRole::Errors)?;
        }
        Ok(step)
    }

    fn add_file(&mut self, file: &Path, parsed: &FileName, objects: Vec<Value>) -> Result<(), KuttlError> {
        for object in objects {
            let api_version = object["apiVersion"].as_str().unwrap_or_default().to_string();
            let kind = object["kind"].as_str().unwrap_or_default().to_string();
            if is_harness_kind(&api_version, &kind, "TestFile") {
                continue;
            }
            match parsed.role {
                FileRole::Assert if is_harness_kind(&api_version, &kind, "TestAssert") => {
                    let assert: TestAssert = harness_object(file, object)?;
                    crate::expressions::check_compiles(&assert)
                        .map_err(|e| KuttlError::Load(format!("{}: {e}", file.display())))?;
                    self.test_assert = Some(assert);
                }
                FileRole::Assert => self.asserts.push(object),
                FileRole::Errors => self.errors.push(object),
                FileRole::Apply if is_harness_kind(&api_version, &kind, "TestStep") => {
                    if self.test_step.is_some() {
                        return Err(KuttlError::Load(format!(
                            "more than 1 TestStep not allowed in step {:?}",
                            self.name
                        )));
                    }
                    let test_step: TestStep = harness_object(file, object)?;
                    if !test_step.kubeconfig.is_empty() {
                        return Err(KuttlError::Load(format!(
                            "{}: TestStep kubeconfig is not supported by opkit test (one cluster per run)",
                            file.display()
                        )));
                    }
                    if test_step.index != 0 {
                        self.index = test_step.index;
                    }
                    if let Some(name) = test_step.metadata.name.clone().filter(|n| !n.is_empty()) {
                        self.name = name;
                    }
                    self.test_step = Some(test_step);
                }
                FileRole::Apply => self.apply.push(object),
            }
        }
        if parsed.role == FileRole::Apply && self.name.is_empty() {
            self.name = parsed.step_name.clone();
        }
        Ok(())
    }

    fn add_listed(&mut self, paths: &[String], role: FileRole) -> Result<(), KuttlError> {
        for listed in paths {
            let path = self.dir.join(crate::command::expand(listed, &Default::default()));
            let files = yaml_files_at(&path).map_err(|e| {
                KuttlError::Load(format!("step {:?} {} path {listed}: {e}", self.name, role_word(role)))
            })?;
            for file in files {
                let objects = load_objects(&file)?;
                match role {
                    FileRole::Apply => self.apply.extend(objects),
                    FileRole::Assert => self.asserts.extend(objects),
                    FileRole::Errors => self.errors.extend(objects),
                }
            }
        }
        Ok(())
    }

    /// `index-name`, as kuttl names steps (`0-install`).
    pub(crate) fn label(&self) -> String {
        format!("{}-{}", self.index, self.name)
    }

    /// The step's timeout in seconds: the `TestAssert`'s, else the suite's.
    pub(crate) fn timeout(&self, suite_timeout: u64) -> u64 {
        match &self.test_assert {
            Some(a) if a.timeout != 0 => a.timeout,
            _ => suite_timeout,
        }
    }
}

fn role_word(role: FileRole) -> &'static str {
    match role {
        FileRole::Apply => "apply",
        FileRole::Assert => "assert",
        FileRole::Errors => "error",
    }
}

/// An object a step created, deleted when the test case ends.
#[derive(Debug, Clone)]
pub(crate) struct Created {
    /// The object as applied.
    pub object: Value,
}

/// What a step runs with.
pub(crate) struct StepContext<'a> {
    /// The cluster.
    pub cluster: &'a Cluster,
    /// The test's namespace.
    pub namespace: &'a str,
    /// The suite's timeout in seconds.
    pub suite_timeout: u64,
    /// Keep created objects.
    pub skip_delete: bool,
    /// The run's working directory.
    pub work_dir: &'a Path,
    /// The step's log.
    pub log: CaseLog,
}

impl Step {
    /// Runs the step; returns its errors (empty when it passed) and records the objects
    /// it created in `created`.
    pub(crate) async fn run(&self, ctx: &StepContext<'_>, created: &mut Vec<Created>) -> Vec<String> {
        let log = &ctx.log;
        log.log(format!("starting test step {}", self.label()));
        let timeout = self.timeout(ctx.suite_timeout);
        if let Err(e) = self.delete_existing(ctx, timeout).await {
            return vec![e];
        }
        let mut errors = Vec::new();
        let env = CommandEnv {
            namespace: ctx.namespace.to_string(),
            kubeconfig: ctx.cluster.kubeconfig().to_path_buf(),
            work_dir: ctx.work_dir.to_path_buf(),
            cwd: self.dir.clone(),
        };
        if let Some(test_step) = &self.test_step {
            let mut commands = test_step.commands.clone();
            for command in commands.iter_mut().filter(|c| c.background) {
                log.log("background commands are not allowed for steps and will be run in foreground");
                command.background = false;
            }
            let (_, result) = run_commands(&commands, &env, ctx.suite_timeout as i64, log).await;
            if let Err(e) = result {
                errors.push(e);
            }
        }
        errors.extend(self.create(ctx, created).await);
        if !errors.is_empty() {
            return errors;
        }
        let start = Instant::now();
        let deadline = start + Duration::from_secs(timeout);
        let mut pause = Duration::from_millis(50);
        loop {
            let left = deadline.saturating_duration_since(Instant::now()).as_secs() as i64;
            errors = self.check(ctx, &env, left.max(1)).await;
            if errors.is_empty() || Instant::now() >= deadline || errors.iter().any(|e| e.contains("exceeded")) {
                break;
            }
            tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now()))).await;
            pause = (pause * 2).min(MAX_POLL);
        }
        if errors.is_empty() {
            log.log(format!("test step completed {}", self.label()));
            return errors;
        }
        log.log(format!("test step failed {}", self.label()));
        if let Some(assert) = &self.test_assert {
            for collector in &assert.collectors {
                log.log(format!("collecting log output for {}", collector.describe()));
                let Some(command) = collector.to_command() else {
                    log.log("skipping invalid assertion collector");
                    continue;
                };
                if let (_, Err(e)) = run_commands(&[command], &env, ctx.suite_timeout as i64, log).await {
                    log.log(format!("post assert collector failure: {e}"));
                }
            }
        }
        errors
    }

    /// Deletes what `TestStep.delete` names and waits until it is gone.
    async fn delete_existing(&self, ctx: &StepContext<'_>, timeout: u64) -> Result<(), String> {
        let Some(test_step) = &self.test_step else { return Ok(()) };
        let mut deleted = Vec::new();
        for reference in &test_step.delete {
            let kind = ctx.cluster.resolve(&reference.api_version, &reference.kind).await?;
            let namespace = if reference.namespace.is_empty() { ctx.namespace } else { &reference.namespace };
            let namespace = kind.namespaced.then_some(namespace);
            let names = if reference.name.is_empty() {
                ctx.cluster
                    .list(&kind, namespace, &reference.labels)
                    .await
                    .map_err(|e| format!("listing resources to delete failed: {e}"))?
                    .iter()
                    .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
                    .collect()
            } else {
                vec![reference.name.clone()]
            };
            for name in names {
                let existed = ctx.cluster.delete(&kind, namespace, &name).await.map_err(|e| {
                    format!("deleting {} {name} failed: {e}", go_gvk(&reference.api_version, &reference.kind))
                })?;
                let id = format!("{}:{}/{name}", reference.kind, namespace.unwrap_or_default());
                ctx.log.log(format!("{id} {}", if existed { "deleted" } else { "already gone" }));
                deleted.push((kind.clone(), namespace.map(str::to_string), name, reference));
            }
        }
        let deadline = Instant::now() + Duration::from_secs(timeout);
        let mut pause = Duration::from_millis(50);
        loop {
            let mut last = None;
            for (kind, namespace, name, reference) in &deleted {
                let gvk = go_gvk(&reference.api_version, &reference.kind);
                match ctx.cluster.get(kind, namespace.as_deref(), name).await {
                    Ok(None) => {}
                    Ok(Some(_)) => last = Some(format!("{gvk} {name} still exists")),
                    Err(e) => last = Some(format!("checking existence of {gvk} {name} failed: {e}")),
                }
            }
            let Some(last) = last else { return Ok(()) };
            if Instant::now() >= deadline {
                return Err(format!(
                    "timed out waiting for resource deletion (result of last check was: {last:?}): context deadline exceeded"
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_POLL);
        }
    }

    /// Creates or updates the step's objects.
    async fn create(&self, ctx: &StepContext<'_>, created: &mut Vec<Created>) -> Vec<String> {
        let mut errors = Vec::new();
        for object in &self.apply {
            let mut object = object.clone();
            let (kind, namespace) = match ctx.cluster.namespaced(&mut object, ctx.namespace).await {
                Ok(found) => found,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            match ctx.cluster.create_or_update(&kind, namespace.as_deref(), &object).await {
                Ok(updated) => {
                    if !updated && !ctx.skip_delete {
                        created.push(Created { object: object.clone() });
                    }
                    ctx.log.log(format!("{} {}", resource_id(&object), if updated { "updated" } else { "created" }));
                }
                Err(e) => errors.push(format!(
                    "applying {} {} failed: {e}",
                    go_gvk(
                        object["apiVersion"].as_str().unwrap_or_default(),
                        object["kind"].as_str().unwrap_or_default()
                    ),
                    object["metadata"]["name"].as_str().unwrap_or_default()
                )),
            }
        }
        errors
    }

    /// Checks the asserts, the assert's commands and the errors once.
    async fn check(&self, ctx: &StepContext<'_>, env: &CommandEnv, left: i64) -> Vec<String> {
        let mut errors = Vec::new();
        for expected in &self.asserts {
            errors.extend(check_resource(ctx, expected).await);
        }
        if let Some(assert) = &self.test_assert {
            let commands: Vec<_> = assert.commands.iter().map(|c| c.to_command(left)).collect();
            if let (_, Err(e)) = run_commands(&commands, env, left, &ctx.log).await {
                errors.push(e);
            }
            errors.extend(crate::expressions::check(ctx.cluster, ctx.namespace, assert).await);
        }
        for expected in &self.errors {
            if let Err(e) = check_absent(ctx, expected).await {
                errors.push(e);
            }
        }
        errors
    }
}

/// The objects an assert or errors entry selects: the named one, or those of its kind
/// with its labels. `Ok(None)` for a named object that does not exist.
async fn candidates(ctx: &StepContext<'_>, expected: &mut Value) -> Result<Option<Vec<Value>>, String> {
    let (kind, namespace) = ctx.cluster.namespaced(expected, ctx.namespace).await?;
    match expected["metadata"]["name"].as_str().filter(|n| !n.is_empty()) {
        Some(name) => Ok(ctx.cluster.get(&kind, namespace.as_deref(), name).await?.map(|o| vec![o])),
        None => {
            let labels = expected["metadata"]["labels"]
                .as_object()
                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
                .unwrap_or_default();
            Ok(Some(ctx.cluster.list(&kind, namespace.as_deref(), &labels).await?))
        }
    }
}

/// kuttl's `CheckResource`: passes when one selected object matches.
async fn check_resource(ctx: &StepContext<'_>, expected: &Value) -> Vec<String> {
    let mut expected = expected.clone();
    let actuals = match candidates(ctx, &mut expected).await {
        Ok(Some(actuals)) => actuals,
        Ok(None) => {
            let kind = ctx.cluster.resolve(
                expected["apiVersion"].as_str().unwrap_or_default(),
                expected["kind"].as_str().unwrap_or_default(),
            );
            let resource = kind.await.map(|k| k.resource).ok();
            let plural = resource.map_or_else(String::new, |r| {
                if r.group.is_empty() { r.plural } else { format!("{}.{}", r.plural, r.group) }
            });
            return vec![format!("{plural} {:?} not found", expected["metadata"]["name"].as_str().unwrap_or_default())];
        }
        Err(e) => return vec![e],
    };
    let mut errors = Vec::new();
    if actuals.is_empty() {
        errors.push(format!(
            "no resources matched of kind: {}",
            go_gvk(expected["apiVersion"].as_str().unwrap_or_default(), expected["kind"].as_str().unwrap_or_default())
        ));
    }
    for actual in &actuals {
        match is_subset(&expected, actual) {
            Ok(()) => return Vec::new(),
            Err(e) => {
                errors.push(pretty_diff(&expected, actual));
                errors.push(format!("resource {}: {e}", resource_id(&expected)));
            }
        }
    }
    errors
}

/// kuttl's `CheckResourceAbsent`: fails when a selected object matches.
async fn check_absent(ctx: &StepContext<'_>, expected: &Value) -> Result<(), String> {
    let mut expected = expected.clone();
    let Some(actuals) = candidates(ctx, &mut expected).await? else { return Ok(()) };
    let matching: Vec<&Value> = actuals.iter().filter(|a| is_subset(&expected, a).is_ok()).collect();
    let Some(first) = matching.first() else { return Ok(()) };
    let gvk = go_gvk(first["apiVersion"].as_str().unwrap_or_default(), first["kind"].as_str().unwrap_or_default());
    let name = first["metadata"]["name"].as_str().unwrap_or_default();
    if matching.len() == 1 {
        Err(format!("resource {gvk} {name} matched error assertion"))
    } else {
        Err(format!("resource {gvk} {name} (and {} other resources) matched error assertion", matching.len() - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::collect_step_files;

    /// Loads the steps of a case directory holding `files`.
    fn load(files: &[(&str, &str)]) -> Result<Vec<Step>, KuttlError> {
        let dir = tempfile::tempdir().map_err(|source| KuttlError::Io { path: "tmp".into(), source })?;
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text)
                .map_err(|source| KuttlError::Io { path: name.into(), source })?;
        }
        let steps = collect_step_files(dir.path(), &[], &mut |_| {})
            .map_err(|source| KuttlError::Io { path: dir.path().into(), source })?;
        let template = TemplateEnv { namespace: "ns".into(), ..TemplateEnv::default() };
        steps.iter().map(|(index, files)| Step::load(*index, files, dir.path(), &template)).collect()
    }

    #[test]
    fn steps_take_their_name_index_and_harness_objects_from_their_files() {
        let steps = load(&[
            ("00-install.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"),
            ("00-assert.yaml", "apiVersion: kuttl.dev/v1beta1\nkind: TestAssert\ntimeout: 7\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"),
            ("01-step.yaml", "apiVersion: kudo.dev/v1alpha1\nkind: TestStep\nmetadata: {name: renamed}\nindex: 5\n"),
            ("01-errors.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n"),
            ("02-x.gotmpl.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 'cm-{{ .Namespace }}'}\n"),
        ])
        .expect("loads");
        let labels: Vec<String> = steps.iter().map(Step::label).collect();
        assert_eq!(labels, ["0-install", "5-renamed", "2-x"]);
        assert_eq!((steps[0].apply.len(), steps[0].asserts.len(), steps[0].timeout(30)), (1, 1, 7));
        assert_eq!((steps[1].apply.len(), steps[1].errors.len(), steps[1].timeout(30)), (0, 1, 30));
        assert_eq!(steps[2].apply[0]["metadata"]["name"], "cm-ns");
    }

    #[test]
    fn what_opkit_cannot_run_is_refused_naming_the_file() {
        let kubeconfig =
            load(&[("00-step.yaml", "apiVersion: kuttl.dev/v1beta1\nkind: TestStep\nkubeconfig: other\n")]);
        assert!(
            kubeconfig.is_err_and(|e| e.to_string().contains("00-step.yaml: TestStep kubeconfig is not supported"))
        );
        let cel = load(&[(
            "00-assert.yaml",
            "apiVersion: kuttl.dev/v1beta1\nkind: TestAssert\nassertAll:\n- celExpr: 'a.b ==='\n",
        )]);
        assert!(cel.is_err_and(|e| e.to_string().contains("failed to build CEL program from expression \"a.b ===\"")));
        let no_ref = load(&[(
            "00-assert.yaml",
            "apiVersion: kuttl.dev/v1beta1\nkind: TestAssert\nresourceRefs:\n- {apiVersion: v1, kind: Pod, name: p}\n",
        )]);
        assert!(no_ref.is_err_and(|e| e.to_string().contains("ref not specified")));
        let two = load(&[
            ("00-a.yaml", "apiVersion: kuttl.dev/v1beta1\nkind: TestStep\n"),
            ("00-b.yaml", "apiVersion: kuttl.dev/v1beta1\nkind: TestStep\n"),
        ]);
        assert!(two.is_err_and(|e| e.to_string().contains("more than 1 TestStep not allowed")));
        let bad = load(&[("00-a.yaml", "apiVersion: v1\nkind: [unclosed\n")]);
        assert!(bad.is_err_and(|e| e.to_string().starts_with("error decoding yaml")));
    }
}
