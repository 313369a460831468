//! KUDO (Kubernetes Universal Declarative Operator) packages on the opkit runtime.
//!
//! A KUDO package is an operator written in YAML: `operator.yaml` (tasks and plans made of
//! phases and steps), `params.yaml` and `templates/`. This crate reads packages
//! ([`package`], [`archive`]), types their parameters as KUDO does ([`params`]), renders
//! their templates with opkit-helm's engine ([`render`]), checks them as `kubectl kudo
//! package verify` does ([`verify`]), turns them into KUDO's `Operator`,
//! `OperatorVersion` and `Instance` objects ([`resources`], CRDs in [`crds`]), and runs
//! Instances' plans with a controller written on the opkit runtime ([`engine`]), judging
//! objects healthy by KUDO's rules ([`health`]) and keeping each plan's status
//! ([`plan`]).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let pkg = opkit_kudo::package::load(std::path::Path::new("./operator"))?;
//! for finding in opkit_kudo::verify::verify(&pkg) {
//!     println!("{finding}");
//! }
//! let client = kube::Client::try_default().await?;
//! opkit_kudo::crds::install(&client).await?;
//! let mgr = opkit::Manager::new(client.clone(), opkit::ManagerOptions::default());
//! opkit_kudo::engine::setup(&mgr).await?;
//! mgr.run().await?;
//! # Ok(()) }
//! ```

pub mod archive;
pub mod client;
pub mod crds;
pub mod engine;
pub mod health;
pub mod package;
pub mod params;
pub mod plan;
pub mod render;
pub mod resources;
pub mod verify;

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
