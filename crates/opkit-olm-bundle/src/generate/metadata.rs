//! `metadata/annotations.yaml` and `bundle.Dockerfile`, in operator-sdk's words and order,
//! and the whole file layout of a generated bundle.

use std::path::PathBuf;

use serde_json::Value;

use crate::bundle::{ANNOTATIONS_FILE, Bundle, MANIFESTS_DIR, METADATA_DIR};
use crate::error::BundleError;
use crate::yaml;

/// The channel a bundle is put in when none is given.
pub(crate) const DEFAULT_CHANNEL_NAME: &str = "alpha";
/// Where scorecard's configuration goes in a bundle.
pub(crate) const SCORECARD_CONFIG_DIR: &str = "tests/scorecard";

/// What the metadata says.
#[derive(Debug, Clone, Default)]
pub struct BundleMetadata {
    /// The bundle directory, relative to the project root (`bundle`).
    pub bundle_dir: String,
    /// The package.
    pub package: String,
    /// Comma-separated channels (default `alpha`).
    pub channels: String,
    /// The default channel, if any.
    pub default_channel: String,
    /// `operators.operatorframework.io.metrics.*` labels as `key=value`.
    pub other_labels: Vec<String>,
    /// Whether the bundle carries scorecard's configuration.
    pub scorecard: bool,
}

impl BundleMetadata {
    fn channels(&self) -> &str {
        if self.channels.is_empty() { DEFAULT_CHANNEL_NAME } else { &self.channels }
    }

    /// The labels of the metadata's three defaults and the metrics labels.
    pub fn metrics_labels(builder: &str, project_layout: &str) -> Vec<String> {
        vec![
            format!("operators.operatorframework.io.metrics.builder={builder}"),
            "operators.operatorframework.io.metrics.mediatype.v1=metrics+v1".to_string(),
            format!("operators.operatorframework.io.metrics.project_layout={project_layout}"),
        ]
    }

    /// `metadata/annotations.yaml`.
    pub fn annotations_yaml(&self) -> String {
        let mut out = String::from("annotations:\n  # Core bundle annotations.\n");
        out.push_str("  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n");
        out.push_str("  operators.operatorframework.io.bundle.manifests.v1: manifests/\n");
        out.push_str("  operators.operatorframework.io.bundle.metadata.v1: metadata/\n");
        out.push_str(&format!("  operators.operatorframework.io.bundle.package.v1: {}\n", self.package));
        out.push_str(&format!("  operators.operatorframework.io.bundle.channels.v1: {}\n", self.channels()));
        if !self.default_channel.is_empty() {
            out.push_str(&format!(
                "  operators.operatorframework.io.bundle.channel.default.v1: {}\n",
                self.default_channel
            ));
        }
        for label in &self.other_labels {
            out.push_str(&format!("  {}\n", label.replacen('=', ": ", 1)));
        }
        if self.scorecard {
            out.push_str("\n  # Annotations for testing.\n");
            out.push_str("  operators.operatorframework.io.test.mediatype.v1: scorecard+v1\n");
            out.push_str("  operators.operatorframework.io.test.config.v1: tests/scorecard/\n");
        }
        out
    }

    /// `bundle.Dockerfile`.
    pub fn dockerfile(&self) -> String {
        let mut out = String::from("FROM scratch\n\n# Core bundle labels.\n");
        out.push_str("LABEL operators.operatorframework.io.bundle.mediatype.v1=registry+v1\n");
        out.push_str("LABEL operators.operatorframework.io.bundle.manifests.v1=manifests/\n");
        out.push_str("LABEL operators.operatorframework.io.bundle.metadata.v1=metadata/\n");
        out.push_str(&format!("LABEL operators.operatorframework.io.bundle.package.v1={}\n", self.package));
        out.push_str(&format!("LABEL operators.operatorframework.io.bundle.channels.v1={}\n", self.channels()));
        if !self.default_channel.is_empty() {
            out.push_str(&format!(
                "LABEL operators.operatorframework.io.bundle.channel.default.v1={}\n",
                self.default_channel
            ));
        }
        for label in &self.other_labels {
            out.push_str(&format!("LABEL {label}\n"));
        }
        if self.scorecard {
            out.push_str("\n# Labels for testing.\n");
            out.push_str("LABEL operators.operatorframework.io.test.mediatype.v1=scorecard+v1\n");
            out.push_str("LABEL operators.operatorframework.io.test.config.v1=tests/scorecard/\n");
        }
        out.push_str("\n# Copy files to locations specified by labels.\n");
        out.push_str(&format!("COPY {}/manifests /manifests/\n", self.bundle_dir));
        out.push_str(&format!("COPY {}/metadata /metadata/\n", self.bundle_dir));
        if self.scorecard {
            out.push_str(&format!("COPY {}/tests/scorecard /tests/scorecard/\n", self.bundle_dir));
        }
        out
    }
}

/// The files of a generated bundle, relative to the project root.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BundleFiles {
    /// `<bundle>/manifests/*`.
    pub manifests: Vec<(PathBuf, String)>,
    /// `<bundle>/tests/scorecard/config.yaml`, when there is a scorecard configuration.
    pub scorecard: Option<(PathBuf, String)>,
    /// `<bundle>/metadata/annotations.yaml`.
    pub annotations: (PathBuf, String),
    /// `bundle.Dockerfile`.
    pub dockerfile: (PathBuf, String),
}

/// Lays `bundle` out under `metadata.bundle_dir`.
pub fn bundle_files(
    bundle: &Bundle,
    metadata: &BundleMetadata,
    scorecard_config: Option<&Value>,
) -> Result<BundleFiles, BundleError> {
    let root = PathBuf::from(&metadata.bundle_dir);
    let manifests = bundle
        .render_manifests(&metadata.package)?
        .into_iter()
        .map(|(name, text)| (root.join(MANIFESTS_DIR).join(name), text))
        .collect();
    Ok(BundleFiles {
        manifests,
        scorecard: scorecard_config.map(|c| (root.join(SCORECARD_CONFIG_DIR).join("config.yaml"), yaml::to_yaml(c))),
        annotations: (root.join(METADATA_DIR).join(ANNOTATIONS_FILE), metadata.annotations_yaml()),
        dockerfile: (PathBuf::from("bundle.Dockerfile"), metadata.dockerfile()),
    })
}
