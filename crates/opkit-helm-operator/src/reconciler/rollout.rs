//! The rollout of a new chart version over a kind's releases: upgrades one at a time,
//! paused at the first failure, the pause kept in the failed resource's `RolloutPaused`
//! condition so a restarted operator resumes it.

use std::sync::Mutex;

use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::SelectorExt;
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::conditions;

/// The rollout of the operator's chart version over the releases made with another one:
/// upgrades take turns (one at a time, whatever `maxConcurrentReconciles`), and the first
/// that fails pauses the rollout until that release is upgraded or uninstalled. The pause
/// is kept in the cluster too: the failed resource's own `RolloutPaused` condition names
/// it, and a restarted operator resumes from it ([`Rollout::resume`]).
#[derive(Default)]
pub(super) struct Rollout {
    /// Held while a release is upgraded to the new chart version.
    turn: tokio::sync::Mutex<()>,
    /// The release (`namespace/name`) whose upgrade failed, pausing the rollout.
    failed: Mutex<Option<String>>,
}

impl Rollout {
    /// The failed release pausing the rollout for `release`, unless that is `release`.
    pub(super) fn paused_by(&self, release: &str) -> Option<String> {
        self.failed.lock().ok().and_then(|failed| failed.clone()).filter(|failed| failed != release)
    }

    /// Records the outcome of `release`'s upgrade to the new chart version.
    pub(super) fn finished(&self, release: &str, succeeded: bool) {
        if let Ok(mut failed) = self.failed.lock() {
            if !succeeded {
                *failed = Some(release.to_string());
            } else if failed.as_deref() == Some(release) {
                *failed = None;
            }
        }
    }

    /// `release` is gone: it no longer pauses the rollout.
    pub(super) fn forget(&self, release: &str) {
        self.finished(release, true);
    }

    /// The `RolloutPaused` condition's message: the rollout of `chart_version` is paused
    /// by the failed upgrade of `failed` (`namespace/name`).
    pub(super) fn pause_message(chart_version: &str, failed: &str) -> String {
        format!("the rollout of chart version {chart_version} is paused: upgrading {failed} failed")
    }

    /// The chart version and failed release a [`Rollout::pause_message`] names.
    fn parse_pause_message(message: &str) -> Option<(&str, &str)> {
        let rest = message.strip_prefix("the rollout of chart version ")?;
        let (version, rest) = rest.split_once(" is paused: upgrading ")?;
        Some((version, rest.strip_suffix(" failed")?))
    }

    /// The rollout of `chart_version` as the resources' conditions left it: paused by the
    /// resource whose own `RolloutPaused` condition names itself for that chart version
    /// (its upgrade failed and it has not been upgraded since).
    fn resumed(chart_version: &str, resources: &[DynamicObject]) -> Rollout {
        let failed = resources.iter().find_map(|cr| {
            let key = format!("{}/{}", cr.namespace().unwrap_or_default(), cr.name_any());
            let conditions = cr.data.pointer("/status/conditions").and_then(Value::as_array)?;
            let paused = conditions.iter().find(|c| {
                c.get("type").and_then(Value::as_str) == Some(conditions::ROLLOUT_PAUSED)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })?;
            let message = paused.get("message").and_then(Value::as_str)?;
            (Rollout::parse_pause_message(message)? == (chart_version, key.as_str())).then_some(key)
        });
        Rollout { turn: tokio::sync::Mutex::new(()), failed: Mutex::new(failed) }
    }

    /// [`Rollout::resumed`] from the custom resources of `resource` in the cluster (those
    /// `selector` matches); a failed list starts unpaused, with a warning.
    pub(super) async fn resume(
        client: &Client,
        resource: &ApiResource,
        chart_version: &str,
        selector: Option<&kube::core::Selector>,
    ) -> Rollout {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
        match api.list(&kube::api::ListParams::default()).await {
            Ok(list) => {
                let selected: Vec<DynamicObject> = list
                    .items
                    .into_iter()
                    .filter(|cr| selector.is_none_or(|selector| selector.matches(cr.labels())))
                    .collect();
                Rollout::resumed(chart_version, &selected)
            }
            Err(e) => {
                tracing::warn!(kind = %resource.kind, error = %e, "cannot read whether a chart rollout is paused");
                Rollout::default()
            }
        }
    }

    /// Takes `release`'s turn to be upgraded to the new chart version (held until the
    /// guard drops), unless another release's failure pauses the rollout: then `Err`
    /// names that release.
    pub(super) async fn take_turn(&self, release: &str) -> Result<Option<tokio::sync::MutexGuard<'_, ()>>, String> {
        let turn = match self.paused_by(release) {
            None => Some(self.turn.lock().await),
            Some(_) => None,
        };
        match self.paused_by(release) {
            Some(failed) => Err(failed),
            None => Ok(turn),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resource(namespace: &str, name: &str, paused: Option<&str>) -> DynamicObject {
        let conditions: Vec<Value> = paused
            .map(|message| json!({ "type": "RolloutPaused", "status": "True", "message": message }))
            .into_iter()
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "demo.example.com/v1alpha1",
            "kind": "Nginx",
            "metadata": { "name": name, "namespace": namespace },
            "status": { "conditions": conditions },
        }))
        .expect("a resource")
    }

    #[test]
    fn a_restarted_rollout_is_paused_by_the_resource_whose_condition_names_itself() {
        let message = Rollout::pause_message("0.2.0", "team/zulu");
        assert_eq!(message, "the rollout of chart version 0.2.0 is paused: upgrading team/zulu failed");
        assert_eq!(Rollout::parse_pause_message(&message), Some(("0.2.0", "team/zulu")));
        assert_eq!(Rollout::parse_pause_message("something else"), None);

        let paused = [
            resource("team", "alpha", Some(&message)),
            resource("team", "zulu", Some(&message)),
            resource("team", "bravo", None),
        ];
        let rollout = Rollout::resumed("0.2.0", &paused);
        assert_eq!(rollout.paused_by("team/alpha").as_deref(), Some("team/zulu"));
        assert_eq!(rollout.paused_by("team/zulu"), None, "the failed release takes its turn");
        // Another chart version starts a new rollout; a paused resource alone (its failed
        // release since upgraded or deleted) does not pause it.
        assert_eq!(Rollout::resumed("0.3.0", &paused).paused_by("team/alpha"), None);
        assert_eq!(Rollout::resumed("0.2.0", &paused[..1]).paused_by("team/alpha"), None);
    }
}
