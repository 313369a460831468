//! Condition types and reasons the reconciler writes, as operator-sdk's
//! `HelmAppCondition`s.

/// The resource was seen by the operator.
pub(crate) const INITIALIZED: &str = "Initialized";
/// The release is deployed.
pub(crate) const DEPLOYED: &str = "Deployed";
/// Installing, upgrading or uninstalling failed.
pub(crate) const RELEASE_FAILED: &str = "ReleaseFailed";
/// Re-applying a deployed release's objects failed.
pub(crate) const IRRECONCILABLE: &str = "Irreconcilable";
/// Reason: installed.
pub(crate) const INSTALL_SUCCESSFUL: &str = "InstallSuccessful";
/// Reason: upgraded.
pub(crate) const UPGRADE_SUCCESSFUL: &str = "UpgradeSuccessful";
/// Reason: uninstalled.
pub(crate) const UNINSTALL_SUCCESSFUL: &str = "UninstallSuccessful";
/// Reason: installing failed.
pub(crate) const INSTALL_ERROR: &str = "InstallError";
/// Reason: upgrading failed.
pub(crate) const UPGRADE_ERROR: &str = "UpgradeError";
/// Reason: re-applying failed.
pub(crate) const RECONCILE_ERROR: &str = "ReconcileError";
/// Reason: uninstalling failed.
pub(crate) const UNINSTALL_ERROR: &str = "UninstallError";
/// The release waits on a paused chart-version rollout (beyond operator-sdk).
pub(crate) const ROLLOUT_PAUSED: &str = "RolloutPaused";
/// Reason: another release's upgrade to the new chart version failed.
pub(crate) const CHART_UPGRADE_FAILED: &str = "ChartUpgradeFailed";

/// The Deployed condition's reason for a deployed revision.
pub(crate) fn deployed_reason(revision: i64) -> &'static str {
    if revision == 1 { INSTALL_SUCCESSFUL } else { UPGRADE_SUCCESSFUL }
}
