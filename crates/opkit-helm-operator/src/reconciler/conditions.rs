//! Condition types and reasons the reconciler writes, as operator-sdk's
//! `HelmAppCondition`s.

/// The resource was seen by the operator.
pub const INITIALIZED: &str = "Initialized";
/// The release is deployed.
pub const DEPLOYED: &str = "Deployed";
/// Installing, upgrading or uninstalling failed.
pub const RELEASE_FAILED: &str = "ReleaseFailed";
/// Re-applying a deployed release's objects failed.
pub const IRRECONCILABLE: &str = "Irreconcilable";
/// Reason: installed.
pub const INSTALL_SUCCESSFUL: &str = "InstallSuccessful";
/// Reason: upgraded.
pub const UPGRADE_SUCCESSFUL: &str = "UpgradeSuccessful";
/// Reason: uninstalled.
pub const UNINSTALL_SUCCESSFUL: &str = "UninstallSuccessful";
/// Reason: installing failed.
pub const INSTALL_ERROR: &str = "InstallError";
/// Reason: upgrading failed.
pub const UPGRADE_ERROR: &str = "UpgradeError";
/// Reason: re-applying failed.
pub const RECONCILE_ERROR: &str = "ReconcileError";
/// Reason: uninstalling failed.
pub const UNINSTALL_ERROR: &str = "UninstallError";
/// The release waits on a paused chart-version rollout (beyond operator-sdk).
pub const ROLLOUT_PAUSED: &str = "RolloutPaused";
/// Reason: another release's upgrade to the new chart version failed.
pub const CHART_UPGRADE_FAILED: &str = "ChartUpgradeFailed";

/// The Deployed condition's reason for a deployed revision.
pub fn deployed_reason(revision: i64) -> &'static str {
    if revision == 1 { INSTALL_SUCCESSFUL } else { UPGRADE_SUCCESSFUL }
}
