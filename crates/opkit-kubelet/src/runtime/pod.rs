//! One real pod's life, as a task: its directory and network sandbox, its projected
//! identity and volumes, its init containers run in order to completion, then its containers, each
//! restarted by the pod's restartPolicy with CrashLoopBackOff and probed; every change
//! of the kubelet's view is written to `pods/status`. A stop request (deletion or
//! shutdown) stops every process as the kubelet does, removes the sandbox and, for a
//! deletion, confirms it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod, Probe};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use opkit::events::EventType;
use parking_lot::Mutex;
use tokio::process::{ChildStderr, ChildStdout};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::RuntimeShared;
use super::backoff::RestartBackoff;
use super::container::{self, PodIsolation, RootPlan, Security};
use super::env::{self, EnvInputs};
use super::identity::{self, IdentityFiles};
use super::image::{self, ImageRun};
use super::logs::{InstanceLog, LogDir, LogProgress};
use super::probes::{self, ProbeKind, ProbeTarget, ProbeTiming, Thresholds};
use super::process::{ContainerProcess, Containment, ExitInfo, ProcessSpec};
use super::status::{self, ContainerView, PodView, State, Terminated};
use super::volumes;
use crate::network::PodSandbox;
use crate::status::digest;

/// kube's default `terminationGracePeriodSeconds`.
const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// How long setup steps (sandbox, token, volumes) wait before they are tried again.
const SETUP_RETRY: Duration = Duration::from_secs(1);
/// How often Secret and ConfigMap volumes are synced while the pod runs (the kubelet
/// syncs them about once a minute; faster here, where reissued certificates are waited on
/// by tests and developers).
const VOLUME_SYNC: Duration = Duration::from_secs(5);

/// Why a pod's processes are being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StopRequest {
    /// How long processes get between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Whether the pod was deleted (its deletion is confirmed once everything stopped).
    pub delete: bool,
}

/// What the node a pod runs on offers it.
#[derive(Debug, Clone)]
pub(crate) struct NodeFacts {
    /// The node's name.
    pub name: String,
    /// Its InternalIP.
    pub host_ip: String,
    /// Its pod range.
    pub pod_cidr: Option<String>,
    /// Its allocatable resources.
    pub allocatable: std::collections::BTreeMap<String, Quantity>,
}

/// What the kubelet server and probes need to know of one container.
#[derive(Debug, Clone)]
pub(crate) struct ContainerRuntime {
    /// Its log files.
    pub logs: LogDir,
    /// The restart count of its current (or last) instance, once one started.
    pub instance: Option<i32>,
    /// The progress of that instance's log.
    pub progress: Option<watch::Receiver<LogProgress>>,
    /// How its current instance was started (environment, working directory).
    pub spec: Option<ProcessSpec>,
    /// The pid of its current instance (a contained container's waiter).
    pub waiter: Option<u32>,
    /// What `attach` joins in its current instance.
    pub attach: Option<Attachment>,
}

/// What `attach` joins in a running container instance: its output as it is read, and
/// its stdin when the container has one (`stdin: true`).
#[derive(Debug, Clone)]
pub(crate) struct Attachment {
    /// The instance's output from now on.
    pub output: tokio::sync::broadcast::Sender<super::logs::OutputChunk>,
    /// The progress of its log: `ended` once all output was sent.
    pub progress: watch::Receiver<LogProgress>,
    /// Its stdin pipe; `None` inside once closed (`stdinOnce` after the first attach).
    pub stdin: Option<Arc<tokio::sync::Mutex<Option<tokio::process::ChildStdin>>>>,
    /// `stdinOnce`: the first attached client's end of input closes the container's stdin.
    pub stdin_once: bool,
}

/// One real pod, shared between its task, the kubelet and the kubelet server.
pub(crate) struct PodShared {
    /// The pod's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// `<pod root>/<ns>_<name>_<uid>`.
    pub dir: PathBuf,
    view: Mutex<PodView>,
    version: watch::Sender<u64>,
    containers: Mutex<HashMap<String, ContainerRuntime>>,
    /// The sandbox's IP and network namespace, once it exists.
    sandbox: Mutex<Option<(IpAddr, Option<PathBuf>)>>,
    stop: watch::Sender<Option<StopRequest>>,
    /// Cancelled when the pod's task ended.
    pub finished: CancellationToken,
    /// The pod's `terminationGracePeriodSeconds`.
    pub grace: Duration,
    /// The ephemeral containers of the pod's latest spec (the task starts new ones).
    ephemeral: watch::Sender<Vec<EphemeralContainer>>,
    /// The target container of each ephemeral container that names one.
    targets: Mutex<HashMap<String, String>>,
}

impl PodShared {
    /// The shared state of `pod`, whose directory is `dir`.
    pub(crate) fn new(pod: &Pod, dir: PathBuf, view: PodView) -> PodShared {
        let spec = pod.spec.clone().unwrap_or_default();
        let containers = spec
            .init_containers
            .iter()
            .flatten()
            .chain(spec.containers.iter())
            .map(|c| &c.name)
            .map(|n| {
                let rt = ContainerRuntime {
                    logs: LogDir::new(dir.join("logs").join(n)),
                    instance: None,
                    progress: None,
                    spec: None,
                    waiter: None,
                    attach: None,
                };
                (n.clone(), rt)
            })
            .collect();
        PodShared {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            dir,
            view: Mutex::new(view),
            version: watch::channel(0).0,
            containers: Mutex::new(containers),
            sandbox: Mutex::new(None),
            stop: watch::channel(None).0,
            finished: CancellationToken::new(),
            grace: grace_of(pod),
            ephemeral: watch::channel(spec.ephemeral_containers.unwrap_or_default()).0,
            targets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes the ephemeral containers of `pod`, the latest version of this pod: the
    /// task starts those it did not run yet (existing ones never change).
    pub(crate) fn set_ephemeral(&self, pod: &Pod) {
        let list = pod.spec.as_ref().and_then(|s| s.ephemeral_containers.clone()).unwrap_or_default();
        self.ephemeral.send_if_modified(|old| {
            let grew = list.len() > old.len();
            if grew {
                *old = list;
            }
            grew
        });
    }

    /// Asks the pod's task to stop its processes (the first request wins).
    pub(crate) fn request_stop(&self, req: StopRequest) {
        self.stop.send_if_modified(|s| {
            if s.is_none() {
                *s = Some(req);
                true
            } else {
                false
            }
        });
    }

    /// What the kubelet currently reports.
    pub(crate) fn view(&self) -> PodView {
        self.view.lock().clone()
    }

    /// One container's runtime data.
    pub(crate) fn container(&self, name: &str) -> Option<ContainerRuntime> {
        self.containers.lock().get(name).cloned()
    }

    /// The sandbox's IP and network namespace.
    #[cfg_attr(not(unix), allow(dead_code))] // used only by the unix-only real-pod runtime
    pub(crate) fn sandbox(&self) -> Option<(IpAddr, Option<PathBuf>)> {
        self.sandbox.lock().clone()
    }

    fn update(&self, f: impl FnOnce(&mut PodView)) {
        f(&mut self.view.lock());
        self.version.send_modify(|v| *v += 1);
    }

    fn update_container(&self, slot: Slot, f: impl FnOnce(&mut ContainerView)) {
        self.update(|v| {
            let list = match (slot.ephemeral, slot.init) {
                (true, _) => &mut v.ephemeral,
                (false, true) => &mut v.init,
                (false, false) => &mut v.containers,
            };
            if let Some(c) = list.get_mut(slot.index) {
                f(c);
            }
        });
    }
}

/// Where a container's view lives.
#[derive(Debug, Clone, Copy)]
struct Slot {
    init: bool,
    /// An ephemeral container (`index` into the view's ephemeral containers).
    ephemeral: bool,
    index: usize,
}

/// The pod's directory name: `<ns>_<name>_<uid>`, as the kubelet's log directories.
pub(crate) fn dir_name(pod: &Pod) -> String {
    format!(
        "{}_{}_{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// The working directory of a container whose own directory is `root`: `workingDir`
/// made under it (only its plain components: it cannot leave `root`).
pub(crate) fn working_dir(root: &std::path::Path, working_dir: Option<&str>) -> PathBuf {
    let mut dir = root.to_path_buf();
    for part in std::path::Path::new(working_dir.unwrap_or_default()).components() {
        if let std::path::Component::Normal(p) = part {
            dir.push(p);
        }
    }
    dir
}

/// Waits until a stop is requested (a dropped sender counts as an immediate stop).
async fn stop_requested(rx: &mut watch::Receiver<Option<StopRequest>>) -> StopRequest {
    match rx.wait_for(Option::is_some).await {
        Ok(r) => r.unwrap_or(StopRequest { grace: Duration::ZERO, delete: false }),
        Err(_) => StopRequest { grace: Duration::ZERO, delete: false },
    }
}

/// Runs the pod until its containers finish for good or it is stopped.
pub(crate) async fn run(rt: Arc<RuntimeShared>, pod: Pod, node: NodeFacts, shared: Arc<PodShared>) {
    let writer_done = CancellationToken::new();
    let writer = tokio::spawn(write_statuses(rt.clone(), pod.clone(), shared.clone(), writer_done.clone()));
    let stop = run_pod(&rt, &pod, &node, &shared).await;
    writer_done.cancel();
    let _ = writer.await;
    if let Some(StopRequest { delete: true, .. }) = stop {
        // A deleted pod's directory goes with it, as the kubelet's housekeeping removes it.
        if let Err(e) = tokio::fs::remove_dir_all(&shared.dir).await
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %shared.dir.display(), error = %e, "removing a deleted pod's directory failed");
        }
        let api: Api<Pod> = Api::namespaced(rt.client.clone(), &shared.namespace);
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: Some(shared.uid.clone()), resource_version: None }),
            ..Default::default()
        };
        match api.delete(&shared.name, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => {}
            Err(e) => tracing::warn!(pod = %shared.name, error = %e, "confirming a pod's deletion failed"),
        }
    }
    shared.finished.cancel();
}

/// The pod's life up to its sandbox's removal; returns the stop request if one ended it.
async fn run_pod(rt: &Arc<RuntimeShared>, pod: &Pod, node: &NodeFacts, shared: &Arc<PodShared>) -> Option<StopRequest> {
    let mut stop_rx = shared.stop.subscribe();
    if let Err(e) = tokio::fs::create_dir_all(&shared.dir).await {
        tracing::warn!(dir = %shared.dir.display(), error = %e, "making a pod's directory failed");
    }
    // The sandbox: the host's own network for a `hostNetwork` pod.
    let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
    let sandbox = loop {
        if host_network {
            break Arc::new(rt.networks.host_network());
        }
        tokio::select! {
            req = stop_requested(&mut stop_rx) => return Some(req),
            made = rt.networks.create(&shared.uid, &shared.name, node.pod_cidr.as_deref()) => match made {
                Ok(s) => break Arc::new(s),
                Err(e) => {
                    let note = format!("Failed to create pod sandbox: {e}");
                    rt.events.emit(pod, &node.name, None, EventType::Warning, "FailedCreatePodSandBox", &note);
                    tokio::select! {
                        req = stop_requested(&mut stop_rx) => return Some(req),
                        () = tokio::time::sleep(SETUP_RETRY) => {}
                    }
                }
            }
        }
    };
    *shared.sandbox.lock() = Some((sandbox.ip(), sandbox.netns().map(PathBuf::from)));
    shared.update(|v| {
        v.sandbox_ready = true;
        v.pod_ip = Some(sandbox.ip().to_string());
    });
    let result = run_in_sandbox(rt, pod, node, shared, &sandbox, &mut stop_rx).await;
    match Arc::try_unwrap(sandbox) {
        Ok(s) => s.destroy().await,
        Err(_) => tracing::warn!(pod = %shared.name, "a pod's sandbox is still in use; not removed"),
    }
    result
}

async fn run_in_sandbox(
    rt: &Arc<RuntimeShared>,
    pod: &Pod,
    node: &NodeFacts,
    shared: &Arc<PodShared>,
    sandbox: &Arc<PodSandbox>,
    stop_rx: &mut watch::Receiver<Option<StopRequest>>,
) -> Option<StopRequest> {
    let files = IdentityFiles::new(&shared.dir);
    let mut refresher = None;
    if identity::automounts(pod) {
        let ca = rt.root_ca_pem.clone().unwrap_or_default();
        if let Err(e) = identity::write_static(pod, &files, &ca, sandbox.api_server()) {
            tracing::warn!(pod = %shared.name, error = %e, "writing a pod's identity failed");
        }
        let ttl = loop {
            tokio::select! {
                req = stop_requested(stop_rx) => return Some(req),
                got = identity::write_token(&rt.client, pod, &files) => match got {
                    Ok(ttl) => break ttl,
                    Err(e) => {
                        let note = format!("MountVolume.SetUp failed for volume \"kube-api-access\" : {e}");
                        rt.events.emit(pod, &node.name, None, EventType::Warning, "FailedMount", &note);
                        tokio::select! {
                            req = stop_requested(stop_rx) => return Some(req),
                            () = tokio::time::sleep(SETUP_RETRY) => {}
                        }
                    }
                }
            }
        };
        refresher = Some(tokio::spawn(refresh_token(rt.client.clone(), pod.clone(), files.clone(), ttl)));
    }
    loop {
        tokio::select! {
            req = stop_requested(stop_rx) => return Some(req),
            made = volumes::set_up(&rt.client, pod, &shared.dir) => match made {
                Ok(()) => break,
                Err(e) => {
                    rt.events.emit(pod, &node.name, None, EventType::Warning, "FailedMount", &e.to_string());
                    tokio::select! {
                        req = stop_requested(stop_rx) => return Some(req),
                        () = tokio::time::sleep(SETUP_RETRY) => {}
                    }
                }
            }
        }
    }
    let syncer = tokio::spawn(sync_volumes(rt.client.clone(), pod.clone(), shared.dir.clone()));
    let result = run_containers(rt, pod, node, shared, sandbox, &files, stop_rx).await;
    if let Some(r) = refresher {
        r.abort();
    }
    syncer.abort();
    result
}

/// Keeps Secret and ConfigMap volumes in step with their sources while the pod runs.
async fn sync_volumes(client: kube::Client, pod: Pod, dir: PathBuf) {
    loop {
        tokio::time::sleep(VOLUME_SYNC).await;
        if let Err(e) = volumes::set_up(&client, &pod, &dir).await {
            tracing::debug!(pod = ?pod.metadata.name, error = %e, "syncing a pod's volumes failed");
        }
    }
}

/// Keeps the projected token fresh: a new one at 80% of the old one's life.
async fn refresh_token(client: kube::Client, pod: Pod, files: IdentityFiles, mut ttl: Duration) {
    loop {
        tokio::time::sleep(identity::refresh_after(ttl)).await;
        match identity::write_token(&client, &pod, &files).await {
            Ok(t) => ttl = t,
            Err(e) => {
                tracing::warn!(pod = ?pod.metadata.name, error = %e, "refreshing a pod's token failed");
                ttl = Duration::from_secs(60);
            }
        }
    }
}

async fn run_containers(
    rt: &Arc<RuntimeShared>,
    pod: &Pod,
    node: &NodeFacts,
    shared: &Arc<PodShared>,
    sandbox: &Arc<PodSandbox>,
    files: &IdentityFiles,
    stop_rx: &mut watch::Receiver<Option<StopRequest>>,
) -> Option<StopRequest> {
    let spec = pod.spec.clone().unwrap_or_default();
    let policy = spec.restart_policy.clone().unwrap_or_else(|| "Always".into());
    let run = ContainerRun { rt, pod, node, shared, sandbox, files, policy: &policy };
    let initialized = shared.view().initialized;
    if !initialized {
        for (index, c) in spec.init_containers.iter().flatten().enumerate() {
            let exit = run.container(c, Slot { init: true, ephemeral: false, index }, 0, stop_rx.clone()).await;
            match exit {
                Outcome::Stopped => return Some(stop_requested(stop_rx).await),
                Outcome::Exited(e) if e.code == 0 => {}
                Outcome::Exited(_) => {
                    shared.update(|v| v.init_failed = true);
                    return None;
                }
            }
        }
        shared.update(|v| {
            v.initialized = true;
            for c in &mut v.containers {
                if matches!(&c.state, State::Waiting { reason, .. } if reason == "PodInitializing") {
                    c.state = State::Waiting { reason: "ContainerCreating".into(), message: None };
                }
            }
        });
    }
    let restarts: Vec<i32> = shared.view().containers.iter().map(|c| c.restarts).collect();
    let runs = spec.containers.iter().enumerate().map(|(index, c)| {
        let first = restarts.get(index).copied().unwrap_or(0);
        run.container(c, Slot { init: false, ephemeral: false, index }, first, stop_rx.clone())
    });
    // Ephemeral containers run next to the app containers, as long as those do.
    let outcomes = tokio::select! {
        outcomes = futures::future::join_all(runs) => outcomes,
        never = run.ephemeral_containers(stop_rx.clone()) => match never {},
    };
    if outcomes.iter().any(|o| matches!(o, Outcome::Stopped)) {
        return Some(stop_requested(stop_rx).await);
    }
    None
}

/// How a container's run ended.
enum Outcome {
    /// Its last instance exited and it is not restarted.
    Exited(ExitInfo),
    /// The pod was stopped.
    Stopped,
}

/// Why an instance of a container could not be prepared: what its waiting state reports.
struct Unprepared {
    /// `CreateContainerConfigError` or `CreateContainerError`.
    reason: &'static str,
    message: String,
}

/// One started (or failed to start) instance of a container.
struct Instance {
    slot: Slot,
    /// Its restart count.
    restarts: i32,
    container_id: String,
    /// When it started (seconds since the epoch).
    started_at: i64,
}

/// How an instance's run ended.
struct InstanceEnd {
    exit: ExitInfo,
    /// Whether the pod's stop ended it.
    stopped: bool,
    started: Instant,
}

/// A started instance's output pipes and the log they are copied into.
struct Output {
    log: Option<InstanceLog>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
}

impl Output {
    /// Copies both pipes into the log until they close (drops them without a log).
    async fn copy(self) {
        let Some(log) = self.log else { return };
        let out = async {
            if let Some(s) = self.stdout {
                log.copy(s, "stdout").await;
            }
        };
        let err = async {
            if let Some(s) = self.stderr {
                log.copy(s, "stderr").await;
            }
        };
        futures::join!(out, err);
    }
}

/// Why a running instance ends early.
enum Interrupt {
    /// A liveness or startup probe failed: kill and restart.
    Unhealthy(ProbeKind),
    /// The pod is stopping.
    Stop(StopRequest),
}

/// Everything one container's run needs.
struct ContainerRun<'a> {
    rt: &'a Arc<RuntimeShared>,
    pod: &'a Pod,
    node: &'a NodeFacts,
    shared: &'a Arc<PodShared>,
    sandbox: &'a Arc<PodSandbox>,
    files: &'a IdentityFiles,
    policy: &'a str,
}

impl ContainerRun<'_> {
    /// Runs every ephemeral container the pod gets, each once (they are never
    /// restarted), in the view's order; never returns.
    async fn ephemeral_containers(&self, stop_rx: watch::Receiver<Option<StopRequest>>) -> std::convert::Infallible {
        use futures::StreamExt;
        let mut added = self.shared.ephemeral.subscribe();
        let mut running = futures::stream::FuturesUnordered::new();
        let mut started = 0;
        loop {
            let new: Vec<EphemeralContainer> = added.borrow_and_update().iter().skip(started).cloned().collect();
            for e in new {
                started += 1;
                let Some(c) = ephemeral_as_container(&e) else { continue };
                let image = c.image.clone().unwrap_or_default();
                let image_id = self.rt.image_id(&image);
                let index = {
                    let mut containers = self.shared.containers.lock();
                    containers.entry(c.name.clone()).or_insert_with(|| ContainerRuntime {
                        logs: LogDir::new(self.shared.dir.join("logs").join(&c.name)),
                        instance: None,
                        progress: None,
                        spec: None,
                        waiter: None,
                        attach: None,
                    });
                    self.shared.view.lock().ephemeral.len()
                };
                self.shared.update(|v| {
                    v.ephemeral.push(ContainerView::waiting(&c.name, &image, "ContainerCreating", 0));
                    if let Some(id) = image_id
                        && !v.image_ids.iter().any(|(i, _)| *i == image)
                    {
                        v.image_ids.push((image.clone(), id));
                    }
                });
                let slot = Slot { init: false, ephemeral: true, index };
                let target = e.target_container_name.clone().filter(|t| !t.is_empty());
                let stop_rx = stop_rx.clone();
                running.push(async move {
                    let _ = self.ephemeral_container(&c, target.as_deref(), slot, stop_rx).await;
                });
            }
            tokio::select! {
                changed = added.changed() => if changed.is_err() {
                    // The pod's shared state is gone: only the running ones are left.
                    while running.next().await.is_some() {}
                    return std::future::pending().await;
                },
                Some(()) = running.next(), if !running.is_empty() => {}
            }
        }
    }

    /// Runs ephemeral container `c` once, in `target`'s PID namespace when it names a
    /// running contained container.
    async fn ephemeral_container(
        &self,
        c: &Container,
        target: Option<&str>,
        slot: Slot,
        stop_rx: watch::Receiver<Option<StopRequest>>,
    ) -> Outcome {
        if let Some(t) = target {
            self.shared.targets.lock().insert(c.name.clone(), t.to_string());
        }
        self.container(c, slot, 0, stop_rx).await
    }

    fn event(&self, c: &Container, type_: EventType, reason: &'static str, note: &str) {
        self.rt.events.emit(self.pod, &self.node.name, Some(&c.name), type_, reason, note);
    }

    fn restarts(&self, slot: Slot, code: i32) -> bool {
        let init = slot.init;
        if slot.ephemeral {
            return false;
        }
        match self.policy {
            "Never" => false,
            "OnFailure" => code != 0,
            _ => !init || code != 0,
        }
    }

    /// The environment of an instance of `c` (`contained`: no `KUBECONFIG`, whose paths
    /// are the host's; in-cluster configuration reads the mounted ServiceAccount), with
    /// `path` as `PATH` unless the container sets one.
    async fn environment(
        &self,
        c: &Container,
        contained: bool,
        path: String,
    ) -> Result<Vec<(String, String)>, env::EnvError> {
        let inputs = EnvInputs {
            pod_ip: self.sandbox.ip().to_string(),
            host_ip: self.node.host_ip.clone(),
            api_server: self.sandbox.api_server(),
            node_allocatable: self.node.allocatable.clone(),
        };
        let mut vars = env::container_env(&self.rt.client, self.pod, c, &inputs).await?;
        let mut extra = vec![("HOSTNAME".to_string(), self.shared.name.clone())];
        if identity::automounts(self.pod) && !contained {
            extra.push(("KUBECONFIG".to_string(), self.files.kubeconfig.display().to_string()));
        }
        extra.push(("PATH".to_string(), path));
        for (k, v) in extra {
            if !vars.iter().any(|(n, _)| *n == k) {
                vars.push((k, v));
            }
        }
        Ok(vars)
    }

    /// The root file system of a contained instance of `c` of `image`: the pod's `/etc`
    /// (written now), a loaded image's entrypoint or a built-in image's tools, the
    /// ServiceAccount and the volumes at their paths.
    fn root_plan(
        &self,
        c: &Container,
        image: &ImageRun,
        privileges: container::Privileges,
        read_only_root: bool,
    ) -> std::io::Result<RootPlan> {
        let etc_dir = self.shared.dir.join("etc");
        use crate::resolv_conf::{ResolvConf, for_pod};
        let resolv = for_pod(self.pod, &ResolvConf::host(), self.sandbox.cluster_dns());
        container::write_etc(&etc_dir, &self.shared.name, &self.sandbox.ip().to_string(), &resolv.render())?;
        let mut mounts = vec![match image {
            ImageRun::Loaded { binary, .. } => volumes::BindMount {
                source: binary.clone(),
                target: PathBuf::from(container::ENTRYPOINT),
                read_only: true,
            },
            ImageRun::Builtin(_) => volumes::BindMount {
                source: image::tools_dir(&self.shared.dir),
                target: PathBuf::from(image::TOOLS_MOUNT),
                read_only: true,
            },
        }];
        mounts.extend(image.file_mounts());
        if identity::automounts(self.pod) {
            mounts.push(volumes::BindMount {
                source: self.files.dir.clone(),
                target: PathBuf::from(container::SERVICE_ACCOUNT_MOUNT),
                read_only: true,
            });
        }
        mounts.extend(volumes::mounts(self.pod, c, &self.shared.dir));
        let host_network = self.pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
        let sandbox_namespaces = self.sandbox.netns().is_some();
        Ok(RootPlan {
            root_dir: self.shared.dir.join("rootfs").join(&c.name),
            etc_dir,
            mounts,
            working_dir: PathBuf::from(c.working_dir.as_deref().filter(|w| !w.is_empty()).unwrap_or("/")),
            hostname: (!sandbox_namespaces && !host_network).then(|| self.shared.name.clone()),
            sandbox_namespaces,
            read_only_root,
            privileges,
            pid_namespace_of: self.target_waiter(c),
        })
    }

    /// The waiter of the running contained container an ephemeral container `c` targets.
    fn target_waiter(&self, c: &Container) -> Option<u32> {
        let target = self.shared.targets.lock().get(&c.name).cloned()?;
        let rt = self.shared.container(&target)?;
        match rt.spec?.containment {
            Some(Containment::New(_)) => rt.waiter,
            _ => None,
        }
    }

    /// How an instance of `c` of `image` starts with `env`: contained with `contained`'s
    /// privileges, else on the host in `working_dir`. A built-in image's tools are
    /// written first.
    fn process_spec(
        &self,
        c: &Container,
        image: &ImageRun,
        env: Vec<(String, String)>,
        contained: Option<(container::Privileges, bool)>,
        working_dir: &std::path::Path,
    ) -> std::io::Result<ProcessSpec> {
        if let ImageRun::Builtin(_) = image {
            crate::images::builtin::write_tools(&image::tools_dir(&self.shared.dir))?;
        }
        let (program, args) = image.command_line(c, &env, contained.is_some());
        let stdin = c.stdin == Some(true);
        Ok(match contained {
            None => ProcessSpec {
                program,
                args,
                env,
                working_dir: working_dir.to_path_buf(),
                service_account: identity::automounts(self.pod).then(|| self.files.dir.clone()),
                mounts: volumes::mounts(self.pod, c, &self.shared.dir),
                stdin,
                containment: None,
            },
            Some((privileges, read_only_root)) => {
                let plan = self.root_plan(c, image, privileges, read_only_root)?;
                ProcessSpec {
                    program,
                    args,
                    env,
                    working_dir: plan.working_dir.clone(),
                    service_account: None,
                    mounts: Vec::new(),
                    stdin,
                    containment: Some(Containment::New(Box::new(plan))),
                }
            }
        })
    }

    /// Runs `c` (restarting it per the restart policy) until it ends for good or the pod
    /// stops: prepare an instance, run it, then restart it (after CrashLoopBackOff) or
    /// finish.
    async fn container(
        &self,
        c: &Container,
        slot: Slot,
        mut restarts: i32,
        mut stop_rx: watch::Receiver<Option<StopRequest>>,
    ) -> Outcome {
        let shared = self.shared;
        let mut backoff = RestartBackoff::new(self.rt.backoff_base);
        // Retries of a container whose configuration is missing back off on their own.
        let mut config_backoff = RestartBackoff::new(self.rt.backoff_base);
        let Some(image) = self.rt.image_run(c.image.as_deref().unwrap_or_default()) else {
            // Not loaded (any more): the pod was real when it started.
            let msg = format!("image {:?} is not loaded", c.image.as_deref().unwrap_or_default());
            shared.update_container(slot, |v| {
                v.state = State::Waiting { reason: "ErrImageNeverPull".into(), message: Some(msg) }
            });
            return Outcome::Stopped;
        };
        let working_dir = working_dir(&shared.dir.join("containers").join(&c.name), c.working_dir.as_deref());
        loop {
            let spec = match self.prepare(c, &image, &working_dir).await {
                Ok(spec) => spec,
                Err(unprepared) => {
                    self.event(c, EventType::Warning, "Failed", &format!("Error: {}", unprepared.message));
                    shared.update_container(slot, |v| {
                        v.state =
                            State::Waiting { reason: unprepared.reason.into(), message: Some(unprepared.message) };
                    });
                    let retry = config_backoff.next(Duration::ZERO).max(SETUP_RETRY);
                    tokio::select! {
                        _ = stop_requested(&mut stop_rx) => return Outcome::Stopped,
                        () = tokio::time::sleep(retry) => continue,
                    }
                }
            };
            let end = self.run_instance(c, slot, restarts, &spec, &mut stop_rx).await;
            if end.stopped {
                return Outcome::Stopped;
            }
            if !self.restarts(slot, end.exit.code) {
                shared.update_container(slot, |v| v.done = true);
                return Outcome::Exited(end.exit);
            }
            let delay = backoff.next(end.started.elapsed());
            if delay.is_zero() {
                // The first restart is immediate.
                restarts = restarts.saturating_add(1);
                shared.update_container(slot, |v| {
                    if let State::Terminated(t) = &v.state {
                        v.last = Some(t.clone());
                    }
                    v.restarts = restarts;
                });
                continue;
            }
            self.report_back_off(c, slot, delay);
            tokio::select! {
                _ = stop_requested(&mut stop_rx) => return Outcome::Stopped,
                () = tokio::time::sleep(delay) => {}
            }
            restarts = restarts.saturating_add(1);
            shared.update_container(slot, |v| v.restarts = restarts);
        }
    }

    /// How the next instance of `c` of `image` starts: its privileges (contained where
    /// the pod's isolation and security context allow it), environment and root.
    async fn prepare(
        &self,
        c: &Container,
        image: &ImageRun,
        working_dir: &std::path::Path,
    ) -> Result<ProcessSpec, Unprepared> {
        let config_error = |message: String| Unprepared { reason: "CreateContainerConfigError", message };
        let security = container::privileges(self.pod, c).map_err(|e| config_error(e.to_string()))?;
        let contained = match security {
            Security::Contained { privileges, read_only_root } if self.rt.isolation == PodIsolation::Contained => {
                Some((privileges, read_only_root))
            }
            _ => None,
        };
        if contained.is_none() && image.has_files() {
            return Err(Unprepared {
                reason: "CreateContainerError",
                message: format!(
                    "image {} carries files (`opkit cluster load --file`), which only a contained container sees; \
                     this one runs on the host (pod isolation {:?}, or a privileged security context)",
                    c.image.as_deref().unwrap_or_default(),
                    self.rt.isolation
                ),
            });
        }
        let tools = match contained {
            Some(_) => PathBuf::from(image::TOOLS_MOUNT),
            None => image::tools_dir(&self.shared.dir),
        };
        let env = self
            .environment(c, contained.is_some(), image.default_path(&tools))
            .await
            .map_err(|e| config_error(e.to_string()))?;
        self.process_spec(c, image, env, contained, working_dir).map_err(|e| {
            tracing::warn!(container = %c.name, error = %e, "preparing a container's root failed");
            Unprepared {
                reason: "CreateContainerError",
                message: format!("preparing the container's root file system: {e}"),
            }
        })
    }

    /// Starts one instance of `c` from `spec` (its `restarts`-th) and runs it until it
    /// exits, is killed by a failed probe, or the pod stops.
    async fn run_instance(
        &self,
        c: &Container,
        slot: Slot,
        restarts: i32,
        spec: &ProcessSpec,
        stop_rx: &mut watch::Receiver<Option<StopRequest>>,
    ) -> InstanceEnd {
        // As the kubelet, before every start.
        let image = c.image.clone().unwrap_or_default();
        let note = format!("Container image \"{image}\" already present on machine");
        self.event(c, EventType::Normal, "Pulled", &note);
        let shared = self.shared;
        let instance = Instance {
            slot,
            restarts,
            container_id: format!(
                "{}{}",
                super::CONTAINER_ID_PREFIX,
                digest(&[&shared.uid, &c.name, &restarts.to_string()])
            ),
            started_at: Timestamp::now().as_second(),
        };
        let started = Instant::now();
        let log = self.open_log(c, restarts).await;
        let spawned = ContainerProcess::spawn(spec, self.sandbox);
        self.event(c, EventType::Normal, "Created", &format!("Created container: {}", c.name));
        let (exit, stopped) = match spawned {
            Err(e) => (self.report_start_error(c, &instance, &e), false),
            Ok((process, stdout, stderr)) => {
                let output = Output { log, stdout, stderr };
                self.supervise(c, &instance, spec, process, output, stop_rx).await
            }
        };
        InstanceEnd { exit, stopped, started }
    }

    /// The log of `c`'s `restarts`-th instance (`None`, with a warning, if it cannot be
    /// opened).
    async fn open_log(&self, c: &Container, restarts: i32) -> Option<InstanceLog> {
        let logs = match self.shared.container(&c.name) {
            Some(rt) => rt.logs,
            None => LogDir::new(self.shared.dir.join("logs").join(&c.name)),
        };
        logs.open(restarts)
            .await
            .inspect_err(|e| tracing::warn!(container = %c.name, error = %e, "opening a container log failed"))
            .ok()
    }

    /// Reports an instance that could not start (exit code 128, `StartError`).
    fn report_start_error(&self, c: &Container, instance: &Instance, error: &std::io::Error) -> ExitInfo {
        let msg = format!("failed to start container {:?}: {error}", c.name);
        self.event(c, EventType::Warning, "Failed", &format!("Error: {msg}"));
        let t = Terminated {
            exit_code: 128,
            signal: None,
            reason: "StartError".into(),
            message: Some(msg),
            started_at: instance.started_at,
            finished_at: instance.started_at,
            container_id: instance.container_id.clone(),
        };
        self.shared.update_container(instance.slot, |v| v.state = State::Terminated(t));
        ExitInfo { code: 128, signal: None }
    }

    /// Runs a started instance: publishes it to the kubelet server, reports it running,
    /// copies its output into its log, waits for its end and reports it. Returns its exit
    /// and whether the pod's stop ended it.
    async fn supervise(
        &self,
        c: &Container,
        instance: &Instance,
        spec: &ProcessSpec,
        mut process: ContainerProcess,
        output: Output,
        stop_rx: &mut watch::Receiver<Option<StopRequest>>,
    ) -> (ExitInfo, bool) {
        self.event(c, EventType::Normal, "Started", &format!("Started container {}", c.name));
        self.publish_instance(c, instance.restarts, spec, &mut process, output.log.as_ref());
        let slot = instance.slot;
        let has_startup = c.startup_probe.is_some() && !slot.init;
        let has_readiness = c.readiness_probe.is_some() && !slot.init;
        self.shared.update_container(slot, |v| {
            v.state = State::Running { started_at: instance.started_at, container_id: instance.container_id.clone() };
            v.started = !has_startup;
            v.ready = !has_startup && !has_readiness && !slot.init && !slot.ephemeral;
            v.restarts = instance.restarts;
        });
        let log = output.log.clone();
        let copying = tokio::spawn(output.copy());
        let (exit, stopped) = self.wait_or_interrupt(c, slot, spec, &mut process, stop_rx).await;
        let _ = copying.await;
        if let Some(l) = &log {
            l.end();
        }
        let t = Terminated {
            exit_code: exit.code,
            signal: exit.signal,
            reason: if exit.code == 0 { "Completed".into() } else { "Error".into() },
            message: None,
            started_at: instance.started_at,
            finished_at: Timestamp::now().as_second(),
            container_id: instance.container_id.clone(),
        };
        self.shared.update_container(slot, |v| {
            v.state = State::Terminated(t);
            // A completed init container counts as ready, as the kubelet reports it.
            v.ready = slot.init && exit.code == 0;
            v.started = false;
        });
        (exit, stopped)
    }

    /// Makes a started instance what the kubelet server's logs, exec and attach reach.
    fn publish_instance(
        &self,
        c: &Container,
        restarts: i32,
        spec: &ProcessSpec,
        process: &mut ContainerProcess,
        log: Option<&InstanceLog>,
    ) {
        let mut containers = self.shared.containers.lock();
        if let Some(rt) = containers.get_mut(&c.name) {
            rt.instance = Some(restarts);
            rt.progress = log.map(InstanceLog::subscribe);
            rt.spec = Some(spec.clone());
            rt.waiter = process.id();
            let stdin = process.take_stdin().map(|s| Arc::new(tokio::sync::Mutex::new(Some(s))));
            rt.attach = log.map(|l| Attachment {
                output: l.output(),
                progress: l.subscribe(),
                stdin,
                stdin_once: c.stdin_once == Some(true),
            });
        }
    }

    /// Waits for the instance to exit, or stops it when the pod stops or a startup or
    /// liveness probe fails for good. Returns its exit and whether the pod's stop ended it.
    async fn wait_or_interrupt(
        &self,
        c: &Container,
        slot: Slot,
        spec: &ProcessSpec,
        process: &mut ContainerProcess,
        stop_rx: &mut watch::Receiver<Option<StopRequest>>,
    ) -> (ExitInfo, bool) {
        let waiter = process.id();
        let interrupt = tokio::select! {
            exit = process.wait() => return (exit, false),
            req = stop_requested(stop_rx) => Interrupt::Stop(req),
            kind = self.probe(c, slot, spec, waiter) => Interrupt::Unhealthy(kind),
        };
        match interrupt {
            Interrupt::Stop(req) => {
                self.event(c, EventType::Normal, "Killing", &format!("Stopping container {}", c.name));
                (process.stop(req.grace).await, true)
            }
            Interrupt::Unhealthy(kind) => {
                let note =
                    format!("Container {} failed {} probe, will be restarted", c.name, kind.title().to_lowercase());
                self.event(c, EventType::Normal, "Killing", &note);
                (process.stop(self.probe_grace(c, kind)).await, false)
            }
        }
    }

    /// How long an instance killed by its failed `kind` probe gets to stop: the probe's
    /// own terminationGracePeriodSeconds wins over the pod's.
    fn probe_grace(&self, c: &Container, kind: ProbeKind) -> Duration {
        let probe = match kind {
            ProbeKind::Startup => c.startup_probe.as_ref(),
            _ => c.liveness_probe.as_ref(),
        };
        probe
            .and_then(|p| p.termination_grace_period_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .map_or_else(|| grace_of(self.pod), Duration::from_secs)
    }

    /// Reports that `c` waits `delay` before its next restart (CrashLoopBackOff).
    fn report_back_off(&self, c: &Container, slot: Slot, delay: Duration) {
        let shared = self.shared;
        let msg = format!(
            "back-off {} restarting failed container={} pod={}_{}({})",
            opkit_apimachinery::duration::format(delay),
            c.name,
            shared.name,
            shared.namespace,
            shared.uid
        );
        let note = format!(
            "Back-off restarting failed container {} in pod {}_{}({})",
            c.name, shared.name, shared.namespace, shared.uid
        );
        self.event(c, EventType::Warning, "BackOff", &note);
        shared.update_container(slot, |v| {
            if let State::Terminated(t) = &v.state {
                v.last = Some(t.clone());
            }
            v.state = State::Waiting { reason: "CrashLoopBackOff".into(), message: Some(msg) };
        });
    }

    /// Probes a running instance; returns only when a startup or liveness probe failed
    /// for good (readiness results update the view).
    async fn probe(&self, c: &Container, slot: Slot, spec: &ProcessSpec, waiter: Option<u32>) -> ProbeKind {
        if slot.init {
            return std::future::pending().await;
        }
        // Exec probes of a contained container run inside it.
        let join = match (&spec.containment, waiter) {
            (Some(Containment::New(plan)), Some(waiter)) => Some(container::JoinPlan {
                waiter,
                working_dir: plan.working_dir.clone(),
                privileges: plan.privileges.clone(),
            }),
            _ => None,
        };
        let target = ProbeTarget { container: c, pod_ip: self.sandbox.ip(), exec: spec, sandbox: self.sandbox, join };
        if let Some(p) = &c.startup_probe {
            match self.probe_loop(c, p, ProbeKind::Startup, &target, slot).await {
                Some(kind) => return kind,
                None => {
                    let ready = c.readiness_probe.is_none();
                    self.shared.update_container(slot, |v| {
                        v.started = true;
                        v.ready = ready;
                    });
                }
            }
        }
        let liveness = async {
            match &c.liveness_probe {
                Some(p) => match self.probe_loop(c, p, ProbeKind::Liveness, &target, slot).await {
                    Some(kind) => kind,
                    None => std::future::pending().await,
                },
                None => std::future::pending().await,
            }
        };
        let readiness = async {
            match &c.readiness_probe {
                Some(p) => {
                    self.probe_loop(c, p, ProbeKind::Readiness, &target, slot).await;
                    std::future::pending().await
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            kind = liveness => kind,
            kind = readiness => kind,
        }
    }

    /// Runs one probe every period. A startup probe returns `None` once it succeeded;
    /// startup and liveness probes return themselves when they failed for good; a
    /// readiness probe runs forever, setting `ready`.
    async fn probe_loop(
        &self,
        c: &Container,
        probe: &Probe,
        kind: ProbeKind,
        target: &ProbeTarget<'_>,
        slot: Slot,
    ) -> Option<ProbeKind> {
        let timing = ProbeTiming::of(probe);
        let mut thresholds = Thresholds::default();
        let mut prober = probes::Prober::default();
        tokio::time::sleep(timing.initial_delay).await;
        loop {
            let result = prober.run(probe, target).await;
            if let Err(msg) = &result {
                let note = format!("{} probe failed: {msg}", kind.title());
                self.event(c, EventType::Warning, "Unhealthy", &note);
            }
            if let Some(ok) = thresholds.record(result.is_ok(), &timing) {
                match kind {
                    ProbeKind::Readiness => {
                        let now_ready = ok;
                        let changed = {
                            let view = self.shared.view.lock();
                            let list = if slot.init { &view.init } else { &view.containers };
                            list.get(slot.index).is_some_and(|v| v.ready != now_ready)
                        };
                        if changed {
                            self.shared.update_container(slot, |v| v.ready = now_ready);
                        }
                    }
                    ProbeKind::Startup if ok => return None,
                    ProbeKind::Liveness if ok => {}
                    _ => return Some(kind),
                }
            }
            tokio::time::sleep(timing.period).await;
        }
    }
}

/// An ephemeral container as the container it runs as (the fields they share; `None`
/// when it does not convert).
fn ephemeral_as_container(e: &EphemeralContainer) -> Option<Container> {
    let mut v = serde_json::to_value(e).ok()?;
    if let Some(m) = v.as_object_mut() {
        m.remove("targetContainerName");
    }
    serde_json::from_value(v).ok()
}

/// The pod's `terminationGracePeriodSeconds` (default 30 s).
pub(crate) fn grace_of(pod: &Pod) -> Duration {
    pod.spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .and_then(|s| u64::try_from(s).ok())
        .map_or(DEFAULT_GRACE, Duration::from_secs)
}

/// Writes the view to `pods/status` whenever it changes, until `done` (then once more),
/// and not once the pod is stopping.
async fn write_statuses(rt: Arc<RuntimeShared>, pod: Pod, shared: Arc<PodShared>, done: CancellationToken) {
    let api: Api<Pod> = Api::namespaced(rt.client.clone(), &shared.namespace);
    let params = PatchParams { field_manager: Some("kubelet".into()), ..Default::default() };
    let mut base = pod;
    let mut written: Option<PodView> = None;
    let mut rx = shared.version.subscribe();
    loop {
        let finishing = done.is_cancelled();
        if shared.stop.borrow().is_none() {
            let view = shared.view();
            if written.as_ref() != Some(&view) {
                let body = status::pod_status(&base, &view, Timestamp::now());
                match api.patch_status(&shared.name, &params, &Patch::Merge(&body)).await {
                    Ok(p) => {
                        base = p;
                        written = Some(view);
                    }
                    Err(kube::Error::Api(s)) if s.is_not_found() => return,
                    Err(e) => {
                        tracing::debug!(pod = %shared.name, error = %e, "writing a pod's status failed; retrying");
                        if finishing {
                            return;
                        }
                        tokio::select! {
                            () = tokio::time::sleep(SETUP_RETRY) => continue,
                            () = done.cancelled() => continue,
                        }
                    }
                }
            }
        }
        if finishing {
            return;
        }
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { return },
            () = done.cancelled() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_dirs_stay_under_the_container_dir() {
        let root = std::path::Path::new("/pods/p/containers/c");
        assert_eq!(working_dir(root, None), root);
        assert_eq!(working_dir(root, Some("/app/data")), root.join("app/data"));
        assert_eq!(working_dir(root, Some("../../../etc/./x/..")), root.join("etc/x"));
    }
}
