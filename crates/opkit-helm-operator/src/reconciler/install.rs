//! `helm install` of a release nothing of which is deployed: the dry run, the pending
//! revision 1, its hooks and objects, then `deployed`. As operator-sdk's helm operator, a
//! failed install is stored `failed` and then uninstalled, which purges the record.

use super::conditions;
use super::deploy::{DeployFailure, DeployRequest, Deployed, Outcome};
use super::uninstall::remove_objects;
use crate::OperatorError;
use crate::manifest::RenderedObject;
use crate::release::{self, Release};

/// Installs the rendered release.
pub(super) async fn install(request: DeployRequest<'_>) -> Result<Deployed, DeployFailure> {
    let fail = |e: OperatorError| (conditions::INSTALL_ERROR, e);
    request.dry_run().await.map_err(fail)?;
    let mut release = request.store_pending().await.map_err(fail)?;
    if let Err(e) = request.perform(&mut release, None).await {
        uninstall_failed(&request, &mut release, &e).await;
        return Err(fail(e));
    }
    release.mark_deployed();
    release::replace(request.target.secrets, &release).await.map_err(fail)?;
    Ok(Deployed { outcome: Outcome::Installed, manifest: request.rendered.manifest, revision: release.version })
}

/// Helm stores the failed install (a failed write is logged, as Helm's `recordRelease`);
/// operator-sdk then uninstalls it, which purges the record. What fails on the way is
/// logged: the install's own error is what the reconcile reports.
async fn uninstall_failed(request: &DeployRequest<'_>, release: &mut Release, error: &OperatorError) {
    let target = request.target;
    let name = target.name;
    release.info.status = "failed".to_string();
    release.info.description = format!("failed: {error}");
    if let Err(e) = release::replace(target.secrets, release).await {
        tracing::warn!(name, error = %e, "recording the failed install");
    }
    let objects = &request.rendered.objects;
    let manifest_objects: Vec<RenderedObject> = request.rendered.manifest_objects().cloned().collect();
    let mut errors = match remove_objects(target.cluster, objects, &manifest_objects, true).await {
        Ok(errors) => errors,
        Err(e) => vec![e.to_string()],
    };
    if let Err(e) = release::delete_all(target.secrets, std::slice::from_ref(release)).await {
        errors.push(e.to_string());
    }
    if !errors.is_empty() {
        tracing::warn!(name, errors = errors.join("; "), "uninstalling the failed install");
    }
}
