//! `metadata/annotations.yaml`: the bundle's package, channels and layout, as
//! `operators.operatorframework.io.*` keys; and `metadata/dependencies.yaml`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The package the bundle belongs to.
pub const PACKAGE: &str = "operators.operatorframework.io.bundle.package.v1";
/// Comma-separated channels the bundle is in.
pub const CHANNELS: &str = "operators.operatorframework.io.bundle.channels.v1";
/// The package's default channel.
pub const DEFAULT_CHANNEL: &str = "operators.operatorframework.io.bundle.channel.default.v1";
/// The bundle's media type (`registry+v1`).
pub const MEDIATYPE: &str = "operators.operatorframework.io.bundle.mediatype.v1";
/// Where the manifests live in the bundle (`manifests/`).
pub const MANIFESTS: &str = "operators.operatorframework.io.bundle.manifests.v1";
/// Where the metadata lives in the bundle (`metadata/`).
pub const METADATA: &str = "operators.operatorframework.io.bundle.metadata.v1";
/// The tool that built the bundle.
pub const METRICS_BUILDER: &str = "operators.operatorframework.io.metrics.builder";
/// The metrics media type (`metrics+v1`).
pub const METRICS_MEDIATYPE: &str = "operators.operatorframework.io.metrics.mediatype.v1";
/// The project layout (plugin key) the bundle was built from.
pub const METRICS_PROJECT_LAYOUT: &str = "operators.operatorframework.io.metrics.project_layout";
/// The scorecard configuration's path in the bundle.
pub const SCORECARD_CONFIG: &str = "operators.operatorframework.io.test.config.v1";
/// Where scorecard's and others' tests live in the bundle.
pub const TEST_MEDIATYPE: &str = "operators.operatorframework.io.test.mediatype.v1";
/// The only bundle media type OLM installs.
pub const REGISTRY_V1: &str = "registry+v1";

/// The annotations file: a single `annotations` map of strings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnnotationsFile {
    /// Every annotation, by key.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

impl AnnotationsFile {
    /// The value of `key`, or `""`.
    pub fn get(&self, key: &str) -> &str {
        self.annotations.get(key).map(String::as_str).unwrap_or_default()
    }

    /// The package name.
    pub fn package(&self) -> &str {
        self.get(PACKAGE)
    }

    /// The channels, split on commas as OLM does (empty entries dropped).
    pub fn channels(&self) -> Vec<String> {
        self.get(CHANNELS).split(',').map(str::trim).filter(|c| !c.is_empty()).map(str::to_string).collect()
    }

    /// The default channel, if set.
    pub fn default_channel(&self) -> Option<&str> {
        Some(self.get(DEFAULT_CHANNEL)).filter(|c| !c.is_empty())
    }
}

/// `metadata/dependencies.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DependenciesFile {
    /// The dependencies.
    #[serde(default)]
    pub dependencies: Vec<Dependency>,
}

/// One dependency: `olm.package` (`packageName`, `version` range) or `olm.gvk`
/// (`group`, `version`, `kind`), or another type OLM knows (`olm.label`, `olm.constraint`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Dependency {
    /// `olm.package`, `olm.gvk`, ...
    #[serde(default, rename = "type")]
    pub dependency_type: String,
    /// The value, whose shape depends on the type.
    #[serde(default)]
    pub value: serde_json::Value,
}
