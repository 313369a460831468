//! One test case (a directory of steps), run as kuttl's `Case.Run` does: its namespace
//! created (unless it exists), its steps run in index order until one fails, the
//! namespace's events logged, then what its steps created deleted and its namespace
//! deleted and waited for (unless `skipDelete`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Namespace};
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use crate::KuttlError;
use crate::cluster::{Cluster, short};
use crate::diff::resource_id;
use crate::files::collect_step_files;
use crate::log::CaseLog;
use crate::report::{CaseReport, StepFailure, StepReport};
use crate::step::{Created, Step, StepContext, TemplateEnv};

/// A test case: a directory whose numbered files are its steps.
#[derive(Debug, Clone)]
pub(crate) struct TestCase {
    /// The directory's name.
    pub name: String,
    /// The directory.
    pub dir: PathBuf,
}

/// What every test case of a run shares.
pub(crate) struct CaseSettings<'a> {
    /// The cluster.
    pub cluster: &'a Cluster,
    /// The suite's step timeout in seconds.
    pub timeout: u64,
    /// Keep what the test created, and its namespace.
    pub skip_delete: bool,
    /// One namespace for all tests (the suite's `namespace`), else one per test.
    pub namespace: Option<&'a str>,
    /// File patterns not reported as ignored.
    pub ignore_files: &'a [String],
    /// Whether namespace events are not logged.
    pub suppress_events: bool,
    /// The run's working directory.
    pub work_dir: &'a Path,
    /// What `.gotmpl.yaml` files see as `.Vars`.
    pub template_vars: &'a serde_json::Map<String, serde_json::Value>,
}

impl TestCase {
    /// Loads the steps, sorted by index; templates see `template`.
    pub(crate) fn load_steps(
        &self,
        ignore_files: &[String],
        template: &TemplateEnv,
        log: &CaseLog,
    ) -> Result<Vec<Step>, KuttlError> {
        let files = collect_step_files(&self.dir, ignore_files, &mut |m| log.log(m))
            .map_err(|source| KuttlError::Io { path: self.dir.clone(), source })?;
        let mut steps = files
            .iter()
            .map(|(index, files)| Step::load(*index, files, &self.dir, template))
            .collect::<Result<Vec<_>, _>>()?;
        steps.sort_by_key(|s| s.index);
        Ok(steps)
    }

    /// Runs the test case and reports it.
    pub(crate) async fn run(&self, settings: &CaseSettings<'_>) -> CaseReport {
        let started = jiff::Timestamp::now();
        let clock = Instant::now();
        let log = CaseLog::new(&self.name);
        let namespace = settings.namespace.map_or_else(generated_namespace, str::to_string);
        let mut report =
            CaseReport { name: self.name.clone(), namespace: namespace.clone(), started, ..CaseReport::default() };
        let fail = |report: &mut CaseReport, site: &str, message: String| {
            log.error(site, &message);
            report.errors.push(message);
        };
        let template = TemplateEnv { namespace: namespace.clone(), vars: settings.template_vars.clone() };
        let steps = match self.load_steps(settings.ignore_files, &template, &log) {
            Ok(steps) => steps,
            Err(e) => {
                fail(&mut report, "harness.go:423", e.to_string());
                return finish(report, &log, clock);
            }
        };
        let mut setup = StepReport { name: "setup".into(), ..StepReport::default() };
        let existed = match create_namespace(settings.cluster, &namespace, &log).await {
            Ok(existed) => existed,
            Err(e) => {
                setup.failure = Some(StepFailure { message: e.clone(), errors: Vec::new() });
                report.steps.push(setup);
                fail(&mut report, "case.go:317", e);
                return finish(report, &log, clock);
            }
        };
        report.steps.push(setup);
        let mut created: Vec<Created> = Vec::new();
        for step in &steps {
            let ctx = StepContext {
                cluster: settings.cluster,
                namespace: &namespace,
                suite_timeout: settings.timeout,
                skip_delete: settings.skip_delete,
                work_dir: settings.work_dir,
                log: log.with_prefix(&step.label()),
            };
            let errors = step.run(&ctx, &mut created).await;
            let mut step_report = StepReport {
                name: format!("step {}", step.label()),
                assertions: step.asserts.len() + step.errors.len(),
                failure: None,
            };
            if !errors.is_empty() {
                let message = format!("failed in step {}", step.label());
                step_report.failure = Some(StepFailure { message: message.clone(), errors: errors.clone() });
                report.steps.push(step_report);
                fail(&mut report, "case.go:333", message);
                for error in errors {
                    fail(&mut report, "case.go:335", error);
                }
                break;
            }
            report.steps.push(step_report);
        }
        if settings.suppress_events {
            log.log("skipping kubernetes event logging");
        } else {
            log_events(settings.cluster, &namespace, &self.name, &log).await;
        }
        if !settings.skip_delete {
            for object in created.iter().rev() {
                if let Err(e) = delete_created(settings.cluster, &object.object).await {
                    fail(&mut report, "step.go:218", e);
                }
            }
            if settings.namespace.is_some() && existed {
                log.log(format!("Skipping deletion of pre-existing user supplied namespace {namespace}"));
            } else if let Err(e) = delete_namespace(settings.cluster, &namespace, settings.timeout, &log).await {
                fail(&mut report, "case.go:245", e);
            }
        }
        finish(report, &log, clock)
    }
}

fn finish(mut report: CaseReport, log: &CaseLog, clock: Instant) -> CaseReport {
    report.duration = clock.elapsed();
    report.log = log.text();
    report
}

/// A namespace name of kuttl's form, `kuttl-test-<random>`.
fn generated_namespace() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("kuttl-test-{}", &id[..12])
}

/// Creates the namespace; `Ok(true)` when it already existed.
async fn create_namespace(cluster: &Cluster, name: &str, log: &CaseLog) -> Result<bool, String> {
    log.log(format!("Creating namespace {name:?}"));
    let api: Api<Namespace> = Api::all(cluster.client());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.to_string());
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(false),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            log.log(format!("Namespace {name:?} already exists"));
            Ok(true)
        }
        Err(e) => Err(format!("failed to create test namespace {name:?}: {}", short(&e))),
    }
}

/// Deletes the namespace and waits until it is gone.
async fn delete_namespace(cluster: &Cluster, name: &str, timeout: u64, log: &CaseLog) -> Result<(), String> {
    log.log(format!("Deleting namespace {name:?}"));
    let api: Api<Namespace> = Api::all(cluster.client());
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => log.log(format!("Namespace {name:?} already cleaned up.")),
        Err(e) => return Err(format!("failed to delete namespace {name:?}: {}", short(&e))),
    }
    let deadline = Instant::now() + Duration::from_secs(timeout);
    let mut pause = Duration::from_millis(50);
    loop {
        match api.get_opt(name).await {
            Ok(None) => return Ok(()),
            Ok(Some(_)) => {}
            Err(e) => log.log(format!("failed to check deletion of namespace {name:?} (will retry): {}", short(&e))),
        }
        if Instant::now() >= deadline {
            return Err(format!("waiting for namespace {name:?} to be deleted timed out: context deadline exceeded"));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// Deletes an object a step created (kuttl's cleanup of created objects).
async fn delete_created(cluster: &Cluster, object: &serde_json::Value) -> Result<(), String> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = cluster.resolve(api_version, object["kind"].as_str().unwrap_or_default()).await?;
    let namespace = object["metadata"]["namespace"].as_str();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    cluster
        .delete(&kind, namespace, name)
        .await
        .map(|_| ())
        .map_err(|e| format!("deleting {}: {e}", resource_id(object)))
}

/// Logs the namespace's events, oldest first (kuttl's `CollectAndLog`).
async fn log_events(cluster: &Cluster, namespace: &str, case: &str, log: &CaseLog) {
    let api: Api<Event> = Api::namespaced(cluster.client(), namespace);
    let mut events = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(e) => {
            log.log(format!("Failed to collect events for {case} in ns {namespace}: {}", short(&e)));
            return;
        }
    };
    events.sort_by(|a, b| {
        (a.metadata.creation_timestamp.as_ref().map(|t| t.0), &a.metadata.name)
            .cmp(&(b.metadata.creation_timestamp.as_ref().map(|t| t.0), &b.metadata.name))
    });
    log.log(format!("{case} events from ns {namespace}:"));
    for event in events {
        let object = &event.involved_object;
        let when = event.metadata.creation_timestamp.map(|t| t.0.to_string()).unwrap_or_default();
        log.log(format!(
            "{when}\t{}\t{} {}\t{}\t{}",
            event.type_.unwrap_or_default(),
            object.kind.clone().unwrap_or_default(),
            object.name.clone().unwrap_or_default(),
            event.reason.unwrap_or_default(),
            event.message.unwrap_or_default()
        ));
    }
}
