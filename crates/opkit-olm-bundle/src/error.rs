//! What can go wrong reading or writing a bundle directory.

use std::path::PathBuf;

/// Why a bundle could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path at fault.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not YAML, or not of the shape expected.
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file at fault.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// The directory holds no ClusterServiceVersion.
    #[error("unable to find a csv in bundle directory {}", dir.display())]
    NoCsv {
        /// The bundle directory.
        dir: PathBuf,
    },
    /// The manifests directory holds more than one ClusterServiceVersion.
    #[error("invalid bundle: contains multiple CSVs ({} and {})", first.display(), second.display())]
    MultipleCsvs {
        /// The first CSV found.
        first: PathBuf,
        /// Another one.
        second: PathBuf,
    },
    /// The manifests directory holds something a bundle may not (a directory, a hidden file).
    #[error("{message}: {}", path.display())]
    Layout {
        /// The entry at fault.
        path: PathBuf,
        /// What is wrong (operator-framework's words).
        message: &'static str,
    },
    /// An object could not be written as YAML.
    #[error("writing {what} as YAML: {message}")]
    Serialize {
        /// The object.
        what: String,
        /// The serializer's message.
        message: String,
    },
}
