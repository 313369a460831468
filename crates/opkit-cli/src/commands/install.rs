//! `opkit install` / `opkit uninstall`: the project's CRDs (config/crd, rendered like
//! `kustomize build`) into or out of the cluster, waiting until established or gone; and
//! [`Steps`], how these commands and deploy/undeploy report what they did (a ✓ only once
//! the whole command succeeded).

use std::cell::RefCell;

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;
use serde_json::{Value, json};

use super::{CliError, kubeconfig, project_dir};
use crate::cli::{ClusterArgs, RemoveArgs};
use crate::cluster_ops;
use crate::output::Output;
use crate::project::Project;

/// The field manager of everything opkit applies.
pub(super) const FIELD_MANAGER: &str = "opkit";

/// The CRDs of config/crd; an error if there are none (nothing generated yet).
pub(super) fn crd_objects(root: &std::path::Path) -> Result<Vec<Value>, CliError> {
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
pub(super) struct Steps {
    done: RefCell<Vec<String>>,
}

impl Steps {
    /// Records a finished step (the progress callback of `cluster_ops`).
    pub(super) fn record(&self, step: &str) {
        self.done.borrow_mut().push(step.to_owned());
    }

    /// Prints every recorded step as `✓ ...`.
    pub(super) fn succeeded(self, out: &Output) {
        for step in self.done.into_inner() {
            out.step(&step);
        }
    }

    /// Warns what was done before `error` (if anything) and returns the error.
    pub(super) fn fail(self, out: &Output, error: impl Into<CliError>) -> CliError {
        let done = self.done.into_inner();
        if !done.is_empty() {
            out.warn(&format!("before the error: {}", done.join(", ")));
        }
        error.into()
    }
}

/// Applies the CRDs and waits until each is established.
pub(super) async fn install_crds(args: &ClusterArgs, out: &mut Output) -> Result<Vec<String>, CliError> {
    let root = project_dir()?;
    Project::load_any_layout(&root)?;
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
pub(super) async fn install(args: ClusterArgs, out: &mut Output) -> Result<(), CliError> {
    let names = install_crds(&args, out).await?;
    out.result(&format!("Installed {} CRD(s): {}", names.len(), names.join(", ")), json!({"installed": names}));
    Ok(())
}

/// `opkit uninstall`.
pub(super) async fn uninstall(args: RemoveArgs, out: &mut Output) -> Result<(), CliError> {
    let root = project_dir()?;
    Project::load_any_layout(&root)?;
    let objs = crd_objects(&root)?;
    let names = delete_objects(&objs, &args, out, "deleting CRDs and every object of them").await?;
    out.result(&format!("Uninstalled {} CRD(s).", names.len()), json!({"deleted": names}));
    Ok(())
}

/// Deletes `objs` (reverse order, waiting until gone) and returns what was deleted; an
/// error names the objects that did not exist unless `--ignore-not-found` is set. The
/// custom resources of the CRDs among `objs` go first, each waited for, while the
/// controller that removes their finalizers still runs (operator-sdk's tutorial ends with
/// `make undeploy` while the sample exists). A wait that times out names every object still
/// held and its finalizers. A ✓ is printed for each deleted object only when no error
/// follows.
pub(super) async fn delete_objects(
    objs: &[Value],
    args: &RemoveArgs,
    out: &mut Output,
    what: &str,
) -> Result<Vec<String>, CliError> {
    let client = kubeconfig::client(&args.cluster).await?;
    let timeout = args.cluster.timeout.get();
    out.waiting(what);
    let progress = Steps::default();
    let record = |m: &str| progress.record(m);
    let result = async {
        let resources = custom_resources(&client, objs).await?;
        let mut deleted = cluster_ops::delete(&client, &resources, &record, Some(timeout)).await?;
        deleted.extend(cluster_ops::delete(&client, objs, &record, Some(timeout)).await?);
        Ok::<_, CliError>(deleted)
    }
    .await;
    let deleted = match result {
        Ok(deleted) => deleted,
        Err(CliError::Cluster(timeout @ cluster_ops::ClusterOpsError::Timeout { .. })) => {
            out.done_waiting();
            let mut held = custom_resources(&client, objs).await.unwrap_or_default();
            held.extend(objs.iter().cloned());
            let held = held_objects(&client, &held).await;
            return Err(progress.fail(out, CliError::Held { timeout, held }));
        }
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

/// Every custom resource of the CRDs among `objs` that the cluster holds, in every
/// namespace, as `{apiVersion, kind, metadata: {name, namespace}}` for
/// [`cluster_ops::delete`]. A CRD the cluster does not serve has none.
async fn custom_resources(client: &kube::Client, objs: &[Value]) -> Result<Vec<Value>, CliError> {
    let mut found = Vec::new();
    for crd in objs.iter().filter(|o| is_crd(o)) {
        let Some(resource) = crd_resource(crd) else { continue };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let list = match api.list(&ListParams::default()).await {
            Ok(list) => list,
            Err(kube::Error::Api(s)) if s.is_not_found() => continue,
            Err(e) => return Err(CliError::ClusterRequest(format!("listing {}: {e}", resource.plural))),
        };
        for item in list.items {
            let mut metadata = json!({"name": item.metadata.name});
            if let Some(ns) = item.metadata.namespace {
                metadata["namespace"] = json!(ns);
            }
            found.push(json!({"apiVersion": resource.api_version, "kind": resource.kind, "metadata": metadata}));
        }
    }
    Ok(found)
}

fn is_crd(obj: &Value) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
        && obj.get("apiVersion").and_then(Value::as_str).is_some_and(|v| v.starts_with("apiextensions.k8s.io/"))
}

/// The API resource of a CRD's kind at its storage version (else its first version).
fn crd_resource(crd: &Value) -> Option<ApiResource> {
    let s = |p: &str| crd.pointer(p).and_then(Value::as_str);
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array)?;
    let version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .or_else(|| versions.first())
        .and_then(|v| v.get("name").and_then(Value::as_str))?;
    let gvk = GroupVersionKind::gvk(s("/spec/group")?, version, s("/spec/names/kind")?);
    Some(ApiResource::from_gvk_with_plural(&gvk, s("/spec/names/plural")?))
}

/// The objects among `objs` that are being deleted but still exist, each as
/// `kind.group/name in NAMESPACE (finalizers: ...)`. An object that cannot be read is left
/// out: this only explains a timeout.
async fn held_objects(client: &kube::Client, objs: &[Value]) -> Vec<String> {
    let mut held = Vec::new();
    for obj in objs {
        let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
        let (api_version, kind, name) = (s("/apiVersion"), s("/kind"), s("/metadata/name"));
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
        let Ok((resource, caps)) =
            kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, &kind)).await
        else {
            continue;
        };
        let namespace = (caps.scope == Scope::Namespaced)
            .then(|| obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or(client.default_namespace()));
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let Ok(Some(current)) = api.get_opt(&name).await else { continue };
        if current.metadata.deletion_timestamp.is_none() {
            continue;
        }
        let object = cluster_ops::ObjectRef { api_version, kind, name, namespace: namespace.map(String::from) };
        let place = namespace.map(|ns| format!(" in {ns}")).unwrap_or_default();
        let finalizers = current.metadata.finalizers.unwrap_or_default();
        let finalizers = if finalizers.is_empty() {
            "no finalizers".to_string()
        } else {
            format!("finalizers: {}", finalizers.join(", "))
        };
        held.push(format!("{object}{place} ({finalizers})"));
    }
    held
}
