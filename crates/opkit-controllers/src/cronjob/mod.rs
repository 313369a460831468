//! The cronjob controller (kube-controller-manager's `cronjob-controller`): creates a Job
//! named `<cronjob>-<scheduled minutes since the epoch>` for the most recent due schedule
//! (within `startingDeadlineSeconds`), honours `concurrencyPolicy` (Allow, Forbid,
//! Replace) and `suspend`, prunes finished Jobs beyond the history limits and keeps
//! `status.active`, `lastScheduleTime` and `lastSuccessfulTime`.

pub mod schedule;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{DeleteParams, PostParams, PropagationPolicy};
use kube::{Api, Resource, ResourceExt};
use opkit::events::{EventType, Recorder};
use opkit::{Action, Context, Controller, Manager, ReconcileError, ReconcileResult};

use crate::ControllersConfig;
use crate::common::WorkloadError;
use crate::common::events::publish;
use crate::common::ownership::controlled_by;
use schedule::Schedule;

/// The reportingController of the cronjob controller's events.
pub const REPORTING_CONTROLLER: &str = "cronjob-controller";
/// The annotation a created Job carries its scheduled time in.
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// Registers the cronjob controller with `mgr`.
pub fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled("cronjob") {
        return Ok(());
    }
    let recorder = Recorder::for_controller(crate::identity::client_for(mgr, cfg, "cronjob"), REPORTING_CONTROLLER);
    Controller::new(mgr, move |ctx| reconcile(ctx, recorder.clone()))
        .client(crate::identity::client_for(mgr, cfg, "cronjob"))
        .named("cronjob")
        .owns::<Job>()
        .max_concurrent_reconciles(2)
        .build()
}

/// `Complete` or `Failed`, when the Job has finished.
fn finished(job: &Job) -> Option<&'static str> {
    let conds = job.status.as_ref()?.conditions.as_ref()?;
    ["Complete", "Failed"].into_iter().find(|t| conds.iter().any(|c| c.type_ == *t && c.status == "True"))
}

/// The Job name for a schedule time.
pub fn job_name(cronjob: &str, scheduled: Timestamp) -> String {
    format!("{cronjob}-{}", scheduled.as_second().div_euclid(60))
}

/// RFC 3339 as Go renders it (`Z` for UTC).
fn rfc3339(t: Timestamp, tz: &TimeZone) -> String {
    let z = t.to_zoned(tz.clone());
    if z.offset().seconds() == 0 {
        z.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        z.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }
}

fn job_ref(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some(Job::api_version(&()).to_string()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        ..Default::default()
    }
}

async fn reconcile(ctx: Context<CronJob>, rec: Recorder) -> ReconcileResult {
    let Some(cj) = ctx.object.clone() else { return Ok(Action::done()) };
    if cj.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let (ns, uid, name) = (cj.namespace().unwrap_or_default(), cj.uid().unwrap_or_default(), cj.name_any());
    let spec = cj.spec.clone().unwrap_or_default();
    let jobs_api: Api<Job> = ctx.api_for();
    let jobs: Vec<Arc<Job>> = ctx
        .cache
        .list::<Job>()
        .into_iter()
        .filter(|j| j.metadata.namespace.as_deref() == Some(ns.as_str()) && controlled_by(&j.metadata, &uid))
        .collect();
    let status = cj.status.clone().unwrap_or_default();
    let now = Timestamp::now();

    // Reconcile status.active with the Jobs that exist.
    let mut active: Vec<ObjectReference> = Vec::new();
    for r in status.active.iter().flatten() {
        let rname = r.name.clone().unwrap_or_default();
        match jobs.iter().find(|j| j.name_any() == rname) {
            Some(j) if finished(j).is_some() => {
                let note = format!("Saw completed job: {rname}, status: {}", finished(j).unwrap_or_default());
                publish(&rec, &*cj, EventType::Normal, "SawCompletedJob", "Sync", &note).await;
            }
            Some(j) => active.push(job_ref(j)),
            None => match jobs_api.get_opt(&rname).await? {
                Some(j) if finished(&j).is_none() => active.push(job_ref(&j)),
                Some(_) => {}
                None => {
                    publish(
                        &rec,
                        &*cj,
                        EventType::Normal,
                        "MissingJob",
                        "Sync",
                        &format!("Active job went missing: {rname}"),
                    )
                    .await
                }
            },
        }
    }
    for j in jobs.iter().filter(|j| finished(j).is_none()) {
        if !active.iter().any(|r| r.name.as_deref() == Some(j.name_any().as_str())) {
            active.push(job_ref(j));
        }
    }
    let mut last_successful = status.last_successful_time.clone();
    for j in jobs.iter().filter(|j| finished(j) == Some("Complete")) {
        if let Some(t) = j.status.as_ref().and_then(|s| s.completion_time.clone())
            && last_successful.as_ref().is_none_or(|l| l.0 < t.0)
        {
            last_successful = Some(t);
        }
    }
    prune_history(&jobs_api, &rec, &cj, &jobs, "Complete", spec.successful_jobs_history_limit.unwrap_or(3)).await?;
    prune_history(&jobs_api, &rec, &cj, &jobs, "Failed", spec.failed_jobs_history_limit.unwrap_or(1)).await?;

    let mut last_schedule = status.last_schedule_time.clone();
    let mut requeue = None;
    if spec.suspend != Some(true) {
        let tz = match spec.time_zone.as_deref() {
            Some(z) => match TimeZone::get(z) {
                Ok(tz) => tz,
                Err(_) => {
                    publish(
                        &rec,
                        &*cj,
                        EventType::Warning,
                        "UnknownTimeZone",
                        "Sync",
                        &format!("invalid timeZone: {z:?}"),
                    )
                    .await;
                    return Ok(Action::done());
                }
            },
            None => TimeZone::UTC,
        };
        let sched = match Schedule::parse(&spec.schedule) {
            Ok(s) => s,
            Err(e) => {
                publish(
                    &rec,
                    &*cj,
                    EventType::Warning,
                    "UnparseableSchedule",
                    "Sync",
                    &format!("unparseable schedule: {:?} : {e}", spec.schedule),
                )
                .await;
                return Err(ReconcileError::terminal(e));
            }
        };
        requeue = sched
            .next(now, &tz)
            .map(|n| Duration::from_millis(u64::try_from((n - now).get_milliseconds().max(0)).unwrap_or(0) + 100));
        let created = cj.metadata.creation_timestamp.as_ref().map_or(now, |t| t.0);
        let mut earliest = last_schedule.as_ref().map_or(created, |t| t.0);
        if let Some(sds) = spec.starting_deadline_seconds {
            let deadline = now - jiff::SignedDuration::from_secs(sds);
            earliest = earliest.max(deadline);
        }
        let (due, missed) = sched.most_recent(earliest, now, &tz);
        if missed > 100 {
            let note = format!(
                "too many missed start times: {missed}. Set or decrease .spec.startingDeadlineSeconds or check clock skew"
            );
            publish(&rec, &*cj, EventType::Warning, "TooManyMissedTimes", "Sync", &note).await;
        }
        if let Some(due) = due {
            let jname = job_name(&name, due);
            let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
            let exists = jobs.iter().any(|j| j.name_any() == jname)
                || active.iter().any(|r| r.name.as_deref() == Some(jname.as_str()));
            if exists {
                // Already started for this schedule time.
            } else if policy == "Forbid" && !active.is_empty() {
                let note = "Not starting job because prior execution is running and concurrency policy is Forbid";
                publish(&rec, &*cj, EventType::Normal, "JobAlreadyActive", "Sync", note).await;
            } else {
                if policy == "Replace" {
                    for r in std::mem::take(&mut active) {
                        let rname = r.name.unwrap_or_default();
                        delete_job(&jobs_api, &rname).await?;
                        publish(
                            &rec,
                            &*cj,
                            EventType::Normal,
                            "SuccessfulDelete",
                            "Delete",
                            &format!("Deleted job {rname}"),
                        )
                        .await;
                    }
                }
                let job = new_job(&cj, &jname, due, &tz)?;
                let job = match jobs_api.create(&PostParams::default(), &job).await {
                    Ok(j) => {
                        publish(
                            &rec,
                            &*cj,
                            EventType::Normal,
                            "SuccessfulCreate",
                            "Create",
                            &format!("Created job {jname}"),
                        )
                        .await;
                        j
                    }
                    Err(kube::Error::Api(s)) if s.is_already_exists() => jobs_api.get(&jname).await?,
                    Err(e) => return Err(e.into()),
                };
                if controlled_by(&job.metadata, &uid) && finished(&job).is_none() {
                    active.push(job_ref(&job));
                }
                last_schedule = Some(Time(due));
            }
        }
    }

    let api: Api<CronJob> = ctx.api();
    let active = (!active.is_empty()).then_some(active);
    opkit::status::update_status_from(&api, (*cj).clone(), |c| {
        let st = c.status.get_or_insert_with(Default::default);
        st.active = active.clone();
        st.last_schedule_time = last_schedule.clone();
        st.last_successful_time = last_successful.clone();
    })
    .await?;
    Ok(requeue.map_or(Action::done(), Action::requeue_after))
}

/// Builds the Job for schedule time `due`.
fn new_job(cj: &CronJob, name: &str, due: Timestamp, tz: &TimeZone) -> Result<Job, WorkloadError> {
    let owner =
        opkit::owner::controller_reference(cj).ok_or_else(|| WorkloadError::Invalid("CronJob has no uid".into()))?;
    let template = cj.spec.as_ref().map(|s| s.job_template.clone()).unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    let mut annotations = tmeta.annotations.unwrap_or_default();
    annotations.insert(SCHEDULED_TIMESTAMP.into(), rfc3339(due, tz));
    Ok(Job {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: cj.namespace(),
            labels: tmeta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    })
}

async fn delete_job(api: &Api<Job>, name: &str) -> Result<(), WorkloadError> {
    let dp = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
    match api.delete(name, &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Deletes the oldest finished Jobs of one kind (`Complete`/`Failed`) beyond `limit`.
async fn prune_history(
    api: &Api<Job>,
    rec: &Recorder,
    cj: &CronJob,
    jobs: &[Arc<Job>],
    kind: &str,
    limit: i32,
) -> Result<(), WorkloadError> {
    let mut done: Vec<&Arc<Job>> =
        jobs.iter().filter(|j| finished(j) == Some(kind) && j.metadata.deletion_timestamp.is_none()).collect();
    done.sort_by_key(|j| {
        j.status
            .as_ref()
            .and_then(|s| s.start_time.clone())
            .or_else(|| j.metadata.creation_timestamp.clone())
            .map(|t| t.0)
    });
    let excess = done.len().saturating_sub(usize::try_from(limit.max(0)).unwrap_or(0));
    for j in done.into_iter().take(excess) {
        delete_job(api, &j.name_any()).await?;
        publish(rec, cj, EventType::Normal, "SuccessfulDelete", "Delete", &format!("Deleted job {}", j.name_any()))
            .await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_timestamps() {
        let t: Timestamp = "2024-01-01T00:05:00Z".parse().unwrap_or(Timestamp::UNIX_EPOCH);
        assert_eq!(job_name("hello", t), format!("hello-{}", t.as_second() / 60));
        assert_eq!(rfc3339(t, &TimeZone::UTC), "2024-01-01T00:05:00Z");
        let tz = TimeZone::fixed(jiff::tz::offset(2));
        assert_eq!(rfc3339(t, &tz), "2024-01-01T02:05:00+02:00");
    }
}
