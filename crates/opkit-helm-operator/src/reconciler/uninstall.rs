//! `helm uninstall` of a release whose custom resource is being deleted: its
//! `pre-delete` hooks, its objects deleted (and, with `--wait`, waited for), its
//! `post-delete` hooks, then every stored revision; and operator-sdk's
//! `CleanupRelease`, which deletes again what is left under `uninstall-wait`.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject};

use super::cluster::{Cluster, keeps};
use super::exec_hook::{run_hooks, wait_until};
use crate::OperatorError;
use crate::hooks;
use crate::manifest::{RenderedObject, split};
use crate::release;

/// Uninstalls release `name` as `helm uninstall --wait` (without `--keep-history`): the
/// stored release's `pre-delete` hooks, its objects deleted and waited for until they
/// are gone, its `post-delete` hooks, then every stored revision deleted. A failure
/// after the objects were deleted still deletes the revisions, and is Helm's
/// `uninstallation completed with N error(s): ...`. Without `wait` the objects are
/// only deleted, as `helm uninstall` without `--wait` (operator-sdk's uninstall).
pub(super) async fn uninstall(
    cluster: Cluster<'_>,
    secrets: &Api<Secret>,
    name: &str,
    wait: bool,
) -> Result<(), OperatorError> {
    let history = release::history(secrets, name).await?;
    let mut errors = Vec::new();
    if let Some(latest) = history.iter().rev().find(|r| r.info.status == "deployed").or(history.last()) {
        let stored_hooks = split(&hooks::hooks_text(&latest.hooks))?;
        errors = remove_objects(cluster, &stored_hooks, &split(&latest.manifest)?, wait).await?;
    }
    release::delete_all(secrets, &history).await?;
    if errors.is_empty() {
        Ok(())
    } else {
        Err(OperatorError::Hook(format!(
            "uninstallation completed with {} error(s): {}",
            errors.len(),
            errors.join("; ")
        )))
    }
}

/// The part of `helm uninstall` that acts on the cluster: `pre-delete` hooks (a failure
/// stops here), `objects` deleted (not those annotated `helm.sh/resource-policy:
/// keep`) and, with `wait`, waited for until gone, then `post-delete` hooks. Returns
/// the errors of the wait and the post-delete hooks, which Helm reports once the
/// release is purged.
pub(super) async fn remove_objects(
    cluster: Cluster<'_>,
    hook_objects: &[RenderedObject],
    objects: &[RenderedObject],
    wait: bool,
) -> Result<Vec<String>, OperatorError> {
    // The release's records are purged afterwards: the runs are not recorded.
    run_hooks(cluster, hook_objects, "pre-delete", None).await.map_err(OperatorError::Hook)?;
    let mut deleted = Vec::new();
    for object in objects.iter().rev() {
        if cluster.delete(object).await? && wait {
            deleted.push(object);
        }
    }
    let mut errors = Vec::new();
    for object in deleted {
        let (api, _) = cluster.api_for(object).await?;
        if let Err(e) = wait_until(&api, object.name(), |o: Option<&DynamicObject>| o.is_none()).await {
            errors.push(e);
            break;
        }
    }
    if let Err(e) = run_hooks(cluster, hook_objects, "post-delete", None).await {
        errors.push(e);
    }
    Ok(errors)
}

/// operator-sdk's `CleanupRelease`: whether any object of `manifest` (but those
/// annotated `helm.sh/resource-policy: keep`) still exists; if one does, every one
/// is deleted again.
pub(super) async fn delete_left(cluster: Cluster<'_>, manifest: &str) -> Result<bool, OperatorError> {
    let objects: Vec<RenderedObject> = split(manifest)?.into_iter().filter(|o| !keeps(o)).collect();
    for object in &objects {
        let (api, _) = cluster.api_for(object).await?;
        if api.get_opt(object.name()).await?.is_some() {
            for object in objects.iter().rev() {
                cluster.delete(object).await?;
            }
            return Ok(true);
        }
    }
    Ok(false)
}
