//! `helm rollback` after a failed upgrade, as operator-sdk's helm operator runs it.

use super::cluster::ApplyMode;
use super::exec_hook::run_hooks;
use super::target::Target;
use crate::OperatorError;
use crate::hooks;
use crate::manifest::split;
use crate::release::{self, Release};

/// `helm rollback NAME` after the failed upgrade `failed`: a new revision with
/// `to`'s chart, values, manifest, notes and hooks (`Rollback to N`), `to`'s
/// `pre-rollback` hooks, its objects applied and the failed revision's others deleted,
/// its `post-rollback` hooks; then `to` is superseded and the new revision deployed. A
/// failure stores the new revision as `failed` (`Rollback "NAME" failed: ...`) and `to`
/// stays deployed. `mode` is [`ApplyMode::Replace`] for `--force` (operator-sdk's
/// default, `rollback-force`).
pub(super) async fn roll_back(
    target: Target<'_>,
    failed: &Release,
    to: &Release,
    mode: ApplyMode,
) -> Result<(), OperatorError> {
    let secrets = target.secrets;
    let mut rolled = to.clone();
    rolled.version = failed.version + 1;
    rolled.info.first_deployed = failed.info.first_deployed.clone();
    rolled.info.last_deployed = jiff::Timestamp::now().to_string();
    rolled.info.description = format!("Rollback to {}", to.version);
    rolled.info.status = "pending-rollback".to_string();
    release::create(secrets, &rolled).await?;
    match restore(target, &mut rolled, failed, to, mode).await {
        Ok(()) => {
            release::supersede(secrets, to).await?;
            rolled.info.status = "deployed".to_string();
            release::replace(secrets, &rolled).await
        }
        Err(e) => {
            rolled.info.status = "failed".to_string();
            rolled.info.description =
                format!("Rollback {} failed: {e}", opkit_apimachinery::strconv::quote(&rolled.name));
            release::replace(secrets, &rolled).await?;
            Err(e)
        }
    }
}

/// The part of a rollback that acts on the cluster: `to`'s hooks around its objects
/// applied again and `failed`'s others deleted, the hook runs recorded in `rolled`.
async fn restore(
    target: Target<'_>,
    rolled: &mut Release,
    failed: &Release,
    to: &Release,
    mode: ApplyMode,
) -> Result<(), OperatorError> {
    let Target { owner, cluster, secrets, .. } = target;
    let hook_objects = split(&hooks::hooks_text(&to.hooks))?;
    run_hooks(cluster, &hook_objects, "pre-rollback", Some((secrets, &mut *rolled)))
        .await
        .map_err(OperatorError::Hook)?;
    let objects = split(&to.manifest)?;
    for object in &objects {
        cluster.apply(owner, object, mode, false).await?;
    }
    cluster.delete_dropped(&failed.manifest, &objects).await?;
    run_hooks(cluster, &hook_objects, "post-rollback", Some((secrets, rolled))).await.map_err(OperatorError::Hook)
}
