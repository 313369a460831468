//! The kubelet's process runtime: a pod bound to a simulated node whose every image (and
//! init container image) is loaded in the image store or built in (see [`image`]) runs
//! for real — each container a
//! process in the pod's network sandbox (see [`pod`]), contained in namespaces and a root
//! file system of its own where the host allows it (see [`container`]); every other pod
//! stays simulated.
//! [`Runtime`] keeps the real pods of this kubelet, starts and stops them, stops them all
//! when the manager stops, and answers the kubelet server's questions about them.

pub(crate) mod backoff;
pub(crate) mod container;
pub(crate) mod env;
pub(crate) mod identity;
pub(crate) mod image;
pub(crate) mod logs;
pub(crate) mod pod;
pub(crate) mod probes;
pub(crate) mod process;
pub(crate) mod status;
pub(crate) mod volumes;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use opkit::{Request, Runnable, RunnableError};
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::KubeletConfig;
use crate::images::ImageStore;
use crate::images::builtin::{self, BuiltinImage};
use crate::network::PodNetworks;
use crate::pod_events::PodEvents;
use container::{JoinPlan, PodIsolation};
use image::ImageRun;
use pod::{NodeFacts, PodShared, StopRequest};
use status::{ContainerView, PodView, State, Terminated};

/// What every real pod of one kubelet shares.
pub(crate) struct RuntimeShared {
    /// The kubelet's client.
    pub client: kube::Client,
    /// The pod networks.
    pub networks: PodNetworks,
    images: ImageStore,
    /// The cluster's CA bundle, projected as `ca.crt`.
    pub root_ca_pem: Option<String>,
    /// The first CrashLoopBackOff delay.
    pub backoff_base: Duration,
    /// Where events go.
    pub events: Arc<PodEvents>,
    /// How containers are isolated.
    pub isolation: PodIsolation,
}

impl RuntimeShared {
    /// How `image` runs: its loaded executable, else the built-in image it names; `None`
    /// when it is neither (its pod is simulated).
    pub(crate) fn image_run(&self, image: &str) -> Option<ImageRun> {
        match self.images.contents(image) {
            Ok(Some((binary, files))) => return Some(ImageRun::Loaded { binary, files }),
            Ok(None) => {}
            Err(e) => tracing::debug!(image, error = %e, "looking up an image failed"),
        }
        BuiltinImage::of(image).map(ImageRun::Builtin)
    }

    /// The image ID reported for `image` (`repository@digest`), when it runs for real.
    fn image_id(&self, image: &str) -> Option<String> {
        if let Some(loaded) = self.images.get(image).ok().flatten() {
            return Some(format!("{}@{}", builtin::repository(&loaded.reference), loaded.digest));
        }
        BuiltinImage::of(image).map(|b| format!("{}@{}", b.repository(), b.digest()))
    }
}

/// A real pod of this kubelet.
struct PodEntry {
    shared: Arc<PodShared>,
    task: JoinHandle<()>,
}

/// The prefix of the container IDs of real containers (`opkit://<id>`); simulated ones
/// are `containerd://<id>`.
pub const CONTAINER_ID_PREFIX: &str = "opkit://";

/// What the kubelet server needs to run a command in a container (`exec`): its
/// environment, working directory and network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(unix), allow(dead_code))] // used only by the unix-only real-pod runtime
pub(crate) struct ExecTargetData {
    /// The container's environment.
    pub env: Vec<(String, String)>,
    /// Its working directory.
    pub working_dir: PathBuf,
    /// The pod's network namespace (`None` on the host network).
    pub netns: Option<PathBuf>,
    /// The pod's IP.
    pub pod_ip: IpAddr,
    /// The contained container to join (`None`: host mode or a privileged container).
    pub container: Option<JoinPlan>,
}

/// Why a container could not be found for the kubelet server.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[cfg_attr(not(unix), allow(dead_code))] // used only by the unix-only real-pod runtime
pub(crate) enum LookupError {
    /// No real pod of that name runs on this kubelet.
    #[error("pod {0:?} does not exist")]
    PodNotFound(String),
    /// The pod has no such container.
    #[error("container {container} is not valid for pod {pod}")]
    ContainerNotFound {
        /// The pod.
        pod: String,
        /// The container asked for.
        container: String,
    },
    /// The container is not running.
    #[error("container {container} is not running in pod {pod}")]
    NotRunning {
        /// The pod.
        pod: String,
        /// The container.
        container: String,
    },
}

/// The real pods of one kubelet.
pub(crate) struct Runtime {
    shared: Arc<RuntimeShared>,
    pod_root: PathBuf,
    pods: Mutex<HashMap<Request, PodEntry>>,
    stopping: CancellationToken,
}

/// Where the API server listens, from its URL.
fn api_server_address(cfg: &KubeletConfig) -> Option<SocketAddr> {
    let uri = cfg.cluster_url.as_ref()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    let ip: IpAddr = if host == "localhost" { IpAddr::V4(Ipv4Addr::LOCALHOST) } else { host.parse().ok()? };
    Some(SocketAddr::new(ip, uri.port_u16().unwrap_or(443)))
}

impl Runtime {
    /// The runtime of a kubelet configured by `cfg`, following the cluster's Services
    /// for its pods with `services_client`; `None` when no image store is configured (or
    /// the API server's address is unknown): every pod is simulated.
    pub(crate) fn new(
        cfg: &KubeletConfig,
        client: kube::Client,
        services_client: kube::Client,
        events: Arc<PodEvents>,
    ) -> Option<Runtime> {
        let images = ImageStore::new(cfg.images.clone()?);
        let Some(api_server) = api_server_address(cfg) else {
            tracing::warn!("the API server's address is unknown: every pod is simulated");
            return None;
        };
        let networks = PodNetworks::new(cfg.pod_network, api_server).with_services(services_client);
        tracing::info!(mode = %networks.mode(), "real pods' network");
        if let Some(reason) = networks.fallback_reason() {
            tracing::warn!(reason, "real pods use the host network");
        }
        let isolation = isolation(cfg.pod_isolation);
        tracing::info!(isolation = %isolation, "real pods' containers");
        if builtin::busybox().is_none() {
            tracing::warn!(
                "no BusyBox on this host (Debian's busybox-static): the built-in images run the host's sh, \
                 coreutils, wget and curl, without BusyBox's other applets"
            );
        }
        let pod_root = cfg.pod_root.clone().unwrap_or_else(|| std::env::temp_dir().join("opkit-pods"));
        let shared = RuntimeShared {
            isolation,
            client,
            networks,
            images,
            root_ca_pem: cfg.root_ca_pem.clone(),
            backoff_base: cfg.crash_loop_backoff,
            events,
        };
        Some(Runtime {
            shared: Arc::new(shared),
            pod_root,
            pods: Mutex::new(HashMap::new()),
            stopping: CancellationToken::new(),
        })
    }

    /// Whether `pod` runs for real: every container's and init container's image is
    /// loaded or built in.
    pub(crate) fn is_real(&self, pod: &Pod) -> bool {
        let Some(spec) = &pod.spec else { return false };
        let mut all = spec.containers.iter().chain(spec.init_containers.iter().flatten()).peekable();
        all.peek().is_some() && all.all(|c| c.image.as_deref().is_some_and(|i| self.shared.image_run(i).is_some()))
    }

    /// Hands the ephemeral containers of `pod` (added through `pods/ephemeralcontainers`)
    /// to its running task, which starts the new ones.
    pub(crate) fn update_ephemeral(&self, key: &Request, pod: &Pod) {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        if let Some(e) = self.pods.lock().get(key).filter(|e| e.shared.uid == uid) {
            e.shared.set_ephemeral(pod);
        }
    }

    /// Whether this runtime runs (or ran) the pod at `key` with `uid`.
    pub(crate) fn owns(&self, key: &Request, uid: &str) -> bool {
        self.pods.lock().get(key).is_some_and(|e| e.shared.uid == uid)
    }

    /// Starts `pod` on `node` unless it already runs (a pod of the same name with
    /// another uid is stopped first).
    pub(crate) fn ensure(&self, key: &Request, pod: &Pod, node: NodeFacts) {
        if self.stopping.is_cancelled() {
            return;
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut pods = self.pods.lock();
        if let Some(e) = pods.get(key) {
            if e.shared.uid == uid {
                return;
            }
            e.shared.request_stop(StopRequest { grace: Duration::ZERO, delete: false });
        }
        let view = self.initial_view(pod, &node);
        let dir = self.pod_root.join(pod::dir_name(pod));
        let shared = Arc::new(PodShared::new(pod, dir, view));
        let task = tokio::spawn(pod::run(self.shared.clone(), pod.clone(), node, shared.clone()));
        pods.insert(key.clone(), PodEntry { shared, task });
    }

    /// The view a pod starts with; a pod already running (the kubelet restarted) starts
    /// its containers again with one restart more, its init containers done.
    fn initial_view(&self, pod: &Pod, node: &NodeFacts) -> PodView {
        let spec = pod.spec.clone().unwrap_or_default();
        let status = pod.status.clone().unwrap_or_default();
        let adopted = status.phase.as_deref() == Some("Running");
        let now = Timestamp::now().as_second();
        let has_init = spec.init_containers.as_ref().is_some_and(|i| !i.is_empty());
        let old = |name: &str| status.container_statuses.iter().flatten().find(|s| s.name == name).cloned();
        let containers = spec
            .containers
            .iter()
            .map(|c| {
                let image = c.image.clone().unwrap_or_default();
                let waiting = if has_init && !adopted { "PodInitializing" } else { "ContainerCreating" };
                let prev = old(&c.name).filter(|_| adopted);
                let restarts = prev.as_ref().map_or(0, |s| s.restart_count.saturating_add(1));
                let mut v = ContainerView::waiting(&c.name, &image, waiting, restarts);
                v.last = prev.and_then(|s| s.state).and_then(|s| s.running).map(|r| Terminated {
                    exit_code: 137,
                    signal: Some(9),
                    reason: "Error".into(),
                    message: None,
                    started_at: r.started_at.map_or(now, |t| t.0.as_second()),
                    finished_at: now,
                    container_id: String::new(),
                });
                v
            })
            .collect();
        let init = spec
            .init_containers
            .iter()
            .flatten()
            .map(|c| {
                let image = c.image.clone().unwrap_or_default();
                let mut v = ContainerView::waiting(&c.name, &image, "PodInitializing", 0);
                if adopted {
                    v.state = State::Terminated(Terminated {
                        exit_code: 0,
                        signal: None,
                        reason: "Completed".into(),
                        message: None,
                        started_at: now,
                        finished_at: now,
                        container_id: String::new(),
                    });
                    v.done = true;
                }
                v
            })
            .collect();
        let image_ids = spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .filter_map(|c| {
                let image = c.image.clone()?;
                let id = self.shared.image_id(&image)?;
                Some((image, id))
            })
            .collect();
        PodView {
            pod_ip: None,
            host_ip: node.host_ip.clone(),
            sandbox_ready: false,
            init,
            initialized: adopted || !has_init,
            containers,
            ephemeral: Vec::new(),
            init_failed: false,
            start_time: status.start_time.map_or(now, |t| t.0.as_second()),
            image_ids,
        }
    }

    /// The pod at `key` (uid `uid`) is being deleted: stops it within `grace` and
    /// confirms the deletion. Returns false when no running task of this runtime has
    /// it (the caller confirms the deletion itself).
    pub(crate) fn delete(&self, key: &Request, uid: &str, grace: Duration) -> bool {
        let pods = self.pods.lock();
        match pods.get(key) {
            Some(e) if e.shared.uid == uid && !e.shared.finished.is_cancelled() => {
                e.shared.request_stop(StopRequest { grace, delete: true });
                true
            }
            _ => false,
        }
    }

    /// The pod at `key` is gone: stops what is left of it at once and removes its
    /// directory.
    pub(crate) fn forget(&self, key: &Request) {
        let Some(e) = self.pods.lock().remove(key) else { return };
        e.shared.request_stop(StopRequest { grace: Duration::ZERO, delete: false });
        tokio::spawn(async move {
            let _ = e.task.await;
            if let Err(err) = tokio::fs::remove_dir_all(&e.shared.dir).await
                && err.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(dir = %e.shared.dir.display(), error = %err, "removing a deleted pod's directory failed");
            }
        });
    }

    /// Stops every pod (SIGTERM, SIGKILL after its grace period), removes their
    /// sandboxes and waits for all of it; no pod starts afterwards.
    pub(crate) async fn shutdown(&self) {
        self.stopping.cancel();
        let entries: Vec<PodEntry> = self.pods.lock().drain().map(|(_, e)| e).collect();
        for e in &entries {
            e.shared.request_stop(StopRequest { grace: e.shared.grace, delete: false });
        }
        for e in entries {
            let _ = e.task.await;
        }
    }

    /// The real pod `name` in `namespace`.
    pub(crate) fn pod(&self, namespace: &str, name: &str) -> Option<Arc<PodShared>> {
        self.pods.lock().get(&Request::new(name, Some(namespace))).map(|e| e.shared.clone())
    }

    /// What `exec` in `container` of pod `namespace/name` runs with (one line to wire the
    /// kubelet server's `/exec` and `/attach` routes to the streams).
    #[cfg_attr(not(unix), allow(dead_code))] // used only by the unix-only real-pod runtime
    pub(crate) fn exec_target(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
    ) -> Result<ExecTargetData, LookupError> {
        let pod = self.pod(namespace, name).ok_or_else(|| LookupError::PodNotFound(name.to_string()))?;
        let rt = pod.container(container).ok_or_else(|| LookupError::ContainerNotFound {
            pod: name.to_string(),
            container: container.to_string(),
        })?;
        let not_running = || LookupError::NotRunning { pod: name.to_string(), container: container.to_string() };
        let running = pod
            .view()
            .containers
            .iter()
            .chain(pod.view().init.iter())
            .chain(pod.view().ephemeral.iter())
            .any(|c| c.name == container && matches!(c.state, State::Running { .. }));
        let (spec, (ip, netns)) = match (rt.spec, pod.sandbox()) {
            (Some(spec), Some(sandbox)) if running => (spec, sandbox),
            _ => return Err(not_running()),
        };
        let container = match &spec.containment {
            Some(process::Containment::New(plan)) => Some(JoinPlan {
                waiter: rt.waiter.ok_or_else(not_running)?,
                working_dir: plan.working_dir.clone(),
                privileges: plan.privileges.clone(),
            }),
            _ => None,
        };
        Ok(ExecTargetData { env: spec.env, working_dir: spec.working_dir, netns, pod_ip: ip, container })
    }

    /// What `attach` to `container` of the real pod `namespace/name` joins: its running
    /// instance's output and stdin.
    #[cfg_attr(not(unix), allow(dead_code))] // used only by the unix-only real-pod runtime
    pub(crate) fn attach_target(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
    ) -> Result<pod::Attachment, LookupError> {
        let pod = self.pod(namespace, name).ok_or_else(|| LookupError::PodNotFound(name.to_string()))?;
        let rt = pod.container(container).ok_or_else(|| LookupError::ContainerNotFound {
            pod: name.to_string(),
            container: container.to_string(),
        })?;
        let running = pod
            .view()
            .containers
            .iter()
            .chain(pod.view().init.iter())
            .chain(pod.view().ephemeral.iter())
            .any(|c| c.name == container && matches!(c.state, State::Running { .. }));
        let not_running = || LookupError::NotRunning { pod: name.to_string(), container: container.to_string() };
        rt.attach.filter(|a| running && !a.progress.borrow().ended).ok_or_else(not_running)
    }

    /// The IP and network namespace (`None` on the host network) of the real pod
    /// `namespace/name` (for `portForward`).
    #[cfg_attr(not(unix), allow(dead_code))] // used only by the unix-only real-pod runtime
    pub(crate) fn pod_sandbox(&self, namespace: &str, name: &str) -> Result<(IpAddr, Option<PathBuf>), LookupError> {
        let pod = self.pod(namespace, name).ok_or_else(|| LookupError::PodNotFound(name.to_string()))?;
        pod.sandbox().ok_or_else(|| LookupError::PodNotFound(name.to_string()))
    }
}

/// The isolation of this kubelet's containers when `requested` is asked for (`None`:
/// contained where the host allows it). Falling back says why, once, as a warning.
pub(crate) fn isolation(requested: Option<PodIsolation>) -> PodIsolation {
    match requested {
        Some(PodIsolation::Host) => PodIsolation::Host,
        None | Some(PodIsolation::Contained) => match container::containment_available() {
            Ok(()) => PodIsolation::Contained,
            Err(reason) => {
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| {
                    tracing::warn!(
                        reason,
                        "real pods are NOT contained: their processes run as the kubelet's user on the host's \
                         file system and see the host's processes"
                    );
                });
                PodIsolation::Host
            }
        },
    }
}

/// Stops every real pod when the manager stops.
pub(crate) struct RuntimeStopper {
    /// The runtime to stop.
    pub runtime: Arc<Runtime>,
}

impl Runnable for RuntimeStopper {
    fn name(&self) -> String {
        "kubelet-runtime".into()
    }
    fn needs_leader_election(&self) -> bool {
        false
    }
    fn start(self: Box<Self>, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), RunnableError>> {
        Box::pin(async move {
            shutdown.cancelled().await;
            self.runtime.shutdown().await;
            Ok(())
        })
    }
}
