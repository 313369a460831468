//! Which local cluster a kubeconfig's context names, as `kind load docker-image` targets a
//! named cluster: `cluster start` marks the cluster entry of the kubeconfig it writes with
//! the extension [`EXTENSION`] holding its data directory (kept when kubeconfigs are merged,
//! `kubectl config view --flatten`), which `cluster load` and `cluster images` follow.

use std::path::{Path, PathBuf};

use kube::config::{Kubeconfig, NamedExtension};
use serde_json::json;

use super::record::ClusterRecord;
use crate::commands::CliError;

/// The name of the kubeconfig cluster extension naming an opkit cluster's data directory.
pub(crate) const EXTENSION: &str = "opkit.dev/cluster";

/// Marks every cluster of `kubeconfig` as the opkit cluster of `data_dir`.
pub(crate) fn mark(kubeconfig: &mut Kubeconfig, data_dir: &Path) {
    for cluster in kubeconfig.clusters.iter_mut().filter_map(|c| c.cluster.as_mut()) {
        let extensions = cluster.extensions.get_or_insert_with(Vec::new);
        extensions.retain(|e| e.name != EXTENSION);
        extensions.push(NamedExtension {
            name: EXTENSION.into(),
            extension: json!({"dataDir": data_dir.display().to_string()}),
        });
    }
}

/// The data directory of the opkit cluster that `context` (else the current context) of
/// `kubeconfig` (else `$KUBECONFIG`, then `~/.kube/config`) names: the one its cluster's
/// [`EXTENSION`] records, else the directory holding the kubeconfig file when that is the
/// cluster's data directory (a cluster started before the extension existed). With no
/// kubeconfig at all, `default`; a context naming another cluster is an error.
pub(crate) fn data_dir(kubeconfig: Option<&Path>, context: Option<&str>, default: &Path) -> Result<PathBuf, CliError> {
    let files = match kubeconfig {
        Some(path) => vec![path.to_path_buf()],
        None => default_files(),
    };
    if kubeconfig.is_none() && !files.iter().any(|f| f.is_file()) {
        return Ok(default.to_path_buf());
    }
    let config = match kubeconfig {
        Some(path) => {
            Kubeconfig::read_from(path).map_err(|e| CliError::Kubeconfig(format!("{}: {e}", path.display())))?
        }
        None => Kubeconfig::read().map_err(|e| CliError::Kubeconfig(e.to_string()))?,
    };
    let context_name = context
        .map(String::from)
        .or_else(|| config.current_context.clone())
        .ok_or_else(|| CliError::Kubeconfig("no current context; pass --context or --data-dir".into()))?;
    let cluster_name = config
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .ok_or_else(|| CliError::Kubeconfig(format!("context {context_name:?} is not in the kubeconfig")))?;
    let cluster = config.clusters.iter().find(|c| c.name == cluster_name).and_then(|c| c.cluster.as_ref());
    let server = cluster.and_then(|c| c.server.clone()).unwrap_or_default();
    let marked = cluster
        .and_then(|c| c.extensions.as_ref())
        .and_then(|e| e.iter().find(|e| e.name == EXTENSION))
        .and_then(|e| e.extension.get("dataDir")?.as_str().map(PathBuf::from));
    if let Some(dir) = marked {
        return Ok(dir);
    }
    for file in &files {
        let Some(dir) = file.parent() else { continue };
        if ClusterRecord::load(dir).ok().flatten().is_some_and(|r| r.server == server) {
            return Ok(dir.to_path_buf());
        }
    }
    Err(CliError::Usage(format!(
        "the kubeconfig's context {context_name:?} names cluster {cluster_name:?} ({server}), which is not an opkit \
         cluster (`opkit cluster start` marks the kubeconfig it writes); switch to an opkit cluster's context, or pass \
         --data-dir DIR of one"
    )))
}

/// The files kubectl reads without `--kubeconfig`: those `$KUBECONFIG` lists, else
/// `~/.kube/config`.
fn default_files() -> Vec<PathBuf> {
    match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        Some(list) => std::env::split_paths(&list).collect(),
        None => std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".kube/config")).into_iter().collect(),
    }
}
