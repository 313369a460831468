//! Reading a bundle directory (`manifests/` + `metadata/annotations.yaml`, registry+v1):
//! the CSV, the other manifests, and the package and channels its annotations name. This
//! is the only place the OLM crate reads a bundle from disk, so it can be replaced by the
//! bundle model of `opkit-olm-bundle` (`Bundle::load`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::OlmError;

/// The annotation naming the bundle's package.
pub const PACKAGE_ANNOTATION: &str = "operators.operatorframework.io.bundle.package.v1";
/// The annotation listing the bundle's channels (comma-separated).
pub const CHANNELS_ANNOTATION: &str = "operators.operatorframework.io.bundle.channels.v1";
/// The annotation naming the package's default channel.
pub const DEFAULT_CHANNEL_ANNOTATION: &str = "operators.operatorframework.io.bundle.channel.default.v1";

/// One bundle, as read from its directory.
#[derive(Debug, Clone)]
pub struct BundleDir {
    /// Where it was read from.
    pub path: PathBuf,
    /// The package (from `metadata/annotations.yaml`).
    pub package: String,
    /// The channels it is in.
    pub channels: Vec<String>,
    /// The package's default channel, when the bundle names one.
    pub default_channel: Option<String>,
    /// The ClusterServiceVersion.
    pub csv: Value,
    /// Every other manifest (CRDs, Services, ConfigMaps, ...), in file order.
    pub objects: Vec<Value>,
    /// `metadata/dependencies.yaml`'s entries (`type`, `value`).
    pub dependencies: Vec<Value>,
}

impl BundleDir {
    /// Reads the bundle in `dir`.
    pub fn load(dir: &Path) -> Result<BundleDir, OlmError> {
        let bad = |message: String| OlmError::Bundle { path: dir.to_path_buf(), message };
        let annotations_path = dir.join("metadata/annotations.yaml");
        let text = read(&annotations_path)?;
        let doc: Value = serde_saphyr::from_str(&text).map_err(|e| bad(format!("metadata/annotations.yaml: {e}")))?;
        let annotation = |key: &str| doc.pointer("/annotations").and_then(|a| a.get(key)).and_then(Value::as_str);
        let package = annotation(PACKAGE_ANNOTATION)
            .ok_or_else(|| bad(format!("metadata/annotations.yaml has no {PACKAGE_ANNOTATION}")))?
            .to_string();
        let channels: Vec<String> = annotation(CHANNELS_ANNOTATION)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect();
        if channels.is_empty() {
            return Err(bad(format!("metadata/annotations.yaml has no {CHANNELS_ANNOTATION}")));
        }
        let default_channel = annotation(DEFAULT_CHANNEL_ANNOTATION).map(str::to_string);
        let dependencies = match std::fs::read_to_string(dir.join("metadata/dependencies.yaml")) {
            Ok(text) => {
                let doc: Value =
                    serde_saphyr::from_str(&text).map_err(|e| bad(format!("metadata/dependencies.yaml: {e}")))?;
                doc.get("dependencies").and_then(Value::as_array).cloned().unwrap_or_default()
            }
            Err(_) => Vec::new(),
        };
        let manifests = dir.join("manifests");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&manifests)
            .map_err(|source| OlmError::Read { path: manifests.clone(), source })?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml" || e == "json"))
            .collect();
        files.sort();
        let mut csv = None;
        let mut objects = Vec::new();
        for file in files {
            let text = read(&file)?;
            let docs: Vec<Value> =
                serde_saphyr::from_multiple(&text).map_err(|e| bad(format!("{}: {e}", file.display())))?;
            for mut doc in docs.into_iter().filter(|d| d.is_object()) {
                if doc.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion") {
                    // OLM reads the CSV as its own type, whatever apiVersion the file says.
                    doc["apiVersion"] = Value::String("operators.coreos.com/v1alpha1".into());
                    if csv.is_some() {
                        return Err(bad("manifests/ holds more than one ClusterServiceVersion".into()));
                    }
                    csv = Some(doc);
                } else {
                    objects.push(crate::crd_v1beta1::to_v1(&doc));
                }
            }
        }
        let csv = csv.ok_or_else(|| bad("manifests/ holds no ClusterServiceVersion".into()))?;
        if csv.pointer("/metadata/name").and_then(Value::as_str).is_none() {
            return Err(bad("the ClusterServiceVersion has no metadata.name".into()));
        }
        Ok(BundleDir { path: dir.to_path_buf(), package, channels, default_channel, csv, objects, dependencies })
    }

    /// The CSV's name.
    pub fn csv_name(&self) -> &str {
        self.csv.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
    }
}

fn read(path: &Path) -> Result<String, OlmError> {
    std::fs::read_to_string(path).map_err(|source| OlmError::Read { path: path.to_path_buf(), source })
}
