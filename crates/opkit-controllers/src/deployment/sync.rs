//! One Deployment sync's shared work: finding or creating the new ReplicaSet (and syncing
//! revisions), scaling ReplicaSets with `ScalingReplicaSet` events, cleaning up old
//! ReplicaSets beyond `revisionHistoryLimit`, and computing and writing status.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use opkit::Context;
use opkit::events::EventType;
use serde_json::json;

use super::State;
use super::util::{self, POD_TEMPLATE_HASH};

/// Why a sync stopped early.
#[derive(Debug, thiserror::Error)]
pub(super) enum SyncError {
    /// An API call failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// The new ReplicaSet's name is taken by a different ReplicaSet; collisionCount was bumped.
    #[error("hash collision for ReplicaSet {0}: retrying with a new collision count")]
    Collision(String),
}

/// A Deployment being synced: a working copy (annotations, status) and its ReplicaSets.
pub(super) struct SyncingDeployment<'a> {
    pub ctx: &'a Context<Deployment>,
    pub st: &'a State,
    pub d: Deployment,
    pub rss: Vec<ReplicaSet>,
}

impl SyncingDeployment<'_> {
    pub(super) fn rs_api(&self) -> Api<ReplicaSet> {
        self.ctx.api_for()
    }

    /// Records an event about the Deployment in the background.
    pub(super) fn event(&self, type_: EventType, reason: &'static str, action: &'static str, note: String) {
        let recorder = self.st.recorder.clone();
        let regarding = kube::Resource::object_ref(&self.d, &());
        tokio::spawn(async move {
            recorder.publish(&regarding, type_, reason, action, &note).await;
        });
    }

    fn template(&self) -> k8s_openapi::api::core::v1::PodTemplateSpec {
        self.d.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default()
    }

    /// Splits the ReplicaSets into the new one (the oldest whose template equals the
    /// Deployment's) and the old ones.
    pub(super) fn split(&self) -> (Option<ReplicaSet>, Vec<ReplicaSet>) {
        let template = self.template();
        let mut sorted = self.rss.clone();
        sorted.sort_by(|a, b| {
            let ka = (a.metadata.creation_timestamp.as_ref().map(|t| t.0), a.metadata.name.clone());
            let kb = (b.metadata.creation_timestamp.as_ref().map(|t| t.0), b.metadata.name.clone());
            ka.cmp(&kb)
        });
        let idx = sorted.iter().position(|rs| {
            rs.spec.as_ref().and_then(|s| s.template.as_ref()).is_some_and(|t| util::equal_ignore_hash(t, &template))
        });
        match idx {
            Some(i) => {
                let new = sorted.remove(i);
                (Some(new), sorted)
            }
            None => (None, sorted),
        }
    }

    /// Sets the Deployment's revision annotation, writing it if it changed.
    async fn sync_deployment_revision(&mut self, revision: &str) -> Result<(), SyncError> {
        let current = self.d.metadata.annotations.as_ref().and_then(|a| a.get(util::REVISION));
        if current.map(String::as_str) == Some(revision) {
            return Ok(());
        }
        let body = json!({"metadata": {"annotations": {util::REVISION: revision}}});
        let patched =
            self.ctx.api().patch(&self.ctx.request.name, &PatchParams::default(), &Patch::Merge(&body)).await?;
        let status = self.d.status.clone();
        self.d.metadata = patched.metadata;
        self.d.spec = patched.spec;
        self.d.status = status;
        Ok(())
    }

    /// Finds the new ReplicaSet (updating its revision and annotations) or, when
    /// `create`, creates it. Returns it and the old ReplicaSets.
    pub(super) async fn new_and_old(
        &mut self,
        create: bool,
    ) -> Result<(Option<ReplicaSet>, Vec<ReplicaSet>), SyncError> {
        let (existing, old) = self.split();
        let new_revision = util::max_revision(&old) + 1;
        if let Some(rs) = existing {
            let mut copy = rs.clone();
            let changed = util::set_new_rs_annotations(&self.d, &mut copy, new_revision, true);
            let min_ready = util::min_ready_seconds(&self.d);
            let min_ready_changed = copy.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0) != min_ready;
            if min_ready_changed && let Some(spec) = copy.spec.as_mut() {
                spec.min_ready_seconds = Some(min_ready);
            }
            let rs = if changed || min_ready_changed {
                let name = copy.metadata.name.clone().unwrap_or_default();
                let updated = self.rs_api().replace(&name, &PostParams::default(), &copy).await?;
                self.replace_cached(updated.clone());
                updated
            } else {
                rs
            };
            let rev = util::revision(rs.metadata.annotations.as_ref()).to_string();
            self.sync_deployment_revision(&rev).await?;
            let mut status = self.d.status.clone().unwrap_or_default();
            if util::progress_deadline(&self.d).is_some() && util::get_condition(&status, "Progressing").is_none() {
                let msg = format!("Found new replica set {:?}", rs.metadata.name.clone().unwrap_or_default());
                util::set_condition(&mut status, util::condition("Progressing", "True", "FoundNewReplicaSet", msg));
                self.write_status(status).await?;
            }
            return Ok((Some(rs), old));
        }
        if !create {
            return Ok((None, old));
        }
        self.create_new_rs(old, new_revision).await
    }

    /// Creates the new ReplicaSet (named by the template's hash), scaled as the rollout
    /// allows; an existing one of that name that is ours with the same template is the
    /// new one, any other is a hash collision.
    async fn create_new_rs(
        &mut self,
        old: Vec<ReplicaSet>,
        new_revision: i64,
    ) -> Result<(Option<ReplicaSet>, Vec<ReplicaSet>), SyncError> {
        let rs = self.new_rs(&old, new_revision);
        let name = rs.metadata.name.clone().unwrap_or_default();
        let count = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let created = match self.rs_api().create(&PostParams::default(), &rs).await {
            Ok(c) => c,
            Err(kube::Error::Api(s)) if s.is_already_exists() => {
                // The cache lags, or the hash collides with a different ReplicaSet.
                let found = self.rs_api().get(&name).await?;
                let ours =
                    opkit::owner::controller_of(&found).is_some_and(|r| Some(&r.uid) == self.d.metadata.uid.as_ref());
                let template = rs.spec.as_ref().and_then(|s| s.template.as_ref());
                let same = found
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.as_ref())
                    .is_some_and(|t| template.is_some_and(|mine| util::equal_ignore_hash(t, mine)));
                if ours && same {
                    return Ok((Some(found), old));
                }
                let mut status = self.d.status.clone().unwrap_or_default();
                status.collision_count = Some(status.collision_count.unwrap_or(0).saturating_add(1));
                self.write_status(status).await?;
                return Err(SyncError::Collision(name));
            }
            Err(e) => {
                self.creation_failed(&name, &e).await;
                return Err(e.into());
            }
        };
        if count > 0 {
            self.event(
                EventType::Normal,
                "ScalingReplicaSet",
                "Scale",
                format!("Scaled up replica set {name} to {count}"),
            );
        }
        let mut status = self.d.status.clone().unwrap_or_default();
        if util::progress_deadline(&self.d).is_some() {
            let msg = format!("Created new replica set {name:?}");
            util::set_condition(&mut status, util::condition("Progressing", "True", "NewReplicaSetCreated", msg));
        }
        self.sync_deployment_revision(&new_revision.to_string()).await?;
        self.write_status(status).await?;
        self.rss.push(created.clone());
        Ok((Some(created), old))
    }

    /// The new ReplicaSet for the Deployment's template: `<deployment>-<hash>`, selecting
    /// and labelling its pods with the hash, with as many replicas as the rollout allows.
    fn new_rs(&self, old: &[ReplicaSet], new_revision: i64) -> ReplicaSet {
        let collision = self.d.status.as_ref().and_then(|s| s.collision_count);
        let mut template = self.template();
        let hash = util::template_hash(&template, collision);
        let tmeta = template.metadata.get_or_insert_with(ObjectMeta::default);
        tmeta.labels.get_or_insert_with(BTreeMap::new).insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let mut selector: LabelSelector = self.d.spec.as_ref().map(|s| s.selector.clone()).unwrap_or_default();
        selector.match_labels.get_or_insert_with(BTreeMap::new).insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let mut rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(format!("{}-{hash}", self.ctx.request.name)),
                namespace: self.d.metadata.namespace.clone(),
                labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                owner_references: opkit::owner::controller_reference(&self.d).map(|r| vec![r]),
                ..ObjectMeta::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: Some(util::min_ready_seconds(&self.d)),
                selector,
                template: Some(template),
            }),
            status: None,
        };
        let mut all: Vec<&ReplicaSet> = old.iter().collect();
        all.push(&rs);
        let count = util::new_rs_new_replicas(&self.d, &all, &rs);
        if let Some(spec) = rs.spec.as_mut() {
            spec.replicas = Some(count);
        }
        util::set_new_rs_annotations(&self.d, &mut rs, new_revision, false);
        rs
    }

    /// Reports a failed create of the new ReplicaSet: a warning event and, with a progress
    /// deadline, `Progressing=False` (best effort).
    async fn creation_failed(&mut self, name: &str, e: &kube::Error) {
        let msg = match e {
            kube::Error::Api(s) => s.message.clone(),
            other => other.to_string(),
        };
        let note = format!("Failed to create new replica set {name:?}: {msg}");
        self.event(EventType::Warning, "FailedCreate", "Create", note.clone());
        if util::progress_deadline(&self.d).is_some() {
            let mut status = self.d.status.clone().unwrap_or_default();
            util::set_condition(&mut status, util::condition("Progressing", "False", "ReplicaSetCreateError", note));
            let _ = self.write_status(status).await;
        }
    }

    fn replace_cached(&mut self, rs: ReplicaSet) {
        if let Some(slot) = self.rss.iter_mut().find(|x| x.metadata.uid == rs.metadata.uid) {
            *slot = rs;
        }
    }

    /// Writes the Deployment's status if it differs.
    pub(super) async fn write_status(&mut self, status: DeploymentStatus) -> Result<(), SyncError> {
        if self.d.status.as_ref() == Some(&status) {
            return Ok(());
        }
        let mut d = self.d.clone();
        d.status = Some(status);
        let written = self.ctx.api().replace_status(&self.ctx.request.name, &PostParams::default(), &d).await?;
        self.d.metadata = written.metadata;
        self.d.status = written.status;
        Ok(())
    }

    /// Scales `rs` to `new_scale` (and refreshes its replicas annotations), recording a
    /// `ScalingReplicaSet` event when the size changed. Returns the updated ReplicaSet.
    pub(super) async fn scale_rs(&mut self, rs: &ReplicaSet, new_scale: i32) -> Result<(bool, ReplicaSet), SyncError> {
        let old_scale = util::rs_replicas(rs);
        let desired = util::replicas(&self.d);
        let max = desired + util::max_surge(&self.d);
        let mut copy = rs.clone();
        let annotations = util::set_replicas_annotations(&mut copy, desired, max);
        let size = old_scale != new_scale;
        if !size && !annotations {
            return Ok((false, rs.clone()));
        }
        if let Some(spec) = copy.spec.as_mut() {
            spec.replicas = Some(new_scale);
        }
        let name = copy.metadata.name.clone().unwrap_or_default();
        let updated = self.rs_api().replace(&name, &PostParams::default(), &copy).await?;
        self.replace_cached(updated.clone());
        if size {
            let op = if new_scale > old_scale { "up" } else { "down" };
            self.event(
                EventType::Normal,
                "ScalingReplicaSet",
                "Scale",
                format!("Scaled {op} replica set {name} to {new_scale} from {old_scale}"),
            );
        }
        Ok((size, updated))
    }

    /// Deletes the oldest fully scaled-down old ReplicaSets beyond `revisionHistoryLimit`.
    pub(super) async fn cleanup(&mut self, old: &[ReplicaSet]) -> Result<(), SyncError> {
        let limit = usize::try_from(util::revision_history_limit(&self.d)).unwrap_or(0);
        let mut alive: Vec<&ReplicaSet> = old.iter().filter(|rs| rs.metadata.deletion_timestamp.is_none()).collect();
        if alive.len() <= limit {
            return Ok(());
        }
        let diff = alive.len() - limit;
        alive.sort_by_key(|rs| {
            (util::revision(rs.metadata.annotations.as_ref()), rs.metadata.creation_timestamp.as_ref().map(|t| t.0))
        });
        for rs in alive.into_iter().take(diff) {
            let st = rs.status.clone().unwrap_or_default();
            let synced = rs.metadata.generation.unwrap_or(0) <= st.observed_generation.unwrap_or(0);
            if st.replicas != 0 || util::rs_replicas(rs) != 0 || !synced {
                continue;
            }
            let name = rs.metadata.name.clone().unwrap_or_default();
            match self.rs_api().delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if opkit::status::is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}
