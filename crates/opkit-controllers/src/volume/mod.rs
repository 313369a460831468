//! Storage as kind gives a local cluster (kube-controller-manager's persistent-volume
//! binder and the protection controllers, with rancher's local-path-provisioner):
//! - a default StorageClass `standard` (`rancher.io/local-path`, `WaitForFirstConsumer`,
//!   reclaim `Delete`) is created when the controllers start, unless one of that name
//!   exists;
//! - the binder binds each claim to the volume it names, one reserved for it, or the
//!   smallest available volume that satisfies it; for a claim of a local-path class with
//!   no such volume it provisions one (`pvc-<uid>`), at once for an `Immediate` class and,
//!   for `WaitForFirstConsumer`, once the scheduler has chosen the node of a pod that uses
//!   it (annotation `volume.kubernetes.io/selected-node`). Binding writes kube's fields and
//!   annotations on both sides;
//! - a volume whose claim is gone is `Released`, then deleted (reclaim `Delete`, with its
//!   directory) or kept (`Retain`);
//! - the `kubernetes.io/pvc-protection` finalizer (added by the API server) is removed
//!   from a deleted claim once no running pod uses it, and `kubernetes.io/pv-protection`
//!   from a deleted volume once it is not bound.
//!
//! Volumes live under [`ControllersConfig::volume_root`]; without one (TestEnv), their
//! paths are recorded but no directory is made.

mod matching;

use std::path::PathBuf;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use opkit::{Action, Cache, Context, Controller, Manager, ReconcileResult, Request, Runnable, RunnableError};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::ControllersConfig;
use crate::common::WorkloadError;

/// The provisioner of the default class.
pub(crate) const LOCAL_PATH: &str = "rancher.io/local-path";
/// The default StorageClass.
pub(crate) const DEFAULT_CLASS: &str = "standard";
/// The annotation with which the scheduler names the node of a claim's first consumer.
pub(crate) const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
const PV_PROTECTION: &str = "kubernetes.io/pv-protection";
const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// Where volumes go when no root is configured (recorded only).
const DEFAULT_ROOT: &str = "/opt/local-path-provisioner";

/// What the binder needs besides the cache.
struct Volumes {
    root: Option<PathBuf>,
}

impl Volumes {
    fn root(&self) -> PathBuf {
        self.root.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT))
    }
}

/// Registers the default-class runnable, the claim binder and the volume reclaimer.
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.enabled("persistentvolume") {
        return Ok(());
    }
    mgr.add(DefaultClass { client: crate::identity::client_for(mgr, cfg, "persistentvolume") });
    let state = std::sync::Arc::new(Volumes { root: cfg.volume_root.clone() });
    let (classes_cache, volumes_cache) = (mgr.cache().clone(), mgr.cache().clone());
    Controller::new(mgr, bind_claim)
        .client(crate::identity::client_for(mgr, cfg, "persistentvolume"))
        .named("persistentvolume-binder")
        .with_state(state.clone())
        .watches::<PersistentVolume>(move |v| claims_for_volume(&volumes_cache, v))
        .watches::<Pod>(claims_of_pod)
        .watches::<StorageClass>(move |_| unbound_claims(&classes_cache))
        .max_concurrent_reconciles(2)
        .build()?;
    let claims_cache = mgr.cache().clone();
    Controller::new(mgr, reclaim_volume)
        .client(crate::identity::client_for(mgr, cfg, "persistentvolume"))
        .named("persistentvolume-reclaimer")
        .with_state(state)
        .watches::<PersistentVolumeClaim>(move |c| volumes_of_claim(&claims_cache, c))
        .build()
}

/// The claim a volume is reserved for, or, for a free volume, every unbound claim (it
/// may satisfy one).
fn claims_for_volume(cache: &Cache, pv: &PersistentVolume) -> Vec<Request> {
    match pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) {
        Some(c) => c.name.clone().map(|name| Request::new(name, c.namespace.as_deref())).into_iter().collect(),
        None => unbound_claims(cache),
    }
}

/// The claims not yet bound (a new class may serve them).
fn unbound_claims(cache: &Cache) -> Vec<Request> {
    let claims = cache.list::<PersistentVolumeClaim>();
    let unbound = claims.iter().filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound"));
    unbound.map(|c| Request::from_object(&**c)).collect()
}

/// The claims a pod uses (their protection and first-consumer binding follow the pod).
fn claims_of_pod(pod: &Pod) -> Vec<Request> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.clone()).unwrap_or_default();
    volumes
        .iter()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| Request::new(c.claim_name.clone(), pod.metadata.namespace.as_deref()))
        .collect()
}

fn volumes_of_claim(cache: &Cache, pvc: &PersistentVolumeClaim) -> Vec<Request> {
    cache
        .list::<PersistentVolume>()
        .iter()
        .filter(|v| {
            matching::reserved_for(v, pvc) || v.metadata.name == pvc.spec.as_ref().and_then(|s| s.volume_name.clone())
        })
        .map(|v| Request::from_object(&**v))
        .collect()
}

/// Whether a pod that has not finished uses the claim.
fn in_use(cache: &Cache, pvc: &PersistentVolumeClaim) -> bool {
    let (ns, name) = (pvc.namespace(), pvc.name_any());
    cache.list::<Pod>().iter().any(|p| {
        let finished = matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"));
        let uses = p.spec.as_ref().and_then(|s| s.volumes.as_ref()).is_some_and(|vs| {
            vs.iter().any(|v| v.persistent_volume_claim.as_ref().is_some_and(|c| c.claim_name == name))
        });
        p.metadata.namespace == ns && uses && !finished
    })
}

/// The default StorageClass (the newest of those marked default).
fn default_class(cache: &Cache) -> Option<String> {
    let classes = cache.list::<StorageClass>();
    let marked = classes.iter().filter(|c| {
        c.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("storageclass.kubernetes.io/is-default-class"))
            .map(String::as_str)
            == Some("true")
    });
    marked.max_by_key(|c| c.metadata.creation_timestamp.clone().map(|t| t.0)).and_then(|c| c.metadata.name.clone())
}

/// Removes `finalizer` from an object (a merge patch of the rest of the list).
async fn drop_finalizer<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let rest: Vec<&String> = obj.meta().finalizers.iter().flatten().filter(|f| *f != finalizer).collect();
    let patch = json!({"metadata": {"finalizers": rest, "resourceVersion": obj.meta().resource_version}});
    match api.patch(&obj.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

fn has_finalizer<K: Resource>(obj: &K, finalizer: &str) -> bool {
    obj.meta().finalizers.iter().flatten().any(|f| f == finalizer)
}

async fn bind_claim(ctx: Context<PersistentVolumeClaim, Volumes>) -> ReconcileResult {
    let Some(pvc) = ctx.object.clone() else { return Ok(Action::done()) };
    let claims: Api<PersistentVolumeClaim> = ctx.api_for();
    if pvc.metadata.deletion_timestamp.is_some() {
        if has_finalizer(&*pvc, PVC_PROTECTION) && !in_use(&ctx.cache, &pvc) {
            drop_finalizer(&claims, &*pvc, PVC_PROTECTION).await?;
        }
        return Ok(Action::done());
    }
    let phase = pvc.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase == Some("Bound") {
        return Ok(Action::done());
    }
    if pvc.spec.as_ref().is_none_or(|s| s.storage_class_name.is_none())
        && let Some(class) = default_class(&ctx.cache)
    {
        // kube's retroactive default class: a claim made before a default class existed.
        let patch = json!({"spec": {"storageClassName": class}});
        claims.patch(&pvc.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
        return Ok(Action::done());
    }
    let volumes = ctx.cache.list::<PersistentVolume>();
    if let Some(pv) = matching::matching_volume(&pvc, &volumes) {
        bind(&ctx, &pvc, pv).await?;
        return Ok(Action::done());
    }
    provision(&ctx, &pvc).await?;
    Ok(Action::done())
}

/// Binds `pvc` to `pv`: the volume first (claimRef, phase Bound), then the claim
/// (volumeName and annotations, then phase, modes and capacity), as kube's binder does.
async fn bind(
    ctx: &Context<PersistentVolumeClaim, Volumes>,
    pvc: &PersistentVolumeClaim,
    pv: &PersistentVolume,
) -> Result<(), WorkloadError> {
    let volumes: Api<PersistentVolume> = Api::all(ctx.client.clone());
    let pv_name = pv.name_any();
    if pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).is_none() {
        let claim_ref = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": pvc.namespace(),
            "name": pvc.name_any(), "uid": pvc.metadata.uid, "resourceVersion": pvc.metadata.resource_version});
        let patch = json!({"metadata": {"annotations": {ANN_BOUND_BY_CONTROLLER: "yes"}, "resourceVersion": pv.metadata.resource_version},
            "spec": {"claimRef": claim_ref}});
        volumes.patch(&pv_name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }
    if pv.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
        volumes
            .patch_status(&pv_name, &PatchParams::default(), &Patch::Merge(&json!({"status": {"phase": "Bound"}})))
            .await?;
    }
    let claims: Api<PersistentVolumeClaim> = ctx.api_for();
    let patch = json!({"metadata": {"annotations": {ANN_BIND_COMPLETED: "yes", ANN_BOUND_BY_CONTROLLER: "yes"}},
        "spec": {"volumeName": pv_name}});
    claims.patch(&pvc.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let spec = pv.spec.clone().unwrap_or_default();
    let status = json!({"status": {"phase": "Bound", "accessModes": spec.access_modes, "capacity": spec.capacity}});
    claims.patch_status(&pvc.name_any(), &PatchParams::default(), &Patch::Merge(&status)).await?;
    Ok(())
}

/// Provisions a local-path volume for `pvc` when its class is local-path and, for
/// `WaitForFirstConsumer`, its first consumer's node is known.
async fn provision(
    ctx: &Context<PersistentVolumeClaim, Volumes>,
    pvc: &PersistentVolumeClaim,
) -> Result<(), WorkloadError> {
    let class_name = matching::class_of(pvc);
    let Some(class) = ctx.cache.get::<StorageClass>(class_name, None).filter(|c| c.provisioner == LOCAL_PATH) else {
        return Ok(());
    };
    let node = pvc.annotations().get(SELECTED_NODE).cloned();
    let wait_for_consumer = class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer");
    if wait_for_consumer && node.is_none() {
        return Ok(());
    }
    if !pvc.annotations().contains_key(ANN_STORAGE_PROVISIONER) {
        let claims: Api<PersistentVolumeClaim> = ctx.api_for();
        let patch = json!({"metadata": {"annotations": {ANN_STORAGE_PROVISIONER: LOCAL_PATH, "volume.beta.kubernetes.io/storage-provisioner": LOCAL_PATH}}});
        claims.patch(&pvc.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }
    let pv = matching::provisioned_volume(pvc, &class, node.as_deref(), &ctx.state.root());
    if let (Some(_), Some(path)) = (&ctx.state.root, pv.spec.as_ref().and_then(|s| s.host_path.as_ref())) {
        std::fs::create_dir_all(&path.path)
            .map_err(|e| WorkloadError::Invalid(format!("cannot make volume directory {}: {e}", path.path)))?;
    }
    let volumes: Api<PersistentVolume> = Api::all(ctx.client.clone());
    match volumes.create(&PostParams::default(), &pv).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn reclaim_volume(ctx: Context<PersistentVolume, Volumes>) -> ReconcileResult {
    let Some(pv) = ctx.object.clone() else { return Ok(Action::done()) };
    let volumes: Api<PersistentVolume> = Api::all(ctx.client.clone());
    let phase = pv.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    if pv.metadata.deletion_timestamp.is_some() {
        if has_finalizer(&*pv, PV_PROTECTION) && phase != "Bound" {
            remove_directory(&ctx.state, &pv);
            drop_finalizer(&volumes, &*pv, PV_PROTECTION).await?;
        }
        return Ok(Action::done());
    }
    let claim = pv.spec.as_ref().and_then(|s| s.claim_ref.clone());
    // Conditional on the version this reconcile read: a cache that has not yet seen the
    // binder's `Bound` must not set the phase back (the write is refused with a 409 and the
    // reconcile retried on a newer cache).
    let set_phase = |phase: &'static str| {
        let volumes = volumes.clone();
        let name = pv.name_any();
        let patch = json!({"metadata": {"resourceVersion": pv.metadata.resource_version}, "status": {"phase": phase}});
        async move { volumes.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await }
    };
    match (phase.as_str(), claim) {
        ("" | "Pending", _) => {
            set_phase("Available").await?;
        }
        ("Bound", Some(claim)) => {
            let current = ctx
                .cache
                .get::<PersistentVolumeClaim>(claim.name.as_deref().unwrap_or_default(), claim.namespace.as_deref());
            let gone = current.is_none_or(|c| claim.uid.is_some() && c.metadata.uid != claim.uid);
            if gone {
                set_phase("Released").await?;
            }
        }
        ("Released", _) => {
            let policy =
                pv.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.as_deref()).unwrap_or("Retain");
            if policy == "Delete" {
                match volumes.delete(&pv.name_any(), &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.is_not_found() => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        _ => {}
    }
    Ok(Action::done())
}

/// Removes a local-path volume's directory under the configured root.
fn remove_directory(state: &Volumes, pv: &PersistentVolume) {
    let Some(root) = &state.root else { return };
    let provisioned = pv.annotations().get(ANN_PROVISIONED_BY).map(String::as_str) == Some(LOCAL_PATH);
    let Some(path) = pv.spec.as_ref().and_then(|s| s.host_path.as_ref()).map(|h| PathBuf::from(&h.path)) else {
        return;
    };
    let deleting = pv.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.as_deref()) == Some("Delete");
    if provisioned
        && deleting
        && path.starts_with(root)
        && let Err(e) = std::fs::remove_dir_all(&path)
    {
        tracing::debug!(path = %path.display(), error = %e, "removing a volume directory failed");
    }
}

/// Creates the default StorageClass once, then ends.
struct DefaultClass {
    client: kube::Client,
}

impl Runnable for DefaultClass {
    fn name(&self) -> String {
        "default-storage-class".into()
    }
    fn needs_leader_election(&self) -> bool {
        false
    }
    fn start(self: Box<Self>, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), RunnableError>> {
        Box::pin(async move {
            let api: Api<StorageClass> = Api::all(self.client.clone());
            let class: StorageClass = serde_json::from_value(json!({
                "metadata": {"name": DEFAULT_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                "provisioner": LOCAL_PATH, "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer",
            }))
            .map_err(|e| RunnableError(e.to_string()))?;
            let mut delay = Duration::from_millis(50);
            loop {
                match api.create(&PostParams::default(), &class).await {
                    Ok(_) => return Ok(()),
                    Err(kube::Error::Api(s)) if s.is_already_exists() => return Ok(()),
                    Err(e) => tracing::warn!(error = %e, "creating the default StorageClass failed; retrying"),
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        })
    }
}
