//! `opkit-bench kudo`: the KUDO corpus run and the KUDO engine's scale benchmark.
//!
//! **Corpus** (`opkit-bench kudo --corpus ../shared/corpus/kudo`): every package
//! `<corpus>/<name>/operator` is loaded and verified (`opkit kudo package verify`), then
//! installed on the local control plane (API server, cluster controllers with simulated
//! pods, and the engine, all in this process) in a namespace of its own, with its
//! defaults, as `kubectl kudo install` does; the report says whether its deploy plan
//! reached COMPLETE, in how long, or why not (the step that waited or failed, and its
//! message). Packages that depend on other packages by name (KudoOperator tasks) find
//! them installed with `--skip-instance` in their namespace, as the corpus's kuttl suite
//! installs every package first.
//!
//! **Scale** (`opkit-bench kudo-scale`): N Instances of one package created at once; the
//! time until every deploy plan is COMPLETE, and the engine's memory (VmRSS, VmHWM) — the
//! engine runs in a child process (this binary's hidden `kudo-engine` command), so its
//! memory is its own.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use opkit::{Manager, ManagerOptions};
use opkit_kudo::Severity;
use opkit_kudo::client::{self, InstallOptions};
use opkit_kudo::plan::state;
use opkit_testenv::TestEnv;
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

use crate::BenchError;
use crate::child::{Spawned, spawn_child};
use crate::serve::ProcMemory;

/// What the corpus run does.
#[derive(Debug, Clone)]
pub struct KudoCorpusOptions {
    /// The corpus directory (`<name>/operator/` per package).
    pub corpus: PathBuf,
    /// How long a deploy plan may take.
    pub timeout: Duration,
    /// Only these packages (empty: all).
    pub only: Vec<String>,
}

/// One package's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct PackageReport {
    /// The package directory's name.
    pub name: String,
    /// `operatorVersion` (empty when it did not load).
    pub version: String,
    /// Verifier errors.
    pub verify_errors: Vec<String>,
    /// Verifier warnings.
    pub verify_warnings: usize,
    /// The deploy plan's final state (COMPLETE, FATAL_ERROR, a running state at the
    /// timeout, or NOT_INSTALLED).
    pub deploy: String,
    /// Seconds from install to the end of the deploy plan.
    pub seconds: f64,
    /// Why it did not complete (empty when it did).
    pub reason: String,
}

/// The corpus run's report.
#[derive(Debug, Clone, Serialize)]
pub struct KudoCorpusReport {
    /// Packages found.
    pub total: usize,
    /// Packages the verifier accepts.
    pub verified: usize,
    /// Packages whose deploy plan completed.
    pub complete: usize,
    /// Each package.
    pub packages: Vec<PackageReport>,
}

/// The corpus's packages: `(name, operator dir)`, sorted.
fn packages(corpus: &Path) -> Result<Vec<(String, PathBuf)>, BenchError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(corpus).map_err(|e| BenchError::Setup(format!("{}: {e}", corpus.display())))? {
        let entry = entry?;
        let dir = entry.path().join("operator");
        if dir.join("operator.yaml").is_file() {
            out.push((entry.file_name().to_string_lossy().into_owned(), dir));
        }
    }
    out.sort();
    Ok(out)
}

/// Starts the control plane and the engine in this process.
pub(crate) async fn control_plane() -> Result<(TestEnv, CancellationToken), BenchError> {
    let env = TestEnv::start().await.map_err(|e| BenchError::Setup(format!("control plane: {e}")))?;
    opkit_kudo::install_crds(&env.client()).await.map_err(|e| BenchError::Setup(e.to_string()))?;
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    opkit_kudo::setup(&mgr).await.map_err(|e| BenchError::Setup(e.to_string()))?;
    let stop = CancellationToken::new();
    tokio::spawn(mgr.run_until(stop.clone()));
    Ok((env, stop))
}

async fn create_namespace(client: &Client, name: &str) -> Result<(), BenchError> {
    let ns = Namespace {
        metadata: kube::api::ObjectMeta { name: Some(name.to_string()), ..Default::default() },
        ..Default::default()
    };
    match Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(BenchError::Setup(format!("namespace {name}: {e}"))),
    }
}

/// Why a plan is not complete: its first step in ERROR/FATAL_ERROR, else the step it waits on.
fn reason_of(status: &opkit_kudo::PlanStatus) -> String {
    let steps = status.phases.iter().flat_map(|p| p.steps.iter().map(move |s| (p, s)));
    let failed = steps.clone().find(|(_, s)| matches!(s.status.as_str(), state::ERROR | state::FATAL_ERROR));
    let waiting = steps.clone().find(|(_, s)| s.status == state::IN_PROGRESS);
    match failed.or(waiting) {
        Some((p, s)) => format!("{}/{} {}: {}", p.name, s.name, s.status, s.message),
        None => status.message.clone(),
    }
}

/// Runs the corpus (see the module docs); `progress` gets each package's name.
pub async fn run_corpus(options: &KudoCorpusOptions, progress: impl Fn(&str)) -> Result<KudoCorpusReport, BenchError> {
    let all = packages(&options.corpus)?;
    if all.is_empty() {
        return Err(BenchError::Setup(format!("no <name>/operator/operator.yaml under {}", options.corpus.display())));
    }
    let (env, stop) = control_plane().await?;
    let client = env.client();
    let mut reports = Vec::new();
    for (name, dir) in all.iter().filter(|(n, _)| options.only.is_empty() || options.only.contains(n)) {
        progress(name);
        reports.push(bench_package(&client, &all, name, dir, options.timeout).await?);
    }
    stop.cancel();
    let total = reports.len();
    let verified = reports.iter().filter(|r| r.verify_errors.is_empty() && !r.version.is_empty()).count();
    let complete = reports.iter().filter(|r| r.deploy == state::COMPLETE).count();
    Ok(KudoCorpusReport { total, verified, complete, packages: reports })
}

/// Loads, verifies and installs one package of the corpus and waits for its deploy plan.
/// A package that fails is reported with the reason; only the cluster failing is an error.
async fn bench_package(
    client: &Client,
    all: &[(String, PathBuf)],
    name: &str,
    dir: &Path,
    timeout: Duration,
) -> Result<PackageReport, BenchError> {
    let mut report = PackageReport {
        name: name.to_string(),
        version: String::new(),
        verify_errors: Vec::new(),
        verify_warnings: 0,
        deploy: "NOT_INSTALLED".into(),
        seconds: 0.0,
        reason: String::new(),
    };
    let pkg = match opkit_kudo::load(dir) {
        Ok(p) => p,
        Err(e) => {
            report.reason = format!("load: {e}");
            return Ok(report);
        }
    };
    report.version = pkg.operator.operator_version.clone();
    let findings = opkit_kudo::verify(&pkg);
    report.verify_errors = findings.iter().filter(|f| f.severity == Severity::Error).map(ToString::to_string).collect();
    report.verify_warnings = findings.iter().filter(|f| f.severity == Severity::Warning).count();
    if !report.verify_errors.is_empty() {
        report.reason = "verify failed (KUDO refuses to install it)".into();
        return Ok(report);
    }
    let namespace = format!("kudo-{name}");
    create_namespace(client, &namespace).await?;
    if pkg.operator.tasks.iter().any(|t| t.kind == "KudoOperator") {
        install_dependency_candidates(client, all, name, &namespace).await;
    }
    let options_install =
        InstallOptions { namespace: namespace.clone(), instance: Some(name.to_string()), ..InstallOptions::default() };
    let started = Instant::now();
    if let Err(e) = client::install(client, &pkg, &options_install).await {
        report.reason = format!("install: {e}");
        return Ok(report);
    }
    wait_for_deploy_plan(client, &namespace, name, started + timeout, timeout, &mut report).await?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Installs every other package of the corpus (operator versions, no instance) so a
/// `KudoOperator` task finds its dependency.
async fn install_dependency_candidates(client: &Client, all: &[(String, PathBuf)], name: &str, namespace: &str) {
    for (_, other_dir) in all.iter().filter(|(n, _)| n != name) {
        if let Ok(dep) = opkit_kudo::load(other_dir) {
            let skip =
                InstallOptions { namespace: namespace.to_string(), skip_instance: true, ..InstallOptions::default() };
            // A candidate that does not install is simply not there for the dependency.
            let _ = client::install(client, &dep, &skip).await;
        }
    }
}

/// Polls the instance until its deploy plan is COMPLETE or FATAL_ERROR or `deadline`
/// passes, recording the plan's status and reason in `report`.
async fn wait_for_deploy_plan(
    client: &Client,
    namespace: &str,
    name: &str,
    deadline: Instant,
    timeout: Duration,
    report: &mut PackageReport,
) -> Result<(), BenchError> {
    loop {
        let inst = client::instance(client, namespace, name).await.map_err(|e| BenchError::Setup(e.to_string()))?;
        let status = inst.as_ref().and_then(|i| client::plan_statuses(i).get("deploy").cloned());
        if let Some(s) = &status {
            report.deploy = s.status.clone();
            if matches!(s.status.as_str(), state::COMPLETE | state::FATAL_ERROR) {
                report.reason = if s.status == state::COMPLETE { String::new() } else { reason_of(s) };
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            report.reason = format!(
                "timed out after {}s: {}",
                timeout.as_secs(),
                status.as_ref().map(reason_of).unwrap_or_else(|| "the deploy plan did not start".into())
            );
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The corpus report as a table.
pub fn render_corpus(report: &KudoCorpusReport) -> String {
    let mut out = format!(
        "KUDO corpus: {} packages, {} verified, {} deploy plans COMPLETE\n\n{:<22} {:<9} {:<8} {:<12} {:>7}  reason\n",
        report.total, report.verified, report.complete, "package", "version", "verify", "deploy", "seconds"
    );
    for p in &report.packages {
        let verify = if p.version.is_empty() {
            "-".to_string()
        } else if p.verify_errors.is_empty() {
            format!("ok ({}w)", p.verify_warnings)
        } else {
            format!("{} err", p.verify_errors.len())
        };
        out.push_str(&format!(
            "{:<22} {:<9} {:<8} {:<12} {:>7.1}  {}\n",
            p.name, p.version, verify, p.deploy, p.seconds, p.reason
        ));
        for e in &p.verify_errors {
            out.push_str(&format!("    {e}\n"));
        }
    }
    out
}

/// What the scale benchmark does.
#[derive(Debug, Clone)]
pub struct KudoScaleOptions {
    /// The package.
    pub package: PathBuf,
    /// How many Instances.
    pub instances: usize,
    /// The executable whose hidden `kudo-engine` command runs the engine.
    pub exe: PathBuf,
    /// How long all deploy plans may take.
    pub timeout: Duration,
}

/// The scale benchmark's report.
#[derive(Debug, Clone, Serialize)]
pub struct KudoScaleReport {
    /// The package.
    pub package: String,
    /// Instances created.
    pub instances: usize,
    /// Instances whose deploy plan completed.
    pub complete: usize,
    /// Seconds to create every Instance.
    pub create_seconds: f64,
    /// Seconds from the first create until every deploy plan was COMPLETE.
    pub all_complete_seconds: f64,
    /// The engine process's VmRSS before the Instances, in MiB.
    pub engine_rss_before_mib: f64,
    /// Its VmRSS at the end, in MiB.
    pub engine_rss_after_mib: f64,
    /// Its VmHWM (peak), in MiB.
    pub engine_peak_mib: f64,
}

/// Runs the hidden `kudo-engine` command: the engine against `kubeconfig` until stdin
/// closes; prints `{"pid":N}` once it runs.
pub async fn run_engine_child(kubeconfig: &Path) -> Result<(), BenchError> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| BenchError::Setup(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| BenchError::Setup(e.to_string()))?;
    let client = Client::try_from(config).map_err(|e| BenchError::Setup(e.to_string()))?;
    let mgr = Manager::new(client, ManagerOptions::default());
    opkit_kudo::setup(&mgr).await.map_err(|e| BenchError::Setup(e.to_string()))?;
    let stop = CancellationToken::new();
    let running = tokio::spawn(mgr.run_until(stop.clone()));
    println!("{}", serde_json::json!({"pid": std::process::id()}));
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(_)) = lines.next_line().await {}
    stop.cancel();
    let _ = running.await;
    Ok(())
}

fn memory(pid: u32) -> Result<ProcMemory, BenchError> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    ProcMemory::parse(&s).ok_or_else(|| BenchError::Setup("no VmRSS/VmHWM in /proc status".into()))
}

const MIB: f64 = 1024.0 * 1024.0;

/// Runs the scale benchmark (see the module docs).
pub async fn run_scale(options: &KudoScaleOptions) -> Result<KudoScaleReport, BenchError> {
    let env = TestEnv::start().await.map_err(|e| BenchError::Setup(format!("control plane: {e}")))?;
    let client = env.client();
    opkit_kudo::install_crds(&client).await.map_err(|e| BenchError::Setup(e.to_string()))?;
    let (mut child, pid) = spawn_engine(&options.exe, env.kubeconfig_path()).await?;
    let before = memory(pid)?;
    let pkg = opkit_kudo::load(&options.package).map_err(|e| BenchError::Setup(e.to_string()))?;
    let ns = "kudo-scale";
    create_namespace(&client, ns).await?;
    let skip = InstallOptions { namespace: ns.into(), skip_instance: true, ..InstallOptions::default() };
    let installed = client::install(&client, &pkg, &skip).await.map_err(|e| BenchError::Setup(e.to_string()))?;
    let instances: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &opkit_kudo::resources::api_resource("Instance"));
    let started = Instant::now();
    let creates = (0..options.instances).map(|i| {
        let body = opkit_kudo::resources::instance(
            &pkg.operator.name,
            &installed.operator_version,
            &format!("i{i:03}"),
            ns,
            &Default::default(),
        );
        let api = instances.clone();
        async move {
            let obj: DynamicObject = serde_json::from_value(body).map_err(|e| BenchError::Setup(e.to_string()))?;
            api.create(&PostParams::default(), &obj).await.map_err(|e| BenchError::Setup(e.to_string()))?;
            Ok::<(), BenchError>(())
        }
    });
    futures::future::try_join_all(creates).await?;
    let create_seconds = started.elapsed().as_secs_f64();
    let complete = wait_for_complete(&instances, options.instances, started + options.timeout).await?;
    let all_complete_seconds = started.elapsed().as_secs_f64();
    let after = memory(pid)?;
    drop(child.stdin.take());
    if tokio::time::timeout(Duration::from_secs(10), child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
    Ok(KudoScaleReport {
        package: pkg.operator.name.clone(),
        instances: options.instances,
        complete,
        create_seconds,
        all_complete_seconds,
        engine_rss_before_mib: before.rss_bytes as f64 / MIB,
        engine_rss_after_mib: after.rss_bytes as f64 / MIB,
        engine_peak_mib: after.hwm_bytes as f64 / MIB,
    })
}

/// The `kudo-engine` child's first line.
#[derive(serde::Deserialize)]
struct EngineReady {
    pid: u32,
}

/// Spawns `exe kudo-engine` on the cluster and reads its pid from its first line.
async fn spawn_engine(exe: &Path, kubeconfig: &Path) -> Result<(tokio::process::Child, u32), BenchError> {
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("kudo-engine").arg("--kubeconfig").arg(kubeconfig);
    let what = format!("{} kudo-engine", exe.display());
    let Spawned { child, ready, .. } = spawn_child::<EngineReady>(cmd, &what, Duration::from_secs(60)).await?;
    let pid = ready.pid;
    Ok((child, pid))
}

/// Polls the Instances until `want` have a COMPLETE deploy plan or `deadline` passes;
/// returns how many did.
async fn wait_for_complete(
    instances: &Api<DynamicObject>,
    want: usize,
    deadline: Instant,
) -> Result<usize, BenchError> {
    loop {
        let list = instances.list(&ListParams::default()).await.map_err(|e| BenchError::Setup(e.to_string()))?;
        let done = list
            .items
            .iter()
            .filter(|i| client::plan_statuses(i).get("deploy").is_some_and(|p| p.status == state::COMPLETE))
            .count();
        if done == want || Instant::now() >= deadline {
            return Ok(done);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The scale report as text.
pub fn render_scale(r: &KudoScaleReport) -> String {
    format!(
        "KUDO engine: {} Instances of {} created at once in {:.2}s; {} deploy plans COMPLETE after {:.2}s\nengine memory: VmRSS {:.1} MiB before, {:.1} MiB after, peak {:.1} MiB\n",
        r.instances,
        r.package,
        r.create_seconds,
        r.complete,
        r.all_complete_seconds,
        r.engine_rss_before_mib,
        r.engine_rss_after_mib,
        r.engine_peak_mib
    )
}
