//! `opkit install` / `opkit uninstall`: the project's CRDs (config/crd, rendered like
//! `kustomize build`) into or out of the cluster, waiting until established or gone; and
//! [`Steps`], how these commands and deploy/undeploy report what they did (a ✓ only once
//! the whole command succeeded).

use std::cell::RefCell;

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

/// What a command did to the cluster, reported as ✓ lines only once all of it succeeded, so
/// that no ✓ is followed by an error; on failure, [`Steps::fail`] warns what was changed
/// before it.
#[derive(Debug, Default)]
pub struct Steps {
    done: RefCell<Vec<String>>,
}

impl Steps {
    /// Records a finished step (the progress callback of `cluster_ops`).
    pub fn record(&self, step: &str) {
        self.done.borrow_mut().push(step.to_owned());
    }

    /// Prints every recorded step as `✓ ...`.
    pub fn succeeded(self, out: &Output) {
        for step in self.done.into_inner() {
            out.step(&step);
        }
    }

    /// Warns what was done before `error` (if anything) and returns the error.
    pub fn fail(self, out: &Output, error: impl Into<CliError>) -> CliError {
        let done = self.done.into_inner();
        if !done.is_empty() {
            out.warn(&format!("before the error: {}", done.join(", ")));
        }
        error.into()
    }
}

/// Applies the CRDs and waits until each is established.
pub async fn install_crds(args: &ClusterArgs, out: &mut Output) -> Result<Vec<String>, CliError> {
    let root = project_dir()?;
    Project::load(&root)?;
    let objs = crd_objects(&root)?;
    let client = kubeconfig::client(args).await?;
    out.waiting("applying the CRDs and waiting until they are established");
    // apply returns once every CRD it applied is Established.
    let steps = Steps::default();
    let timeout = args.timeout.get();
    if let Err(e) = cluster_ops::apply(&client, &objs, FIELD_MANAGER, &|m: &str| steps.record(m), timeout).await {
        out.done_waiting();
        return Err(steps.fail(out, e));
    }
    out.done_waiting();
    steps.succeeded(out);
    Ok(names(&objs))
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
/// error names the objects that did not exist unless `--ignore-not-found` is set. A ✓ is
/// printed for each deleted object only when no error follows.
pub async fn delete_objects(
    objs: &[Value],
    args: &RemoveArgs,
    out: &mut Output,
    what: &str,
) -> Result<Vec<String>, CliError> {
    let client = kubeconfig::client(&args.cluster).await?;
    out.waiting(what);
    let progress = Steps::default();
    let deleted = match cluster_ops::delete(&client, objs, &|m: &str| progress.record(m), true).await {
        Ok(deleted) => deleted,
        Err(e) => {
            out.done_waiting();
            return Err(progress.fail(out, e));
        }
    };
    out.done_waiting();
    // Only what was deleted gets a ✓; objects already gone are an error below, or nothing
    // with --ignore-not-found (as kubectl delete).
    let steps = Steps::default();
    for d in &deleted {
        steps.record(&format!("{d} deleted"));
    }
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
        let error = CliError::Usage(format!("not found: {} (pass --ignore-not-found to ignore)", missing.join(", ")));
        return Err(steps.fail(out, error));
    }
    steps.succeeded(out);
    Ok(deleted.iter().map(ToString::to_string).collect())
}
