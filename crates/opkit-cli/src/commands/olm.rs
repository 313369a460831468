//! `opkit olm install|status|uninstall|run`: the Operator Lifecycle Manager on a cluster
//! (`opkit-olm`). Its CRDs are applied to the cluster; its controllers run in an `opkit
//! olm run` process (started in the background by `install`, its log in `--log-file`),
//! which holds the Lease `olm/olm-operator` while it runs, so `status` can tell from any
//! machine whether OLM is working and `uninstall` can stop a runner on this one.

use std::time::{Duration, Instant};

use opkit::leader::LeaderElectionConfig;
use opkit::{Manager, ManagerOptions};
use opkit_olm::install::{self, LEASE, OLM_NAMESPACE};
use serde_json::json;

use super::{CliError, kubeconfig};
use crate::cli::{OlmInstallArgs, OlmRunArgs, OlmStatusArgs, OlmUninstallArgs};
use crate::output::Output;

/// How often `install` looks whether the runner it started holds the Lease.
const POLL: Duration = Duration::from_millis(200);

/// `opkit olm install`: CRDs, namespaces, the global OperatorGroup, then the controllers
/// in a background `opkit olm run`.
pub(super) async fn install(args: OlmInstallArgs, out: &mut Output) -> Result<(), CliError> {
    note_version(&args.version, out);
    let client = kubeconfig::client(&args.cluster).await?;
    let timeout = args.cluster.timeout.get();
    out.waiting("applying OLM's CRDs");
    install::install(&client, timeout).await?;
    out.step("OLM's CRDs, the olm and operators namespaces and OperatorGroup operators/global-operators applied");
    let before = install::status(&client).await?;
    if let Some(holder) = &before.running {
        out.result(
            &format!("OLM is installed; its controllers already run ({holder})"),
            json!({"installed": true, "running": holder}),
        );
        return Ok(());
    }
    let log_file = std::path::absolute(&args.log_file)?;
    if let Some(dir) = log_file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let log = std::fs::File::create(&log_file)
        .map_err(|e| std::io::Error::new(e.kind(), format!("creating {}: {e}", log_file.display())))?;
    let mut command = std::process::Command::new(std::env::current_exe()?);
    command.args(["olm", "run", "--timeout", &args.cluster.timeout.to_string()]);
    if let Some(path) = &args.cluster.kubeconfig {
        command.arg("--kubeconfig").arg(std::path::absolute(path)?);
    }
    if let Some(context) = &args.cluster.context {
        command.args(["--context", context]);
    }
    let mut child = super::cluster::spawn_background(&mut command, log)?;
    let pid = child.id();
    out.waiting(&format!("starting OLM's controllers (pid {pid})"));
    let deadline = Instant::now() + timeout;
    let holder = loop {
        if let Some(exit) = child.try_wait()? {
            return Err(CliError::Build(format!(
                "OLM's controllers exited ({exit}) before they started; see {}",
                log_file.display()
            )));
        }
        let status = install::status(&client).await?;
        if let Some(holder) = status.running.filter(|h| install::runner_of(h).is_some_and(|(p, _)| p == pid)) {
            break holder;
        }
        if Instant::now() >= deadline {
            return Err(CliError::Build(format!(
                "OLM's controllers (pid {pid}) did not start within {}; see {}",
                args.cluster.timeout,
                log_file.display()
            )));
        }
        tokio::time::sleep(POLL).await;
    };
    out.result(
        &format!("OLM is installed; its controllers run in the background (pid {pid}, log {})", log_file.display()),
        json!({"installed": true, "running": holder, "pid": pid, "logFile": log_file}),
    );
    Ok(())
}

/// `opkit olm status`: the CRDs and whether the controllers run; exits 3 when OLM is not
/// installed or not running.
pub(super) async fn status(args: OlmStatusArgs, out: &mut Output) -> Result<(), CliError> {
    note_version(&args.version, out);
    let client = kubeconfig::client(&args.cluster).await?;
    let status = install::status(&client).await?;
    let mut text = String::from("NAME                                             INSTALLED\n");
    for (name, ok) in &status.crds {
        text.push_str(&format!("{name:<48} {}\n", if *ok { "Installed" } else { "Not installed" }));
    }
    text.push_str(&match &status.running {
        Some(holder) => format!("OLM's controllers run ({holder})"),
        None => "OLM's controllers are not running (opkit olm install starts them)".into(),
    });
    let crds: serde_json::Map<String, serde_json::Value> =
        status.crds.iter().map(|(name, ok)| (name.clone(), json!(ok))).collect();
    out.result(&text, json!({"installed": status.installed(), "running": status.running, "crds": crds}));
    if status.installed() && status.running.is_some() { Ok(()) } else { Err(CliError::Reported { code: 3 }) }
}

/// `opkit olm uninstall`: stops a runner on this machine, deletes the CRDs (and so every
/// OLM object) and OLM's namespaces.
pub(super) async fn uninstall(args: OlmUninstallArgs, out: &mut Output) -> Result<(), CliError> {
    note_version(&args.version, out);
    let args = args.remove;
    let client = kubeconfig::client(&args.cluster).await?;
    let status = install::status(&client).await?;
    if !args.ignore_not_found && status.crds.iter().all(|(_, ok)| !ok) {
        return Err(CliError::Usage(
            "OLM is not installed on this cluster (--ignore-not-found to succeed anyway)".into(),
        ));
    }
    if let Some((pid, host)) = status.running.as_deref().and_then(install::runner_of) {
        if host == hostname() {
            match super::cluster::terminate(pid) {
                Ok(()) => out.step(&format!("OLM's controllers (pid {pid}) asked to stop")),
                Err(e) => out.warn(&format!("could not stop OLM's controllers (pid {pid}): {e}")),
            }
        } else {
            out.warn(&format!("OLM's controllers run on {host} (pid {pid}); stop them there"));
        }
    }
    out.waiting("deleting OLM's CRDs");
    install::uninstall(&client, args.cluster.timeout.get()).await?;
    out.result("OLM uninstalled", json!({"uninstalled": true}));
    Ok(())
}

/// `opkit olm run`: OLM's controllers in the foreground, holding the Lease, until SIGTERM
/// or Ctrl-C.
pub(super) async fn run(args: OlmRunArgs) -> Result<(), CliError> {
    let client = kubeconfig::client(&args.cluster).await?;
    let mut election = LeaderElectionConfig::new(LEASE, OLM_NAMESPACE);
    election.identity = install::runner_identity(std::process::id(), &hostname());
    election.release_on_cancel = true;
    let options = ManagerOptions { leader_election: Some(election), ..ManagerOptions::default() };
    let mgr = Manager::new(client, options);
    opkit_olm::setup(&mgr).map_err(|e| CliError::Build(e.to_string()))?;
    tracing::info!("starting OLM's controllers");
    mgr.run().await.map_err(|e| CliError::Build(e.to_string()))
}

/// Notes that `--version` cannot choose another OLM: opkit's is built in (operator-sdk
/// fetches the version's manifests).
fn note_version(version: &str, out: &Output) {
    if version != "latest" {
        out.warn(&format!(
            "--version {version}: opkit's OLM is built in (its CRDs and controllers are part of opkit), so this is the version there is"
        ));
    }
}

/// This machine's name, for the runner's identity.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}
