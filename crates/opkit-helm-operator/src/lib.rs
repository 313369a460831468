//! Helm-chart operators, as operator-sdk's helm plugin runs them: a `watches.yaml`
//! ([`watches`]) names, for each kind, the chart whose release a custom resource of that
//! kind stands for; one generic reconciler ([`reconciler`]) renders the chart with the
//! resource's spec as values (`opkit-helm`), applies the objects, keeps them from drifting
//! and stores each revision as Helm does ([`release`]), so the real `helm list` and
//! `helm history` show it. [`manifest`] splits rendered output into objects; [`crd`] is
//! the scaffolded CustomResourceDefinition of a watched kind.

pub mod annotations;
pub mod crd;
pub mod hooks;
mod junctors;
pub mod manifest;
pub mod metrics;
pub mod reconciler;
pub mod release;
mod schema_keywords;
pub mod watches;

pub use reconciler::setup;
pub use watches::{Watch, load_watches};

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
