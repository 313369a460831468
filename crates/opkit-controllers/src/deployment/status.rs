//! Deployment status, as kube computes it: replica counts summed over ReplicaSets, the
//! Available condition (MinimumReplicasAvailable / MinimumReplicasUnavailable), the
//! Progressing condition (ReplicaSetUpdated, NewReplicaSetAvailable,
//! ProgressDeadlineExceeded) and ReplicaFailure copied from ReplicaSets.

use k8s_openapi::api::apps::v1::{DeploymentStatus, ReplicaSet};
use k8s_openapi::jiff::Timestamp;

use super::rollout::deployment_complete;
use super::sync::{SyncError, SyncingDeployment};
use super::util;

/// A replica count as kube writes it: every count of a Deployment's status is
/// `omitempty`, so a zero is left out rather than written as 0.
fn counted(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

impl SyncingDeployment<'_> {
    /// The status the Deployment should have given its ReplicaSets.
    pub(super) fn calculate_status(&self, new_rs: Option<&ReplicaSet>, old: &[ReplicaSet]) -> DeploymentStatus {
        let all: Vec<&ReplicaSet> = old.iter().chain(new_rs).collect();
        let available = util::available_replicas(&all);
        let total = util::actual_replicas(&all);
        let cur = self.d.status.clone().unwrap_or_default();
        let mut s = DeploymentStatus {
            observed_generation: self.d.metadata.generation,
            replicas: counted(total),
            updated_replicas: counted(new_rs.map_or(0, |n| util::actual_replicas(&[n]))),
            ready_replicas: counted(util::ready_replicas(&all)),
            available_replicas: counted(available),
            unavailable_replicas: counted((total - available).max(0)),
            collision_count: cur.collision_count,
            conditions: cur.conditions.clone(),
            terminating_replicas: cur.terminating_replicas,
        };
        let desired = util::replicas(&self.d);
        if available >= desired - util::max_unavailable(&self.d) {
            let c = util::condition(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.".into(),
            );
            util::set_condition(&mut s, c);
        } else {
            let c = util::condition(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.".into(),
            );
            util::set_condition(&mut s, c);
        }
        s
    }

    /// Updates status with progress conditions after a rollout step.
    pub(super) async fn rollout_status(
        &mut self,
        new_rs: Option<&ReplicaSet>,
        old: &[ReplicaSet],
    ) -> Result<(), SyncError> {
        let mut s = self.calculate_status(new_rs, old);
        let cur = self.d.status.clone().unwrap_or_default();
        let deadline = util::progress_deadline(&self.d);
        if deadline.is_none() {
            util::remove_condition(&mut s, "Progressing");
        }
        let progressing = util::get_condition(&s, "Progressing").cloned();
        let complete_before = s.replicas == s.updated_replicas
            && progressing.as_ref().is_some_and(|c| c.reason.as_deref() == Some("NewReplicaSetAvailable"));
        let rs_name = new_rs.and_then(|n| n.metadata.name.clone()).unwrap_or_default();
        if let Some(deadline) = deadline
            && !complete_before
        {
            if deployment_complete(&self.d, &s) {
                let msg = format!("ReplicaSet {rs_name:?} has successfully progressed.");
                util::set_condition(&mut s, util::condition("Progressing", "True", "NewReplicaSetAvailable", msg));
            } else if is_progressing(&cur, &s) {
                let msg = format!("ReplicaSet {rs_name:?} is progressing.");
                let mut c = util::condition("Progressing", "True", "ReplicaSetUpdated", msg);
                if let Some(p) = progressing.as_ref().filter(|p| p.status == "True") {
                    c.last_transition_time = p.last_transition_time.clone();
                }
                util::remove_condition(&mut s, "Progressing");
                util::set_condition(&mut s, c);
            } else if timed_out(progressing.as_ref(), deadline) {
                let msg = format!("ReplicaSet {rs_name:?} has timed out progressing.");
                util::set_condition(&mut s, util::condition("Progressing", "False", "ProgressDeadlineExceeded", msg));
            }
        }
        let failure = old.iter().chain(new_rs).find_map(|rs| {
            rs.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "ReplicaFailure").cloned()
        });
        match failure {
            Some(f) => {
                let c = util::condition(
                    "ReplicaFailure",
                    &f.status,
                    f.reason.as_deref().unwrap_or(""),
                    f.message.unwrap_or_default(),
                );
                util::set_condition(&mut s, c);
            }
            None => util::remove_condition(&mut s, "ReplicaFailure"),
        }
        self.write_status(s).await
    }
}

fn is_progressing(old: &DeploymentStatus, new: &DeploymentStatus) -> bool {
    let old_old = old.replicas.unwrap_or(0) - old.updated_replicas.unwrap_or(0);
    let new_old = new.replicas.unwrap_or(0) - new.updated_replicas.unwrap_or(0);
    let count = |n: Option<i32>| n.unwrap_or(0);
    count(new.updated_replicas) > count(old.updated_replicas)
        || count(new.ready_replicas) > count(old.ready_replicas)
        || count(new.available_replicas) > count(old.available_replicas)
        || old_old > new_old
}

fn timed_out(progressing: Option<&k8s_openapi::api::apps::v1::DeploymentCondition>, deadline: i32) -> bool {
    let Some(c) = progressing else { return false };
    if c.reason.as_deref() == Some("NewReplicaSetAvailable") || c.reason.as_deref() == Some("ProgressDeadlineExceeded")
    {
        return c.reason.as_deref() == Some("ProgressDeadlineExceeded");
    }
    let Some(t) = c.last_update_time.as_ref() else { return false };
    t.0.as_second().saturating_add(i64::from(deadline)) < Timestamp::now().as_second()
}

/// Seconds until the Progressing condition of `s` would time out, if it is counting.
pub(super) fn seconds_to_deadline(s: &DeploymentStatus, deadline: i32) -> Option<i64> {
    let c = util::get_condition(s, "Progressing")?;
    if c.status != "True" || c.reason.as_deref() == Some("NewReplicaSetAvailable") {
        return None;
    }
    let t = c.last_update_time.as_ref()?;
    Some((t.0.as_second() + i64::from(deadline) - Timestamp::now().as_second()).max(0))
}
