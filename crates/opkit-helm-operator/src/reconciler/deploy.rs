//! The steps `helm install` and `helm upgrade` share: what a reconcile does with a
//! rendered release ([`Outcome`]), the dry run before anything changes, the pending
//! revision stored first, and the hooks and objects of the new revision; plus re-applying
//! a deployed release's objects when nothing changed (drift repair).

use serde_json::Value;

use super::cluster::ApplyMode;
use super::conditions;
use super::exec_hook::run_hooks;
use super::render::{Rendered, chart_version};
use super::target::Target;
use crate::OperatorError;
use crate::hooks;
use crate::release::{self, Release};

/// What a reconcile did to the release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Nothing was deployed: revision 1 was installed.
    Installed,
    /// The manifest or chart version changed: a new revision was deployed.
    Upgraded,
    /// Nothing changed: the deployed revision's objects were applied again.
    Reconciled,
}

impl Outcome {
    /// What deploying `rendered` does when `deployed` is the deployed revision.
    pub(super) fn of(deployed: Option<&Release>, rendered: &Rendered) -> Outcome {
        match deployed {
            None => Outcome::Installed,
            Some(r) if r.manifest != rendered.manifest || chart_version(&r.chart) != chart_version(&rendered.chart) => {
                Outcome::Upgraded
            }
            Some(_) => Outcome::Reconciled,
        }
    }
}

/// A deployed release: what the reconcile did, the manifest and the deployed revision.
pub(super) struct Deployed {
    /// What was done.
    pub outcome: Outcome,
    /// The deployed manifest.
    pub manifest: String,
    /// The deployed revision.
    pub revision: i64,
}

/// A failed deploy: the condition reason (`InstallError`, `UpgradeError` or
/// `ReconcileError`) and the error.
pub(super) type DeployFailure = (&'static str, OperatorError);

/// A rendered release to install or upgrade.
pub(super) struct DeployRequest<'a> {
    /// The release.
    pub target: Target<'a>,
    /// Its stored revisions, oldest first (none pending).
    pub history: &'a [Release],
    /// The chart rendered for the next revision.
    pub rendered: Rendered,
    /// The values (the custom resource's spec), stored as the revision's config.
    pub config: Value,
    /// How objects are written (`upgrade-force` replaces them).
    pub mode: ApplyMode,
}

impl DeployRequest<'_> {
    /// A dry run first, as operator-sdk's install and upgrade: an object the API server
    /// refuses fails the release before anything is changed.
    pub(super) async fn dry_run(&self) -> Result<(), OperatorError> {
        for object in self.rendered.manifest_objects() {
            self.target.cluster.apply(self.target.owner, object, self.mode, true).await?;
        }
        Ok(())
    }

    /// The next revision, stored pending before any hook or object is created, as Helm
    /// stores it.
    pub(super) async fn store_pending(&self) -> Result<Release, OperatorError> {
        let Target { name, cluster, secrets, .. } = self.target;
        let version = self.history.last().map_or(1, |r| r.version + 1);
        let first_deployed = self.history.first().map(|r| r.info.first_deployed.clone());
        let Rendered { objects, manifest, notes, chart } = &self.rendered;
        let mut release = Release::pending(
            name,
            cluster.namespace,
            version,
            first_deployed,
            chart.clone(),
            self.config.clone(),
            manifest.clone(),
        );
        release.info.notes = notes.clone();
        release.hooks = hooks::release_hooks(objects);
        release::create(secrets, &release).await?;
        Ok(release)
    }

    /// Installs (nothing `deployed`) or upgrades the release's objects: the `pre-install`
    /// or `pre-upgrade` hooks, every object applied, the `post-` hooks, and, for an
    /// upgrade, the deployed revision's objects the new manifest no longer has deleted
    /// (after the post hooks; Helm deletes them first). Each hook's run is recorded in
    /// `release` (the new, pending revision), stored as each hook starts. The error is
    /// Helm's.
    pub(super) async fn perform(&self, release: &mut Release, deployed: Option<&Release>) -> Result<(), OperatorError> {
        let Target { owner, cluster, secrets, .. } = self.target;
        let objects = &self.rendered.objects;
        let (pre, post) =
            if deployed.is_some() { ("pre-upgrade", "post-upgrade") } else { ("pre-install", "post-install") };
        let hook_failed = |event: &str, e: String| {
            OperatorError::Hook(if deployed.is_some() {
                format!("{event} hooks failed: {e}")
            } else {
                format!("failed {event}: {e}")
            })
        };
        run_hooks(cluster, objects, pre, Some((secrets, &mut *release))).await.map_err(|e| hook_failed(pre, e))?;
        for object in self.rendered.manifest_objects() {
            cluster.apply(owner, object, self.mode, false).await?;
        }
        run_hooks(cluster, objects, post, Some((secrets, &mut *release))).await.map_err(|e| hook_failed(post, e))?;
        if let Some(previous) = deployed {
            cluster.delete_dropped(&previous.manifest, objects).await?;
        }
        Ok(())
    }
}

/// Applies the deployed revision's objects again (drift repair), by server-side apply.
pub(super) async fn reapply(
    target: Target<'_>,
    rendered: Rendered,
    current: &Release,
) -> Result<Deployed, DeployFailure> {
    for object in rendered.manifest_objects() {
        target
            .cluster
            .apply(target.owner, object, ApplyMode::Patch, false)
            .await
            .map_err(|e| (conditions::RECONCILE_ERROR, e))?;
    }
    Ok(Deployed { outcome: Outcome::Reconciled, manifest: rendered.manifest, revision: current.version })
}
