//! `helm upgrade` of a deployed release whose manifest or chart version changed: the dry
//! run, the pending revision, its hooks and objects (the dropped ones deleted), then the
//! previous revision superseded and the new one deployed. As operator-sdk's helm
//! operator, a failed upgrade is stored `failed` and rolled back to the deployed revision.

use super::cluster::ApplyMode;
use super::conditions;
use super::deploy::{DeployFailure, DeployRequest, Deployed, Outcome};
use super::rollback::roll_back;
use crate::OperatorError;
use crate::release::{self, Release};

/// Upgrades the release from `previous` (its deployed revision) to the rendered one;
/// after a failure, it is rolled back as `rollback_mode` says.
pub(super) async fn upgrade(
    request: DeployRequest<'_>,
    previous: &Release,
    rollback_mode: ApplyMode,
) -> Result<Deployed, DeployFailure> {
    let fail = |e: OperatorError| (conditions::UPGRADE_ERROR, e);
    let secrets = request.target.secrets;
    request.dry_run().await.map_err(fail)?;
    let mut release = request.store_pending().await.map_err(fail)?;
    if let Err(e) = request.perform(&mut release, Some(previous)).await {
        release.info.status = "failed".to_string();
        release.info.description =
            format!("Upgrade {} failed: {e}", opkit_apimachinery::strconv::quote(request.target.name));
        release::replace(secrets, &release).await.map_err(fail)?;
        if let Err(rollback) = roll_back(request.target, &release, previous, rollback_mode).await {
            tracing::warn!(name = request.target.name, error = %rollback, "rolling back the failed upgrade");
        }
        return Err(fail(e));
    }
    release::supersede(secrets, previous).await.map_err(fail)?;
    release.mark_deployed();
    release::replace(secrets, &release).await.map_err(fail)?;
    Ok(Deployed { outcome: Outcome::Upgraded, manifest: request.rendered.manifest, revision: release.version })
}
