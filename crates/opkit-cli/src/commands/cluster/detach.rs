//! `opkit cluster start --detach`: the same command re-run without `--detach` as a
//! background process (`spawn_background`: its own process group, stdin closed, stdout
//! and stderr written to `DATA_DIR/cluster.log`, a new one each start, no other inherited
//! descriptor), waited for until its record names it and its `/readyz`
//! answers; if it dies first, the end of its log is the error, and Ctrl-C while waiting
//! stops it.

use std::path::Path;
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use opkit_apiserver::ServerError;
use opkit_apiserver::data_dir::DataDirError;

use super::record::{ClusterRecord, LOG_FILE, holder};
use crate::cli::{OutputFormat, StartArgs};
use crate::commands::CliError;

/// How often the starting cluster is looked at.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// How long one `/readyz` probe may take.
const READY_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// How many lines of the log a failed start shows.
const LOG_TAIL_LINES: usize = 30;

/// Starts the cluster `args` describe in the background and returns once it is ready,
/// printing what `cluster start` prints, with its pid and log file.
pub(super) async fn start_detached(args: &StartArgs, output: OutputFormat) -> Result<(), CliError> {
    let data_dir = std::path::absolute(&args.data_dir)?;
    // Checked here too, so the running cluster's log is not truncated.
    if let Some(holder) = holder(&data_dir)? {
        return Err(ServerError::DataDir(DataDirError::InUse { dir: data_dir, holder: holder.record }).into());
    }
    // Ctrl-C while waiting stops the half-started cluster too, as it would in the
    // foreground; listened for from before the log file is made.
    let mut interrupted = std::pin::pin!(opkit::signal::shutdown_requested());
    if let std::task::Poll::Ready(result) = futures::poll!(interrupted.as_mut()) {
        result?;
        return Err(CliError::Detached("interrupted before the cluster was started".into()));
    }
    std::fs::create_dir_all(&data_dir)?;
    let log_path = data_dir.join(LOG_FILE);
    let log = std::fs::File::create(&log_path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("creating {}: {e}", log_path.display())))?;
    let mut command = std::process::Command::new(std::env::current_exe()?);
    command.args(std::env::args_os().skip(1).filter(|arg| arg != "--detach")).arg("--log-file").arg(&log_path);
    let mut child = super::spawn_background(&mut command, log)?;
    let pid = child.id();
    let deadline = Instant::now() + args.ready_timeout.get();
    let record = loop {
        if let Some(status) = child.try_wait()? {
            return Err(CliError::Detached(format!(
                "the cluster exited ({status}) before it was ready; the end of its log {}:\n{}",
                log_path.display(),
                log_tail(&log_path)
            )));
        }
        if let Some(record) = ClusterRecord::load(&data_dir).ok().flatten().filter(|r| r.pid == pid)
            && tokio::time::timeout(READY_PROBE_TIMEOUT, ready(&record)).await.unwrap_or(false)
        {
            break record;
        }
        if Instant::now() >= deadline {
            super::lifecycle::terminate(pid)?;
            return Err(CliError::Detached(format!(
                "the cluster (pid {pid}) was not ready within {} (--ready-timeout) and was stopped; the end of its log {}:\n{}",
                args.ready_timeout,
                log_path.display(),
                log_tail(&log_path)
            )));
        }
        tokio::select! {
            () = tokio::time::sleep(POLL_INTERVAL) => {}
            _ = &mut interrupted => {
                super::lifecycle::terminate(pid)?;
                return Err(CliError::Detached(format!(
                    "interrupted before the cluster was ready; it (pid {pid}) was asked to stop, see {}",
                    log_path.display()
                )));
            }
        }
    };
    match output {
        OutputFormat::Json => {
            println!("{}", serde_json::to_string(&record).map_err(std::io::Error::from)?)
        }
        OutputFormat::Text | OutputFormat::Xunit => {
            println!("{}", record.text());
            println!("Running in the background (pid {pid}); its log is {}.", log_path.display());
            println!("Stop it with `opkit cluster stop --data-dir {}`.", data_dir.display());
        }
    }
    Ok(())
}

/// Whether the recorded cluster answers `/readyz` through its kubeconfig.
async fn ready(record: &ClusterRecord) -> bool {
    let Ok(kubeconfig) = Kubeconfig::read_from(&record.kubeconfig) else {
        return false;
    };
    let options = KubeConfigOptions { context: Some(record.context_name.clone()), ..KubeConfigOptions::default() };
    let Ok(config) = kube::Config::from_custom_kubeconfig(kubeconfig, &options).await else {
        return false;
    };
    let Ok(client) = kube::Client::try_from(config) else {
        return false;
    };
    let Ok(request) = http::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    client.request_text(request).await.is_ok()
}

/// The last lines of the log at `path` (or why it cannot be read).
fn log_tail(path: &Path) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
        }
        Err(e) => format!("(cannot read it: {e})"),
    }
}
