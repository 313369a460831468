//! A kuttl-compatible test runner: the KUbernetes Test TooL's format (a `TestSuite` in
//! `kuttl-test.yaml`, test case directories of numbered steps `NN-*.yaml`, asserts
//! `NN-assert.yaml` matched as kuttl matches them, errors `NN-errors.yaml`, `TestStep`
//! and `TestAssert` objects, commands and collectors), run against any cluster a
//! [`Cluster`] reaches. `opkit test` uses it with the in-process opkit control plane.
//!
//! The pieces: [`api`] (the configuration objects), [`files`] (test directories),
//! [`step`] and [`case`] (running them), [`subset`] (kuttl's partial match), [`expressions`] (CEL asserts), [`diff`]
//! (the diff of a failed assert), [`command`] (commands), [`harness`] (a whole run) and
//! [`report`] (the result, and kuttl's JUnit and JSON reports).
//!
//! # Example
//! ```no_run
//! use std::sync::Arc;
//! use opkit_kuttl::{Cluster, Harness, TestSuite};
//!
//! # async fn f() -> Result<(), opkit_kuttl::KuttlError> {
//! let (suite, _notes) = TestSuite::load("kuttl-test.yaml".as_ref())?;
//! let cluster = Cluster::from_kubeconfig("kubeconfig".as_ref()).await?;
//! let report = Harness::new(suite, Arc::new(cluster)).run().await?;
//! for case in report.cases() {
//!     println!("{}: {}", case.name, if case.passed() { "passed" } else { "failed" });
//! }
//! assert!(report.passed());
//! # Ok(()) }
//! ```

use std::path::PathBuf;

pub mod api;
pub mod case;
pub mod cluster;
pub mod command;
pub mod diff;
pub mod expressions;
pub mod files;
pub mod harness;
pub mod log;
pub mod report;
pub mod step;
pub mod subset;

pub use api::TestSuite;
pub use cluster::Cluster;
pub use harness::Harness;
pub use report::{CaseReport, ReportFormat, RunReport};

/// Why a suite could not be loaded or run (a failing test is a result, not an error).
#[derive(Debug, thiserror::Error)]
pub enum KuttlError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A file is not valid YAML, or a harness object has a field of the wrong type.
    #[error("error decoding yaml {}: {message}", path.display())]
    Yaml {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A test definition is invalid or uses what opkit does not support.
    #[error("{0}")]
    Load(String),
    /// The kubeconfig could not be used.
    #[error("kubeconfig {0}")]
    Kubeconfig(String),
    /// The client could not be built.
    #[error("kubernetes client: {0}")]
    Kube(#[source] kube::Error),
}
