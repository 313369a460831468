//! `opkit cluster stop`, `status`, `delete` and `kubeconfig`: what runs from a data
//! directory is the process holding its lock (`record::holder`), and what it started is
//! its record ([`ClusterRecord`]); stopping is SIGTERM, a wait for the lock to be
//! released, and SIGKILL after the timeout.

use std::path::Path;
use std::time::{Duration, Instant};

use kube::config::Kubeconfig;
use opkit_apiserver::ServerError;
use serde_json::json;

use super::record::{ClusterRecord, holder};
use crate::cli::{DeleteArgs, KubeconfigArgs, StatusArgs, StopArgs};
use crate::commands::CliError;
use crate::output::Output;

/// How often a stopping cluster's lock is looked at.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// How long a killed cluster may take to release its directory.
const KILL_GRACE: Duration = Duration::from_secs(10);

/// The exit code of `cluster status` when no cluster runs (as `systemctl status`).
const NOT_RUNNING_EXIT_CODE: u8 = 3;

/// Files one of which every data directory a cluster started from has.
const DATA_DIR_MARKERS: [&str; 5] = ["lock", "token", "state.db", "cluster.json", super::record::LOG_FILE];

/// A cluster that was stopped.
struct Stopped {
    pid: u32,
    /// SIGTERM was not enough.
    killed: bool,
}

/// `opkit cluster stop`.
pub(crate) fn stop(args: StopArgs, out: &mut Output) -> Result<(), CliError> {
    let dir = std::path::absolute(&args.data_dir)?;
    match stop_running(&dir, args.timeout.get(), out)? {
        Some(Stopped { pid, killed }) => {
            let how = if killed {
                format!("killed (SIGKILL) after it did not stop within {}", args.timeout)
            } else {
                "stopped".into()
            };
            out.result(
                &format!("{how}: the cluster running from {} (pid {pid})", dir.display()),
                json!({"stopped": true, "pid": pid, "killed": killed, "dataDir": dir}),
            );
            Ok(())
        }
        None if args.ignore_not_running => {
            out.result(
                &format!("no cluster is running from {}", dir.display()),
                json!({"stopped": false, "dataDir": dir}),
            );
            Ok(())
        }
        None => Err(CliError::NotRunning { dir }),
    }
}

/// `opkit cluster status`: exits 0 when a cluster runs, 3 when none does.
pub(crate) fn status(args: StatusArgs, out: &mut Output) -> Result<(), CliError> {
    let dir = std::path::absolute(&args.data_dir)?;
    let Some(holder) = holder(&dir)? else {
        out.result(&format!("no cluster is running from {}", dir.display()), json!({"running": false, "dataDir": dir}));
        return Err(CliError::Reported { code: NOT_RUNNING_EXIT_CODE });
    };
    // The record of an earlier run, or of one still starting, does not describe it.
    let record = ClusterRecord::load(&dir)?.filter(|r| Some(r.pid) == holder.pid);
    let server = record.as_ref().map(|r| r.server.clone()).or_else(|| holder.url.clone());
    let uptime = record.as_ref().map(|r| {
        let elapsed = jiff::Timestamp::now().duration_since(r.started_at);
        jiff::SignedDuration::from_secs(elapsed.as_secs())
    });
    let mut text = vec![format!("a cluster is running from {}", dir.display())];
    match holder.pid {
        Some(pid) => text.push(format!("  pid:        {pid}")),
        None => text.push("  pid:        (not recorded yet)".into()),
    }
    text.push(format!("  server:     {}", server.as_deref().unwrap_or("(not listening yet)")));
    match &record {
        Some(r) => {
            text.push(format!("  kubeconfig: {} (context {:?})", r.kubeconfig.display(), r.context_name));
            text.push(format!("  started:    {:.0} (up {:#})", r.started_at, uptime.unwrap_or_default()));
            if let Some(log) = &r.log_file {
                text.push(format!("  log:        {}", log.display()));
            }
            match (r.pod_isolation.as_str(), &r.pod_isolation_fallback_reason) {
                // A record written before isolation was recorded.
                ("", _) => {}
                ("contained", _) => text.push("  real pods:  contained".into()),
                (_, Some(reason)) => text.push(format!("  real pods:  NOT contained (host mode): {reason}")),
                _ => text.push("  real pods:  NOT contained (host mode, as asked)".into()),
            }
        }
        None => text.push("  (still starting: its kubeconfig is not written yet)".into()),
    }
    out.result(
        &text.join("\n"),
        json!({
            "running": true,
            "dataDir": dir,
            "pid": holder.pid,
            "server": server,
            "kubeconfig": record.as_ref().map(|r| &r.kubeconfig),
            "contextName": record.as_ref().map(|r| &r.context_name),
            "startedAt": record.as_ref().map(|r| r.started_at),
            "uptimeSeconds": uptime.map(|u| u.as_secs()),
            "logFile": record.as_ref().and_then(|r| r.log_file.as_ref()),
            "podIsolation": record.as_ref().map(|r| &r.pod_isolation),
            "podIsolationFallbackReason": record.as_ref().and_then(|r| r.pod_isolation_fallback_reason.as_ref()),
        }),
    );
    Ok(())
}

/// `opkit cluster delete`: stops the cluster if it runs, then deletes its data directory
/// and the kubeconfig it wrote outside of it.
pub(crate) fn delete(args: DeleteArgs, out: &mut Output) -> Result<(), CliError> {
    let dir = std::path::absolute(&args.data_dir)?;
    if !dir.exists() {
        out.result(
            &format!("no cluster data in {}: nothing to delete", dir.display()),
            json!({"deleted": false, "dataDir": dir}),
        );
        return Ok(());
    }
    if !DATA_DIR_MARKERS.iter().any(|marker| dir.join(marker).exists()) {
        return Err(CliError::Usage(format!(
            "{} does not look like an opkit cluster's data directory (it has none of {}); not deleting it",
            dir.display(),
            DATA_DIR_MARKERS.join(", ")
        )));
    }
    let stopped = stop_running(&dir, args.timeout.get(), out)?;
    let record = ClusterRecord::load(&dir).ok().flatten();
    let kubeconfig = record.filter(|r| !r.kubeconfig.starts_with(&dir) && wrote(r)).map(|r| r.kubeconfig);
    std::fs::remove_dir_all(&dir)
        .map_err(|e| std::io::Error::new(e.kind(), format!("deleting {}: {e}", dir.display())))?;
    if let Some(path) = &kubeconfig {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(std::io::Error::new(e.kind(), format!("deleting {}: {e}", path.display())).into()),
        }
    }
    let mut text = Vec::new();
    if let Some(Stopped { pid, .. }) = &stopped {
        text.push(format!("stopped the cluster (pid {pid})"));
    }
    text.push(format!("deleted {}", dir.display()));
    if let Some(path) = &kubeconfig {
        text.push(format!("deleted {}", path.display()));
    }
    out.result(
        &text.join("\n"),
        json!({"deleted": true, "dataDir": dir, "stoppedPid": stopped.map(|s| s.pid), "deletedKubeconfig": kubeconfig}),
    );
    Ok(())
}

/// `opkit cluster kubeconfig`: the kubeconfig the cluster wrote, its names changed with
/// `--context-name`.
pub(crate) fn kubeconfig(args: KubeconfigArgs, out: &mut Output) -> Result<(), CliError> {
    let dir = std::path::absolute(&args.data_dir)?;
    let record = ClusterRecord::load(&dir)?.ok_or_else(|| CliError::NotRunning { dir: dir.clone() })?;
    if holder(&dir)?.and_then(|h| h.pid) != Some(record.pid) {
        out.warn(&format!(
            "no cluster is running from {}: the kubeconfig names the server it listened on last ({})",
            dir.display(),
            record.server
        ));
    }
    let mut config = Kubeconfig::read_from(&record.kubeconfig)
        .map_err(|e| CliError::Kubeconfig(format!("{}: {e}", record.kubeconfig.display())))?;
    if let Some(name) = &args.context_name {
        if name.is_empty() {
            return Err(CliError::Usage("--context-name must not be empty".into()));
        }
        rename(&mut config, &record.context_name, name);
    }
    let yaml = opkit_apiserver::kubeconfig::to_yaml(&config).map_err(ServerError::from)?;
    let json = serde_json::to_value(&config).map_err(|e| CliError::Kubeconfig(e.to_string()))?;
    out.result(yaml.trim_end(), json);
    Ok(())
}

/// Names the cluster and context `old` of `config` `new`, and its user `old-admin`
/// `new-admin`, as `cluster start --context-name new` would have written them.
fn rename(config: &mut Kubeconfig, old: &str, new: &str) {
    let (old_user, new_user) = (format!("{old}-admin"), format!("{new}-admin"));
    for cluster in config.clusters.iter_mut().filter(|c| c.name == old) {
        cluster.name = new.into();
    }
    for user in config.auth_infos.iter_mut().filter(|u| u.name == old_user) {
        user.name.clone_from(&new_user);
    }
    for context in config.contexts.iter_mut().filter(|c| c.name == old) {
        context.name = new.into();
        if let Some(context) = context.context.as_mut() {
            if context.cluster == old {
                context.cluster = new.into();
            }
            if context.user.as_deref() == Some(old_user.as_str()) {
                context.user = Some(new_user.clone());
            }
        }
    }
    if config.current_context.as_deref() == Some(old) {
        config.current_context = Some(new.into());
    }
}

/// Whether the kubeconfig at the record's path is still the one the cluster wrote (a
/// cluster named as it, at its server), so deleting it deletes nothing of the user's.
fn wrote(record: &ClusterRecord) -> bool {
    Kubeconfig::read_from(&record.kubeconfig).is_ok_and(|config| {
        config.clusters.iter().any(|c| {
            c.name == record.context_name
                && c.cluster.as_ref().and_then(|c| c.server.as_deref()) == Some(record.server.as_str())
        })
    })
}

/// Stops the cluster running from `dir`, if one does: SIGTERM, then SIGKILL when it has
/// not released the directory within `timeout`.
fn stop_running(dir: &Path, timeout: Duration, out: &mut Output) -> Result<Option<Stopped>, CliError> {
    let Some(holder) = holder(dir)? else {
        return Ok(None);
    };
    let pid = holder.pid.ok_or_else(|| {
        CliError::Usage(format!(
            "the process holding {} has not recorded its pid yet (lock file: {:?}); try again",
            dir.display(),
            holder.record
        ))
    })?;
    out.waiting(&format!("stopping the cluster running from {} (pid {pid})", dir.display()));
    terminate(pid)?;
    if released(dir, timeout)? {
        out.done_waiting();
        return Ok(Some(Stopped { pid, killed: false }));
    }
    out.warn(&format!(
        "the cluster (pid {pid}) did not stop within {}; killing it",
        opkit_apimachinery::duration::format(timeout)
    ));
    signal(pid, StopSignal::Kill)?;
    if released(dir, KILL_GRACE)? {
        out.done_waiting();
        return Ok(Some(Stopped { pid, killed: true }));
    }
    Err(CliError::Usage(format!("pid {pid} still holds {} after SIGKILL", dir.display())))
}

/// Whether `dir`'s lock is released within `timeout`.
fn released(dir: &Path, timeout: Duration) -> Result<bool, CliError> {
    let deadline = Instant::now() + timeout;
    loop {
        if holder(dir)?.is_none() {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Asks the cluster process `pid` to stop (SIGTERM), as Ctrl-C does.
pub(crate) fn terminate(pid: u32) -> Result<(), CliError> {
    signal(pid, StopSignal::Terminate)
}

/// How a cluster process is asked to stop.
#[derive(Debug, Clone, Copy)]
enum StopSignal {
    /// SIGTERM: stop gracefully, as Ctrl-C does.
    Terminate,
    /// SIGKILL: stop now.
    Kill,
}

/// Sends `signal` to `pid`; a process that is already gone is not an error.
#[cfg(unix)]
fn signal(pid: u32, signal: StopSignal) -> Result<(), CliError> {
    let process = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| CliError::Usage(format!("{pid} is not a process id")))?;
    let signal = match signal {
        StopSignal::Terminate => rustix::process::Signal::TERM,
        StopSignal::Kill => rustix::process::Signal::KILL,
    };
    match rustix::process::kill_process(process, signal) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(e) => Err(std::io::Error::from(e).into()),
    }
}

/// Stopping another process by its pid needs Unix signals; elsewhere stop the cluster
/// with Ctrl-C in its own terminal.
#[cfg(not(unix))]
fn signal(pid: u32, signal: StopSignal) -> Result<(), CliError> {
    Err(CliError::Usage(format!(
        "cannot send {signal:?} to pid {pid}: opkit cluster stop needs Unix signals; stop the cluster with Ctrl-C"
    )))
}
