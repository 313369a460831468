//! The cluster client of `install`, `run`, `deploy` and friends: `--kubeconfig` and
//! `--context`, else `$KUBECONFIG` / `~/.kube/config` as kubectl reads them.

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::CliError;
use crate::cli::ClusterArgs;

/// A client for the cluster the flags (or the environment) name.
pub async fn client(args: &ClusterArgs) -> Result<Client, CliError> {
    let options = KubeConfigOptions { context: args.context.clone(), ..KubeConfigOptions::default() };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc =
                Kubeconfig::read_from(path).map_err(|e| CliError::Kubeconfig(format!("{}: {e}", path.display())))?;
            Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| CliError::Kubeconfig(format!("{}: {e}", path.display())))?
        }
        None => Config::from_kubeconfig(&options).await.map_err(|e| {
            CliError::Kubeconfig(format!(
                "{e} (set KUBECONFIG, pass --kubeconfig, or start a local cluster with `opkit cluster start`)"
            ))
        })?,
    };
    Client::try_from(config).map_err(|e| CliError::Kubeconfig(e.to_string()))
}
