//! Patches: `patches` (file or inline, strategic-merge or JSON6902, optional `target`
//! selector), legacy `patchesStrategicMerge` and `patchesJson6902`. Strategic merge and
//! label selectors are `opkit_apimachinery`'s, the same the API server uses.

use std::path::Path;

use opkit_apimachinery::patch::{ListSemantics, strategic_merge_patch};
use opkit_apimachinery::selector::LabelSelector;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{KustomizeError, Res, parse_docs, read};

/// One entry of `patches:` / `patchesJson6902:`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct PatchEntry {
    path: Option<String>,
    patch: Option<String>,
    target: Option<Target>,
    options: Option<Map<String, Value>>,
}

/// A patch `target` selector.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub(super) struct Target {
    group: Option<String>,
    version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
    label_selector: Option<String>,
    annotation_selector: Option<String>,
}

fn perr(kfile: &Path, patch: &str, message: impl Into<String>) -> KustomizeError {
    KustomizeError::Patch { path: kfile.to_path_buf(), patch: patch.to_string(), message: message.into() }
}

/// A [`Target`] with its label and annotation selectors parsed (kube's label-selector grammar,
/// as kustomize uses for both).
struct TargetMatcher<'a> {
    target: &'a Target,
    labels: Option<LabelSelector>,
    annotations: Option<LabelSelector>,
}

impl Target {
    /// Parses the selectors; an invalid one is an error of the patch `label` in `kfile`.
    fn matcher(&self, kfile: &Path, label: &str) -> Result<TargetMatcher<'_>, KustomizeError> {
        let parse = |what: &str, sel: &Option<String>| {
            sel.as_deref().map(LabelSelector::parse).transpose().map_err(|e| {
                perr(kfile, label, format!("invalid {what} {:?}: {e}", sel.as_deref().unwrap_or_default()))
            })
        };
        Ok(TargetMatcher {
            target: self,
            labels: parse("labelSelector", &self.label_selector)?,
            annotations: parse("annotationSelector", &self.annotation_selector)?,
        })
    }
}

impl TargetMatcher<'_> {
    fn matches(&self, r: &Res) -> bool {
        let t = self.target;
        let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        let selects = |sel: &Option<LabelSelector>, pointer: &str| {
            sel.as_ref().is_none_or(|s| s.matches(r.obj.pointer(pointer).and_then(Value::as_object)))
        };
        eq(&t.group, r.group())
            && eq(&t.version, r.version())
            && eq(&t.kind, r.kind())
            && t.name.as_deref().is_none_or(|n| r.had_name(n))
            && t.namespace.as_deref().is_none_or(|n| r.namespace() == n || r.previous.iter().any(|(pn, _)| pn == n))
            && selects(&self.labels, "/metadata/labels")
            && selects(&self.annotations, "/metadata/annotations")
    }
}

/// Applies `patchesStrategicMerge` entries (file paths or inline YAML).
pub(super) fn apply_strategic_merge_list(
    res: &mut [Res],
    entries: &[String],
    dir: &Path,
    kfile: &Path,
) -> Result<(), KustomizeError> {
    for (i, entry) in entries.iter().enumerate() {
        let trimmed = entry.trim();
        let (label, text) = if !trimmed.contains('\n') && !trimmed.contains(": ") {
            let path = dir.join(trimmed);
            if !path.is_file() {
                return Err(perr(kfile, trimmed, format!("'{}' does not exist", path.display())));
            }
            (trimmed.to_string(), read(&path)?)
        } else {
            (format!("inline #{}", i + 1), entry.clone())
        };
        for doc in parse_docs(&text, kfile)? {
            apply_smp_doc(res, &doc, None, kfile, &label)?;
        }
    }
    Ok(())
}

/// Applies `patches` (or `patchesJson6902`) entries.
pub(super) fn apply_patches(
    res: &mut [Res],
    entries: &[PatchEntry],
    dir: &Path,
    kfile: &Path,
) -> Result<(), KustomizeError> {
    for (i, entry) in entries.iter().enumerate() {
        if entry.options.as_ref().is_some_and(|o| !o.is_empty()) {
            return Err(perr(kfile, &format!("#{}", i + 1), "patch options are not supported"));
        }
        let (label, text) = match (&entry.path, &entry.patch) {
            (Some(p), None) => {
                let path = dir.join(p);
                if !path.is_file() {
                    return Err(perr(kfile, p, format!("'{}' does not exist", path.display())));
                }
                (p.clone(), read(&path)?)
            }
            (None, Some(inline)) => (format!("inline #{}", i + 1), inline.clone()),
            _ => return Err(perr(kfile, &format!("#{}", i + 1), "exactly one of path and patch must be set")),
        };
        let docs = parse_docs(&text, kfile)?;
        let is_json6902 = docs.len() == 1 && docs[0].is_array();
        if is_json6902 {
            let ops: json_patch::Patch = serde_json::from_value(docs[0].clone())
                .map_err(|e| perr(kfile, &label, format!("invalid JSON6902 patch: {e}")))?;
            let Some(target) = &entry.target else {
                return Err(perr(kfile, &label, "must specify a target for a JSON6902 patch"));
            };
            let target = target.matcher(kfile, &label)?;
            let mut matched = false;
            for r in res.iter_mut().filter(|r| target.matches(r)) {
                matched = true;
                json_patch::patch(&mut r.obj, &ops)
                    .map_err(|e| perr(kfile, &label, format!("{}/{}: {e}", r.kind(), r.name())))?;
            }
            if !matched {
                return Err(perr(kfile, &label, "target matches no resource"));
            }
        } else {
            for doc in &docs {
                apply_smp_doc(res, doc, entry.target.as_ref(), kfile, &label)?;
            }
        }
    }
    Ok(())
}

/// Applies one strategic-merge patch document: to the `target` matches when given, otherwise to
/// the object with the patch's own kind/name (and namespace, when set).
fn apply_smp_doc(
    res: &mut [Res],
    doc: &Value,
    target: Option<&Target>,
    kfile: &Path,
    label: &str,
) -> Result<(), KustomizeError> {
    if !doc.is_object() {
        return Err(perr(kfile, label, "a strategic-merge patch must be a mapping"));
    }
    let pr = Res { obj: doc.clone(), previous: Vec::new() };
    let target = target.map(|t| t.matcher(kfile, label)).transpose()?;
    let mut matched = 0;
    for r in res.iter_mut() {
        let hit = match &target {
            Some(t) => t.matches(r),
            None => {
                pr.kind() == r.kind()
                    && r.had_name(pr.name())
                    && (pr.namespace().is_empty() || pr.namespace() == r.namespace())
                    && (pr.group().is_empty() || pr.group() == r.group())
            }
        };
        if !hit {
            continue;
        }
        matched += 1;
        let mut patch = doc.clone();
        if target.is_some()
            && let Some(m) = patch.as_object_mut()
        {
            // With an explicit target the patch's own identity must not rename the object.
            m.remove("apiVersion");
            m.remove("kind");
            if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("name");
                meta.remove("namespace");
            }
        }
        let lists = ListSemantics::for_builtin(r.group(), r.kind());
        r.obj = strategic_merge_patch(&r.obj, &patch, &lists)
            .map_err(|e| perr(kfile, label, format!("{}/{}: {e}", r.kind(), r.name())))?;
    }
    if matched == 0 {
        let what = if target.is_some() { "target".to_string() } else { format!("{}/{}", pr.kind(), pr.name()) };
        return Err(perr(kfile, label, format!("no matches for {what}; failed to find unique target for patch")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn res(obj: Value) -> Res {
        Res { obj, previous: Vec::new() }
    }

    fn target(label_selector: &str) -> Target {
        Target { label_selector: Some(label_selector.to_string()), ..Target::default() }
    }

    #[test]
    fn label_selector_targets_set_based_requirements() {
        let r = res(json!({"kind": "Deployment", "metadata": {"name": "d", "labels": {"env": "b", "tier": "web"}}}));
        let matches = |sel: &str| target(sel).matcher(Path::new("k.yaml"), "p").unwrap().matches(&r);
        assert!(matches("env in (a,b)"));
        assert!(matches("env in (a,b),tier"));
        assert!(!matches("env in (a,c)"));
        assert!(matches("env notin (a,c),!missing"));
        assert!(matches("env=b,tier!=db"));
        assert!(!matches("missing"));
        assert!(target("env in (a").matcher(Path::new("k.yaml"), "p").is_err());
    }

    #[test]
    fn strategic_merge_uses_merge_keys_and_directives() {
        let mut resources = vec![res(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "manager", "image": "a", "args": ["--x"], "env": [{"name": "A", "value": "1"}]},
                {"name": "sidecar", "image": "s"}
            ], "tolerations": [{"key": "k"}], "nodeSelector": {"a": "b"}}}}}))];
        let patch = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "manager", "args": ["--y"], "env": [{"name": "B", "value": "2"}]},
                {"name": "sidecar", "$patch": "delete"},
                {"name": "new", "image": "n"}
            ], "tolerations": [{"key": "other"}], "nodeSelector": null}}}});
        apply_smp_doc(&mut resources, &patch, None, Path::new("k.yaml"), "p").unwrap();
        assert_eq!(
            resources[0].obj["spec"]["template"]["spec"],
            json!({"containers": [
                {"name": "manager", "image": "a", "args": ["--y"], "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                {"name": "new", "image": "n"}
            ], "tolerations": [{"key": "other"}]})
        );
    }
}
