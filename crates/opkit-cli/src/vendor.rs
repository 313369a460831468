//! The opkit crates `opkit init` vendors into a new project (`vendor/opkit/<crate>`), so
//! the project builds outside this checkout and in its Dockerfile without the crates being
//! published. `build.rs` packs them into the CLI (and says why it embeds rather than
//! copies); this module plans them into the project and settles its `Cargo.lock`.

use std::path::Path;
use std::process::Stdio;

use crate::fileplan::{FilePlan, PlanError};

// build.rs writes the packed files' items `pub`; only this module names them.
#[allow(unreachable_pub)]
mod packed {
    include!(concat!(env!("OUT_DIR"), "/vendored.rs"));
}

/// Where the vendored crates live in a project.
pub(crate) const DIR: &str = "vendor/opkit";

/// Whether this CLI carries the opkit sources (it does when built from the checkout).
pub(crate) fn available() -> bool {
    !packed::FILES.is_empty()
}

/// The dependency line for `krate` (`opkit`, `opkit-testenv`) on its vendored copy.
pub(crate) fn dependency(krate: &str) -> String {
    format!("{{ version = \"{}\", path = \"{DIR}/{krate}\" }}", env!("CARGO_PKG_VERSION"))
}

/// Plans every vendored file, and the workspace's lock file as the project's starting
/// `Cargo.lock` (the versions opkit was tested with, already in cargo's cache).
pub(crate) fn plan(plan: &mut FilePlan) -> Result<(), PlanError> {
    for (path, text) in packed::FILES {
        plan.create(format!("{DIR}/{path}"), *text)?;
    }
    if let Some(lock) = packed::WORKSPACE_LOCK {
        plan.create("Cargo.lock", lock)?;
    }
    Ok(())
}

/// Gives every vendored file the modification time of its newest source, not the time
/// `opkit init` wrote it: cargo decides whether a path dependency is stale by comparing
/// times, so projects sharing a target directory (`CARGO_TARGET_DIR`) build the vendored
/// crates once. Each copy's version carries a hash of its sources, so a different copy
/// never reuses another's build.
pub(crate) fn set_source_times(root: &Path) -> std::io::Result<()> {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(packed::SOURCES_MODIFIED);
    for (path, _) in packed::FILES {
        std::fs::File::options().write(true).open(root.join(DIR).join(path))?.set_modified(time)?;
    }
    Ok(())
}

/// Settles the project's `Cargo.lock`: cargo drops the workspace's entries the project
/// does not use and adds the project, keeping every pinned version. Offline first (the
/// versions are in cargo's cache when this CLI was built here); the error is cargo's.
pub(crate) fn settle_lock(root: &Path) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut last = String::new();
    for offline in [true, false] {
        let mut cmd = std::process::Command::new(&cargo);
        cmd.args(["metadata", "--format-version", "1", "--quiet"]).current_dir(root).stdin(Stdio::null());
        if offline {
            cmd.arg("--offline");
        }
        match cmd.output() {
            Ok(output) if output.status.success() => return Ok(()),
            Ok(output) => last = String::from_utf8_lossy(&output.stderr).trim().to_string(),
            Err(e) => return Err(format!("running {cargo}: {e}")),
        }
    }
    Err(last)
}
