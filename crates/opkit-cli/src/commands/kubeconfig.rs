//! The cluster client of `install`, `run`, `deploy` and friends: `--kubeconfig` and
//! `--context`, else `$KUBECONFIG` / `~/.kube/config` as kubectl reads them; and the
//! kubeconfig `opkit run` hands the operator, which impersonates its ServiceAccount.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Client, Config};

use super::CliError;
use crate::cli::ClusterArgs;

/// A client for the cluster the flags (or the environment) name.
pub(super) async fn client(args: &ClusterArgs) -> Result<Client, CliError> {
    let config = config(args.kubeconfig.as_deref(), args.context.clone()).await?;
    Client::try_from(config).map_err(|e| CliError::Kubeconfig(e.to_string()))
}

/// The client configuration of `kubeconfig` (else `$KUBECONFIG` / `~/.kube/config`, as
/// kubectl reads them) at `context` (else the current one).
pub(super) async fn config(kubeconfig: Option<&Path>, context: Option<String>) -> Result<Config, CliError> {
    let options = KubeConfigOptions { context, ..KubeConfigOptions::default() };
    match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|e| read_error(Some(path), e))?;
            Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| CliError::Kubeconfig(format!("{}: {e}", path.display())))
        }
        None => Config::from_kubeconfig(&options).await.map_err(|e| {
            CliError::Kubeconfig(format!(
                "{} (set KUBECONFIG, pass --kubeconfig, or start a local cluster with `opkit cluster start`)",
                describe(&e)
            ))
        }),
    }
}

/// A kubeconfig error naming the file once, unquoted, as kubectl does (kube's own text
/// quotes it, and `path` would name it again).
fn read_error(path: Option<&Path>, error: KubeconfigError) -> CliError {
    match (&error, path) {
        (KubeconfigError::ReadConfig(..), _) | (_, None) => CliError::Kubeconfig(describe(&error)),
        (_, Some(path)) => CliError::Kubeconfig(format!("{}: {error}", path.display())),
    }
}

/// kube's text of `error`, but a file that cannot be read as `PATH: WHY`.
fn describe(error: &KubeconfigError) -> String {
    match error {
        KubeconfigError::ReadConfig(io, path) => format!("{}: {io}", path.display()),
        other => other.to_string(),
    }
}

/// The kubeconfig the flags (or the environment) name, as kubectl reads it (the files of
/// `$KUBECONFIG` merged).
pub(super) fn read(args: &ClusterArgs) -> Result<Kubeconfig, CliError> {
    match &args.kubeconfig {
        Some(path) => Kubeconfig::read_from(path).map_err(|e| read_error(Some(path), e)),
        None => Kubeconfig::read().map_err(|e| read_error(None, e)),
    }
}

/// `kubeconfig` with the selected context (`--context`, else the current one) made
/// current and its user impersonating `user` (kubectl's `--as`): the credentials stay
/// the caller's, the permissions become `user`'s.
pub(super) fn impersonating(
    mut kubeconfig: Kubeconfig,
    context: Option<&str>,
    user: &str,
) -> Result<Kubeconfig, CliError> {
    let name = context
        .map(String::from)
        .or_else(|| kubeconfig.current_context.clone())
        .ok_or_else(|| CliError::Kubeconfig("no current context; pass --context".into()))?;
    let auth_name = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.context.as_ref())
        .and_then(|c| c.user.clone())
        .ok_or_else(|| CliError::Kubeconfig(format!("context {name:?} not found or has no user")))?;
    let auth = kubeconfig
        .auth_infos
        .iter_mut()
        .find(|a| a.name == auth_name)
        .and_then(|a| a.auth_info.as_mut())
        .ok_or_else(|| CliError::Kubeconfig(format!("user {auth_name:?} of context {name:?} not found")))?;
    auth.impersonate = Some(user.to_string());
    auth.impersonate_groups = None;
    kubeconfig.current_context = Some(name);
    Ok(kubeconfig)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = r#"
apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: admin
  user: {token: t0ken}
- name: other
  user: {token: other}
contexts:
- name: dev
  context: {cluster: dev, user: admin}
- name: elsewhere
  context: {cluster: dev, user: other}
current-context: elsewhere
"#;

    #[test]
    fn the_selected_contexts_user_impersonates() {
        let kc = Kubeconfig::from_yaml(KUBECONFIG).expect("kubeconfig");
        let out = impersonating(kc, Some("dev"), "system:serviceaccount:ns:op").expect("impersonating");
        assert_eq!(out.current_context.as_deref(), Some("dev"));
        let user =
            |n: &str| out.auth_infos.iter().find(|a| a.name == n).and_then(|a| a.auth_info.clone()).expect("user");
        assert_eq!(user("admin").impersonate.as_deref(), Some("system:serviceaccount:ns:op"));
        assert_eq!(user("other").impersonate, None);
    }

    #[test]
    fn an_unknown_context_is_an_error() {
        let kc = Kubeconfig::from_yaml(KUBECONFIG).expect("kubeconfig");
        assert!(matches!(impersonating(kc, Some("nope"), "u"), Err(CliError::Kubeconfig(m)) if m.contains("nope")));
    }
}
