//! Rollout strategies, as kube's deployment controller: RollingUpdate (scale the new
//! ReplicaSet up within maxSurge, old ones down within maxUnavailable), Recreate (scale
//! old ReplicaSets to zero, wait for their pods to go, then scale up the new one), and
//! proportional scaling of every active ReplicaSet when the Deployment is resized
//! mid-rollout or paused.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::sync::{SyncError, SyncingDeployment};
use super::util;

fn is_active(rs: &ReplicaSet) -> bool {
    util::rs_replicas(rs) > 0
}

/// Whether the Deployment was resized since its active ReplicaSets were last scaled.
pub(super) fn is_scaling_event(d: &Deployment, new_rs: Option<&ReplicaSet>, old: &[ReplicaSet]) -> bool {
    let desired = util::replicas(d);
    old.iter()
        .chain(new_rs)
        .filter(|rs| is_active(rs))
        .filter_map(|rs| util::int_annotation(rs, util::DESIRED_REPLICAS))
        .any(|v| v != desired)
}

impl SyncingDeployment<'_> {
    /// RollingUpdate: scale the new ReplicaSet up, else old ones down; clean up when done.
    /// Returns the ReplicaSets after the changes.
    pub(super) async fn rolling(&mut self) -> Result<(), SyncError> {
        let (new_rs, old) = self.new_and_old(true).await?;
        let Some(mut new_rs) = new_rs else { return self.rollout_status(None, &old).await };
        // Scale up the new ReplicaSet.
        let desired = util::replicas(&self.d);
        let new_now = util::rs_replicas(&new_rs);
        let target = if new_now > desired {
            desired
        } else {
            let all: Vec<&ReplicaSet> = old.iter().chain([&new_rs]).collect();
            util::new_rs_new_replicas(&self.d, &all, &new_rs)
        };
        if target != new_now {
            let (scaled, updated) = self.scale_rs(&new_rs, target).await?;
            new_rs = updated;
            if scaled {
                return self.rollout_status(Some(&new_rs), &old).await;
            }
        }
        // Scale down old ReplicaSets.
        let (scaled_down, old) = self.reconcile_old(&new_rs, old).await?;
        if scaled_down {
            return self.rollout_status(Some(&new_rs), &old).await;
        }
        let status = self.calculate_status(Some(&new_rs), &old);
        if deployment_complete(&self.d, &status) {
            self.cleanup(&old).await?;
        }
        self.rollout_status(Some(&new_rs), &old).await
    }

    async fn reconcile_old(
        &mut self,
        new_rs: &ReplicaSet,
        mut old: Vec<ReplicaSet>,
    ) -> Result<(bool, Vec<ReplicaSet>), SyncError> {
        let old_refs: Vec<&ReplicaSet> = old.iter().collect();
        if util::spec_replicas(&old_refs) == 0 {
            return Ok((false, old));
        }
        let all_pods = util::spec_replicas(&old_refs) + util::rs_replicas(new_rs);
        let min_available = util::replicas(&self.d) - util::max_unavailable(&self.d);
        let new_unavailable = util::rs_replicas(new_rs) - util::available_replicas(&[new_rs]);
        let max_scaled_down = all_pods - min_available - new_unavailable;
        if max_scaled_down <= 0 {
            return Ok((false, old));
        }
        old.sort_by_key(|rs| rs.metadata.creation_timestamp.as_ref().map(|t| t.0));
        // First remove unhealthy replicas of old ReplicaSets.
        let mut cleaned = 0;
        for slot in old.iter_mut() {
            if cleaned >= max_scaled_down {
                break;
            }
            let rs = slot.clone();
            let replicas = util::rs_replicas(&rs);
            let unhealthy = replicas - util::available_replicas(&[&rs]);
            if replicas == 0 || unhealthy <= 0 {
                continue;
            }
            let down = unhealthy.min(max_scaled_down - cleaned);
            let (_, updated) = self.scale_rs(&rs, replicas - down).await?;
            *slot = updated;
            cleaned += down;
        }
        // Then scale down healthy ones while availability allows.
        let mut all: Vec<&ReplicaSet> = old.iter().collect();
        all.push(new_rs);
        let available = util::available_replicas(&all);
        let mut scaled = 0;
        if available > min_available {
            let budget = available - min_available;
            for slot in old.iter_mut() {
                if scaled >= budget {
                    break;
                }
                let rs = slot.clone();
                let replicas = util::rs_replicas(&rs);
                if replicas == 0 {
                    continue;
                }
                let down = replicas.min(budget - scaled);
                let (_, updated) = self.scale_rs(&rs, replicas - down).await?;
                *slot = updated;
                scaled += down;
            }
        }
        Ok((cleaned + scaled > 0, old))
    }

    /// Recreate: old ReplicaSets to zero, wait for their pods to be gone, then scale up.
    pub(super) async fn recreate(&mut self, old_pods_running: impl Fn(&[ReplicaSet]) -> bool) -> Result<(), SyncError> {
        let (new_rs, mut old) = self.new_and_old(false).await?;
        let mut scaled = false;
        for rs in old.iter_mut() {
            if is_active(rs) {
                let (s, updated) = self.scale_rs(&rs.clone(), 0).await?;
                *rs = updated;
                scaled |= s;
            }
        }
        if scaled || old_pods_running(&old) {
            return self.rollout_status(new_rs.as_ref(), &old).await;
        }
        let (new_rs, old) = match new_rs {
            Some(rs) => (rs, old),
            None => match self.new_and_old(true).await? {
                (Some(rs), old) => (rs, old),
                (None, old) => return self.rollout_status(None, &old).await,
            },
        };
        let desired = util::replicas(&self.d);
        let (scaled, new_rs) = self.scale_rs(&new_rs, desired).await?;
        if !scaled {
            let status = self.calculate_status(Some(&new_rs), &old);
            if deployment_complete(&self.d, &status) {
                self.cleanup(&old).await?;
            }
        }
        self.rollout_status(Some(&new_rs), &old).await
    }

    /// Scaling (resize or paused): keep the rollout's proportions, then update status.
    pub(super) async fn scale_only(&mut self) -> Result<(), SyncError> {
        let (new_rs, old) = self.new_and_old(false).await?;
        let (new_rs, old) = self.scale(new_rs, old).await?;
        if util::is_paused(&self.d) {
            self.cleanup(&old).await?;
        }
        let status = self.calculate_status(new_rs.as_ref(), &old);
        self.write_status(status).await
    }

    async fn scale(
        &mut self,
        new_rs: Option<ReplicaSet>,
        mut old: Vec<ReplicaSet>,
    ) -> Result<(Option<ReplicaSet>, Vec<ReplicaSet>), SyncError> {
        let desired = util::replicas(&self.d);
        // Only one active ReplicaSet (or none): it gets everything.
        let active: Vec<ReplicaSet> = old.iter().chain(new_rs.as_ref()).filter(|rs| is_active(rs)).cloned().collect();
        let only = match active.len() {
            0 => new_rs
                .clone()
                .or_else(|| old.iter().max_by_key(|rs| rs.metadata.creation_timestamp.as_ref().map(|t| t.0)).cloned()),
            1 => active.first().cloned(),
            _ => None,
        };
        if let Some(rs) = only {
            if util::rs_replicas(&rs) != desired {
                let (_, updated) = self.scale_rs(&rs, desired).await?;
                return Ok(replace(new_rs, old, updated));
            }
            return Ok((new_rs, old));
        }
        // The new ReplicaSet is saturated: old ones go to zero.
        if let Some(n) = new_rs.as_ref()
            && util::int_annotation(n, util::DESIRED_REPLICAS) == Some(desired)
            && util::rs_replicas(n) == desired
            && util::available_replicas(&[n]) == desired
        {
            for rs in old.iter_mut() {
                if is_active(rs) {
                    let (_, updated) = self.scale_rs(&rs.clone(), 0).await?;
                    *rs = updated;
                }
            }
            return Ok((new_rs, old));
        }
        if util::is_recreate(&self.d) {
            return Ok((new_rs, old));
        }
        let mut all = active;
        let current = util::spec_replicas(&all.iter().collect::<Vec<_>>());
        let allowed = if desired > 0 { desired + util::max_surge(&self.d) } else { 0 };
        let to_add = allowed - current;
        let newer_first = |a: &ReplicaSet, b: &ReplicaSet| {
            let ta = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
            let tb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
            (util::rs_replicas(b), tb).cmp(&(util::rs_replicas(a), ta))
        };
        if to_add > 0 {
            all.sort_by(newer_first);
        } else {
            all.sort_by(|a, b| {
                let ta = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
                let tb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
                (util::rs_replicas(b), ta).cmp(&(util::rs_replicas(a), tb))
            });
        }
        let mut sizes: Vec<i32> = Vec::with_capacity(all.len());
        let mut added = 0;
        for rs in &all {
            let p = if to_add != 0 { proportion(&self.d, rs, to_add, added) } else { 0 };
            added += p;
            sizes.push(util::rs_replicas(rs) + p);
        }
        if to_add != 0 && added != to_add && !sizes.is_empty() {
            sizes[0] = (sizes[0] + to_add - added).max(0);
        }
        let (mut new_rs, mut old) = (new_rs, old);
        for (rs, size) in all.iter().zip(sizes) {
            let (_, updated) = self.scale_rs(rs, size).await?;
            (new_rs, old) = replace(new_rs, old, updated);
        }
        Ok((new_rs, old))
    }
}

fn replace(
    new_rs: Option<ReplicaSet>,
    mut old: Vec<ReplicaSet>,
    updated: ReplicaSet,
) -> (Option<ReplicaSet>, Vec<ReplicaSet>) {
    if new_rs.as_ref().is_some_and(|n| n.metadata.uid == updated.metadata.uid) {
        return (Some(updated), old);
    }
    if let Some(slot) = old.iter_mut().find(|o| o.metadata.uid == updated.metadata.uid) {
        *slot = updated;
    }
    (new_rs, old)
}

/// How many of `to_add` replicas `rs` gets (kube's `GetProportion`).
fn proportion(d: &Deployment, rs: &ReplicaSet, to_add: i32, added: i32) -> i32 {
    let replicas = util::rs_replicas(rs);
    if replicas == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let desired = util::replicas(d);
    let fraction = if desired == 0 {
        -replicas
    } else {
        let deployment_replicas = desired + util::max_surge(d);
        let annotated = util::int_annotation(rs, util::MAX_REPLICAS)
            .unwrap_or_else(|| d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0));
        if annotated == 0 {
            0
        } else {
            let size = f64::from(replicas) * f64::from(deployment_replicas) / f64::from(annotated);
            (size.round() as i32) - replicas
        }
    };
    let allowed = to_add - added;
    if to_add > 0 { fraction.min(allowed) } else { fraction.max(allowed) }
}

/// Whether the rollout is done: every replica updated and available, status current.
pub(super) fn deployment_complete(d: &Deployment, s: &k8s_openapi::api::apps::v1::DeploymentStatus) -> bool {
    let desired = util::replicas(d);
    // An omitted count is zero (kube writes the counts `omitempty`).
    s.updated_replicas.unwrap_or(0) == desired
        && s.replicas.unwrap_or(0) == desired
        && s.available_replicas.unwrap_or(0) == desired
        && s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, ReplicaSetSpec};

    fn rs(replicas: i32) -> ReplicaSet {
        ReplicaSet {
            spec: Some(ReplicaSetSpec { replicas: Some(replicas), ..ReplicaSetSpec::default() }),
            ..ReplicaSet::default()
        }
    }

    fn dep(replicas: i32) -> Deployment {
        Deployment {
            spec: Some(DeploymentSpec { replicas: Some(replicas), ..DeploymentSpec::default() }),
            ..Deployment::default()
        }
    }

    #[test]
    fn new_replicas_respect_surge() {
        let d = dep(10); // surge 3
        let (old, new) = (rs(10), rs(0));
        assert_eq!(util::new_rs_new_replicas(&d, &[&old, &new], &new), 3);
        let (old, new) = (rs(8), rs(3));
        assert_eq!(util::new_rs_new_replicas(&d, &[&old, &new], &new), 5);
        let (old, new) = (rs(0), rs(9));
        assert_eq!(util::new_rs_new_replicas(&d, &[&old, &new], &new), 10);
    }

    #[test]
    fn scaling_events_use_desired_annotation() {
        let d = dep(5);
        let mut r = rs(3);
        r.metadata.annotations = Some([(util::DESIRED_REPLICAS.to_string(), "3".to_string())].into());
        assert!(is_scaling_event(&d, Some(&r), &[]));
        let d = dep(3);
        assert!(!is_scaling_event(&d, Some(&r), &[]));
    }

    #[test]
    fn proportions_follow_max_replicas() {
        let d = dep(20); // surge 5 => 25 allowed
        let mut r = rs(8);
        r.metadata.annotations = Some([(util::MAX_REPLICAS.to_string(), "13".to_string())].into());
        assert_eq!(proportion(&d, &r, 12, 0), 7);
        assert_eq!(proportion(&d, &r, 3, 0), 3);
        assert_eq!(proportion(&dep(0), &r, -8, 0), -8);
    }
}
