//! Chart hooks as Helm's `execHook` runs them: the hooks of one event in weight order
//! (then by name, stable over Helm's kind order), each deleted first under the
//! `before-hook-creation` policy (the default), created, and waited for when it is a Job
//! (until Complete or Failed) or a Pod (until Succeeded or Failed), for at most
//! [`HOOK_TIMEOUT`]; afterwards `hook-succeeded` / `hook-failed` delete them. Hooks are
//! stored in the release as Helm's `release.Hook`, so `helm get hooks` shows them and the
//! `pre-delete` hooks run from the release; each run is recorded in its hook's `last_run`
//! ([`record_run`]) as Helm's `execHook` records it, so `helm status -o json` shows when
//! it ran and how it ended.

use std::time::Duration;

use serde_json::{Value, json};

use crate::manifest::RenderedObject;

/// How long a hook may run: Helm's default `--timeout`.
pub(crate) const HOOK_TIMEOUT: Duration = Duration::from_secs(300);

/// The policy that deletes a hook's previous object before it is created (the default).
pub(crate) const BEFORE_HOOK_CREATION: &str = "before-hook-creation";
/// The policy that deletes a hook once every hook of its event succeeded.
pub(crate) const HOOK_SUCCEEDED: &str = "hook-succeeded";
/// The policy that deletes a hook when it failed.
pub(crate) const HOOK_FAILED: &str = "hook-failed";

/// One hook of an event.
#[derive(Debug, Clone)]
pub(crate) struct Hook<'a> {
    /// The rendered object.
    pub object: &'a RenderedObject,
    /// `helm.sh/hook-weight` (0 when absent or not an integer, as Helm).
    pub weight: i64,
    /// `helm.sh/hook-delete-policy`, [`BEFORE_HOOK_CREATION`] when none is given.
    pub delete_policies: Vec<String>,
}

impl Hook<'_> {
    /// Whether `policy` is one of the hook's deletion policies.
    pub(crate) fn has_policy(&self, policy: &str) -> bool {
        self.delete_policies.iter().any(|p| p == policy)
    }
}

/// Helm's `release.HookPhase` of a hook that was created and is being waited for.
pub(crate) const PHASE_RUNNING: &str = "Running";
/// The phase of a hook that completed (a Job Complete, a Pod Succeeded, any other kind
/// once created).
pub(crate) const PHASE_SUCCEEDED: &str = "Succeeded";
/// The phase of a hook that could not be created or failed.
pub(crate) const PHASE_FAILED: &str = "Failed";

/// Helm's `release.HookExecution`: when a hook last ran and how it ended. Helm's own time
/// type writes an unset time as `""`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct HookRun {
    /// When the hook was created (RFC 3339), empty if it never ran.
    pub started_at: String,
    /// When its wait ended, empty while it runs.
    pub completed_at: String,
    /// [`PHASE_RUNNING`], [`PHASE_SUCCEEDED`], [`PHASE_FAILED`] or empty.
    pub phase: String,
}

impl HookRun {
    /// A run that starts now.
    pub(crate) fn started() -> HookRun {
        HookRun {
            started_at: jiff::Timestamp::now().to_string(),
            completed_at: String::new(),
            phase: PHASE_RUNNING.into(),
        }
    }

    /// This run, ended now in `phase`.
    pub(crate) fn completed(self, phase: &str) -> HookRun {
        HookRun { completed_at: jiff::Timestamp::now().to_string(), phase: phase.to_string(), ..self }
    }

    /// As Helm's JSON.
    fn to_json(&self) -> Value {
        json!({ "started_at": self.started_at, "completed_at": self.completed_at, "phase": self.phase })
    }
}

/// Records `run` as the `last_run` of `hook` among a release's stored hooks (those
/// [`release_hooks`] made; the one of the same template, kind and name).
pub(crate) fn record_run(stored: &mut [Value], hook: &Hook<'_>, run: &HookRun) {
    let kind = hook.object.gvk().kind;
    let same = |h: &&mut Value| {
        h.get("path").and_then(Value::as_str) == Some(hook.object.source.as_str())
            && h.get("kind").and_then(Value::as_str) == Some(kind.as_str())
            && h.get("name").and_then(Value::as_str) == Some(hook.object.name())
    };
    if let Some(entry) = stored.iter_mut().find(same).and_then(Value::as_object_mut) {
        entry.insert("last_run".into(), run.to_json());
    }
}

/// An annotation's comma-separated list.
fn list_annotation(object: &RenderedObject, key: &str) -> Vec<String> {
    object
        .object
        .pointer(&format!("/metadata/annotations/{}", key.replace('/', "~1")))
        .and_then(Value::as_str)
        .map(|v| v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default()
}

/// The hooks of `event` (`pre-install`, `post-upgrade`, ...) among `objects`, in the
/// order Helm runs them.
pub(crate) fn hooks_for<'a>(objects: &'a [RenderedObject], event: &str) -> Vec<Hook<'a>> {
    let mut hooks: Vec<Hook<'a>> = objects
        .iter()
        .filter(|o| list_annotation(o, "helm.sh/hook").iter().any(|e| e == event))
        .map(|object| {
            let weight = object
                .object
                .pointer("/metadata/annotations/helm.sh~1hook-weight")
                .and_then(Value::as_str)
                .and_then(|w| w.trim().parse().ok())
                .unwrap_or(0);
            let mut delete_policies = list_annotation(object, "helm.sh/hook-delete-policy");
            if delete_policies.is_empty() {
                delete_policies.push(BEFORE_HOOK_CREATION.to_string());
            }
            Hook { object, weight, delete_policies }
        })
        .collect();
    hooks.sort_by(|a, b| a.weight.cmp(&b.weight).then_with(|| a.object.name().cmp(b.object.name())));
    hooks
}

/// The hooks among `objects` as Helm's `release.Hook`s, for the stored release.
pub(crate) fn release_hooks(objects: &[RenderedObject]) -> Vec<Value> {
    objects
        .iter()
        .filter(|o| o.is_hook())
        .map(|object| {
            let manifest = object.text.splitn(3, '\n').nth(2).unwrap_or_default().trim_end_matches('\n');
            let weight = object
                .object
                .pointer("/metadata/annotations/helm.sh~1hook-weight")
                .and_then(Value::as_str)
                .and_then(|w| w.trim().parse::<i64>().ok())
                .unwrap_or(0);
            json!({
                "name": object.name(),
                "kind": object.gvk().kind,
                "path": object.source,
                "manifest": manifest,
                "events": list_annotation(object, "helm.sh/hook"),
                "last_run": HookRun::default().to_json(),
                "weight": weight,
                "delete_policies": list_annotation(object, "helm.sh/hook-delete-policy"),
            })
        })
        .collect()
}

/// The stored hooks back as rendered objects (`---\n# Source: PATH\n...` documents).
pub(crate) fn hooks_text(hooks: &[Value]) -> String {
    hooks
        .iter()
        .map(|h| {
            format!(
                "---\n# Source: {}\n{}\n",
                h.get("path").and_then(Value::as_str).unwrap_or_default(),
                h.get("manifest").and_then(Value::as_str).unwrap_or_default()
            )
        })
        .collect()
}

/// Helm's multierror text for one error, as `execHook` returns a failed wait.
pub(crate) fn one_error(message: &str) -> String {
    format!("1 error occurred:\n\t* {message}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_run_by_weight_then_name_with_helms_default_policy() {
        let text = "---\n# Source: c/templates/a.yaml\napiVersion: v1\nkind: Pod\nmetadata:\n  name: b\n  annotations:\n    helm.sh/hook: pre-install,pre-upgrade\n    helm.sh/hook-weight: \"5\"\n\
                    ---\n# Source: c/templates/b.yaml\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: a\n  annotations:\n    helm.sh/hook: pre-install\n    helm.sh/hook-weight: \"5\"\n    helm.sh/hook-delete-policy: hook-succeeded, hook-failed\n\
                    ---\n# Source: c/templates/c.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: z\n  annotations:\n    helm.sh/hook: pre-install\n    helm.sh/hook-weight: \"-1\"\n\
                    ---\n# Source: c/templates/d.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: post\n  annotations:\n    helm.sh/hook: post-install\n";
        let objects = crate::manifest::split(text).expect("splits");
        let hooks = hooks_for(&objects, "pre-install");
        let order: Vec<(&str, i64)> = hooks.iter().map(|h| (h.object.name(), h.weight)).collect();
        assert_eq!(order, [("z", -1), ("a", 5), ("b", 5)]);
        assert_eq!(hooks[1].delete_policies, ["hook-succeeded", "hook-failed"]);
        assert_eq!(hooks[2].delete_policies, [BEFORE_HOOK_CREATION]);
        assert_eq!(hooks_for(&objects, "pre-upgrade").len(), 1);

        let stored = release_hooks(&objects);
        assert_eq!(stored.len(), 4);
        assert_eq!(stored[1]["kind"], "Job");
        assert_eq!(stored[1]["events"], json!(["pre-install"]));
        let back = crate::manifest::split(&hooks_text(&stored)).expect("splits");
        assert_eq!(back, objects);

        // A run is recorded on its own hook only.
        let mut stored = stored;
        let run = HookRun::started();
        assert_eq!(run.phase, PHASE_RUNNING);
        let done = run.clone().completed(PHASE_SUCCEEDED);
        record_run(&mut stored, &hooks[1], &done);
        assert_eq!(stored[1]["last_run"]["phase"], "Succeeded");
        assert_eq!(stored[1]["last_run"]["started_at"], json!(run.started_at));
        assert!(!done.completed_at.is_empty());
        assert_eq!(stored[0]["last_run"], json!({ "started_at": "", "completed_at": "", "phase": "" }));
    }
}
