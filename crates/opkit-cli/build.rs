//! The build script. It packs the opkit crates a scaffolded project vendors into the CLI
//! (`build/vendor.rs` says how and why), and records the git commit opkit is built from,
//! for `opkit version`: `OPKIT_GIT_COMMIT` from the environment when set (a packager's
//! build), else `git rev-parse HEAD` when the sources are a git checkout, else "unknown".
//! A build outside git never fails.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "build/vendor.rs"]
mod vendor;

fn main() {
    vendor::write_packed_sources();
    println!("cargo:rerun-if-env-changed=OPKIT_GIT_COMMIT");
    let commit = std::env::var("OPKIT_GIT_COMMIT")
        .ok()
        .filter(|commit| !commit.trim().is_empty())
        .or_else(git_head)
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=OPKIT_GIT_COMMIT={}", commit.trim());
}

/// The directory git runs in: this crate's.
fn crate_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default())
}

/// The trimmed output of a successful `git ARGS`.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(crate_dir()).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// The commit HEAD names; the build reruns when HEAD or the branch it names moves.
fn git_head() -> Option<String> {
    let commit = git(&["rev-parse", "HEAD"])?;
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"]), git(&["rev-parse", "--git-path", "packed-refs"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git(&["rev-parse", "--git-path", &branch]));
    }
    for path in watched.into_iter().flatten() {
        let path = crate_dir().join(Path::new(&path));
        // A path that does not exist would make cargo rerun this script on every build.
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    Some(commit)
}
