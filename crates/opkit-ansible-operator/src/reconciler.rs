//! The generic Ansible reconciler, one controller per watched kind (operator-sdk's
//! `internal/ansible/controller`): each reconcile adds the watch's finalizer, marks the
//! resource Running, runs its role or playbook through `ansible-runner` against the API
//! proxy, and marks it Successful or Failure with the run's `ansibleResult` and the
//! failed tasks' messages (a Warning Event too). A deleted resource carrying the finalizer
//! runs the finalizer's role or playbook, then loses the finalizer. The period comes from
//! the `ansible.sdk.operatorframework.io/reconcile-period` annotation, the watch's
//! `reconcilePeriod` or `--reconcile-period`; a `requeue_after` task sets it for one run.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::SelectorExt;
use kube::{Resource, ResourceExt};
use opkit::events::EventType;
use opkit::predicate::Event;
use opkit::{Action, Context, Controller, Manager, ReconcileError, ReconcileResult, Reconciler};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::log_events::{EventSubject, LogEvents, event_verbosity, log_event};
use crate::metrics::RunMetrics;
use crate::proxy::{ApiProxy, NamespacedOwner, OwnerRegistration, kubeconfig_for};
use crate::runner::{self, RunOutput, RunnerSettings};
use crate::status;
use crate::user_metrics::UserMetrics;
use crate::watches::{Runnable, Watch};
use crate::{OperatorError, install_collection};

/// Annotation setting one resource's reconcile period.
pub(crate) const RECONCILE_PERIOD_ANNOTATION: &str = "ansible.sdk.operatorframework.io/reconcile-period";

/// How the operator runs (ansible-operator's flags).
#[derive(Debug, Clone)]
pub struct OperatorOptions {
    /// Where the API proxy listens (`--proxy-port`, default 8888 on loopback; port 0
    /// picks a free one).
    pub proxy_address: SocketAddr,
    /// Where runs' input directories and artifacts go (default: ansible-operator's
    /// `/tmp/ansible-operator/runner`; [`OperatorOptions::for_project`] gives each
    /// project its own).
    pub runner_dir: PathBuf,
    /// `--ansible-verbosity` (default 2).
    pub verbosity: u8,
    /// `--ansible-args`: extra `ansible-playbook` arguments.
    pub ansible_args: Option<String>,
    /// `--reconcile-period`: the period of watches without `reconcilePeriod` (default 10h).
    pub reconcile_period: Duration,
    /// Roles paths added before `ANSIBLE_ROLES_PATH` (the project's `roles/`).
    pub roles_paths: Vec<PathBuf>,
    /// Collections paths added after opkit's `operator_sdk.util` and before
    /// `ANSIBLE_COLLECTIONS_PATH`.
    pub collections_paths: Vec<PathBuf>,
    /// `--inject-owner-ref` (default true): the proxy adds owner references (or
    /// annotations) to what runs create and watches those kinds.
    pub inject_owner_ref: bool,
    /// `--ansible-log-events`: what is logged of each run's events (default Tasks).
    pub log_events: LogEvents,
    /// Where ansible-operator's metrics API also listens (`localhost:5050`, where
    /// operator-sdk's `osdk_metric` module sends by default); `None`: only on the proxy.
    /// If the address is taken, a warning is logged and the proxy alone serves it.
    pub metrics_api_address: Option<SocketAddr>,
}

impl Default for OperatorOptions {
    fn default() -> Self {
        OperatorOptions {
            proxy_address: SocketAddr::from(([127, 0, 0, 1], 8888)),
            runner_dir: std::env::temp_dir().join("ansible-operator").join("runner"),
            verbosity: 2,
            ansible_args: None,
            reconcile_period: Duration::from_secs(10 * 3600),
            roles_paths: Vec::new(),
            collections_paths: Vec::new(),
            inject_owner_ref: true,
            log_events: LogEvents::Tasks,
            metrics_api_address: Some(SocketAddr::from(([127, 0, 0, 1], 5050))),
        }
    }
}

impl OperatorOptions {
    /// The defaults, with runs' input directories and artifacts in a directory of the
    /// project at `project_dir` alone (`/tmp/ansible-operator/NAME-HASH/runner`, the hash
    /// from its absolute path): two projects reconciling resources of the same name on
    /// one machine never share, or rotate away, each other's artifacts.
    pub fn for_project(project_dir: &Path) -> std::io::Result<OperatorOptions> {
        let project = std::path::absolute(project_dir)?;
        let name = project.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "project".into());
        let hash = opkit_apimachinery::fnv::fnv64a(project.as_os_str().as_encoded_bytes());
        let runner_dir =
            std::env::temp_dir().join("ansible-operator").join(format!("{name}-{:08x}", hash as u32)).join("runner");
        Ok(OperatorOptions { runner_dir, ..OperatorOptions::default() })
    }
}

/// The running API proxy; dropping it stops the proxy.
#[derive(Debug)]
pub struct ProxyGuard {
    /// Where the proxy listens.
    pub address: SocketAddr,
    stop: CancellationToken,
}

impl Drop for ProxyGuard {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Starts the API proxy and registers one controller per watch with `mgr`. Each kind must
/// be served (its CRD installed).
pub async fn setup(mgr: &Manager, watches: Vec<Watch>, options: OperatorOptions) -> Result<ProxyGuard, OperatorError> {
    let client = mgr.client();
    let stop = CancellationToken::new();
    let user_metrics = UserMetrics::new(mgr.metrics().clone());
    let proxy =
        ApiProxy::new(client.clone(), mgr.cache().clone(), stop.clone(), options.inject_owner_ref, user_metrics);
    let address = proxy.start(options.proxy_address).await?;
    if let Some(metrics_api) = options.metrics_api_address
        && let Err(e) = proxy.start_metrics_api(metrics_api).await
    {
        tracing::warn!(error = %e, proxy = %address, "the metrics API is served on the proxy only");
    }
    let guard = ProxyGuard { address, stop };
    let metrics = RunMetrics::register(mgr.metrics());
    let settings = Arc::new(RunnerSettings {
        runner_dir: options.runner_dir.clone(),
        verbosity: options.verbosity,
        ansible_args: options.ansible_args.clone(),
        collections_paths: std::iter::once(install_collection(&options.runner_dir.join("collections"))?)
            .chain(options.collections_paths.iter().cloned())
            .collect(),
        roles_paths: options.roles_paths.clone(),
        metrics_url: Some(format!("http://{address}/metrics")),
    });
    for watch in watches {
        let (resource, caps) =
            opkit::watches_file::served_kind(proxy.rest_mapper(), &watch.group, &watch.version, &watch.kind).await?;
        let annotations = watch.watch_annotations_changes;
        let filter = move |event: &Event<'_>| match event {
            Event::Update { old, new } => {
                old.generation != new.generation
                    || new.generation.is_none()
                    || old.deletion_timestamp != new.deletion_timestamp
                    || (annotations && old.annotations != new.annotations)
            }
            _ => true,
        };
        let concurrency = watch.max_concurrent_reconciles;
        let (dependents, cluster_scoped, blacklist) =
            (watch.watch_dependent_resources, watch.watch_cluster_scoped_resources, watch.blacklist.clone());
        let reconciler = AnsibleReconciler {
            reconcile_period: if watch.reconcile_period.is_zero() {
                options.reconcile_period
            } else {
                watch.reconcile_period
            },
            watch,
            settings: settings.clone(),
            proxy: address,
            metrics: metrics.clone(),
            log_events: options.log_events,
        };
        let controller = Controller::new_dynamic(mgr, resource.clone(), caps.scope.clone(), reconciler)
            .named(format!("{}-controller", resource.kind.to_lowercase()))
            .with_event_filter(filter)
            .max_concurrent_reconciles(concurrency);
        proxy.register_owner(OwnerRegistration {
            resource: &resource,
            scope: caps.scope.clone(),
            handle: controller.handle(),
            watch_dependent_resources: dependents,
            watch_cluster_scoped_resources: cluster_scoped,
            blacklist,
        });
        controller.build()?;
    }
    Ok(guard)
}

/// The resource as the run sees it: its JSON, with an empty `spec` when it has none.
fn run_object(cached: &DynamicObject) -> Result<Value, serde_json::Error> {
    let mut object = serde_json::to_value(cached)?;
    if !object.get("spec").is_some_and(Value::is_object)
        && let Some(map) = object.as_object_mut()
    {
        map.insert("spec".into(), json!({}));
    }
    Ok(object)
}

/// The resource as the owner of what the run creates through the proxy.
fn owner_of(cached: &DynamicObject) -> NamespacedOwner {
    let types = cached.types.clone().unwrap_or_default();
    NamespacedOwner {
        api_version: types.api_version,
        kind: types.kind,
        name: cached.name_any(),
        uid: cached.uid().unwrap_or_default(),
        namespace: cached.namespace().unwrap_or_default(),
    }
}

/// Reconciles the custom resources of one watched kind.
pub(crate) struct AnsibleReconciler {
    watch: Watch,
    settings: Arc<RunnerSettings>,
    proxy: SocketAddr,
    metrics: RunMetrics,
    reconcile_period: Duration,
    log_events: LogEvents,
}

fn requeue(period: Duration) -> Action {
    if period.is_zero() { Action::done() } else { Action::requeue_after(period) }
}

/// What one reconcile runs, read from the resource and its watch.
struct RunPlan {
    /// The resource is being deleted.
    deleted: bool,
    /// This is the finalizer's run (deleted, and carrying the watch's finalizer).
    finalizer_run: bool,
    /// The finalizer is to be added first (not yet there, not being deleted).
    add_finalizer: bool,
    /// The role or playbook to run.
    runnable: Runnable,
    /// When to reconcile again after a successful run.
    period: Duration,
}

impl Reconciler<DynamicObject> for AnsibleReconciler {
    async fn reconcile(&self, ctx: Context<DynamicObject>) -> ReconcileResult {
        let Some(cached) = ctx.object.clone() else { return Ok(Action::done()) };
        if !self.selects(&cached)? {
            return Ok(Action::done());
        }
        let api = ctx.dynamic_api();
        let name = cached.name_any();
        let gvk = self.watch.gvk_string();
        let period = match self.period_of(&cached) {
            Ok(period) => period,
            Err(message) => {
                self.metrics.failed(&gvk);
                self.update_status(&api, &name, |s| status::mark_error(s, &message)).await;
                return Err(ReconcileError::retry(message));
            }
        };
        let Some(plan) = self.plan_run(&cached, period) else { return Ok(Action::done()) };
        if plan.add_finalizer
            && let Some(f) = &self.watch.finalizer
        {
            opkit::finalizer::ensure_finalizer(&api, cached.as_ref(), &f.name).await.map_err(ReconcileError::retry)?;
        }
        if self.watch.manage_status && !plan.deleted {
            self.update_status(&api, &name, status::mark_running).await;
        }
        let object = run_object(&cached).map_err(ReconcileError::terminal)?;
        let kubeconfig = self.write_kubeconfig(&cached).map_err(ReconcileError::retry)?;
        let started = Instant::now();
        let run = self.run_ansible(&object, &name, &plan, &kubeconfig).await;
        let _ = std::fs::remove_file(&kubeconfig);
        let output = match run {
            Ok(output) => output,
            Err(e) => {
                self.metrics.failed(&gvk);
                if self.watch.manage_status {
                    self.update_status(&api, &name, |s| status::mark_error(s, "Unable to run reconciliation")).await;
                }
                tracing::error!(name, error = %e, "Unable to run ansible runner");
                return Err(ReconcileError::retry(e));
            }
        };
        self.record_run(&ctx, &api, &name, &plan, &output, started).await
    }
}

impl AnsibleReconciler {
    /// Whether the watch's label selector (if any) selects the resource.
    fn selects(&self, cached: &DynamicObject) -> Result<bool, ReconcileError> {
        let Some(selector) = &self.watch.selector else { return Ok(true) };
        let selector: kube::core::Selector = selector.clone().try_into().map_err(ReconcileError::terminal)?;
        Ok(selector.matches(cached.labels()))
    }

    /// The resource's reconcile period: its annotation's, else the watch's; the error is
    /// the status message of an annotation that does not parse.
    fn period_of(&self, cached: &DynamicObject) -> Result<Duration, String> {
        match cached.annotations().get(RECONCILE_PERIOD_ANNOTATION) {
            None => Ok(self.reconcile_period),
            Some(text) => opkit_apimachinery::duration::parse(text)
                .map_err(|e| format!("Unable to parse reconcile period annotation: {e}")),
        }
    }

    /// What to run for the resource; `None` when there is nothing to do (deleted without
    /// the finalizer).
    fn plan_run(&self, cached: &DynamicObject, period: Duration) -> Option<RunPlan> {
        let deleted = opkit::finalizer::is_being_deleted(cached);
        let finalizer = self.watch.finalizer.as_ref();
        let has_finalizer = finalizer.is_some_and(|f| opkit::finalizer::contains_finalizer(cached, &f.name));
        if deleted && !has_finalizer {
            return None;
        }
        let finalizer_run = deleted && has_finalizer;
        let runnable = match (finalizer_run, finalizer) {
            (true, Some(f)) => f.runnable.clone().unwrap_or_else(|| self.watch.runnable.clone()),
            _ => self.watch.runnable.clone(),
        };
        Some(RunPlan { deleted, finalizer_run, add_finalizer: !has_finalizer && finalizer.is_some(), runnable, period })
    }

    /// Writes a kubeconfig pointing at the proxy as the resource's owner (what the run's
    /// Kubernetes modules use); returns its path.
    fn write_kubeconfig(&self, cached: &DynamicObject) -> Result<PathBuf, String> {
        let kubeconfig = self.settings.runner_dir.join(format!("kubeconfig-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&self.settings.runner_dir)
            .and_then(|()| std::fs::write(&kubeconfig, kubeconfig_for(&owner_of(cached), self.proxy)))
            .map_err(|e| format!("writing the run's kubeconfig: {e}"))?;
        Ok(kubeconfig)
    }

    /// Runs the plan's role or playbook for the resource (`object`, named `name`) with
    /// `kubeconfig`, logging job events as they come.
    async fn run_ansible(
        &self,
        object: &Value,
        name: &str,
        plan: &RunPlan,
        kubeconfig: &Path,
    ) -> Result<RunOutput, OperatorError> {
        let mut subject = EventSubject {
            name: name.to_string(),
            namespace: object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().to_string(),
            gvk: self.watch.gvk_string(),
            job: String::new(),
        };
        let verbosity = event_verbosity(object);
        let log = |ident: &str, event: &crate::job_events::JobEvent| {
            if subject.job != ident {
                subject.job = ident.to_string();
            }
            log_event(self.log_events, verbosity, &subject, event);
        };
        runner::run(&self.settings, &self.watch, &plan.runnable, object, plan.finalizer_run, kubeconfig, log).await
    }

    /// Acts on a finished run: metrics, the finalizer, a Warning Event for failures, the
    /// status, and when to reconcile next.
    async fn record_run(
        &self,
        ctx: &Context<DynamicObject>,
        api: &Api<DynamicObject>,
        name: &str,
        plan: &RunPlan,
        output: &RunOutput,
        started: Instant,
    ) -> ReconcileResult {
        let mut period = plan.period;
        let gvk = self.watch.gvk_string();
        let summary = &output.summary;
        if let Some(p) = &summary.requeue_after {
            match opkit_apimachinery::duration::parse(p) {
                Ok(d) => return Ok(Action::requeue_after(d)),
                Err(e) => return Err(ReconcileError::retry(format!("requeue_after period {p:?}: {e}"))),
            }
        }
        let Some(result) = &summary.result else {
            self.metrics.finished(&gvk, false, started.elapsed().as_secs_f64());
            tracing::error!(name, ident = output.ident, stdout = %output.stdout, "did not receive playbook_on_stats event");
            return Err(ReconcileError::retry("did not receive playbook_on_stats event"));
        };
        let succeeded = summary.succeeded();
        self.metrics.finished(&gvk, succeeded, started.elapsed().as_secs_f64());
        tracing::info!(
            name,
            ok = result.ok,
            changed = result.changed,
            skipped = result.skipped,
            failures = result.failures,
            artifacts = %output.artifact_dir.display(),
            "ansible run finished"
        );
        let Some(fresh) = api.get_opt(name).await.map_err(ReconcileError::retry)? else {
            return Ok(Action::done());
        };
        let finalizer = self.watch.finalizer.as_ref();
        if plan.finalizer_run
            && succeeded
            && let Some(f) = finalizer
        {
            opkit::finalizer::remove_finalizer(api, &fresh, &f.name).await.map_err(ReconcileError::retry)?;
        } else if !plan.deleted && opkit::finalizer::is_being_deleted(&fresh) && finalizer.is_some() {
            period = Duration::from_secs(5);
        }
        if !succeeded && let Some(resource) = ctx.resource() {
            let note = summary.failures.join("\n");
            let reference = fresh.object_ref(resource);
            ctx.recorder.publish(&reference, EventType::Warning, "Failed", "Reconcile", &note).await;
        }
        if self.watch.manage_status && !(plan.finalizer_run && succeeded) {
            self.update_status(api, name, |s| status::mark_done(s, result, &summary.failures)).await;
        }
        if succeeded { Ok(requeue(period)) } else { Err(ReconcileError::retry("event runner on failed")) }
    }

    /// Reads the resource from the API server, changes its status with `change` and
    /// writes it back (the status subresource); a failure is logged.
    async fn update_status(&self, api: &Api<DynamicObject>, name: &str, change: impl FnOnce(&mut Map<String, Value>)) {
        let current = match api.get_opt(name).await {
            Ok(Some(current)) => current,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(name, error = %e, "reading the resource for its status");
                return;
            }
        };
        let before = current.data.get("status").and_then(Value::as_object).cloned().unwrap_or_default();
        let mut status = before.clone();
        change(&mut status);
        if status == before {
            return;
        }
        let patch = json!({ "status": status });
        if let Err(e) = api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await
            && !opkit::status::is_not_found(&e)
        {
            tracing::warn!(name, error = %e, "writing the status");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::OperatorOptions;

    #[test]
    fn each_project_has_its_own_runner_dir() {
        let dir = |p: &str| OperatorOptions::for_project(Path::new(p)).expect("absolute path").runner_dir;
        let a = dir("/srv/a/memcached-operator");
        assert_ne!(a, dir("/srv/b/memcached-operator"));
        assert_eq!(a, dir("/srv/a/memcached-operator"));
        assert!(a.ends_with("runner"));
        let project = a.parent().and_then(Path::file_name).map(|n| n.to_string_lossy().into_owned());
        assert!(project.is_some_and(|n| n.starts_with("memcached-operator-")), "{}", a.display());
    }
}
