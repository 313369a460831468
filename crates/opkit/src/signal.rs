//! Waiting for a request to stop: Ctrl-C everywhere, and SIGTERM on Unix (what the
//! kubelet sends before it kills a container). The manager and the `opkit` CLI share it.

/// Completes when the process is asked to stop (Ctrl-C, or SIGTERM on Unix). Fails only
/// if the signal handlers cannot be installed.
pub async fn shutdown_requested() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}
