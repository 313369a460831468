//! A kuttl-compatible test runner: the KUbernetes Test TooL's format (a `TestSuite` in
//! `kuttl-test.yaml`, test case directories of numbered steps `NN-*.yaml`, asserts
//! `NN-assert.yaml` matched as kuttl matches them, errors `NN-errors.yaml`, `TestStep`
//! and `TestAssert` objects, commands and collectors), run against any cluster a
//! [`Cluster`] reaches. `opkit test` uses it with the in-process opkit control plane.
//!
//! Inside, the pieces are: the configuration objects (`api`), test directories
//! (`files`), running steps and cases (`step`, `case`), kuttl's partial match (`subset`),
//! CEL asserts (`expressions`), the diff of a failed assert (`diff`), commands
//! (`command`), a whole run (`harness`) and its result with kuttl's JUnit and JSON reports
//! (`report`).
//!
//! # Public surface
//!
//! - [`TestSuite`]: `kuttl-test.yaml`, loaded with [`TestSuite::load`] (its
//!   [`HarnessMeta`] and [`Command`]s).
//! - [`Cluster`]: the cluster a run talks to (a kubeconfig, or a client).
//! - [`Harness`]: runs a suite's test cases against a cluster.
//! - [`RunReport`] ([`SuiteReport`], [`CaseReport`], [`StepReport`], [`StepFailure`]),
//!   [`ReportFormat`]: the result and kuttl's reports.
//! - [`Sink`]: where a run's log lines go.
//! - [`load_objects`]: the objects of a step file, as kuttl reads them.
//! - [`KuttlError`]: why a suite could not be loaded or run.
//!
//! # Example
//!
//! Reading a step file as kuttl does (a runnable doctest):
//!
//! ```
//! let path = std::env::temp_dir().join(format!("opkit-kuttl-doc-{}.yaml", std::process::id()));
//! std::fs::write(&path, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\nnote: no kind, skipped\n")?;
//! let objects = opkit_kuttl::load_objects(&path)?;
//! assert_eq!(objects.len(), 1);
//! assert_eq!(objects[0]["metadata"]["name"], "a");
//! # std::fs::remove_file(&path)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Running a suite against a cluster:
//!
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

mod api;
mod case;
mod cluster;
mod command;
mod diff;
mod expressions;
mod files;
mod harness;
mod log;
mod report;
mod step;
mod subset;

pub use api::{Command, HarnessMeta, TestSuite};
pub use cluster::Cluster;
pub use harness::Harness;
pub use log::Sink;
pub use report::{CaseReport, ReportFormat, RunReport, StepFailure, StepReport, SuiteReport, escape as xml_escape};
pub use step::load_objects;

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
