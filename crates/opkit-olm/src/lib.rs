//! The Operator Lifecycle Manager on an opkit cluster, written with the opkit runtime.
//!
//! The public surface:
//! - [`setup`]: registers OLM's controllers (CatalogSource, Subscription, InstallPlan,
//!   ClusterServiceVersion, OperatorGroup, OperatorCondition) on an [`opkit::Manager`].
//!   They run in whatever process runs that manager: `opkit olm run` (which
//!   `opkit olm install` starts in the background), or a test next to its control plane.
//! - [`crds`]: OLM's CustomResourceDefinitions, with OLM's own schemas ([`crds::install`]);
//!   [`types`] the typed objects ([`types::Subscription`], [`types::ClusterServiceVersion`], ...).
//! - [`install`]: `opkit olm install`, `uninstall` and `status` (the CRDs, namespaces,
//!   global OperatorGroup, and the lease of the process running the controllers).
//! - [`fbc`]: file-based catalogs ([`Catalog`]: `olm.package`, `olm.channel`, `olm.bundle`),
//!   read from a directory or a ConfigMap, or rendered from bundle directories (read by
//!   [`opkit_olm_bundle::Bundle::load`]); [`resolve`] walks their channels one
//!   `replaces`/`skips`/`skipRange` step at a time and resolves `olm.gvk`/`olm.package`
//!   dependencies; [`parse_version`] reads a version as OLM does.
//! - [`run_bundle`]: operator-sdk's `run bundle`, `run bundle-upgrade` and `cleanup`, from
//!   bundle directories: a catalog in a ConfigMap, a CatalogSource, an OperatorGroup and a
//!   Subscription, then waiting for the CSV to succeed ([`RunOptions`], [`Installed`],
//!   [`CleanupOptions`], [`Removed`]).
//! - [`OlmError`]: why an OLM operation failed; [`FIELD_MANAGER`] the field manager OLM
//!   writes with.
//!
//! # Example
//! Render a catalog from bundle directories and find the next upgrade in its channel:
//! ```
//! use opkit_olm::{Catalog, resolve};
//! use opkit_olm_bundle::Bundle;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/memcached-operator");
//! let bundles = [Bundle::load(format!("{dir}/0.0.1"))?, Bundle::load(format!("{dir}/0.0.2"))?];
//! let catalog = Catalog::from_bundles(&bundles)?;
//! assert!(catalog.validate().is_empty());
//! let channel = resolve::channel(&catalog, "memcached-operator", None, "sub")?;
//! let next = resolve::next(&catalog, channel, "memcached-operator.v0.0.1");
//! assert_eq!(next.map(|b| b.name.as_str()), Some("memcached-operator.v0.0.2"));
//! # Ok(())
//! # }
//! ```

use std::path::PathBuf;

pub(crate) mod controllers;
pub mod crds;
pub mod fbc;
pub mod install;
pub(crate) mod objects;
pub mod resolve;
pub mod run_bundle;
pub(crate) mod semver_range;
pub mod types;

pub use controllers::setup;
pub use fbc::Catalog;
pub use run_bundle::{CleanupOptions, Installed, Removed, RunOptions};
pub use semver_range::parse_version;

/// The field manager OLM's controllers write with.
pub const FIELD_MANAGER: &str = "olm";

/// Why an OLM operation failed.
#[derive(Debug, thiserror::Error)]
pub enum OlmError {
    /// A file could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A bundle directory is not valid.
    #[error("bundle {}: {message}", path.display())]
    Bundle {
        /// The directory.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A catalog is not valid, or a bundle in it cannot be read.
    #[error("catalog: {0}")]
    Catalog(String),
    /// A request to the API server failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// The API server does not serve a kind (its CRD is not installed).
    #[error("the API server does not serve {api_version} {kind}: {message}")]
    KindNotServed {
        /// The apiVersion.
        api_version: String,
        /// The kind.
        kind: String,
        /// Discovery's error.
        message: String,
    },
    /// The API server refused an object.
    #[error("cannot apply {kind} {name:?}: {message}")]
    Apply {
        /// The kind.
        kind: String,
        /// The name.
        name: String,
        /// The API server's message.
        message: String,
    },
    /// Something did not happen in time.
    #[error("timed out waiting for {0}")]
    Timeout(String),
    /// A ClusterServiceVersion failed, or the subscription could not be resolved.
    #[error("{0}")]
    Install(String),
    /// The OLM controllers could not be registered.
    #[error(transparent)]
    Build(#[from] opkit::BuildError),
}
