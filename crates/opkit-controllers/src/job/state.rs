//! The job controller's decisions as pure functions of a Job and its pods: which finished
//! pods still need counting, and the plan of one pass (pods to create and delete, the new
//! status, conditions and events, when to look again).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use opkit::events::EventType;

use super::pods::{TRACKING_FINALIZER, format_intervals, index_of, is_indexed, parse_intervals};
use crate::common::pods::{is_ready, is_terminal, is_terminating, phase};

/// The Job and its pods as one pass sees them.
pub(super) struct View<'a> {
    job: &'a Job,
    pods: &'a [Arc<Pod>],
    deleted: &'a BTreeSet<String>,
    /// Pods whose tracking finalizer this controller already removed, by uid.
    pub untracked: BTreeSet<String>,
    /// The status being built.
    pub status: JobStatus,
}

/// What one pass does.
#[derive(Debug, Default)]
pub(super) struct Plan {
    /// Pods to delete.
    pub delete: Vec<Arc<Pod>>,
    /// Pods to create (with their completion index in Indexed mode).
    pub create: Vec<Option<i32>>,
    /// The status to write.
    pub status: JobStatus,
    /// Events to record: type, reason, note.
    pub events: Vec<(EventType, String, String)>,
    /// Look again after this long (activeDeadlineSeconds).
    pub requeue: Option<Duration>,
    /// For a finished Job with a TTL: how long until it is deleted (zero: now).
    pub ttl_expired_in: Option<Duration>,
}

fn cond_true(st: &JobStatus, t: &str) -> bool {
    st.conditions.iter().flatten().any(|c| c.type_ == t && c.status == "True")
}

fn set_cond(st: &mut JobStatus, t: &str, status: &str, reason: &str, message: &str, now: &Time) {
    let conds = st.conditions.get_or_insert_with(Vec::new);
    if let Some(c) = conds.iter_mut().find(|c| c.type_ == t) {
        if c.status != status {
            c.last_transition_time = Some(now.clone());
        }
        c.status = status.into();
        c.reason = Some(reason.into());
        c.message = Some(message.into());
        c.last_probe_time = Some(now.clone());
        return;
    }
    conds.push(JobCondition {
        type_: t.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: Some(now.clone()),
        last_transition_time: Some(now.clone()),
    });
}

/// Records `newly` finished pods in `status.uncountedTerminatedPods` (Succeeded pods as
/// succeeded, failed or deleted ones as failed; deleted pods of a complete Job are not
/// counted).
pub(super) fn add_uncounted(job: &mut Job, newly: &[Arc<Pod>]) {
    let st = job.status.get_or_insert_with(Default::default);
    let complete = cond_true(st, "Complete");
    let u = st.uncounted_terminated_pods.get_or_insert_with(Default::default);
    for p in newly {
        let Some(uid) = p.uid() else { continue };
        let list = if phase(p) == "Succeeded" {
            u.succeeded.get_or_insert_with(Vec::new)
        } else if complete {
            continue;
        } else {
            u.failed.get_or_insert_with(Vec::new)
        };
        if !list.contains(&uid) {
            list.push(uid);
        }
    }
}

impl<'a> View<'a> {
    /// A view of `job` and its `pods`; `deleted` names pods already deleted, `untracked`
    /// the uids whose finalizer is already gone.
    pub(super) fn new(
        job: &'a Job,
        pods: &'a [Arc<Pod>],
        deleted: &'a BTreeSet<String>,
        untracked: &BTreeSet<String>,
    ) -> Self {
        View { job, pods, deleted, untracked: untracked.clone(), status: job.status.clone().unwrap_or_default() }
    }

    fn uncounted(&self) -> BTreeSet<String> {
        let u = self.status.uncounted_terminated_pods.clone().unwrap_or_default();
        u.succeeded.into_iter().flatten().chain(u.failed.into_iter().flatten()).collect()
    }

    fn gone(&self, p: &Pod) -> bool {
        is_terminating(p) || self.deleted.contains(&p.name_any())
    }

    /// Finished (or deleted) pods still holding the tracking finalizer and not yet recorded.
    pub(super) fn newly_finished(&self) -> Vec<Arc<Pod>> {
        let uncounted = self.uncounted();
        self.pods
            .iter()
            .filter(|p| p.finalizers().iter().any(|f| f == TRACKING_FINALIZER))
            .filter(|p| p.uid().is_some_and(|u| !self.untracked.contains(&u) && !uncounted.contains(&u)))
            .filter(|p| is_terminal(p) || is_terminating(p))
            .cloned()
            .collect()
    }

    /// Moves uncounted pods whose finalizer is gone into `succeeded`/`failed` (and
    /// `completedIndexes`).
    pub(super) fn flush_uncounted(&mut self) {
        let u = self.status.uncounted_terminated_pods.clone().unwrap_or_default();
        let released = |uid: &String| {
            self.untracked.contains(uid)
                || !self
                    .pods
                    .iter()
                    .any(|p| p.uid().as_ref() == Some(uid) && p.finalizers().iter().any(|f| f == TRACKING_FINALIZER))
        };
        let mut completed = parse_intervals(self.status.completed_indexes.as_deref().unwrap_or(""));
        let (mut succ, mut fail) = (Vec::new(), Vec::new());
        let mut n_succ = self.status.succeeded.unwrap_or(0);
        let mut n_fail = self.status.failed.unwrap_or(0);
        for uid in u.succeeded.into_iter().flatten() {
            if released(&uid) {
                n_succ += 1;
                if let Some(i) = self.pods.iter().find(|p| p.uid().as_ref() == Some(&uid)).and_then(|p| index_of(p)) {
                    completed.insert(i);
                }
            } else {
                succ.push(uid);
            }
        }
        for uid in u.failed.into_iter().flatten() {
            if released(&uid) { n_fail += 1 } else { fail.push(uid) }
        }
        self.status.succeeded = (n_succ != 0).then_some(n_succ);
        self.status.failed = (n_fail != 0).then_some(n_fail);
        if is_indexed(self.job) {
            let s = format_intervals(&completed);
            self.status.completed_indexes = (!s.is_empty()).then_some(s);
        }
        self.status.uncounted_terminated_pods = Some(UncountedTerminatedPods {
            succeeded: (!succ.is_empty()).then_some(succ),
            failed: (!fail.is_empty()).then_some(fail),
        });
    }

    /// Decides this pass: a finished Job only deletes its active pods; a suspended one
    /// deletes them too; a failed or complete one gets its conditions; else the active
    /// pods are scaled to what parallelism and completions want.
    pub(super) fn plan(&self, now: jiff::Timestamp) -> Plan {
        let spec = self.job.spec.clone().unwrap_or_default();
        let now_t = Time(jiff::Timestamp::from_second(now.as_second()).unwrap_or(now));
        let mut plan = Plan { status: self.status.clone(), ..Default::default() };
        let active: Vec<&Arc<Pod>> = self.pods.iter().filter(|p| !is_terminal(p) && !self.gone(p)).collect();
        let terminating = self.pods.iter().filter(|p| !is_terminal(p) && self.gone(p)).count();
        plan.status.ready = Some(count(active.iter().filter(|p| is_ready(p)).count()));
        plan.status.terminating = Some(count(terminating));
        if cond_true(&plan.status, "Complete") || cond_true(&plan.status, "Failed") {
            plan.stop(&active);
            plan.ttl_expired_in = self.ttl(&plan.status, now);
            return plan;
        }
        if spec.suspend == Some(true) {
            plan.stop(&active);
            if !cond_true(&plan.status, "Suspended") {
                set_cond(&mut plan.status, "Suspended", "True", "JobSuspended", "Job suspended", &now_t);
                plan.events.push((EventType::Normal, "Suspended".into(), "Job suspended".into()));
            }
            return plan;
        }
        if cond_true(&plan.status, "Suspended") {
            set_cond(&mut plan.status, "Suspended", "False", "JobResumed", "Job resumed", &now_t);
            plan.events.push((EventType::Normal, "Resumed".into(), "Job resumed".into()));
            plan.status.start_time = Some(now_t.clone());
        }
        if let Some((reason, message)) = self.failure(&spec, &active, &mut plan, now, &now_t) {
            plan.stop(&active);
            set_cond(&mut plan.status, "FailureTarget", "True", reason, message, &now_t);
            set_cond(&mut plan.status, "Failed", "True", reason, message, &now_t);
            plan.events.push((EventType::Warning, reason.into(), message.into()));
            plan.requeue = None;
            plan.ttl_expired_in = self.ttl(&plan.status, now);
            return plan;
        }
        let completed = parse_intervals(plan.status.completed_indexes.as_deref().unwrap_or(""));
        let succeeded = plan.status.succeeded.unwrap_or(0);
        let done = match (is_indexed(self.job), spec.completions) {
            (true, Some(c)) => count(completed.len()) >= c,
            (_, Some(c)) => succeeded >= c,
            (_, None) => succeeded > 0 && active.is_empty(),
        };
        if done {
            plan.stop(&active);
            let msg = "Reached expected number of succeeded pods";
            set_cond(&mut plan.status, "SuccessCriteriaMet", "True", "CompletionsReached", msg, &now_t);
            set_cond(&mut plan.status, "Complete", "True", "CompletionsReached", msg, &now_t);
            plan.status.completion_time = Some(now_t);
            plan.events.push((EventType::Normal, "Completed".into(), "Job completed".into()));
            plan.requeue = None;
            plan.ttl_expired_in = self.ttl(&plan.status, now);
            return plan;
        }
        let kept = if is_indexed(self.job) {
            scale_indexed(&spec, active, &completed, &mut plan)
        } else {
            scale_unindexed(&spec, active, succeeded, &mut plan)
        };
        let active_n = count(kept + plan.create.len());
        plan.status.active = (active_n != 0).then_some(active_n);
        plan
    }

    /// Why the Job fails now (past its backoff limit or its active deadline), if it does;
    /// sets when to look again for a deadline not reached yet.
    fn failure(
        &self,
        spec: &JobSpec,
        active: &[&Arc<Pod>],
        plan: &mut Plan,
        now: jiff::Timestamp,
        now_t: &Time,
    ) -> Option<(&'static str, &'static str)> {
        let start = plan.status.start_time.get_or_insert_with(|| now_t.clone()).0;
        let failed = plan.status.failed.unwrap_or(0);
        let on_failure = spec.template.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("OnFailure");
        let restarts: i32 = if on_failure { active.iter().map(|p| restart_count(p)).sum() } else { 0 };
        if failed + restarts > spec.backoff_limit.unwrap_or(6) {
            return Some(("BackoffLimitExceeded", "Job has reached the specified backoff limit"));
        }
        let deadline = spec.active_deadline_seconds?;
        let elapsed = now.as_second() - start.as_second();
        if elapsed >= deadline {
            return Some(("DeadlineExceeded", "Job was active longer than specified deadline"));
        }
        plan.requeue = Some(Duration::from_secs(u64::try_from(deadline - elapsed).unwrap_or(1)));
        None
    }

    fn ttl(&self, st: &JobStatus, now: jiff::Timestamp) -> Option<Duration> {
        let ttl = self.job.spec.as_ref()?.ttl_seconds_after_finished?;
        let finished_at = st.completion_time.clone().or_else(|| {
            st.conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "Failed" && c.status == "True")
                .and_then(|c| c.last_transition_time.clone())
        })?;
        let left = finished_at.0.as_second() + i64::from(ttl) - now.as_second();
        Some(Duration::from_secs(u64::try_from(left.max(0)).unwrap_or(0)))
    }
}

impl Plan {
    /// Deletes every active pod: the Job runs no more.
    fn stop(&mut self, active: &[&Arc<Pod>]) {
        self.delete = active.iter().map(|p| Arc::clone(p)).collect();
        self.status.active = None;
    }
}

/// Indexed mode: keeps one active pod per index still to complete (up to parallelism,
/// lowest first), deletes the rest, and creates the missing indexes. Returns how many
/// pods are kept.
fn scale_indexed(spec: &JobSpec, active: Vec<&Arc<Pod>>, completed: &BTreeSet<i32>, plan: &mut Plan) -> usize {
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    let total = spec.completions.unwrap_or(parallelism);
    let mut keep: Vec<&Arc<Pod>> = Vec::new();
    let mut seen = BTreeSet::new();
    for p in active {
        match index_of(p) {
            Some(i) if i >= 0 && i < total && !completed.contains(&i) && seen.insert(i) => keep.push(p),
            _ => plan.delete.push(p.clone()),
        }
    }
    let want = parallelism.min(total - count(completed.len())).max(0);
    keep.sort_by_key(|p| index_of(p));
    while count(keep.len()) > want {
        if let Some(p) = keep.pop() {
            plan.delete.push(p.clone());
        }
    }
    let free = usize::try_from(want).unwrap_or(0).saturating_sub(keep.len());
    plan.create = (0..total).filter(|i| !completed.contains(i) && !seen.contains(i)).take(free).map(Some).collect();
    keep.len()
}

/// NonIndexed mode: as many active pods as parallelism and the completions left want
/// (deleting unready pods first, then the newest), creating the missing ones. Returns
/// how many pods are kept.
fn scale_unindexed(spec: &JobSpec, active: Vec<&Arc<Pod>>, succeeded: i32, plan: &mut Plan) -> usize {
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    let want = match spec.completions {
        Some(c) => parallelism.min(c - succeeded).max(0),
        None if succeeded > 0 => count(active.len()),
        None => parallelism,
    };
    let mut keep = active;
    keep.sort_by_key(|p| (!is_ready(p), p.metadata.creation_timestamp.as_ref().map(|t| t.0)));
    while count(keep.len()) > want {
        if let Some(p) = keep.pop() {
            plan.delete.push(p.clone());
        }
    }
    plan.create = vec![None; usize::try_from(want).unwrap_or(0).saturating_sub(keep.len())];
    keep.len()
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn restart_count(p: &Pod) -> i32 {
    p.status.as_ref().map_or(0, |s| {
        s.container_statuses.iter().chain(s.init_container_statuses.iter()).flatten().map(|c| c.restart_count).sum()
    })
}

#[cfg(test)]
mod tests;
