//! Patches: `patches` (file or inline, strategic-merge or JSON6902, optional `target`
//! selector), legacy `patchesStrategicMerge` and `patchesJson6902`.

use std::path::Path;

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

/// Whether a `k=v,k2!=v2,k3` selector matches `labels`.
fn selector_matches(sel: &str, labels: Option<&Value>) -> bool {
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    sel.split(',').map(str::trim).filter(|s| !s.is_empty()).all(|term| {
        if let Some((k, v)) = term.split_once("!=") {
            get(k.trim()) != Some(v.trim())
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            get(k.trim()) == Some(v.trim())
        } else if let Some(k) = term.strip_prefix('!') {
            get(k.trim()).is_none()
        } else {
            get(term).is_some()
        }
    })
}

impl Target {
    fn matches(&self, r: &Res) -> bool {
        let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        eq(&self.group, r.group())
            && eq(&self.version, r.version())
            && eq(&self.kind, r.kind())
            && self.name.as_deref().is_none_or(|n| r.had_name(n))
            && self.namespace.as_deref().is_none_or(|n| r.namespace() == n || r.previous.iter().any(|(pn, _)| pn == n))
            && self.label_selector.as_deref().is_none_or(|s| selector_matches(s, r.obj.pointer("/metadata/labels")))
            && self
                .annotation_selector
                .as_deref()
                .is_none_or(|s| selector_matches(s, r.obj.pointer("/metadata/annotations")))
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
    let mut matched = 0;
    for r in res.iter_mut() {
        let hit = match target {
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
        strategic_merge(&mut r.obj, &patch, "");
    }
    if matched == 0 {
        let what = if target.is_some() { "target".to_string() } else { format!("{}/{}", pr.kind(), pr.name()) };
        return Err(perr(kfile, label, format!("no matches for {what}; failed to find unique target for patch")));
    }
    Ok(())
}

/// The merge key of a list field, when kustomize merges it by key rather than replacing it.
fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    match field {
        "containers" | "initContainers" | "ephemeralContainers" | "env" | "volumes" | "imagePullSecrets" => {
            Some("name")
        }
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "ports" => {
            if items.iter().any(|i| i.get("containerPort").is_some()) {
                Some("containerPort")
            } else {
                Some("port")
            }
        }
        _ => None,
    }
}

fn directive(v: &Value) -> Option<&str> {
    v.get("$patch").and_then(Value::as_str)
}

/// Strategic merge of `patch` into `target`: maps merge recursively, `null` deletes a key,
/// `$patch: replace|delete` directives, keyed lists merge by their merge key, other lists replace.
pub(super) fn strategic_merge(target: &mut Value, patch: &Value, field: &str) {
    match (target, patch) {
        (t @ Value::Object(_), Value::Object(p)) => {
            if directive(patch) == Some("replace") {
                let mut p = p.clone();
                p.remove("$patch");
                *t = Value::Object(p);
                return;
            }
            let Some(tm) = t.as_object_mut() else { return };
            for (k, v) in p {
                if k == "$patch" {
                    continue;
                }
                if v.is_null() || directive(v) == Some("delete") {
                    tm.remove(k);
                } else if let Some(existing) = tm.get_mut(k) {
                    strategic_merge(existing, v, k);
                } else {
                    let mut v = v.clone();
                    strip_directives(&mut v);
                    tm.insert(k.clone(), v);
                }
            }
        }
        (Value::Array(t), Value::Array(p)) => {
            let all: Vec<Value> = t.iter().chain(p.iter()).cloned().collect();
            let Some(key) = merge_key(field, &all) else {
                *t = p.iter().filter(|i| directive(i).is_none()).cloned().collect();
                return;
            };
            for item in p {
                let kv = item.get(key).cloned();
                let pos = kv.as_ref().and_then(|kv| t.iter().position(|e| e.get(key) == Some(kv)));
                match (directive(item), pos) {
                    (Some("delete"), Some(i)) => {
                        t.remove(i);
                    }
                    (Some("delete"), None) => {}
                    (_, Some(i)) => strategic_merge(&mut t[i], item, ""),
                    (_, None) => {
                        let mut item = item.clone();
                        strip_directives(&mut item);
                        t.push(item);
                    }
                }
            }
        }
        (t, p) => {
            let mut p = p.clone();
            strip_directives(&mut p);
            *t = p;
        }
    }
}

fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("$patch");
            m.values_mut().for_each(strip_directives);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_by_name_and_deletes() {
        let mut t = json!({"spec": {"containers": [
            {"name": "manager", "image": "a", "args": ["--x"], "env": [{"name": "A", "value": "1"}]},
            {"name": "sidecar", "image": "s"}
        ], "tolerations": [{"key": "k"}]}});
        let p = json!({"spec": {"containers": [
            {"name": "manager", "args": ["--y"], "env": [{"name": "B", "value": "2"}]},
            {"name": "sidecar", "$patch": "delete"},
            {"name": "new", "image": "n"}
        ], "tolerations": [{"key": "other"}], "nodeSelector": null}});
        strategic_merge(&mut t, &p, "");
        assert_eq!(
            t,
            json!({"spec": {"containers": [
                {"name": "manager", "image": "a", "args": ["--y"], "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                {"name": "new", "image": "n"}
            ], "tolerations": [{"key": "other"}]}})
        );
    }

    #[test]
    fn selectors() {
        let labels = json!({"app": "x", "tier": "web"});
        assert!(selector_matches("app=x,tier", Some(&labels)));
        assert!(selector_matches("app==x,tier!=db,!missing", Some(&labels)));
        assert!(!selector_matches("app=y", Some(&labels)));
        assert!(!selector_matches("app", None));
    }
}
