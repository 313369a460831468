//! A bundle directory (`manifests/`, `metadata/annotations.yaml`): [`Bundle::load`] reads
//! one as operator-framework's bundle loader does, and [`Bundle::render_manifests`] lays one
//! out as `operator-sdk generate bundle` writes it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::annotations::{self, AnnotationsFile, DependenciesFile};
use crate::crd::BundleCrd;
use crate::csv::{CSV_KIND, ClusterServiceVersion};
use crate::error::BundleError;
use crate::yaml;

/// The default manifests directory of a bundle.
pub(crate) const MANIFESTS_DIR: &str = "manifests";
/// The default metadata directory of a bundle.
pub(crate) const METADATA_DIR: &str = "metadata";
/// The annotations file in the metadata directory.
pub(crate) const ANNOTATIONS_FILE: &str = "annotations.yaml";
/// The dependencies file in the metadata directory.
pub(crate) const DEPENDENCIES_FILE: &str = "dependencies.yaml";

/// An object of `manifests/` that is neither the CSV nor a CRD (a Service, a ConfigMap, a
/// ClusterRole, ...), which OLM creates next to the operator.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleObject {
    /// The file it was read from (empty for an object built in memory).
    pub file: PathBuf,
    /// The object.
    pub object: Value,
}

impl BundleObject {
    /// `apiVersion`, or `""`.
    pub fn api_version(&self) -> &str {
        self.object.get("apiVersion").and_then(Value::as_str).unwrap_or_default()
    }

    /// `kind`, or `""`.
    pub fn kind(&self) -> &str {
        self.object.get("kind").and_then(Value::as_str).unwrap_or_default()
    }

    /// `metadata.name`, or `""`.
    pub fn name(&self) -> &str {
        self.object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
    }
}

/// An OLM bundle (`registry+v1`): one ClusterServiceVersion, the CRDs it owns, other
/// objects, and the metadata naming its package and channels.
///
/// This is the one bundle reader of the workspace: validation, scorecard and OLM on the
/// local cluster all start from [`Bundle::load`].
#[derive(Debug, Clone, PartialEq)]
pub struct Bundle {
    /// The bundle's root directory (holding `manifests/` and `metadata/`).
    pub dir: PathBuf,
    /// The directory the manifests were read from.
    pub manifests_dir: PathBuf,
    /// The CSV, typed.
    pub csv: ClusterServiceVersion,
    /// The CSV as read, for checks on fields the types do not keep.
    pub csv_object: Value,
    /// The file the CSV was read from.
    pub csv_file: PathBuf,
    /// The CRDs, in file-name order.
    pub crds: Vec<BundleCrd>,
    /// Every other object, in file-name order.
    pub objects: Vec<BundleObject>,
    /// `metadata/annotations.yaml`, when present.
    pub annotations: Option<AnnotationsFile>,
    /// The file the annotations were read from.
    pub annotations_file: Option<PathBuf>,
    /// `metadata/dependencies.yaml`, when present.
    pub dependencies: Option<DependenciesFile>,
}

impl Bundle {
    /// Reads the bundle in `dir`.
    ///
    /// `dir` is a bundle root (its manifests in `manifests/`, or where the annotations'
    /// `operators.operatorframework.io.bundle.manifests.v1` says; its annotations in
    /// `metadata/annotations.yaml`), or a directory of manifests alone. Each manifest file
    /// holds one object (the first YAML document, as operator-framework reads it); hidden
    /// files and subdirectories are refused, as are a missing CSV and a second one.
    pub fn load(dir: impl AsRef<Path>) -> Result<Bundle, BundleError> {
        let dir = dir.as_ref().to_path_buf();
        if !dir.is_dir() {
            return Err(BundleError::Io {
                path: dir,
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
            });
        }
        let annotations_file = dir.join(METADATA_DIR).join(ANNOTATIONS_FILE);
        let annotations = if annotations_file.is_file() {
            let text = read(&annotations_file)?;
            let file: AnnotationsFile = serde_saphyr::from_str(&text).map_err(|e| BundleError::Parse {
                path: annotations_file.clone(),
                message: format!("unable to load the annotations file: {e}"),
            })?;
            Some(file)
        } else {
            None
        };
        let dependencies_file = dir.join(METADATA_DIR).join(DEPENDENCIES_FILE);
        let dependencies = if dependencies_file.is_file() {
            let text = read(&dependencies_file)?;
            let file: DependenciesFile = serde_saphyr::from_str(&text)
                .map_err(|e| BundleError::Parse { path: dependencies_file.clone(), message: e.to_string() })?;
            Some(file)
        } else {
            None
        };
        let declared = annotations
            .as_ref()
            .map(|a| a.get(annotations::MANIFESTS).trim_end_matches('/'))
            .filter(|m| !m.is_empty())
            .unwrap_or(MANIFESTS_DIR);
        let manifests_dir = if dir.join(declared).is_dir() { dir.join(declared) } else { dir.clone() };
        let mut bundle = Bundle::read_manifests(&dir, &manifests_dir)?;
        bundle.annotations_file = annotations.is_some().then_some(annotations_file);
        bundle.annotations = annotations;
        bundle.dependencies = dependencies;
        Ok(bundle)
    }

    fn read_manifests(dir: &Path, manifests_dir: &Path) -> Result<Bundle, BundleError> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(manifests_dir)
            .map_err(|source| BundleError::Io { path: manifests_dir.to_path_buf(), source })?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(|source| BundleError::Io { path: manifests_dir.to_path_buf(), source })?;
        entries.sort();
        let reading_root = manifests_dir == dir;
        let mut csv: Option<(PathBuf, Value)> = None;
        let mut crds = Vec::new();
        let mut objects = Vec::new();
        for path in entries {
            let hidden = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
            if path.is_dir() {
                // A bundle root read as its own manifests directory has metadata/ and
                // friends beside the manifests; a real manifests directory may not.
                if reading_root || hidden {
                    continue;
                }
                return Err(BundleError::Layout { path, message: "bundle manifests dir contains directory" });
            }
            if hidden {
                if reading_root {
                    continue;
                }
                return Err(BundleError::Layout { path, message: "bundle manifests dir has hidden file" });
            }
            let text = read(&path)?;
            let object = match yaml::first_document(&text) {
                Ok(Some(object)) => object,
                Ok(None) if reading_root => continue,
                Ok(None) => continue,
                Err(_) if reading_root => continue,
                Err(message) => {
                    return Err(BundleError::Parse { path, message: format!("unable to decode object: {message}") });
                }
            };
            match object.get("kind").and_then(Value::as_str) {
                Some(CSV_KIND) => {
                    if let Some((first, _)) = &csv {
                        return Err(BundleError::MultipleCsvs { first: first.clone(), second: path });
                    }
                    csv = Some((path, object));
                }
                Some("CustomResourceDefinition") => crds.push(BundleCrd::from_object(path, object)),
                _ if reading_root => {
                    if object.get("kind").is_some() && object.get("apiVersion").is_some() {
                        objects.push(BundleObject { file: path, object });
                    }
                }
                _ => objects.push(BundleObject { file: path, object }),
            }
        }
        let Some((csv_file, csv_object)) = csv else { return Err(BundleError::NoCsv { dir: dir.to_path_buf() }) };
        let typed: ClusterServiceVersion = serde_json::from_value(csv_object.clone())
            .map_err(|e| BundleError::Parse { path: csv_file.clone(), message: format!("unable to parse CSV: {e}") })?;
        Ok(Bundle {
            dir: dir.to_path_buf(),
            manifests_dir: manifests_dir.to_path_buf(),
            csv: typed,
            csv_object,
            csv_file,
            crds,
            objects,
            annotations: None,
            annotations_file: None,
            dependencies: None,
        })
    }

    /// The package, from the annotations.
    pub fn package(&self) -> Option<&str> {
        self.annotations.as_ref().map(AnnotationsFile::package).filter(|p| !p.is_empty())
    }

    /// The channels, from the annotations.
    pub fn channels(&self) -> Vec<String> {
        self.annotations.as_ref().map(AnnotationsFile::channels).unwrap_or_default()
    }

    /// The default channel: the annotation, else the only channel.
    pub fn default_channel(&self) -> Option<String> {
        let annotations = self.annotations.as_ref()?;
        if let Some(channel) = annotations.default_channel() {
            return Some(channel.to_string());
        }
        match annotations.channels().as_slice() {
            [only] => Some(only.clone()),
            _ => None,
        }
    }

    /// The CRD named `name` (`<plural>.<group>`).
    pub fn crd(&self, name: &str) -> Option<&BundleCrd> {
        self.crds.iter().find(|c| c.name == name)
    }

    /// The typed CSV as JSON (what a writer emits).
    pub fn csv_json(&self) -> Result<Value, BundleError> {
        serde_json::to_value(&self.csv)
            .map_err(|e| BundleError::Serialize { what: "the ClusterServiceVersion".into(), message: e.to_string() })
    }
}

impl Bundle {
    /// Lays out this bundle's manifests as operator-sdk names them: the CSV as
    /// `<package>.clusterserviceversion.yaml`, each CRD as `<group>_<plural>.yaml`, every
    /// other object as `<name>_<group>_<version>_<kind>.yaml` (core objects without the
    /// group, all lower-case), each as sigs.k8s.io/yaml writes it.
    pub fn render_manifests(&self, package: &str) -> Result<Vec<(PathBuf, String)>, BundleError> {
        let mut files = Vec::new();
        let csv = self.csv_json()?;
        files.push((PathBuf::from(format!("{package}.clusterserviceversion.yaml")), yaml::to_yaml(&csv)));
        for crd in &self.crds {
            let name = format!("{}_{}.yaml", crd.group, crd.plural);
            files.push((PathBuf::from(name), yaml::to_yaml(&crd.object)));
        }
        for object in &self.objects {
            let (group, version) = match object.api_version().split_once('/') {
                Some((group, version)) => (group, version),
                None => ("", object.api_version()),
            };
            let mut name = object.name().to_string();
            for part in [group, version, object.kind()] {
                if !part.is_empty() {
                    name.push('_');
                    name.push_str(part);
                }
            }
            files.push((PathBuf::from(format!("{}.yaml", name.to_lowercase())), yaml::to_yaml(&object.object)));
        }
        Ok(files)
    }
}

fn read(path: &Path) -> Result<String, BundleError> {
    std::fs::read_to_string(path).map_err(|source| BundleError::Io { path: path.to_path_buf(), source })
}
