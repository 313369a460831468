//! `opkit install` / `opkit uninstall`: the project's CRDs (config/crd, rendered like
//! `kustomize build`) into or out of the cluster, waiting until established or gone.

use std::time::Duration;

use serde_json::{Value, json};

use super::{CliError, kubeconfig, project_dir};
use crate::cli::{ClusterArgs, RemoveArgs};
use crate::cluster_ops;
use crate::output::Output;
use crate::project::Project;

/// The field manager of everything opkit applies.
pub const FIELD_MANAGER: &str = "opkit";

/// The CRDs of config/crd; an error if there are none (nothing generated yet).
pub fn crd_objects(root: &std::path::Path) -> Result<Vec<Value>, CliError> {
    let objs = crate::kustomize::build(&root.join("config/crd"))?;
    if objs.is_empty() {
        return Err(CliError::Usage(
            "config/crd lists no CRDs: run `opkit create api` and then `opkit generate` (make manifests)".into(),
        ));
    }
    Ok(objs)
}

fn names(objs: &[Value]) -> Vec<String> {
    objs.iter().filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str).map(String::from)).collect()
}

/// Applies the CRDs and waits until each is established.
pub async fn install_crds(args: &ClusterArgs, out: &mut Output) -> Result<Vec<String>, CliError> {
    let root = project_dir()?;
    Project::load(&root)?;
    let objs = crd_objects(&root)?;
    let client = kubeconfig::client(args).await?;
    out.waiting("applying the CRDs and waiting until they are established");
    // apply returns once every CRD it applied is Established.
    cluster_ops::apply(&client, &objs, FIELD_MANAGER, &|m: &str| out.step(m), Duration::from_secs(args.timeout))
        .await?;
    let names = names(&objs);
    out.done_waiting();
    Ok(names)
}

/// `opkit install`.
pub async fn install(args: ClusterArgs, out: &mut Output) -> Result<(), CliError> {
    let names = install_crds(&args, out).await?;
    out.result(&format!("Installed {} CRD(s): {}", names.len(), names.join(", ")), json!({"installed": names}));
    Ok(())
}

/// `opkit uninstall`.
pub async fn uninstall(args: RemoveArgs, out: &mut Output) -> Result<(), CliError> {
    let root = project_dir()?;
    Project::load(&root)?;
    let objs = crd_objects(&root)?;
    let names = delete_objects(&objs, &args, out, "deleting CRDs and every object of them").await?;
    out.result(&format!("Uninstalled {} CRD(s).", names.len()), json!({"deleted": names}));
    Ok(())
}

/// Deletes `objs` (reverse order, waiting until gone) and returns what was deleted; an
/// error names the objects that did not exist unless `--ignore-not-found` is set.
pub async fn delete_objects(
    objs: &[Value],
    args: &RemoveArgs,
    out: &mut Output,
    what: &str,
) -> Result<Vec<String>, CliError> {
    let client = kubeconfig::client(&args.cluster).await?;
    out.waiting(what);
    let deleted = cluster_ops::delete(&client, objs, &|m: &str| out.step(m), true).await?;
    let missing: Vec<String> = objs
        .iter()
        .filter_map(|o| {
            let kind = o.get("kind").and_then(Value::as_str)?;
            let name = o.pointer("/metadata/name").and_then(Value::as_str)?;
            let gone = deleted.iter().any(|d| d.kind == kind && d.name == name);
            (!gone).then(|| format!("{}/{name}", kind.to_lowercase()))
        })
        .collect();
    if !args.ignore_not_found && !missing.is_empty() {
        return Err(CliError::Usage(format!("not found: {} (pass --ignore-not-found to ignore)", missing.join(", "))));
    }
    Ok(deleted.iter().map(ToString::to_string).collect())
}
