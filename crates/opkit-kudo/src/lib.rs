//! KUDO (Kubernetes Universal Declarative Operator) packages on the opkit runtime.
//!
//! A KUDO package is an operator written in YAML: `operator.yaml` (tasks and plans made of
//! phases and steps), `params.yaml` and `templates/`. This crate reads packages, types
//! their parameters as KUDO does, renders their templates with opkit-helm's engine, checks
//! them as `kubectl kudo package verify` does, turns them into KUDO's `Operator`,
//! `OperatorVersion` and `Instance` objects, and runs Instances' plans with a controller
//! written on the opkit runtime, judging objects healthy by KUDO's rules and keeping each
//! plan's status.
//!
//! # Public surface
//!
//! - [`load`], [`from_files`]: read a package (a directory or a `.tgz`) into a [`Package`]
//!   (`operator.yaml` as [`OperatorFile`] with its [`Task`]s and [`Plan`]s, `params.yaml`
//!   as [`ParamsFile`], the templates).
//! - [`write_tgz`]: the archive `kubectl kudo package create` writes
//!   ([`Package::archive_name`] names it).
//! - [`verify()`]: the [`Finding`]s of `kubectl kudo package verify`, each of a [`Severity`].
//! - [`install_crds`], [`crd_manifests`]: KUDO's three CRDs.
//! - [`manager`]: KUDO's manager in the cluster (`kudo-system`, its ServiceAccount and
//!   StatefulSet), as `kubectl kudo init` installs it.
//! - [`setup`], [`setup_with`] ([`EngineOptions`]): the engine that runs Instances' plans,
//!   with [`CLEANUP_FINALIZER`] and [`CANCELLED`].
//! - [`client`]: what `kubectl kudo` does against a cluster (install, upgrade, update,
//!   uninstall, plan trigger, cancel and retry, waiting for a plan).
//! - [`params`]: KUDO's parameter typing ([`Parameter`], effective values, API form).
//! - [`plan`]: plan statuses ([`PlanStatus`], [`plan::state`]), history and the status tree.
//! - [`resources`]: KUDO's objects, their API resources, labels and annotations.
//! - [`Variables`], [`render_objects`]: template rendering as the engine does it.
//! - [`KudoError`]: why reading a package or running the engine failed.
//!
//! # Example
//!
//! Read and verify a package (a runnable doctest), then, against a cluster, install the
//! CRDs and run the engine:
//!
//! ```
//! let operator = b"apiVersion: kudo.dev/v1beta1\nname: demo\noperatorVersion: 0.1.0\ntasks:\n- name: app\n  kind: Apply\n  spec:\n    resources: [cm.yaml]\nplans:\n  deploy:\n    phases:\n    - name: main\n      steps:\n      - name: app\n        tasks: [app]\n";
//! let files = vec![
//!     ("operator.yaml".to_string(), operator.to_vec()),
//!     ("templates/cm.yaml".to_string(), b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n".to_vec()),
//! ];
//! let pkg = opkit_kudo::from_files(std::path::Path::new("demo"), files)?;
//! assert_eq!(pkg.archive_name(), "demo-0.1.0.tgz");
//! assert!(opkit_kudo::verify(&pkg).is_empty());
//! # Ok::<(), opkit_kudo::KudoError>(())
//! ```
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let pkg = opkit_kudo::load(std::path::Path::new("./operator"))?;
//! for finding in opkit_kudo::verify(&pkg) {
//!     println!("{finding}");
//! }
//! let client = kube::Client::try_default().await?;
//! opkit_kudo::install_crds(&client).await?;
//! let mgr = opkit::Manager::new(client.clone(), opkit::ManagerOptions::default());
//! opkit_kudo::setup(&mgr).await?;
//! mgr.run().await?;
//! # Ok(()) }
//! ```

mod archive;
pub mod client;
mod crds;
mod engine;
mod health;
pub mod manager;
mod package;
pub mod params;
pub mod plan;
mod render;
pub mod resources;
mod verify;

pub use archive::write_tgz;
pub use crds::{crd_manifests, install_crds};
pub use engine::{CANCELLED, CLEANUP_FINALIZER, EngineOptions, setup, setup_with};
pub use package::{
    Maintainer, OperatorFile, Ordering, Package, ParamsFile, Phase, PipeSpec, Plan, Step, Task, TaskSpec, from_files,
    load,
};
pub use params::Parameter;
pub use plan::PlanStatus;
pub use render::{Variables, render_objects};
pub use verify::{Finding, Severity, verify};

use std::path::PathBuf;

/// Why reading a package or running the engine failed.
#[derive(Debug, thiserror::Error)]
pub enum KudoError {
    /// A file could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A package file is not valid.
    #[error("{file}: {message}")]
    Package {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// Parameters given to an install or update are not valid.
    #[error("{0}")]
    Params(String),
    /// A request to the API server failed.
    #[error(transparent)]
    Kube(Box<kube::Error>),
    /// The engine's controller could not be built.
    #[error(transparent)]
    Build(#[from] opkit::BuildError),
    /// KUDO's CRDs are not installed or not established.
    #[error("{0}")]
    Crd(String),
}

impl From<kube::Error> for KudoError {
    fn from(e: kube::Error) -> KudoError {
        KudoError::Kube(Box::new(e))
    }
}
