//! A small kustomize in Rust: renders a kustomization directory (the subset kubebuilder's
//! `config/` tree and its users need) into objects in kustomize's legacy output order, so the
//! CLI needs no `kubectl`/`kustomize` binary. Parsing and resource loading live here; the
//! transformers in `transform`, patches in `patch`.

mod patch;
mod transform;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

/// Why a kustomization could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum KustomizeError {
    /// The directory holds no `kustomization.yaml`, `kustomization.yml` or `Kustomization`.
    #[error("unable to find one of 'kustomization.yaml', 'kustomization.yml' or 'Kustomization' in directory '{}'", dir.display())]
    NoKustomization {
        /// Directory that was searched.
        dir: PathBuf,
    },
    /// A resource listed in a kustomization does not exist.
    #[error("{}: resource {entry:?}: '{}' does not exist", kustomization.display(), path.display())]
    MissingResource {
        /// Kustomization file listing it.
        kustomization: PathBuf,
        /// The entry as written.
        entry: String,
        /// The resolved path.
        path: PathBuf,
    },
    /// Reading a file failed.
    #[error("reading {}: {source}", path.display())]
    Io {
        /// File that failed.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not valid YAML (or not the expected shape).
    #[error("{}: {message}", path.display())]
    Yaml {
        /// File at fault.
        path: PathBuf,
        /// Parser message.
        message: String,
    },
    /// The kustomization has a field kustomize does not know (typically a typo).
    #[error("{}: invalid Kustomization: json: unknown field {field:?}", path.display())]
    UnknownField {
        /// Kustomization file.
        path: PathBuf,
        /// The unknown field.
        field: String,
    },
    /// The kustomization uses a kustomize feature this renderer does not implement.
    #[error("{}: field {field:?} is not supported by opkit's built-in kustomize", path.display())]
    Unsupported {
        /// Kustomization file.
        path: PathBuf,
        /// The field.
        field: String,
    },
    /// A field has the wrong shape, a resource is malformed, or two resources collide.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// Kustomization (or resource) file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A patch failed to apply or matched nothing.
    #[error("{}: patch {patch}: {message}", path.display())]
    Patch {
        /// Kustomization file.
        path: PathBuf,
        /// Which patch (path or `inline #n`).
        patch: String,
        /// What went wrong.
        message: String,
    },
    /// Kustomizations include each other in a cycle.
    #[error("cycle detected: {} is included from itself", dir.display())]
    Cycle {
        /// Directory that closes the cycle.
        dir: PathBuf,
    },
    /// Serialising objects to YAML failed.
    #[error("writing YAML: {0}")]
    Serialize(String),
}

/// Kustomization fields that exist in kustomize but are not implemented here.
const UNSUPPORTED: [&str; 17] = [
    "bases",
    "components",
    "configMapGenerator",
    "secretGenerator",
    "generatorOptions",
    "crds",
    "vars",
    "replacements",
    "transformers",
    "generators",
    "validators",
    "openapi",
    "helmCharts",
    "helmGlobals",
    "configurations",
    "sortOptions",
    "buildMetadata",
];

/// Fields understood by this renderer.
const KNOWN: [&str; 15] = [
    "apiVersion",
    "kind",
    "metadata",
    "resources",
    "namespace",
    "namePrefix",
    "nameSuffix",
    "labels",
    "commonLabels",
    "commonAnnotations",
    "images",
    "patches",
    "patchesStrategicMerge",
    "patchesJson6902",
    "replicas",
];

/// The parsed `kustomization.yaml`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Kustomization {
    resources: Vec<String>,
    namespace: Option<String>,
    name_prefix: Option<String>,
    name_suffix: Option<String>,
    labels: Vec<transform::LabelSet>,
    common_labels: Map<String, Value>,
    common_annotations: Map<String, Value>,
    images: Vec<transform::Image>,
    patches: Vec<patch::PatchEntry>,
    patches_strategic_merge: Vec<String>,
    patches_json6902: Vec<patch::PatchEntry>,
    replicas: Vec<transform::Replica>,
}

/// One object being rendered, with the (namespace, name) pairs it had before earlier renames
/// (kustomize matches patch targets and name references against those too).
#[derive(Debug, Clone)]
struct Res {
    obj: Value,
    previous: Vec<(String, String)>,
}

impl Res {
    fn kind(&self) -> &str {
        self.obj.get("kind").and_then(Value::as_str).unwrap_or_default()
    }
    fn name(&self) -> &str {
        self.obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
    }
    fn namespace(&self) -> &str {
        self.obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default()
    }
    /// API group from `apiVersion` (`""` for the core group).
    fn group(&self) -> &str {
        let av = self.obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        av.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
    }
    fn version(&self) -> &str {
        let av = self.obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        av.rsplit_once('/').map(|(_, v)| v).unwrap_or(av)
    }
    /// Whether `name`/`namespace` match the current or any previous identity.
    fn had_name(&self, name: &str) -> bool {
        self.name() == name || self.previous.iter().any(|(_, n)| n == name)
    }
}

/// Sets the image of every container whose image name (any tag) is `name`, as
/// `kustomize edit set image NAME=IMAGE` followed by a build does; returns how many
/// containers changed.
pub fn set_image(objs: &mut [Value], name: &str, image: &str) -> usize {
    transform::images_in(objs.iter_mut(), &[transform::Image::set(name, image)])
}

/// Renders the kustomization in `dir` (including nested kustomizations it lists) and returns the
/// objects in kustomize's legacy order.
pub fn build(dir: &Path) -> Result<Vec<Value>, KustomizeError> {
    let mut stack = Vec::new();
    let mut res = build_dir(dir, &mut stack)?;
    sort_legacy(&mut res);
    Ok(res.into_iter().map(|r| r.obj).collect())
}

/// Writes objects as a `---`-separated YAML stream (one document per object).
pub fn to_yaml_stream(objs: &[Value]) -> Result<String, KustomizeError> {
    let mut out = String::new();
    for (i, obj) in objs.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        let doc = serde_saphyr::to_string(obj).map_err(|e| KustomizeError::Serialize(e.to_string()))?;
        out.push_str(&doc);
        if !doc.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

fn find_kustomization(dir: &Path) -> Result<PathBuf, KustomizeError> {
    ["kustomization.yaml", "kustomization.yml", "Kustomization"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
        .ok_or_else(|| KustomizeError::NoKustomization { dir: dir.to_path_buf() })
}

fn read(path: &Path) -> Result<String, KustomizeError> {
    std::fs::read_to_string(path).map_err(|source| KustomizeError::Io { path: path.to_path_buf(), source })
}

/// Parses a (possibly multi-document) YAML text into its non-empty documents.
fn parse_docs(text: &str, path: &Path) -> Result<Vec<Value>, KustomizeError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text)
        .map_err(|e| KustomizeError::Yaml { path: path.to_path_buf(), message: e.to_string() })?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

fn load_kustomization(path: &Path) -> Result<Kustomization, KustomizeError> {
    let text = read(path)?;
    let doc = parse_docs(&text, path)?.into_iter().next().unwrap_or(Value::Object(Map::new()));
    let Value::Object(map) = &doc else {
        return Err(KustomizeError::Invalid {
            path: path.to_path_buf(),
            message: "kustomization is not a mapping".into(),
        });
    };
    for key in map.keys() {
        if UNSUPPORTED.contains(&key.as_str()) {
            return Err(KustomizeError::Unsupported { path: path.to_path_buf(), field: key.clone() });
        }
        if !KNOWN.contains(&key.as_str()) {
            return Err(KustomizeError::UnknownField { path: path.to_path_buf(), field: key.clone() });
        }
    }
    if let Some(kind) = map.get("kind").and_then(Value::as_str)
        && kind != "Kustomization"
    {
        return Err(KustomizeError::Invalid {
            path: path.to_path_buf(),
            message: format!("kind {kind:?} is not Kustomization (components are not supported)"),
        });
    }
    serde_json::from_value(doc)
        .map_err(|e| KustomizeError::Invalid { path: path.to_path_buf(), message: e.to_string() })
}

fn build_dir(dir: &Path, stack: &mut Vec<PathBuf>) -> Result<Vec<Res>, KustomizeError> {
    let canon = dir.canonicalize().map_err(|source| KustomizeError::Io { path: dir.to_path_buf(), source })?;
    if stack.contains(&canon) {
        return Err(KustomizeError::Cycle { dir: dir.to_path_buf() });
    }
    let kfile = find_kustomization(dir)?;
    let k = load_kustomization(&kfile)?;
    stack.push(canon);
    let mut res = Vec::new();
    for entry in &k.resources {
        res.extend(load_resource(dir, &kfile, entry, stack)?);
    }
    stack.pop();
    check_unique(&res, &kfile)?;

    patch::apply_strategic_merge_list(&mut res, &k.patches_strategic_merge, dir, &kfile)?;
    patch::apply_patches(&mut res, &k.patches, dir, &kfile)?;
    let before: Vec<(String, String)> = res.iter().map(|r| (r.namespace().to_string(), r.name().to_string())).collect();
    if let Some(ns) = &k.namespace {
        transform::set_namespace(&mut res, ns);
    }
    transform::prefix_suffix(&mut res, k.name_prefix.as_deref().unwrap_or(""), k.name_suffix.as_deref().unwrap_or(""));
    for (r, id) in res.iter_mut().zip(before) {
        if id != (r.namespace().to_string(), r.name().to_string()) && !r.previous.contains(&id) {
            r.previous.push(id);
        }
    }
    transform::labels(&mut res, &k.common_labels, &k.labels);
    transform::annotations(&mut res, &k.common_annotations);
    patch::apply_patches(&mut res, &k.patches_json6902, dir, &kfile)?;
    transform::replicas(&mut res, &k.replicas);
    transform::images(&mut res, &k.images);
    transform::fix_name_references(&mut res);
    check_unique(&res, &kfile)?;
    Ok(res)
}

fn load_resource(dir: &Path, kfile: &Path, entry: &str, stack: &mut Vec<PathBuf>) -> Result<Vec<Res>, KustomizeError> {
    if entry.contains("://") || entry.starts_with("github.com/") || entry.starts_with("git@") {
        return Err(KustomizeError::Invalid {
            path: kfile.to_path_buf(),
            message: format!("remote resource {entry:?} is not supported"),
        });
    }
    let path = clean_join(dir, entry);
    if path.is_dir() {
        return build_dir(&path, stack);
    }
    if !path.is_file() {
        return Err(KustomizeError::MissingResource {
            kustomization: kfile.to_path_buf(),
            entry: entry.to_string(),
            path,
        });
    }
    let mut out = Vec::new();
    for doc in parse_docs(&read(&path)?, &path)? {
        let items = match doc.get("kind").and_then(Value::as_str) {
            Some(k) if k.ends_with("List") && doc.get("items").is_some_and(Value::is_array) => {
                doc.get("items").and_then(Value::as_array).cloned().unwrap_or_default()
            }
            _ => vec![doc],
        };
        for obj in items {
            let res = Res { obj, previous: Vec::new() };
            if !res.obj.is_object() || res.kind().is_empty() || res.name().is_empty() {
                return Err(KustomizeError::Invalid {
                    path: path.clone(),
                    message: "every document must be an object with kind and metadata.name".into(),
                });
            }
            out.push(res);
        }
    }
    Ok(out)
}

/// Joins `rel` onto `dir` and removes `.` and `..` components lexically (for readable paths).
fn clean_join(dir: &Path, rel: &str) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in dir.join(rel).components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.components().next_back(), Some(Component::Normal(_))) => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// kustomize refuses two resources with the same id: group, version, kind, namespace and
/// name (its `ResId.Equals`); the samples of one kind in two versions are two resources.
fn check_unique(res: &[Res], kfile: &Path) -> Result<(), KustomizeError> {
    let mut seen = std::collections::BTreeSet::new();
    for r in res {
        let id = (r.group(), r.version(), r.kind(), r.namespace(), r.name());
        if !seen.insert(id) {
            return Err(KustomizeError::Invalid {
                path: kfile.to_path_buf(),
                message: format!(
                    "may not add resource with an already registered id: {}.{}/{} in namespace {:?}",
                    r.kind(),
                    r.version(),
                    r.name(),
                    r.namespace()
                ),
            });
        }
    }
    Ok(())
}

/// kustomize's `orderFirst` list (api/resid/gvk.go).
const ORDER_FIRST: [&str; 22] = [
    "Namespace",
    "ResourceQuota",
    "StorageClass",
    "CustomResourceDefinition",
    "ServiceAccount",
    "PodSecurityPolicy",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ConfigMap",
    "Secret",
    "Endpoints",
    "Service",
    "LimitRange",
    "PriorityClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
];

/// kustomize's `orderLast` list.
const ORDER_LAST: [&str; 2] = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"];

/// Sorts like kustomize's legacy order: kind rank, then `group_version_kind`, then
/// namespace and name.
fn sort_legacy(res: &mut [Res]) {
    let rank = |kind: &str| -> i64 {
        if let Some(i) = ORDER_FIRST.iter().position(|k| *k == kind) {
            i as i64 - ORDER_FIRST.len() as i64
        } else if let Some(i) = ORDER_LAST.iter().position(|k| *k == kind) {
            1 + i as i64
        } else {
            0
        }
    };
    let or = |s: &str, d: &str| if s.is_empty() { d.to_string() } else { s.to_string() };
    res.sort_by_cached_key(|r| {
        (
            rank(r.kind()),
            format!("{}_{}_{}", or(r.group(), "~G"), or(r.version(), "~V"), or(r.kind(), "~K")),
            or(r.namespace(), "~X"),
            r.name().to_string(),
        )
    });
}
