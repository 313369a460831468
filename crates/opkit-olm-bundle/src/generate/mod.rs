//! Generating bundles as operator-sdk does: the CSV base from markers and UI metadata
//! (`generate kustomize manifests`), and the bundle from the project's manifests
//! (`generate bundle`).

pub(crate) mod base;
pub(crate) mod manifests;
pub(crate) mod markers;
pub(crate) mod metadata;

pub use base::{UiMetadata, apply_descriptions, apply_ui_metadata, new_base};
pub use manifests::{BundleOptions, GenerateError, GeneratedBundle, generate_bundle, is_semver};
pub use markers::{MarkerError, scan_descriptions};
pub use metadata::{BundleFiles, BundleMetadata, bundle_files};
