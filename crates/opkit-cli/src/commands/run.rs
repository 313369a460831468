//! `opkit run`: installs the CRDs, then builds and runs the operator locally (`cargo run`)
//! against the same cluster, forwarding Ctrl-C / SIGTERM so it shuts down cleanly. The
//! operator gets the cluster as `--kubeconfig` and `--context` (its `ManagerArgs`), so
//! `opkit run --context X` installs into and watches X even when X is not current.
//!
//! The operator runs as the ServiceAccount its deployment would use: the RBAC objects
//! of config/default (namespace, ServiceAccount, roles and bindings, rendered as `make
//! deploy` renders them) are applied, and the operator gets a kubeconfig whose user
//! impersonates that ServiceAccount. So `make run` meets the same `forbidden` errors
//! the deployed operator would. `--as-admin` keeps the caller's own identity.
//!
//! A project with webhooks gets them served locally ([`super::run_webhooks`]) unless
//! `ENABLE_WEBHOOKS=false`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;

use super::install::FIELD_MANAGER;
use super::{CliError, install, kubeconfig, project_dir, run_webhooks};
use crate::cli::{ClusterArgs, RunArgs};
use crate::cluster_ops;
use crate::output::Output;

/// The kinds `opkit run` applies from config/default before starting the operator.
const RBAC_KINDS: &[&str] =
    &["Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"];

/// Where the operator's impersonating kubeconfig is written (under the project).
const RUN_KUBECONFIG: &str = "target/opkit/run-kubeconfig";

/// Runs the operator until it exits or a signal stops it.
pub(super) async fn run(args: RunArgs, out: &mut Output) -> Result<(), CliError> {
    let root = project_dir()?;
    let project = crate::project::Project::load(&root)?;
    install::install_crds(&args.cluster, out).await?;
    let enable_webhooks = run_webhooks::enabled(std::env::var("ENABLE_WEBHOOKS").ok().as_deref());
    let webhooks = match (run_webhooks::project_has_webhooks(&project), enable_webhooks) {
        (true, true) => Some(run_webhooks::LocalWebhooks::prepare(&root, &project)?),
        (true, false) => {
            out.step("ENABLE_WEBHOOKS=false: the operator runs without its webhooks");
            None
        }
        (false, _) => None,
    };
    let kubeconfig = if args.as_admin { None } else { Some(run_as_service_account(&args, &root, out).await?) };
    out.step("CRDs installed; building and starting the operator (cargo run)");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = operator_command(&cargo, &args, &root, kubeconfig.as_deref(), &project, webhooks.as_ref())?;
    let timeout = args.cluster.timeout.get();
    let client = match &webhooks {
        Some(_) => Some(kubeconfig::client(&args.cluster).await?),
        None => None,
    };
    let mut child = cmd.spawn().map_err(|e| CliError::Build(format!("running {cargo}: {e}")))?;
    let mut install = std::pin::pin!(async {
        match (&webhooks, &client) {
            (Some(w), Some(c)) => w.install_when_listening(c, timeout).await.map(|()| w.summary()),
            _ => std::future::pending().await,
        }
    });
    let mut installing = webhooks.is_some();
    let outcome = loop {
        tokio::select! {
            status = child.wait() => break status.map_err(CliError::from),
            signalled = opkit::signal::shutdown_requested() => {
                break match signalled {
                    Ok(()) => stop(&mut child).await.map_err(CliError::from),
                    Err(e) => Err(CliError::from(e)),
                };
            }
            installed = &mut install, if installing => {
                installing = false;
                match installed {
                    Ok(summary) => out.step(&summary),
                    Err(e) => {
                        let _ = stop(&mut child).await;
                        break Err(e);
                    }
                }
            }
        }
    };
    if let (Some(w), Some(c)) = (&webhooks, &client) {
        w.remove(c, timeout).await?;
        out.step("webhook configurations removed, CRDs restored");
    }
    let status = outcome?;
    if status.success() { Ok(()) } else { Err(CliError::Build(format!("the operator exited with {status}"))) }
}

/// `cargo run` of the operator against the chosen cluster: its cluster flags, the
/// kubeconfig (the impersonating one, else the caller's), and the local webhooks'
/// environment (or `ENABLE_WEBHOOKS=false` when the project has webhooks it does not serve).
fn operator_command(
    cargo: &str,
    args: &RunArgs,
    root: &Path,
    kubeconfig: Option<&Path>,
    project: &crate::project::Project,
    webhooks: Option<&run_webhooks::LocalWebhooks>,
) -> Result<tokio::process::Command, CliError> {
    let mut cmd = tokio::process::Command::new(cargo);
    cmd.arg("run");
    if args.release {
        cmd.arg("--release");
    }
    cmd.arg("--").args(operator_cluster_args(&args.cluster, kubeconfig)?);
    cmd.args(&args.args).current_dir(root).stdin(Stdio::null());
    if let Some(path) = kubeconfig.or(args.cluster.kubeconfig.as_deref()) {
        cmd.env("KUBECONFIG", std::path::absolute(path)?);
    }
    match webhooks {
        Some(w) => {
            cmd.envs(w.env());
        }
        None if run_webhooks::project_has_webhooks(project) => {
            cmd.env("ENABLE_WEBHOOKS", "false");
        }
        None => {}
    }
    Ok(cmd)
}

/// The operator's `--kubeconfig` and `--context` (its `ManagerArgs`), so it watches the
/// cluster the CRDs went to: the impersonating kubeconfig (whose current context is the
/// chosen one), else the caller's `--kubeconfig` and `--context`.
fn operator_cluster_args(cluster: &ClusterArgs, impersonating: Option<&Path>) -> Result<Vec<OsString>, CliError> {
    let mut out = Vec::new();
    if let Some(path) = impersonating.or(cluster.kubeconfig.as_deref()) {
        out.push("--kubeconfig".into());
        out.push(std::path::absolute(path)?.into_os_string());
    }
    if let Some(context) = &cluster.context {
        out.push("--context".into());
        out.push(context.into());
    }
    Ok(out)
}

/// Applies config/default's namespace and RBAC objects and writes a kubeconfig that
/// impersonates the manager's ServiceAccount; returns the kubeconfig's path.
async fn run_as_service_account(args: &RunArgs, root: &Path, out: &mut Output) -> Result<PathBuf, CliError> {
    let rendered = crate::kustomize::build(&root.join("config/default")).map_err(|e| {
        CliError::Usage(format!("rendering config/default for the operator's RBAC: {e} (--as-admin runs without it)"))
    })?;
    let (namespace, account) = manager_account(&rendered).ok_or_else(|| {
        CliError::Usage("config/default defines no ServiceAccount for the manager; run with --as-admin".into())
    })?;
    let rbac: Vec<Value> =
        rendered.into_iter().filter(|o| o["kind"].as_str().is_some_and(|k| RBAC_KINDS.contains(&k))).collect();
    let client = kubeconfig::client(&args.cluster).await?;
    let timeout = args.cluster.timeout.get();
    cluster_ops::apply(&client, &rbac, FIELD_MANAGER, &|m: &str| out.step(m), timeout).await?;
    let user = format!("system:serviceaccount:{namespace}:{account}");
    let impersonating =
        kubeconfig::impersonating(kubeconfig::read(&args.cluster)?, args.cluster.context.as_deref(), &user)?;
    let path = root.join(RUN_KUBECONFIG);
    opkit_apiserver::kubeconfig::write(&impersonating, &path)
        .map_err(|e| CliError::Kubeconfig(format!("writing {}: {e}", path.display())))?;
    out.step(&format!("the operator runs as {user}, with config/rbac's permissions (--as-admin: as yourself)"));
    Ok(path)
}

/// The namespace and name of the ServiceAccount the manager Deployment runs as (else
/// the only ServiceAccount) in rendered config/default objects.
fn manager_account(objs: &[Value]) -> Option<(String, String)> {
    let namespace_of =
        |o: &Value| o.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_string();
    let from_deployment = objs.iter().filter(|o| o["kind"] == "Deployment").find_map(|d| {
        let name = d.pointer("/spec/template/spec/serviceAccountName")?.as_str()?;
        Some((namespace_of(d), name.to_string()))
    });
    let accounts: Vec<&Value> = objs.iter().filter(|o| o["kind"] == "ServiceAccount").collect();
    from_deployment.or_else(|| match accounts.as_slice() {
        [only] => Some((namespace_of(only), only.pointer("/metadata/name")?.as_str()?.to_string())),
        _ => None,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_operator_gets_the_chosen_kubeconfig_and_context() {
        #[derive(clap::Parser)]
        struct Flags {
            #[command(flatten)]
            cluster: ClusterArgs,
        }
        let cluster = |flags: &[&str]| <Flags as clap::Parser>::parse_from(["opkit"].iter().chain(flags)).cluster;
        let chosen = cluster(&["--kubeconfig", "/k/config", "--context", "b"]);
        let args = |imp: Option<&Path>| {
            operator_cluster_args(&chosen, imp)
                .expect("args")
                .into_iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(args(None), ["--kubeconfig", "/k/config", "--context", "b"]);
        assert_eq!(args(Some(Path::new("/p/run-kubeconfig"))), ["--kubeconfig", "/p/run-kubeconfig", "--context", "b"]);
        assert!(operator_cluster_args(&cluster(&[]), None).expect("args").is_empty());
    }

    #[test]
    fn the_manager_deployment_names_the_account() {
        let objs = vec![
            json!({"kind": "ServiceAccount", "metadata": {"name": "a", "namespace": "sys"}}),
            json!({"kind": "ServiceAccount", "metadata": {"name": "op-controller-manager", "namespace": "sys"}}),
            json!({"kind": "Deployment", "metadata": {"name": "m", "namespace": "sys"},
                "spec": {"template": {"spec": {"serviceAccountName": "op-controller-manager"}}}}),
        ];
        assert_eq!(manager_account(&objs), Some(("sys".into(), "op-controller-manager".into())));
        assert_eq!(manager_account(&objs[..1]), Some(("sys".into(), "a".into())));
        assert_eq!(manager_account(&objs[..2]), None);
    }
}
