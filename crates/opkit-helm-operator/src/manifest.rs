//! A rendered chart split into its documents: `helm template`'s output is a series of
//! `---\n# Source: PATH\n...` documents; hooks (`helm.sh/hook`) are not part of a
//! release's manifest, as in Helm.

use kube::api::GroupVersionKind;
use serde_json::Value;

use crate::OperatorError;

/// One rendered object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RenderedObject {
    /// The template it came from (`nginx/templates/deployment.yaml`).
    pub source: String,
    /// The document as rendered, with its `---` and `# Source:` header.
    pub text: String,
    /// The object.
    pub object: Value,
}

impl RenderedObject {
    /// The object's group, version and kind.
    pub(crate) fn gvk(&self) -> GroupVersionKind {
        let api_version = self.object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = self.object.get("kind").and_then(Value::as_str).unwrap_or_default();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        GroupVersionKind::gvk(group, version, kind)
    }

    /// `metadata.name`.
    pub(crate) fn name(&self) -> &str {
        self.object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
    }

    /// `metadata.namespace`, if written in the template.
    pub(crate) fn namespace(&self) -> Option<&str> {
        self.object.pointer("/metadata/namespace").and_then(Value::as_str).filter(|n| !n.is_empty())
    }

    /// Whether this is a hook (Helm keeps hooks out of the manifest).
    pub(crate) fn is_hook(&self) -> bool {
        self.object.pointer("/metadata/annotations/helm.sh~1hook").is_some()
    }
}

/// The objects of a rendered chart (or of a release's manifest), hooks included, in
/// Helm's order.
pub(crate) fn split(rendered: &str) -> Result<Vec<RenderedObject>, OperatorError> {
    let mut objects = Vec::new();
    for chunk in rendered.split("---\n# Source: ").skip(1) {
        let (source, content) = chunk.split_once('\n').unwrap_or((chunk, ""));
        let object: Value = serde_saphyr::from_str(content)
            .map_err(|e| OperatorError::Manifest(format!("{source}: the rendered document is not YAML: {e}")))?;
        if object.is_null() {
            continue;
        }
        if object.get("kind").and_then(Value::as_str).is_none_or(str::is_empty)
            || object.get("apiVersion").and_then(Value::as_str).is_none_or(str::is_empty)
        {
            return Err(OperatorError::Manifest(format!("{source}: the object has no apiVersion or kind")));
        }
        if object.pointer("/metadata/name").and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(OperatorError::Manifest(format!("{source}: the object has no metadata.name")));
        }
        let text = format!("---\n# Source: {source}\n{}", content.trim_end_matches('\n'));
        objects.push(RenderedObject { source: source.to_string(), text: format!("{text}\n"), object });
    }
    Ok(objects)
}

/// A release's manifest: its non-hook documents, as Helm stores it.
pub(crate) fn manifest_of(objects: &[RenderedObject]) -> String {
    objects.iter().filter(|o| !o.is_hook()).map(|o| o.text.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_documents_and_keeps_hooks_out_of_the_manifest() {
        let rendered = "---\n# Source: c/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n# Source: c/templates/dep.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: b\n  namespace: x\n---\n# Source: c/templates/test.yaml\napiVersion: v1\nkind: Pod\nmetadata:\n  name: t\n  annotations:\n    helm.sh/hook: test\n";
        let objects = split(rendered).expect("valid");
        assert_eq!(objects.len(), 3);
        assert_eq!(objects[1].gvk(), GroupVersionKind::gvk("apps", "v1", "Deployment"));
        assert_eq!(objects[1].namespace(), Some("x"));
        assert!(objects[2].is_hook());
        let manifest = manifest_of(&objects);
        assert!(manifest.starts_with("---\n# Source: c/templates/cm.yaml\napiVersion: v1\n"));
        assert!(!manifest.contains("test.yaml"));
        assert_eq!(split(&manifest).expect("valid").len(), 2);
    }

    #[test]
    fn rejects_objects_without_kind() {
        let err = split("---\n# Source: c/templates/x.yaml\nmetadata:\n  name: a\n").unwrap_err();
        assert_eq!(err.to_string(), "c/templates/x.yaml: the object has no apiVersion or kind");
    }
}
