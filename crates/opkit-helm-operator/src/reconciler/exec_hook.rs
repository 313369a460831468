//! Running a chart's hooks as Helm's `execHook` does ([`crate::hooks`] says which hooks
//! an event has and in what order): each created, waited for when it is a Job or a Pod,
//! its run recorded in the pending revision, and deleted as its policies say.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};

use super::cluster::{Cluster, status_message};
use crate::hooks::{
    self, BEFORE_HOOK_CREATION, HOOK_FAILED, HOOK_SUCCEEDED, HOOK_TIMEOUT, HookRun, PHASE_FAILED, PHASE_SUCCEEDED,
};
use crate::manifest::RenderedObject;
use crate::release::{self, Release};

/// Where hook runs are recorded: the stored pending revision and the secrets it is stored
/// in. `None` when the release's records are purged afterwards (an uninstall).
pub(super) type RunRecord<'a> = Option<(&'a Api<Secret>, &'a mut Release)>;

/// Runs the hooks of `event` among `objects` as Helm's `execHook`, recording each
/// run in its entry of `record`'s release (a pending revision), which is stored as
/// each hook starts (its `last_run` `Running`), so `helm status` shows the hook
/// running; the error is Helm's text (without the event's prefix, which the caller
/// adds).
pub(super) async fn run_hooks(
    cluster: Cluster<'_>,
    objects: &[RenderedObject],
    event: &str,
    mut record: RunRecord<'_>,
) -> Result<(), String> {
    let hooks = hooks::hooks_for(objects, event);
    for (i, hook) in hooks.iter().enumerate() {
        if let Err(message) = run_hook(cluster, hook, event, &mut record).await? {
            for done in hooks[..=i].iter().filter(|h| h.has_policy(HOOK_FAILED)) {
                let (api, _) = cluster.api_for(done.object).await.map_err(|e| e.to_string())?;
                delete_and_wait(&api, done.object.name()).await?;
            }
            return Err(hooks::one_error(&message));
        }
    }
    for hook in hooks.iter().filter(|h| h.has_policy(HOOK_SUCCEEDED)) {
        let (api, _) = cluster.api_for(hook.object).await.map_err(|e| e.to_string())?;
        delete_and_wait(&api, hook.object.name()).await?;
    }
    Ok(())
}

/// Creates one hook (its previous object deleted first under `before-hook-creation`) and
/// waits for it, recording its run. The outer error stops the event at once (the hook
/// could not be created); the inner one is the failed wait, after which the event's
/// `hook-failed` hooks are deleted.
async fn run_hook(
    cluster: Cluster<'_>,
    hook: &hooks::Hook<'_>,
    event: &str,
    record: &mut RunRecord<'_>,
) -> Result<Result<(), String>, String> {
    let (api, namespaced) = cluster.api_for(hook.object).await.map_err(|e| e.to_string())?;
    let name = hook.object.name();
    if hook.has_policy(BEFORE_HOOK_CREATION) {
        delete_and_wait(&api, name).await?;
    }
    let mut body = hook.object.object.clone();
    if namespaced
        && hook.object.namespace().is_none()
        && let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.insert("namespace".into(), json!(cluster.namespace));
    }
    let body: DynamicObject = serde_json::from_value(body).map_err(|e| e.to_string())?;
    let run = HookRun::started();
    if let Some((secrets, release)) = record.as_mut() {
        hooks::record_run(&mut release.hooks, hook, &run);
        // As Helm's `recordRelease`, a failed write is logged, not fatal.
        if let Err(e) = release::replace(secrets, release).await {
            tracing::warn!(release = %release.name, error = %e, "recording a hook's run");
        }
    }
    if let Err(e) = api.create(&PostParams::default(), &body).await {
        if let Some((_, release)) = record.as_mut() {
            hooks::record_run(&mut release.hooks, hook, &run.completed(PHASE_FAILED));
        }
        return Err(format!("warning: Hook {event} {} failed: {}", hook.object.source, status_message(&e)));
    }
    let waited = wait_for_hook(cluster, hook.object).await;
    let phase = if waited.is_ok() { PHASE_SUCCEEDED } else { PHASE_FAILED };
    if let Some((_, release)) = record.as_mut() {
        hooks::record_run(&mut release.hooks, hook, &run.completed(phase));
    }
    Ok(waited)
}

/// Waits for a created hook: a Job until it finishes, a Pod until it ends, any other kind
/// not at all.
async fn wait_for_hook(cluster: Cluster<'_>, object: &RenderedObject) -> Result<(), String> {
    let namespace = object.namespace().unwrap_or(cluster.namespace);
    match object.gvk().kind.as_str() {
        "Job" => wait_for_job(&Api::namespaced(cluster.client.clone(), namespace), object.name()).await,
        "Pod" => wait_for_pod(&Api::namespaced(cluster.client.clone(), namespace), object.name()).await,
        _ => Ok(()),
    }
}

/// Waits until `cond` holds for object `name` of `api`, for at most [`HOOK_TIMEOUT`];
/// the timeout is Helm's `timed out waiting for the condition`.
pub(super) async fn wait_until<K>(
    api: &Api<K>,
    name: &str,
    cond: impl kube::runtime::wait::Condition<K>,
) -> Result<Option<K>, String>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    match tokio::time::timeout(HOOK_TIMEOUT, kube::runtime::wait::await_condition(api.clone(), name, cond)).await {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out waiting for the condition".to_string()),
    }
}

/// Deletes a hook's object (background propagation) and waits until it is gone.
async fn delete_and_wait(api: &Api<DynamicObject>, name: &str) -> Result<(), String> {
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(e) if opkit::status::is_not_found(&e) => return Ok(()),
        Err(e) => return Err(status_message(&e)),
    }
    wait_until(api, name, |o: Option<&DynamicObject>| o.is_none()).await.map(|_| ())
}

/// Helm's `waitForJob`: until the Job is Complete, or Failed (`job NAME failed: REASON`).
async fn wait_for_job(api: &Api<Job>, name: &str) -> Result<(), String> {
    let finished = |job: &Job, type_: &str| {
        job.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == type_ && c.status == "True").cloned())
    };
    let done = move |job: Option<&Job>| {
        job.is_none_or(|job| finished(job, "Complete").is_some() || finished(job, "Failed").is_some())
    };
    let Some(job) = wait_until(api, name, done).await? else { return Err(format!("job {name} was deleted")) };
    match finished(&job, "Failed") {
        Some(failed) => Err(format!("job {name} failed: {}", failed.reason.unwrap_or_default())),
        None => Ok(()),
    }
}

/// Helm's `waitForPodSuccess`: until the Pod Succeeded, or Failed (`pod NAME failed`).
async fn wait_for_pod(api: &Api<Pod>, name: &str) -> Result<(), String> {
    let phase = |pod: &Pod| pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    let done = move |pod: Option<&Pod>| pod.is_none_or(|pod| matches!(phase(pod).as_str(), "Succeeded" | "Failed"));
    let Some(pod) = wait_until(api, name, done).await? else { return Err(format!("pod {name} was deleted")) };
    if phase(&pod) == "Failed" { Err(format!("pod {name} failed")) } else { Ok(()) }
}
