//! `opkit kudo init`: KUDO's CRDs, then KUDO's manager as `kubectl kudo init` installs it
//! (`opkit_kudo::manager`: the StatefulSet `kudo-controller-manager` in `kudo-system`,
//! its pod running `opkit kudo manager`). On a local opkit cluster this binary is loaded
//! as the manager's image first, so that pod runs the engine for real; `--crd-only`
//! stops after the CRDs, and `--manager` runs the engine in this process instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use opkit_kudo::manager::{self, ManagerOptions};
use serde_json::{Value, json};

use super::args::KudoInitArgs;
use super::cluster;
use crate::commands::CliError;
use crate::output::Output;
use opkit_kubelet::images::ImageStore;

/// KUDO's CRDs, as `init` reports them.
const CRD_NAMES: [&str; 3] = ["operators.kudo.dev", "operatorversions.kudo.dev", "instances.kudo.dev"];
/// The manager's one pod.
const MANAGER_POD: &str = "kudo-controller-manager-0";

/// Runs `opkit kudo init`.
pub(super) async fn init(args: KudoInitArgs, out: &mut Output) -> Result<(), CliError> {
    let manager = (!args.crd_only && !args.manager).then(|| manager_options(&args.kudo_image));
    if args.dry_run {
        dry_run(manager.as_ref(), out);
        return Ok(());
    }
    let (client, _) = cluster::client(&args.cluster).await?;
    opkit_kudo::install_crds(&client).await?;
    for name in CRD_NAMES {
        out.step(&format!("customresourcedefinition.apiextensions.k8s.io/{name} established"));
    }
    if args.manager {
        out.step("running the KUDO engine (Ctrl-C to stop)");
        let mgr = opkit::Manager::new(client, opkit::ManagerOptions::default());
        opkit_kudo::setup(&mgr).await?;
        return mgr.run().await.map_err(|e| CliError::Build(e.to_string()));
    }
    let Some(options) = manager else {
        out.result(
            "KUDO's CRDs are installed (--crd-only). Run the engine with `opkit kudo manager`.",
            json!({"crds": CRD_NAMES}),
        );
        return Ok(());
    };
    let loaded = load_manager_image(&args, out)?;
    manager::install_manager(&client, &options).await?;
    out.step(&format!("statefulset.apps/{} applied in {}", manager::MANAGER_STATEFULSET, manager::MANAGER_NAMESPACE));
    if loaded.is_none() {
        out.warn(&format!(
            "the kubeconfig's context names no local opkit cluster, so {} was not loaded: the manager's pod runs \
             the engine only if the nodes can pull that image (of the opkit binary); pass --data-dir of a local \
             cluster, or run `opkit kudo manager` beside it",
            options.image
        ));
    }
    if args.wait {
        wait_for_manager(&client, args.wait_timeout.into(), out).await?;
    }
    let text = format!(
        "KUDO is installed: its CRDs, and its manager in {} (pod {MANAGER_POD}, image {}){}.",
        manager::MANAGER_NAMESPACE,
        options.image,
        if args.wait { ", ready" } else { "" }
    );
    out.result(
        &text,
        json!({"crds": CRD_NAMES, "namespace": manager::MANAGER_NAMESPACE, "statefulSet": manager::MANAGER_STATEFULSET,
            "image": options.image, "imageLoaded": loaded.is_some(), "ready": args.wait}),
    );
    Ok(())
}

/// The manager runs the engine from the opkit image, with leader election so that a
/// restarted or upgraded pod never runs beside the one it replaces.
fn manager_options(image: &str) -> ManagerOptions {
    let command = ["opkit", "kudo", "manager", "--leader-elect", "--leader-election-id", "kudo-controller-manager"];
    ManagerOptions { image: image.to_string(), command: command.map(String::from).to_vec() }
}

/// `--dry-run`: the CRDs, then the manager's objects unless only the CRDs are installed.
fn dry_run(manager: Option<&ManagerOptions>, out: &mut Output) {
    let mut objects: Vec<Value> =
        opkit_kudo::crd_manifests().iter().filter_map(|c| serde_json::to_value(c).ok()).collect();
    objects.extend(manager.map(manager::manager_manifests).unwrap_or_default());
    let text: String =
        objects.iter().map(|o| format!("---\n{}", serde_saphyr::to_string(o).unwrap_or_default())).collect();
    out.result(text.trim_end(), json!({"items": objects}));
}

/// Loads this binary as the manager's image into the image store of the local opkit
/// cluster (`--data-dir`, else the one the kubeconfig's context names), as `opkit cluster
/// load` does; `None` when the context names no local opkit cluster (or names one whose
/// data directory is not on this machine).
fn load_manager_image(args: &KudoInitArgs, out: &mut Output) -> Result<Option<PathBuf>, CliError> {
    let data_dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => {
            let default = Path::new(crate::commands::cluster::DEFAULT_DATA_DIR);
            let kubeconfig = args.cluster.kubeconfig.as_deref();
            match crate::commands::cluster::context::data_dir(kubeconfig, args.cluster.context.as_deref(), default) {
                Ok(dir) if dir.is_dir() => dir,
                Ok(dir) => {
                    tracing::debug!(dir = %dir.display(), "no local cluster's data directory: not loading KUDO's manager image");
                    return Ok(None);
                }
                Err(reason) => {
                    tracing::debug!(%reason, "not loading KUDO's manager image");
                    return Ok(None);
                }
            }
        }
    };
    let store = ImageStore::new(std::path::absolute(data_dir)?.join("images"));
    let binary = std::env::current_exe()
        .map_err(|e| CliError::Usage(format!("finding this opkit binary to load as {}: {e}", args.kudo_image)))?;
    out.waiting(&format!("loading {} as {}", binary.display(), args.kudo_image));
    let image = store.load(&args.kudo_image, &binary)?;
    out.done_waiting();
    out.step(&format!("loaded {} into {}", image.reference, store.dir().display()));
    Ok(Some(store.dir().to_path_buf()))
}

/// Waits for the manager's pod to be ready, naming its last Warning event on a timeout.
async fn wait_for_manager(
    client: &kube::Client,
    timeout: std::time::Duration,
    out: &mut Output,
) -> Result<(), CliError> {
    let ns = manager::MANAGER_NAMESPACE;
    out.waiting(&format!("waiting for pod {ns}/{MANAGER_POD} to be ready"));
    let waited = crate::cluster_ops::wait_pod_ready(client, ns, MANAGER_POD, timeout).await;
    out.done_waiting();
    if let Err(e) = waited {
        let labels: BTreeMap<String, String> = [("app", "kudo-manager")].map(|(k, v)| (k.into(), v.into())).into();
        return Err(crate::commands::pod_warnings::explain_timeout(client, ns, &[labels], e.into()).await);
    }
    out.step(&format!("pod {ns}/{MANAGER_POD} is ready"));
    Ok(())
}
