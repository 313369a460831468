//! `opkit deploy` / `opkit undeploy`: config/default rendered like `kustomize build` (in
//! Rust, kubectl is not needed), with the manager image set, applied to or deleted from
//! the cluster; `opkit build-installer` writes the same rendering to dist/install.yaml.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use super::install::{FIELD_MANAGER, Steps, delete_objects};
use super::{CliError, kubeconfig, project_dir};
use crate::cli::{BuildInstallerArgs, DeployArgs, RemoveArgs};
use crate::cluster_ops;
use crate::fileplan::FilePlan;
use crate::output::Output;
use crate::project::Project;

/// The image name config/manager uses, replaced by `--image` (kustomize's `images`).
const PLACEHOLDER_IMAGE: &str = "controller";

/// Sets every container whose image is `controller` (any tag) to `image`, as
/// `kustomize edit set image controller=IMAGE` does for `make deploy`.
pub(super) fn set_image(objs: &mut [Value], image: &str) -> usize {
    crate::kustomize::set_image(objs, PLACEHOLDER_IMAGE, image)
}

fn render(image: Option<&str>) -> Result<Vec<Value>, CliError> {
    let root = project_dir()?;
    Project::load_any_layout(&root)?;
    let mut objs = crate::kustomize::build(&root.join("config/default"))?;
    if let Some(image) = image {
        set_image(&mut objs, image);
    }
    Ok(objs)
}

/// `opkit build-installer`: config/default with the image set, as one YAML stream in
/// `--file` (kubebuilder's `kustomize build config/default > dist/install.yaml`).
pub(super) fn build_installer(args: BuildInstallerArgs, out: &mut Output) -> Result<(), CliError> {
    let root = project_dir()?;
    let objs = render(Some(&args.image))?;
    let yaml = crate::kustomize::to_yaml_stream(&objs)?;
    let mut plan = FilePlan::new(&root);
    plan.write(&args.file, yaml);
    plan.commit()?;
    let path = args.file.display().to_string();
    out.result(
        &format!(
            "Wrote {path}: {} object(s) with image {}; install with `kubectl apply -f {path}`.",
            objs.len(),
            args.image
        ),
        json!({"path": path, "objects": objs.len(), "image": args.image}),
    );
    Ok(())
}

/// `opkit deploy`.
pub(super) async fn deploy(args: DeployArgs, out: &mut Output) -> Result<(), CliError> {
    let steps = Steps::default();
    match deploy_steps(&args, out, &steps).await {
        Ok(result) => {
            out.done_waiting();
            steps.succeeded(out);
            let (text, json) = result;
            out.result(&text, json);
            Ok(())
        }
        Err(e) => {
            out.done_waiting();
            Err(steps.fail(out, e))
        }
    }
}

/// Applies config/default and waits for its Deployments, recording each step in `steps`;
/// returns the result to print.
async fn deploy_steps(args: &DeployArgs, out: &mut Output, steps: &Steps) -> Result<(String, Value), CliError> {
    let objs = render(Some(&args.image))?;
    let client = kubeconfig::client(&args.cluster).await?;
    let timeout = args.cluster.timeout.get();
    out.waiting("applying config/default");
    let applied = cluster_ops::apply(&client, &objs, FIELD_MANAGER, &|m: &str| steps.record(m), timeout).await?;
    let deployments: Vec<(String, String)> = objs
        .iter()
        .filter(|o| o.get("kind").and_then(Value::as_str) == Some("Deployment"))
        .filter_map(|o| {
            let name = o.pointer("/metadata/name")?.as_str()?.to_string();
            let ns = o.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_string();
            Some((ns, name))
        })
        .collect();
    let cluster_nodes = nodes(&client).await?;
    let opkit_cluster = is_opkit_cluster(&cluster_nodes);
    let mut simulated = false;
    if args.no_wait {
        // Without waiting for pods, the nodes' reported images are all there is to go by.
        if opkit_cluster && !image_reported(&cluster_nodes, &args.image)? {
            simulated = true;
            out.warn(&not_loaded_warning(&args.image));
        }
    } else {
        for (ns, name) in &deployments {
            out.waiting(&format!("waiting for deployment {ns}/{name} to become available"));
            if let Err(e) = cluster_ops::wait_deployment_available(&client, ns, name, timeout).await {
                return Err(
                    super::pod_warnings::explain_timeout(&client, ns, &[selector(&objs, ns, name)], e.into()).await
                );
            }
            if opkit_cluster && !runs_for_real(&client, ns, name).await? {
                simulated = true;
                out.warn(&format!("deployment {ns}/{name} reports available, but its pods are simulated"));
            } else {
                steps.record(&format!("deployment {ns}/{name} is available"));
            }
        }
        if simulated {
            out.warn(&not_loaded_warning(&args.image));
        }
    }
    let names: Vec<String> = applied.iter().map(ToString::to_string).collect();
    let text = if simulated {
        format!(
            "Applied {} object(s) with image {}, which is not loaded: the operator is not running.",
            names.len(),
            args.image
        )
    } else {
        format!("Deployed {} object(s) with image {}.", names.len(), args.image)
    };
    Ok((text, json!({"applied": names, "image": args.image, "imageLoaded": !simulated})))
}

/// The `matchLabels` of Deployment `ns/name` among `objs`.
fn selector(objs: &[Value], ns: &str, name: &str) -> BTreeMap<String, String> {
    objs.iter()
        .find(|o| {
            o.get("kind").and_then(Value::as_str) == Some("Deployment")
                && o.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
                && o.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default") == ns
        })
        .and_then(|o| o.pointer("/spec/selector/matchLabels"))
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default()
}

/// What to do when the manager's image is not loaded into the local cluster.
fn not_loaded_warning(image: &str) -> String {
    format!(
        "image {image} is not loaded into this opkit cluster: the manager's pods are simulated and the \
         operator does NOT run. Load it with `make cluster-load IMG={image}` (or `opkit cluster load {image} \
         --binary PATH`), then deploy again."
    )
}

/// The nodes of the cluster.
async fn nodes(client: &kube::Client) -> Result<Vec<Node>, CliError> {
    let api: Api<Node> = Api::all(client.clone());
    let list =
        api.list(&Default::default()).await.map_err(|e| CliError::ClusterRequest(format!("listing nodes: {e}")))?;
    Ok(list.items)
}

/// Whether the cluster is a local opkit cluster: its nodes are simulated, and only
/// pods whose images are loaded run for real.
fn is_opkit_cluster(nodes: &[Node]) -> bool {
    nodes.iter().any(|n| {
        let annotations = n.metadata.annotations.as_ref();
        annotations.and_then(|a| a.get(opkit_controllers::SIMULATED_NODE_ANNOTATION)).is_some_and(|v| v == "true")
    })
}

/// Whether a node reports `image` in `status.images`, as kubelets report the images on
/// their machine (an opkit node reports the loaded ones, refreshed every heartbeat).
fn image_reported(nodes: &[Node], image: &str) -> Result<bool, CliError> {
    let wanted = opkit_kubelet::images::normalize(image)?;
    Ok(nodes.iter().any(|n| {
        n.status.iter().flat_map(|s| s.images.iter().flatten()).any(|i| {
            i.names.iter().flatten().any(|name| opkit_kubelet::images::normalize(name).is_ok_and(|n| n == wanted))
        })
    }))
}

/// Whether `pod` is a simulated pod of a local opkit cluster: it has started and its
/// containers carry no process runtime ID (false on any other cluster, or when the nodes
/// cannot be read).
pub(super) async fn simulated_on_opkit(client: &kube::Client, pod: &Pod) -> bool {
    let statuses = pod.status.iter().flat_map(|s| s.container_statuses.iter().flatten()).collect::<Vec<_>>();
    let started = statuses.iter().any(|c| c.container_id.is_some());
    let real = statuses.iter().any(|c| is_real(c.container_id.as_deref()));
    started && !real && nodes(client).await.is_ok_and(|n| is_opkit_cluster(&n))
}

/// Whether a container ID is the process runtime's (`opkit://`), not a simulated one.
fn is_real(container_id: Option<&str>) -> bool {
    container_id.is_some_and(|id| id.starts_with(opkit_controllers::REAL_CONTAINER_ID_PREFIX))
}

/// Whether the ready pods of Deployment `ns/name` run real processes: their containers
/// carry the process runtime's `opkit://` IDs, where simulated ones carry `containerd://`.
async fn runs_for_real(client: &kube::Client, ns: &str, name: &str) -> Result<bool, CliError> {
    let failed = |e: kube::Error| CliError::ClusterRequest(format!("reading deployment {ns}/{name}'s pods: {e}"));
    let deployment = Api::<Deployment>::namespaced(client.clone(), ns).get(name).await.map_err(failed)?;
    let labels = deployment.spec.and_then(|s| s.selector.match_labels).unwrap_or_default();
    let selector: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&selector.join(",")))
        .await
        .map_err(failed)?;
    Ok(pods.items.iter().any(|p| {
        p.status.iter().flat_map(|s| s.container_statuses.iter().flatten()).any(|c| is_real(c.container_id.as_deref()))
    }))
}

/// `opkit undeploy`.
pub(super) async fn undeploy(args: RemoveArgs, out: &mut Output) -> Result<(), CliError> {
    let objs = render(None)?;
    let names = delete_objects(&objs, &args, out, "deleting what config/default applied").await?;
    out.result(&format!("Undeployed {} object(s).", names.len()), json!({"deleted": names}));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_placeholder_is_replaced() {
        let mut objs = vec![json!({"kind": "Deployment", "spec": {"template": {"spec": {"containers": [
            {"name": "manager", "image": "controller:latest"},
            {"name": "sidecar", "image": "busybox"}
        ]}}}})];
        assert_eq!(set_image(&mut objs, "example.com/op:v1"), 1);
        assert_eq!(objs[0]["spec"]["template"]["spec"]["containers"][0]["image"], "example.com/op:v1");
        assert_eq!(objs[0]["spec"]["template"]["spec"]["containers"][1]["image"], "busybox");
    }
}
