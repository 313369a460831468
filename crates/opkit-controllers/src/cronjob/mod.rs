//! The cronjob controller (kube-controller-manager's `cronjob-controller`): creates a Job
//! named `<cronjob>-<scheduled minutes since the epoch>` for the most recent due schedule
//! (within `startingDeadlineSeconds`), honours `concurrencyPolicy` (Allow, Forbid,
//! Replace) and `suspend`, prunes finished Jobs beyond the history limits and keeps
//! `status.active`, `lastScheduleTime` and `lastSuccessfulTime`.

pub(crate) mod schedule;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, Job};
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
pub(crate) const REPORTING_CONTROLLER: &str = "cronjob-controller";
/// The annotation a created Job carries its scheduled time in.
pub(crate) const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// Registers the cronjob controller with `mgr`.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
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
pub(crate) fn job_name(cronjob: &str, scheduled: Timestamp) -> String {
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
    let (ns, uid) = (cj.namespace().unwrap_or_default(), cj.uid().unwrap_or_default());
    let jobs: Vec<Arc<Job>> = ctx
        .cache
        .list::<Job>()
        .into_iter()
        .filter(|j| j.metadata.namespace.as_deref() == Some(ns.as_str()) && controlled_by(&j.metadata, &uid))
        .collect();
    let pass = Pass { cj: &cj, uid, jobs_api: ctx.api_for(), rec: &rec, jobs };
    let spec = cj.spec.clone().unwrap_or_default();
    let status = cj.status.clone().unwrap_or_default();

    let mut active = pass.active_jobs(status.active.iter().flatten()).await?;
    let last_successful = pass.last_successful_time(status.last_successful_time.clone());
    pass.prune_history("Complete", spec.successful_jobs_history_limit.unwrap_or(3)).await?;
    pass.prune_history("Failed", spec.failed_jobs_history_limit.unwrap_or(1)).await?;

    let mut last_schedule = status.last_schedule_time.clone();
    let mut requeue = None;
    if spec.suspend != Some(true) {
        let Some((sched, tz)) = pass.schedule(&spec).await? else { return Ok(Action::done()) };
        let now = Timestamp::now();
        requeue = sched
            .next(now, &tz)
            .map(|n| Duration::from_millis(u64::try_from((n - now).get_milliseconds().max(0)).unwrap_or(0) + 100));
        if let Some(due) = pass.due_time(&spec, &sched, &tz, last_schedule.as_ref(), now).await
            && pass.start_job(&spec, due, &tz, &mut active).await?
        {
            last_schedule = Some(Time(due));
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

/// One reconcile of a CronJob: the object, the Jobs it controls (from the cache), and
/// where its Jobs and events are written.
struct Pass<'a> {
    cj: &'a CronJob,
    uid: String,
    jobs_api: Api<Job>,
    rec: &'a Recorder,
    jobs: Vec<Arc<Job>>,
}

impl Pass<'_> {
    /// Records an event about the CronJob.
    async fn event(&self, type_: EventType, reason: &str, action: &str, note: &str) {
        publish(self.rec, self.cj, type_, reason, action, note).await;
    }

    /// `status.active` checked against the Jobs that exist: finished and missing Jobs
    /// leave it (with an event), and unfinished Jobs it does not list join it.
    async fn active_jobs(
        &self,
        listed: impl Iterator<Item = &ObjectReference>,
    ) -> Result<Vec<ObjectReference>, WorkloadError> {
        let mut active: Vec<ObjectReference> = Vec::new();
        for r in listed {
            let rname = r.name.clone().unwrap_or_default();
            match self.jobs.iter().find(|j| j.name_any() == rname) {
                Some(j) if finished(j).is_some() => {
                    let note = format!("Saw completed job: {rname}, status: {}", finished(j).unwrap_or_default());
                    self.event(EventType::Normal, "SawCompletedJob", "Sync", &note).await;
                }
                Some(j) => active.push(job_ref(j)),
                None => match self.jobs_api.get_opt(&rname).await? {
                    Some(j) if finished(&j).is_none() => active.push(job_ref(&j)),
                    Some(_) => {}
                    None => {
                        let note = format!("Active job went missing: {rname}");
                        self.event(EventType::Normal, "MissingJob", "Sync", &note).await;
                    }
                },
            }
        }
        for j in self.jobs.iter().filter(|j| finished(j).is_none()) {
            if !active.iter().any(|r| r.name.as_deref() == Some(j.name_any().as_str())) {
                active.push(job_ref(j));
            }
        }
        Ok(active)
    }

    /// The latest completion time of the Jobs that completed, or `recorded` if later.
    fn last_successful_time(&self, recorded: Option<Time>) -> Option<Time> {
        let mut last = recorded;
        for j in self.jobs.iter().filter(|j| finished(j) == Some("Complete")) {
            if let Some(t) = j.status.as_ref().and_then(|s| s.completion_time.clone())
                && last.as_ref().is_none_or(|l| l.0 < t.0)
            {
                last = Some(t);
            }
        }
        last
    }

    /// The parsed schedule and its time zone; `None` (after a warning event) for an
    /// unknown time zone, an error for an unparseable schedule.
    async fn schedule(&self, spec: &CronJobSpec) -> Result<Option<(Schedule, TimeZone)>, ReconcileError> {
        let tz = match spec.time_zone.as_deref() {
            Some(z) => match TimeZone::get(z) {
                Ok(tz) => tz,
                Err(_) => {
                    let note = format!("invalid timeZone: {z:?}");
                    self.event(EventType::Warning, "UnknownTimeZone", "Sync", &note).await;
                    return Ok(None);
                }
            },
            None => TimeZone::UTC,
        };
        match Schedule::parse(&spec.schedule) {
            Ok(sched) => Ok(Some((sched, tz))),
            Err(e) => {
                let note = format!("unparseable schedule: {:?} : {e}", spec.schedule);
                self.event(EventType::Warning, "UnparseableSchedule", "Sync", &note).await;
                Err(ReconcileError::terminal(e))
            }
        }
    }

    /// The most recent schedule time due since the last one (or the CronJob's creation),
    /// no earlier than `startingDeadlineSeconds` ago; warns when over 100 were missed.
    async fn due_time(
        &self,
        spec: &CronJobSpec,
        sched: &Schedule,
        tz: &TimeZone,
        last_schedule: Option<&Time>,
        now: Timestamp,
    ) -> Option<Timestamp> {
        let created = self.cj.metadata.creation_timestamp.as_ref().map_or(now, |t| t.0);
        let mut earliest = last_schedule.map_or(created, |t| t.0);
        if let Some(sds) = spec.starting_deadline_seconds {
            earliest = earliest.max(now - jiff::SignedDuration::from_secs(sds));
        }
        let (due, missed) = sched.most_recent(earliest, now, tz);
        if missed > 100 {
            let note = format!(
                "too many missed start times: {missed}. Set or decrease .spec.startingDeadlineSeconds or check clock skew"
            );
            self.event(EventType::Warning, "TooManyMissedTimes", "Sync", &note).await;
        }
        due
    }

    /// Starts the Job for schedule time `due` as `concurrencyPolicy` allows (Forbid
    /// skips while one is active, Replace deletes the active ones first). Returns whether
    /// `due` now counts as scheduled (false when a Job for it exists or Forbid held it).
    async fn start_job(
        &self,
        spec: &CronJobSpec,
        due: Timestamp,
        tz: &TimeZone,
        active: &mut Vec<ObjectReference>,
    ) -> Result<bool, WorkloadError> {
        let jname = job_name(&self.cj.name_any(), due);
        let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
        let exists = self.jobs.iter().any(|j| j.name_any() == jname)
            || active.iter().any(|r| r.name.as_deref() == Some(jname.as_str()));
        if exists {
            return Ok(false);
        }
        if policy == "Forbid" && !active.is_empty() {
            let note = "Not starting job because prior execution is running and concurrency policy is Forbid";
            self.event(EventType::Normal, "JobAlreadyActive", "Sync", note).await;
            return Ok(false);
        }
        if policy == "Replace" {
            for r in std::mem::take(active) {
                let rname = r.name.unwrap_or_default();
                delete_job(&self.jobs_api, &rname).await?;
                self.event(EventType::Normal, "SuccessfulDelete", "Delete", &format!("Deleted job {rname}")).await;
            }
        }
        let job = new_job(self.cj, &jname, due, tz)?;
        let job = match self.jobs_api.create(&PostParams::default(), &job).await {
            Ok(j) => {
                self.event(EventType::Normal, "SuccessfulCreate", "Create", &format!("Created job {jname}")).await;
                j
            }
            Err(kube::Error::Api(s)) if s.is_already_exists() => self.jobs_api.get(&jname).await?,
            Err(e) => return Err(e.into()),
        };
        if controlled_by(&job.metadata, &self.uid) && finished(&job).is_none() {
            active.push(job_ref(&job));
        }
        Ok(true)
    }

    /// Deletes the oldest finished Jobs of one kind (`Complete`/`Failed`) beyond `limit`.
    async fn prune_history(&self, kind: &str, limit: i32) -> Result<(), WorkloadError> {
        let mut done: Vec<&Arc<Job>> =
            self.jobs.iter().filter(|j| finished(j) == Some(kind) && j.metadata.deletion_timestamp.is_none()).collect();
        done.sort_by_key(|j| {
            j.status
                .as_ref()
                .and_then(|s| s.start_time.clone())
                .or_else(|| j.metadata.creation_timestamp.clone())
                .map(|t| t.0)
        });
        let excess = done.len().saturating_sub(usize::try_from(limit.max(0)).unwrap_or(0));
        for j in done.into_iter().take(excess) {
            delete_job(&self.jobs_api, &j.name_any()).await?;
            self.event(EventType::Normal, "SuccessfulDelete", "Delete", &format!("Deleted job {}", j.name_any())).await;
        }
        Ok(())
    }
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
