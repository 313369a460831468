//! Simulated nodes, as kwok provides them: a registrar creates `cfg.nodes` Nodes
//! (`opkit-worker-0`, `opkit-worker-1`, …), and a node controller acts as each simulated
//! node's kubelet towards the control plane — it keeps the node's status healthy (Ready,
//! no pressure, capacity, addresses, nodeInfo) and renews its Lease in `kube-node-lease`
//! every `cfg.node_heartbeat`. Any Node annotated [`SIMULATED_ANNOTATION`]` = "true"` is
//! simulated, so tests may add their own (tainted, labelled) nodes.

pub(crate) mod build;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use opkit::{Action, Context, Controller, Manager, ReconcileResult, Runnable, RunnableError};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::ControllersConfig;

pub use opkit_kubelet::node::SIMULATED_ANNOTATION;
pub(crate) use opkit_kubelet::node::is_simulated;

/// The annotation naming a simulated Node's kubelet server (`127.0.0.1:<port>`).
pub(crate) const KUBELET_ENDPOINT_ANNOTATION: &str = opkit_kubelet::KUBELET_ENDPOINT_ANNOTATION;

/// The kubelet version simulated nodes report.
pub(crate) const KUBELET_VERSION: &str = "v1.33.0";

/// Where node heartbeat Leases live.
pub(crate) const LEASE_NAMESPACE: &str = "kube-node-lease";

/// The field manager of node writes.
const MANAGER: &str = "kubelet";

/// Registers the node registrar and the node controller with `mgr` (controller name
/// `nodes`); with `kubelet_port`, every simulated Node advertises the kubelet server
/// there.
pub(crate) fn register(
    mgr: &Manager,
    cfg: &ControllersConfig,
    kubelet_port: Option<u16>,
) -> Result<(), opkit::BuildError> {
    if !cfg.enabled("nodes") {
        return Ok(());
    }
    mgr.add(Registrar { client: crate::identity::client_for(mgr, cfg, "nodes"), count: cfg.nodes });
    let heartbeat = cfg.node_heartbeat.max(Duration::from_millis(100));
    let images = Arc::new(cfg.images.clone().map(opkit_kubelet::images::ImageStore::new));
    let note: Arc<Option<String>> = Arc::new(isolation_note(cfg));
    Controller::new(mgr, move |ctx: Context<Node>| {
        let (images, note) = (images.clone(), note.clone());
        async move { reconcile(ctx, heartbeat, kubelet_port, images.as_ref().as_ref(), note.as_deref()).await }
    })
    .client(crate::identity::client_for(mgr, cfg, "nodes"))
    .named("nodes")
    .watches::<Lease>(|l: &Lease| {
        if l.metadata.namespace.as_deref() == Some(LEASE_NAMESPACE) {
            vec![opkit::Request::new(l.metadata.name.clone().unwrap_or_default(), None)]
        } else {
            vec![]
        }
    })
    .max_concurrent_reconciles(4)
    .without_leader_election()
    .build()
}

/// What the nodes' Ready condition says of real pods when they run and are not contained
/// (`None` when they are, or when every pod is simulated): kube's kubelet tells a node's
/// security features in the same place (". AppArmor enabled").
fn isolation_note(cfg: &ControllersConfig) -> Option<String> {
    if cfg.images.is_none() || !cfg.enabled("kubelet") {
        return None;
    }
    match crate::pod_isolation_mode(cfg.pod_isolation) {
        (crate::PodIsolation::Contained, _) => None,
        (crate::PodIsolation::Host, reason) => Some(format!(
            "Real pods are NOT contained (host mode): {}",
            reason.as_deref().unwrap_or("host isolation is configured")
        )),
    }
}

/// Creates the configured nodes once, then ends (a runnable that returns `Ok` leaves the
/// manager running).
struct Registrar {
    client: kube::Client,
    count: usize,
}

impl Runnable for Registrar {
    fn name(&self) -> String {
        "node-registrar".into()
    }
    fn needs_leader_election(&self) -> bool {
        false
    }
    fn start(self: Box<Self>, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), RunnableError>> {
        Box::pin(async move {
            let api: Api<Node> = Api::all(self.client.clone());
            let mut pending: Vec<usize> = (0..self.count).collect();
            let mut delay = Duration::from_millis(50);
            while !pending.is_empty() {
                let mut failed = Vec::new();
                for i in pending {
                    match api.create(&PostParams::default(), &build::new_node(i)).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(s)) if s.is_already_exists() => {}
                        Err(e) => {
                            tracing::warn!(node = %build::node_name(i), error = %e, "registering node failed; retrying");
                            failed.push(i);
                        }
                    }
                }
                pending = failed;
                if !pending.is_empty() {
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
            }
            Ok(())
        })
    }
}

/// Keeps one simulated node's status healthy and its lease renewed.
async fn reconcile(
    ctx: Context<Node>,
    heartbeat: Duration,
    kubelet_port: Option<u16>,
    images: Option<&opkit_kubelet::images::ImageStore>,
    ready_note: Option<&str>,
) -> ReconcileResult {
    let Some(node) = ctx.object.clone() else { return Ok(Action::done()) };
    if !is_simulated(&node) || node.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let name = node.metadata.name.clone().unwrap_or_default();
    let now = Timestamp::now();
    if let Some(port) = kubelet_port {
        let endpoint = format!("127.0.0.1:{port}");
        let annotations = node.metadata.annotations.as_ref();
        if annotations.and_then(|a| a.get(KUBELET_ENDPOINT_ANNOTATION)) != Some(&endpoint) {
            let api: Api<Node> = Api::all(ctx.client.clone());
            let patch = json!({"metadata": {"annotations": {KUBELET_ENDPOINT_ANNOTATION: endpoint}}});
            api.patch(
                &name,
                &PatchParams { field_manager: Some(MANAGER.into()), ..Default::default() },
                &Patch::Merge(&patch),
            )
            .await?;
        }
    }
    let loaded = images.map(build::loaded_images).unwrap_or_default();
    if let Some(status) = build::desired_status(&node, now, kubelet_port, &loaded, ready_note) {
        let api: Api<Node> = Api::all(ctx.client.clone());
        let patch = json!({"status": status});
        api.patch_status(
            &name,
            &PatchParams { field_manager: Some(MANAGER.into()), ..Default::default() },
            &Patch::Merge(&patch),
        )
        .await?;
    }
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), LEASE_NAMESPACE);
    let due = |l: &Lease| {
        let renewed = l.spec.as_ref().and_then(|s| s.renew_time.as_ref()).map(|t| t.0);
        renewed.is_none_or(|t| {
            let age = now.duration_since(t).unsigned_abs();
            age + heartbeat / 10 >= heartbeat
        })
    };
    match ctx.cache.get::<Lease>(&name, Some(LEASE_NAMESPACE)) {
        None => {
            let lease = build::lease(&node, now);
            match leases.create(&PostParams::default(), &lease).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_already_exists() => return Ok(Action::requeue_after(heartbeat / 10)),
                Err(e) => return Err(e.into()),
            }
        }
        Some(current) if due(&current) => {
            let mut next = build::lease(&node, now);
            next.metadata.resource_version = current.metadata.resource_version.clone();
            next.metadata.owner_references =
                current.metadata.owner_references.clone().or(next.metadata.owner_references);
            if let (Some(spec), Some(old)) = (next.spec.as_mut(), current.spec.as_ref()) {
                spec.acquire_time = old.acquire_time.clone();
                spec.lease_transitions = old.lease_transitions;
            }
            match leases.replace(&name, &PostParams::default(), &next).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_conflict() => return Ok(Action::requeue_after(heartbeat / 10)),
                Err(e) => return Err(e.into()),
            }
        }
        Some(_) => {}
    }
    Ok(Action::requeue_after(heartbeat))
}
