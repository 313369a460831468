//! Helm-chart operators, as operator-sdk's helm plugin runs them: a `watches.yaml` names,
//! for each kind, the chart whose release a custom resource of that kind stands for; one
//! generic reconciler per watched kind renders the chart with the resource's spec as
//! values (`opkit-helm`), applies the objects, keeps them from drifting and stores each
//! revision as Helm does, so the real `helm list` and `helm history` show it.
//!
//! The public surface:
//!
//! - [`load_watches`] / [`parse_watches`]: the watches file, as [`Watch`]es;
//! - [`setup`]: registers one controller per watch with a manager;
//! - [`crd_for`] (and [`spec_schema`]): the scaffolded CustomResourceDefinition of a
//!   watched kind, its spec schema from the chart's `values.schema.json`;
//! - [`Release`]: a revision as Helm stores it (a `helm.sh/release.v1` secret);
//! - [`OperatorError`] and [`UNINSTALL_FINALIZER`].
//!
//! ```
//! // A watched kind's CRD, its spec open (the chart has no values schema).
//! let crd = opkit_helm_operator::crd_for("demo.example.com", "v1alpha1", "Nginx", "nginxes", None)?;
//! assert_eq!(crd.metadata.name.as_deref(), Some("nginxes.demo.example.com"));
//! # Ok::<(), opkit_helm_operator::OperatorError>(())
//! ```
//!
//! Running the operator needs a cluster:
//!
//! ```no_run
//! # async fn run(mgr: opkit::Manager) -> Result<(), opkit_helm_operator::OperatorError> {
//! let watches = opkit_helm_operator::load_watches(std::path::Path::new("watches.yaml"))?;
//! opkit_helm_operator::setup(&mgr, watches).await?;
//! # Ok(())
//! # }
//! ```

mod annotations;
mod crd;
mod hooks;
mod junctors;
mod manifest;
mod metrics;
mod reconciler;
mod release;
mod schema_keywords;
mod watches;

pub use crd::{crd_for, spec_schema};
pub use reconciler::setup;
pub use release::Release;
pub use watches::{Watch, load_watches, parse_watches};

/// The finalizer that uninstalls a release before its custom resource goes (operator-sdk's).
pub const UNINSTALL_FINALIZER: &str = "helm.sdk.operatorframework.io/uninstall-release";

/// Why the Helm operator could not start or reconcile.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// The watches file could not be read or is not valid, or a watched kind is not served.
    #[error(transparent)]
    Watches(#[from] opkit::watches_file::WatchesError),
    /// The API server does not serve the kind of an object of the release.
    #[error(transparent)]
    Mapping(#[from] opkit::discovery::MappingError),
    /// A request to the API server failed.
    #[error(transparent)]
    Kube(Box<kube::Error>),
    /// The chart could not be rendered; the message is Helm's.
    #[error(transparent)]
    Helm(#[from] opkit_helm::HelmError),
    /// The API server refused an object of the release (the message is its Status's).
    #[error("cannot apply {kind} {name:?}: {message}")]
    Apply {
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// The API server's message.
        message: String,
    },
    /// A rendered document is not a Kubernetes object.
    #[error("{0}")]
    Manifest(String),
    /// A stored release could not be read or written.
    #[error("release {name}: {message}")]
    Release {
        /// The release secret's name.
        name: String,
        /// What failed.
        message: String,
    },
    /// A controller could not be built.
    #[error(transparent)]
    Build(#[from] opkit::BuildError),
    /// A chart hook failed; the message is Helm's (e.g. `failed pre-install: 1 error
    /// occurred:\n\t* job web-check failed: BackoffLimitExceeded\n\n`).
    #[error("{0}")]
    Hook(String),
}

impl From<kube::Error> for OperatorError {
    fn from(e: kube::Error) -> OperatorError {
        OperatorError::Kube(Box::new(e))
    }
}
