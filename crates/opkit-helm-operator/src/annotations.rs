//! operator-sdk's custom resource annotations that change how the helm operator acts on
//! one release (`internal/helm/controller/reconcile.go`): `upgrade-force` (upgrade with
//! `helm upgrade --force`: objects are replaced, not patched), `rollback-force` (the
//! rollback after a failed upgrade replaces objects; on unless `"false"`) and
//! `uninstall-wait` (the uninstall finalizer stays until every object of the deployed
//! manifest is gone). Their values are read as Go's `strconv.ParseBool` reads them.

use kube::ResourceExt;
use kube::api::DynamicObject;

/// `"true"` upgrades the release with `--force`: changed objects are replaced (PUT), so
/// fields the new manifest drops are gone instead of merged with the live object.
pub const UPGRADE_FORCE: &str = "helm.sdk.operatorframework.io/upgrade-force";
/// `"false"` rolls a failed upgrade back without `--force` (patching); the default is
/// to replace, as operator-sdk does.
pub const ROLLBACK_FORCE: &str = "helm.sdk.operatorframework.io/rollback-force";
/// `"true"` keeps the uninstall finalizer until every object of
/// `status.deployedRelease.manifest` is gone, deleting them again while any is left.
pub const UNINSTALL_WAIT: &str = "helm.sdk.operatorframework.io/uninstall-wait";

/// The condition message while the finalizer waits for the release's objects to go
/// (operator-sdk's).
pub const UNINSTALL_WAIT_MESSAGE: &str = "Waiting until all resources are deleted.";

/// How a custom resource's annotations ask its release to be handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseAnnotations {
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
    pub fn of(object: &DynamicObject) -> ReleaseAnnotations {
        let flag =
            |key: &str, default: bool| object.annotations().get(key).and_then(|v| parse_bool(v)).unwrap_or(default);
        ReleaseAnnotations {
            upgrade_force: flag(UPGRADE_FORCE, false),
            rollback_force: flag(ROLLBACK_FORCE, true),
            uninstall_wait: flag(UNINSTALL_WAIT, false),
        }
    }
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
}
