//! `opkit version`: opkit's version and the git commit it was built from, and, as
//! `kubectl version` does, the version the cluster's server reports at `/version`.

use kube::config::KubeConfigOptions;
use serde_json::json;

use super::CliError;
use crate::cli::{ClusterArgs, VersionArgs};
use crate::output::Output;

/// opkit's version.
pub(super) const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit opkit was built from ("unknown" outside a git checkout).
pub(super) const GIT_COMMIT: &str = env!("OPKIT_GIT_COMMIT");

/// The Kubernetes API version opkit's client is built for (k8s-openapi's enabled version),
/// as operator-sdk reports the client-go it is built with.
pub(super) const KUBERNETES_VERSION: &str = kubernetes_version();

#[allow(unreachable_code)]
const fn kubernetes_version() -> &'static str {
    k8s_openapi::k8s_if_1_33! { return "v1.33"; }
    k8s_openapi::k8s_if_1_34! { return "v1.34"; }
    k8s_openapi::k8s_if_1_35! { return "v1.35"; }
    "unknown"
}

/// Prints the client's version and, unless `--client`, the server's (or why it cannot be
/// reached: that is not an error).
pub(super) async fn version(args: VersionArgs, out: &mut Output) -> Result<(), CliError> {
    let client = json!({"opkitVersion": VERSION, "gitCommit": GIT_COMMIT, "kubernetesVersion": KUBERNETES_VERSION});
    let mut text = vec![
        format!("opkit Version: {VERSION}"),
        format!("Git Commit: {GIT_COMMIT}"),
        format!("Kubernetes Version: {KUBERNETES_VERSION}"),
    ];
    if args.client {
        out.result(&text.join("\n"), json!({ "clientVersion": client }));
        return Ok(());
    }
    match server_version(&args.cluster).await {
        Ok((server, info)) => {
            text.push(format!("Server Version: {} ({server})", info.git_version));
            out.result(&text.join("\n"), json!({"clientVersion": client, "server": server, "serverVersion": info}));
        }
        Err(reason) => {
            text.push(format!("Server Version: unreachable: {reason}"));
            out.result(&text.join("\n"), json!({"clientVersion": client, "serverError": reason}));
        }
    }
    Ok(())
}

/// The server's URL and `/version`, or why they cannot be had.
async fn server_version(args: &ClusterArgs) -> Result<(String, k8s_openapi::apimachinery::pkg::version::Info), String> {
    let kubeconfig = super::kubeconfig::read(args).map_err(|e| e.to_string())?;
    let options = KubeConfigOptions { context: args.context.clone(), ..KubeConfigOptions::default() };
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &options).await.map_err(|e| format!("kubeconfig: {e}"))?;
    let server = config.cluster_url.to_string().trim_end_matches('/').to_string();
    let client = kube::Client::try_from(config).map_err(|e| format!("kubeconfig: {e}"))?;
    let timeout = args.timeout.get();
    match tokio::time::timeout(timeout, client.apiserver_version()).await {
        Ok(Ok(info)) => Ok((server, info)),
        Ok(Err(e)) => Err(format!("{server}: {}", causes(&e))),
        Err(_) => Err(format!("{server}: no answer within {}", args.timeout)),
    }
}

/// An error and its causes, `: `-separated, each said once.
fn causes(error: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}
