//! operator-sdk's custom resource annotations that change how the helm operator acts on
//! one release (`internal/helm/controller/reconcile.go`): `upgrade-force` (upgrade with
//! `helm upgrade --force`: objects are replaced, not patched), `rollback-force` (the
//! rollback after a failed upgrade replaces objects; on unless `"false"`) and
//! `uninstall-wait` (the uninstall finalizer stays until every object of the deployed
//! manifest is gone), read as Go's `strconv.ParseBool` reads them; and `reconcile-period`
//! (how often the release is reconciled, a Go duration, over the watch's period).

use std::time::Duration;

use kube::ResourceExt;
use kube::api::DynamicObject;

/// `"true"` upgrades the release with `--force`: changed objects are replaced (PUT), so
/// fields the new manifest drops are gone instead of merged with the live object.
pub(crate) const UPGRADE_FORCE: &str = "helm.sdk.operatorframework.io/upgrade-force";
/// `"false"` rolls a failed upgrade back without `--force` (patching); the default is
/// to replace, as operator-sdk does.
pub(crate) const ROLLBACK_FORCE: &str = "helm.sdk.operatorframework.io/rollback-force";
/// `"true"` keeps the uninstall finalizer until every object of
/// `status.deployedRelease.manifest` is gone, deleting them again while any is left.
pub(crate) const UNINSTALL_WAIT: &str = "helm.sdk.operatorframework.io/uninstall-wait";
/// A Go duration (`5s`, `1h2m`) that replaces the watch's `reconcilePeriod` for this
/// custom resource.
pub(crate) const RECONCILE_PERIOD: &str = "helm.sdk.operatorframework.io/reconcile-period";

/// The condition message while the finalizer waits for the release's objects to go
/// (operator-sdk's).
pub(crate) const UNINSTALL_WAIT_MESSAGE: &str = "Waiting until all resources are deleted.";

/// How a custom resource's annotations ask its release to be handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReleaseAnnotations {
    /// [`UPGRADE_FORCE`].
    pub upgrade_force: bool,
    /// [`ROLLBACK_FORCE`].
    pub rollback_force: bool,
    /// [`UNINSTALL_WAIT`].
    pub uninstall_wait: bool,
}

impl ReleaseAnnotations {
    /// The annotations of `object`; a value that is not a boolean counts as absent, as
    /// operator-sdk logs and ignores it.
    pub(crate) fn of(object: &DynamicObject) -> ReleaseAnnotations {
        let flag =
            |key: &str, default: bool| object.annotations().get(key).and_then(|v| parse_bool(v)).unwrap_or(default);
        ReleaseAnnotations {
            upgrade_force: flag(UPGRADE_FORCE, false),
            rollback_force: flag(ROLLBACK_FORCE, true),
            uninstall_wait: flag(UNINSTALL_WAIT, false),
        }
    }
}

/// The [`RECONCILE_PERIOD`] of `object`, or `None` without the annotation. A value that
/// is not a Go duration is an error, as operator-sdk's reconcile returns it.
pub(crate) fn reconcile_period(object: &DynamicObject) -> Result<Option<Duration>, String> {
    let Some(text) = object.annotations().get(RECONCILE_PERIOD) else { return Ok(None) };
    opkit_apimachinery::duration::parse(text)
        .map(Some)
        .map_err(|e| format!("annotation {RECONCILE_PERIOD}: {text:?} is not a duration: {e}"))
}

/// Go's `strconv.ParseBool`.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(annotations: serde_json::Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "demo.example.com/v1alpha1",
            "kind": "Nginx",
            "metadata": { "name": "web", "annotations": annotations },
        }))
        .expect("an object")
    }

    #[test]
    fn annotations_are_read_as_operator_sdk_reads_them() {
        let defaults = ReleaseAnnotations::of(&with(serde_json::json!({})));
        assert_eq!(defaults, ReleaseAnnotations { upgrade_force: false, rollback_force: true, uninstall_wait: false });
        let set = ReleaseAnnotations::of(&with(serde_json::json!({
            UPGRADE_FORCE: "True", ROLLBACK_FORCE: "0", UNINSTALL_WAIT: "t",
        })));
        assert_eq!(set, ReleaseAnnotations { upgrade_force: true, rollback_force: false, uninstall_wait: true });
        // Not booleans: the defaults.
        let junk = ReleaseAnnotations::of(&with(serde_json::json!({
            UPGRADE_FORCE: "yes", ROLLBACK_FORCE: "no", UNINSTALL_WAIT: "",
        })));
        assert_eq!(junk, defaults);
    }

    #[test]
    fn the_reconcile_period_is_a_go_duration() {
        assert_eq!(reconcile_period(&with(serde_json::json!({}))), Ok(None));
        let set = with(serde_json::json!({ RECONCILE_PERIOD: "1m30s" }));
        assert_eq!(reconcile_period(&set), Ok(Some(Duration::from_secs(90))));
        let bad = reconcile_period(&with(serde_json::json!({ RECONCILE_PERIOD: "1x3m9s" }))).unwrap_err();
        assert!(bad.starts_with("annotation helm.sdk.operatorframework.io/reconcile-period: \"1x3m9s\""), "{bad}");
    }
}
