//! The real-pod benchmark (`opkit-bench real-pods`): what running pods as processes
//! costs on the local control plane (in this process, a `TestEnv` with an image store).
//!
//! - **Start latency and overhead:** `--pods` pods of a loaded image (`exec sleep`) are
//!   created one at a time; each is timed from its create request until the watch sees
//!   its container running. Then, with all of them running: this process's RSS growth
//!   per pod (the kubelet's bookkeeping, plus the API server's objects and events), and
//!   the proportional memory (PSS) of each pod's sandbox holder and of its process.
//! - **`make deploy` to the first reconcile** (when `--operator-binary` names the
//!   Memcached operator's binary, e.g. `target/release/memcached-operator`): the Memcached
//!   CRD and a `size: 3` CR exist, the manager is deployed as `make deploy` deploys it
//!   (its ServiceAccount bound to a role, its Deployment with the loaded image); the
//!   clock runs from the Deployment's create until the CR's `status.nodes` lists its 3
//!   pods, so it covers scheduling, the sandbox, the process start, the manager's cache
//!   sync and leader election, and one reconcile.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{CustomResourceExt, ResourceExt};
use memcached_operator::api::cache_v1alpha1::{Memcached, MemcachedSpec};
use opkit_controllers::ControllersConfig;
use opkit_testenv::TestEnv;
use serde::Serialize;

use crate::BenchError;

/// How long one pod may take to run, and the operator to reconcile.
const LIMIT: Duration = Duration::from_secs(120);

/// What to measure.
#[derive(Debug, Clone)]
pub struct RealPodsOptions {
    /// Pods to start one after the other.
    pub pods: usize,
    /// The Memcached operator's binary, for the deploy-to-reconcile measurement.
    pub operator_binary: Option<PathBuf>,
}

/// The measured figures.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RealPodsReport {
    /// How pods were networked (`namespaces` or `host`).
    pub network: String,
    /// Pods started.
    pub pods: usize,
    /// Create → container running: median, 99th percentile and maximum, in ms.
    pub start_ms: [f64; 3],
    /// This process's RSS growth per running pod, in KiB.
    pub control_plane_rss_per_pod_kib: f64,
    /// The mean proportional memory of a sandbox holder, in KiB (0 on the host network).
    pub holder_pss_kib: f64,
    /// The mean proportional memory of a pod's own process (`sleep`), in KiB.
    pub container_pss_kib: f64,
    /// Deployment created → the first reconcile's status, in ms (with an operator binary).
    pub deploy_to_first_reconcile_ms: Option<f64>,
}

/// Runs the benchmark.
pub async fn run(opts: &RealPodsOptions) -> Result<RealPodsReport, BenchError> {
    let setup = |e: &dyn std::fmt::Display| BenchError::Setup(e.to_string());
    let cfg = ControllersConfig { nodes: 1, ..ControllersConfig::default() };
    let env = TestEnv::builder().controllers(cfg).real_pods().start().await.map_err(|e| setup(&e))?;
    let network = match opkit_controllers::pod_network_mode(None).0 {
        opkit_controllers::NetworkMode::Namespaces => "namespaces",
        opkit_controllers::NetworkMode::Host => "host",
    };
    let dir = tempfile::tempdir()?;
    let sleeper = dir.path().join("sleeper");
    std::fs::write(&sleeper, "#!/bin/sh\nexec sleep 86399\n")?;
    make_executable(&sleeper)?;
    env.load_image("bench.example.com/sleeper:v1", &sleeper).map_err(|e| setup(&e))?;

    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    // One pod first, so the node, the ServiceAccount and the caches are warm.
    start_pod(&pods, "warm-up").await?;
    let rss_before = own_rss_kib()?;
    let mut samples = Vec::with_capacity(opts.pods);
    for i in 0..opts.pods {
        samples.push(start_pod(&pods, &format!("sleeper-{i}")).await?);
    }
    let rss_after = own_rss_kib()?;
    samples.sort();
    let ms = |d: Option<Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    let start_ms = [
        ms(crate::stats::percentile(&samples, 50.0)),
        ms(crate::stats::percentile(&samples, 99.0)),
        ms(samples.last().copied()),
    ];
    let holder_pss_kib = mean(&children_pss_kib("sleep infinity"));
    let container_pss_kib = mean(&children_pss_kib("sleep 86399"));
    let deploy_to_first_reconcile_ms = match &opts.operator_binary {
        Some(binary) => Some(deploy_to_first_reconcile(&env, binary).await?.as_secs_f64() * 1000.0),
        None => None,
    };
    Ok(RealPodsReport {
        network: network.to_string(),
        pods: opts.pods,
        start_ms,
        control_plane_rss_per_pod_kib: rss_after.saturating_sub(rss_before) as f64 / opts.pods.max(1) as f64,
        holder_pss_kib,
        container_pss_kib,
        deploy_to_first_reconcile_ms,
    })
}

/// The report as text.
pub fn render_text(r: &RealPodsReport) -> String {
    let mut lines = vec![
        format!("real pods ({} network), {} started one after the other", r.network, r.pods),
        format!(
            "  create -> running: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
            r.start_ms[0], r.start_ms[1], r.start_ms[2]
        ),
        format!("  control plane RSS per running pod: {:.0} KiB", r.control_plane_rss_per_pod_kib),
        format!(
            "  per pod: sandbox holder PSS {:.0} KiB, its process (sleep) PSS {:.0} KiB",
            r.holder_pss_kib, r.container_pss_kib
        ),
    ];
    if let Some(ms) = r.deploy_to_first_reconcile_ms {
        lines.push(format!("  manager Deployment created -> first reconcile's status: {ms:.0} ms"));
    }
    lines.join("\n")
}

fn make_executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

/// Creates pod `name` of the sleeper image and returns how long it took to run.
async fn start_pod(pods: &Api<Pod>, name: &str) -> Result<Duration, BenchError> {
    let pod: Pod = object(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "bench.example.com/sleeper:v1"}],
            "terminationGracePeriodSeconds": 1}
    }))?;
    let running = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .and_then(|c| c.state.as_ref())
            .is_some_and(|s| s.running.is_some())
    };
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(pods.clone(), cfg).applied_objects().boxed();
    let started = Instant::now();
    pods.create(&PostParams::default(), &pod).await.map_err(|e| BenchError::Setup(format!("creating {name}: {e}")))?;
    let seen = tokio::time::timeout(LIMIT, async {
        while let Some(event) = events.next().await {
            if event.as_ref().is_ok_and(running) {
                return true;
            }
        }
        false
    })
    .await;
    match seen {
        Ok(true) => Ok(started.elapsed()),
        _ => Err(BenchError::Setup(format!("pod {name} did not run within {LIMIT:?}"))),
    }
}

/// This process's VmRSS, in KiB.
fn own_rss_kib() -> Result<u64, BenchError> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    crate::serve::ProcMemory::parse(&status)
        .map(|m| m.rss_bytes / 1024)
        .ok_or_else(|| BenchError::Setup("no VmRSS in /proc/self/status".into()))
}

/// The PSS (KiB) of each process whose command line is `cmdline` (arguments joined by
/// spaces) and whose parent is this process.
fn children_pss_kib(cmdline: &str) -> Vec<f64> {
    let me = std::process::id().to_string();
    let mut found = vec![];
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let path = entry.path();
        let Ok(stat) = std::fs::read_to_string(path.join("status")) else { continue };
        let parent = stat.lines().find_map(|l| l.strip_prefix("PPid:")).map(str::trim);
        if parent != Some(me.as_str()) {
            continue;
        }
        let Ok(raw) = std::fs::read(path.join("cmdline")) else { continue };
        let args: Vec<String> =
            raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        if args.join(" ") != cmdline {
            continue;
        }
        let Ok(rollup) = std::fs::read_to_string(path.join("smaps_rollup")) else { continue };
        let pss = rollup.lines().find_map(|l| l.strip_prefix("Pss:")).map(|v| v.trim().trim_end_matches("kB").trim());
        if let Some(kib) = pss.and_then(|v| v.parse::<f64>().ok()) {
            found.push(kib);
        }
    }
    found
}

/// A typed object from its JSON.
fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T, BenchError> {
    serde_json::from_value(value).map_err(|e| BenchError::Setup(format!("object: {e}")))
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() { 0.0 } else { values.iter().sum::<f64>() / values.len() as f64 }
}

/// Deploys the Memcached operator's `binary` as `make deploy` does and times the
/// Deployment's create until a `size: 3` CR's status lists its 3 pods.
async fn deploy_to_first_reconcile(env: &TestEnv, binary: &Path) -> Result<Duration, BenchError> {
    let setup = |what: &str, e: &dyn std::fmt::Display| BenchError::Setup(format!("{what}: {e}"));
    let image = "example.com/memcached-operator:bench";
    env.load_image(image, binary).map_err(|e| setup("loading the operator", &e))?;
    env.install_crds([Memcached::crd()]).await.map_err(|e| setup("installing the CRD", &e))?;
    let client = env.client();
    let ns = "memcached-operator-system";
    let namespace: Namespace = object(serde_json::json!({"metadata": {"name": ns}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .map_err(|e| setup("namespace", &e))?;
    let account: ServiceAccount = object(serde_json::json!({"metadata": {"name": "controller-manager"}}))?;
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &account)
        .await
        .map_err(|e| setup("service account", &e))?;
    let binding: ClusterRoleBinding = object(serde_json::json!({
        "metadata": {"name": "memcached-operator-manager"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "controller-manager", "namespace": ns}]
    }))?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .map_err(|e| setup("role binding", &e))?;
    let memcacheds: Api<Memcached> = Api::namespaced(client.clone(), "default");
    let cr = Memcached::new("bench", MemcachedSpec { size: 3 });
    memcacheds.create(&PostParams::default(), &cr).await.map_err(|e| setup("the Memcached CR", &e))?;
    let reconciled = |m: &Memcached| m.status.as_ref().is_some_and(|s| s.nodes.len() == 3);
    let mut events = watcher(memcacheds.clone(), watcher::Config::default()).applied_objects().boxed();
    let deployment: Deployment = object(serde_json::json!({
        "metadata": {"name": "controller-manager"},
        "spec": {
            "selector": {"matchLabels": {"control-plane": "controller-manager"}},
            "template": {
                "metadata": {"labels": {"control-plane": "controller-manager"}},
                "spec": {
                    "serviceAccountName": "controller-manager",
                    "terminationGracePeriodSeconds": 2,
                    "containers": [{"name": "manager", "image": image, "command": ["/manager"],
                        "args": ["--leader-elect", "--health-probe-bind-address=:8081"]}]
                }
            }
        }
    }))?;
    let started = Instant::now();
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &deployment)
        .await
        .map_err(|e| setup("the manager Deployment", &e))?;
    let done = tokio::time::timeout(LIMIT, async {
        while let Some(event) = events.next().await {
            if event.as_ref().is_ok_and(|m| m.name_any() == "bench" && reconciled(m)) {
                return true;
            }
        }
        false
    })
    .await;
    match done {
        Ok(true) => Ok(started.elapsed()),
        _ => Err(BenchError::Setup(format!("the operator did not reconcile within {LIMIT:?}"))),
    }
}
