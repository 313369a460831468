//! The bench's own child processes: `opkit-bench` run with a hidden subcommand (`serve`,
//! `runtime-manager`, `memcached-operator`, `kudo-engine`) so that what is measured runs
//! outside the measuring process. Each is spawned with stdin and stdout piped and killed
//! when dropped, and says it is ready on its first stdout line, one JSON object.

use std::process::Stdio;
use std::time::Duration;

use serde::de::DeserializeOwned;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use crate::BenchError;

/// A running child and the rest of its stdout after its first line.
pub(crate) struct Spawned<T> {
    /// The child (killed when dropped).
    pub(crate) child: Child,
    /// Its stdout after the ready line.
    pub(crate) lines: Lines<BufReader<ChildStdout>>,
    /// Its ready line, parsed.
    pub(crate) ready: T,
}

/// Spawns `cmd` (stdin and stdout piped, stderr inherited, killed on drop) and reads its
/// first line as a `T` within `timeout`; `what` names the child in errors.
pub(crate) async fn spawn_child<T: DeserializeOwned>(
    cmd: Command,
    what: &str,
    timeout: Duration,
) -> Result<Spawned<T>, BenchError> {
    spawn_child_with_input(cmd, what, timeout, None).await
}

/// As [`spawn_child`], first writing `input` (one line: what the child is to do) to its
/// stdin. The stdin stays open in [`Spawned::child`]: a child that idles until its stdin
/// closes runs until it is dropped.
pub(crate) async fn spawn_child_with_input<T: DeserializeOwned>(
    mut cmd: Command,
    what: &str,
    timeout: Duration,
    input: Option<&str>,
) -> Result<Spawned<T>, BenchError> {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| BenchError::Setup(format!("spawning {what}: {e}")))?;
    if let Some(input) = input {
        let stdin = child.stdin.as_mut().ok_or_else(|| BenchError::Setup(format!("{what}: no stdin pipe")))?;
        stdin.write_all(format!("{input}\n").as_bytes()).await?;
        stdin.flush().await?;
    }
    let stdout = child.stdout.take().ok_or_else(|| BenchError::Setup(format!("{what}: no stdout pipe")))?;
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(timeout, lines.next_line())
        .await
        .map_err(|_| BenchError::Setup(format!("{what} did not report within {}s", timeout.as_secs())))??
        .ok_or_else(|| BenchError::Setup(format!("{what} exited before it reported")))?;
    let ready =
        serde_json::from_str(&line).map_err(|e| BenchError::Setup(format!("bad line from {what} {line:?}: {e}")))?;
    Ok(Spawned { child, lines, ready })
}
