//! `opkit run`: installs the CRDs, then builds and runs the operator locally (`cargo run`)
//! against the same cluster, forwarding Ctrl-C / SIGTERM so it shuts down cleanly.

use std::process::Stdio;

use super::{CliError, install, project_dir};
use crate::cli::RunArgs;
use crate::output::Output;

/// Runs the operator until it exits or a signal stops it.
pub async fn run(args: RunArgs, out: &mut Output) -> Result<(), CliError> {
    let root = project_dir()?;
    install::install_crds(&args.cluster, out).await?;
    out.step("CRDs installed; building and starting the operator (cargo run)");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = tokio::process::Command::new(&cargo);
    cmd.arg("run");
    if args.release {
        cmd.arg("--release");
    }
    cmd.arg("--").args(&args.args).current_dir(&root).stdin(Stdio::null());
    if let Some(path) = &args.cluster.kubeconfig {
        cmd.env("KUBECONFIG", std::path::absolute(path)?);
    }
    let mut child = cmd.spawn().map_err(|e| CliError::Build(format!("running {cargo}: {e}")))?;
    let status = tokio::select! {
        status = child.wait() => status?,
        signalled = opkit::signal::shutdown_requested() => {
            signalled?;
            stop(&mut child).await?
        }
    };
    if status.success() { Ok(()) } else { Err(CliError::Build(format!("the operator exited with {status}"))) }
}

/// Asks the operator to stop (SIGTERM, as the kubelet would) and waits for it.
// The workspace denies unsafe code; this is its one exception: std cannot send a signal
// other than SIGKILL to a child, and the operator must get SIGTERM to shut down cleanly.
#[cfg(unix)]
#[allow(unsafe_code)]
async fn stop(child: &mut tokio::process::Child) -> std::io::Result<std::process::ExitStatus> {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) with a pid we spawned and a valid signal number has no memory
        // effects; the worst case (the child already exited) is an ESRCH error we ignore.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    child.wait().await
}

/// Stops the operator (Windows has no SIGTERM: the process is terminated) and waits for it.
#[cfg(not(unix))]
async fn stop(child: &mut tokio::process::Child) -> std::io::Result<std::process::ExitStatus> {
    child.start_kill()?;
    child.wait().await
}
