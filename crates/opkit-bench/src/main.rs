//! The `opkit-bench` command: `apiserver` runs the API server benchmark, `admission` what
//! an admission webhook adds to a create, `runtime` the
//! controller runtime benchmark, `memcached` the Memcached operator benchmark, `cluster`
//! the 10,000-pod control plane benchmark, `charts` the chart corpus conformance run and
//! `helm-template` the chart rendering conformance run;
//! the hidden `serve` runs the server under test (with the cluster controllers for
//! `cluster`), the hidden `runtime-manager` the opkit manager whose memory is measured and
//! the hidden `memcached-operator` the operator under test, each in a child process.

mod emit;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use emit::{Output, ReportArgs, Verdict, benchmark, corpus, emit, own_exe};
use opkit_bench::cluster::{ClusterOptions, ClusterWorkload};
use opkit_bench::runtime::{RuntimeOptions, RuntimeWorkload};
use opkit_bench::scaling::{ScalingOptions, ScalingWorkload};
use opkit_bench::{Backend, Options, Workload, render_text, run};

#[derive(Parser)]
#[command(name = "opkit-bench", about = "Benchmarks for opkit")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Benchmark the API server (client in this process, server in a child process).
    Apiserver(ApiserverArgs),
    /// Benchmark the opkit controller runtime against a bare kube::runtime::Controller
    /// (controllers in this process, server in a child process, memory in another).
    Runtime(RuntimeArgs),
    /// What one validating admission webhook adds to a create: ConfigMap creates against
    /// an in-process server with no webhook, then with one (an in-process HTTPS server).
    Admission(AdmissionArgs),
    /// Benchmark the Memcached sample operator end to end (control plane in this process,
    /// operator in a child process).
    Memcached(MemcachedArgs),
    /// Benchmark the Memcached operator of operator-sdk's Ansible tutorial run by the
    /// Ansible operator (control plane and operator in this process), on the load of
    /// `memcached --crs 50 --size 1`.
    Ansible(AnsibleArgs),
    /// The chart corpus conformance run: the real helm client installs (--wait), checks
    /// status, get manifest and lookup, dry-runs a second release (--dry-run=server),
    /// upgrades (--reuse-values), checks history, rolls back, tests and uninstalls every
    /// chart of the corpus directories on the local control plane (in this process).
    /// Fails only on a chart doing worse than expected.
    Charts(ChartsArgs),
    /// The chart corpus rendered by opkit-helm and compared byte for byte with the real
    /// `helm template` output (CASES.tsv), timed against a helm binary when given.
    /// Reports failing cases; fails only on a usage error.
    HelmTemplate(HelmTemplateArgs),
    /// The CRD corpus conformance run: every CRD of the corpus created on an API server
    /// in this process and waited for until Established, then every example object
    /// created; each verdict compared with a real cluster's (tools/crds/expected.tsv).
    /// Fails when a CRD is refused or a verdict differs.
    Crds(CrdsArgs),
    /// The server's memory per watch from resourceVersion 0 (a fresh in-memory server in a
    /// child process): with the watches open, and once they are closed.
    WatchMemory(WatchMemoryArgs),
    /// `opkit bundle validate` over every bundle of the OLM corpus, compared with what
    /// operator-sdk says where it is established (tools/olm/validate-expected.tsv).
    OlmValidate(OlmValidateArgs),
    /// The KUDO corpus run: every package verified, installed and its deploy plan run on
    /// the local control plane, with the reason when it does not complete (docs/kudo.md).
    Kudo(KudoArgs),
    /// The KUDO engine at scale: N Instances of one package at once, time until every
    /// deploy plan is COMPLETE and the engine's memory (engine in a child process).
    KudoScale(KudoScaleArgs),
    /// The KUDO corpus's kuttl suites with opkit's kuttl runner and the engine in process;
    /// every failing case classified (docs/kudo.md).
    KudoKuttl(KudoKuttlArgs),
    /// Runs the KUDO engine (used by `kudo-scale`).
    #[command(hide = true)]
    KudoEngine {
        /// The kubeconfig of the cluster.
        #[arg(long)]
        kubeconfig: PathBuf,
    },
    /// What real pods cost on the local control plane: start latency and memory per pod,
    /// and (with --operator-binary) the time from deploying the Memcached operator to its
    /// first reconcile. Needs root for network namespaces (else pods share the host network).
    RealPods(RealPodsArgs),
    /// Runs the Memcached operator (used by `memcached`).
    #[command(hide = true)]
    MemcachedOperator {
        /// The kubeconfig of the control plane.
        #[arg(long)]
        kubeconfig: PathBuf,
    },
    /// Benchmark the local control plane at scale: Deployments created at once, until all
    /// are available (API server and cluster controllers in a child process).
    Cluster(ClusterArgs),
    /// OLM on the local control plane over a corpus of bundles: every bundle through
    /// `run bundle` and `cleanup`, every version chain upgraded through `replaces`.
    OlmInstall(opkit_bench::olm_install::OlmInstallArgs),
    /// Runs an opkit manager for the memory measurement (used by `runtime`).
    #[command(hide = true)]
    RuntimeManager,
    /// The runtime as it scales: read-your-own-writes' cost (on and off, same run) and the
    /// memory of a cache of Pods with managedFields kept, removed, and metadata only.
    Scaling(ScalingArgs),
    /// Runs one cache for the memory measurement (used by `scaling`).
    #[command(hide = true)]
    CacheMemory,
    /// The same objects reconciled by 1, 2 and 3 shards of one ring: time to reconcile all,
    /// each shard's memory, and the rebalance after one shard is SIGKILLed.
    Sharding(ShardingArgs),
    /// Runs one shard (used by `sharding`).
    #[command(hide = true)]
    ShardingShard,
    /// Leader failover with two replicas, as plain processes and in real pods: seconds
    /// from killing the leader (SIGKILL, then SIGTERM) until the standby reconciles, at
    /// controller-runtime's lease timings.
    Failover(FailoverArgs),
    /// Runs one replica (used by `failover`).
    #[command(hide = true)]
    FailoverReplica {
        /// The replica's spec (JSON); read from stdin when absent.
        #[arg(long)]
        spec: Option<String>,
    },
    /// Runs a server and prints how to reach it (used by `apiserver`).
    #[command(hide = true)]
    Serve {
        /// Storage backend.
        #[arg(long, value_enum)]
        backend: Backend,
        /// Data directory (durable backend).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Also run the cluster controllers with this many simulated nodes.
        #[arg(long)]
        nodes: Option<usize>,
        /// The simulated kubelets' pod start delay, in ms.
        #[arg(long, default_value_t = 0)]
        pod_start_delay_ms: u64,
        /// The simulated kubelets' pod ready delay, in ms.
        #[arg(long, default_value_t = 0)]
        pod_ready_delay_ms: u64,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { backend, data_dir, nodes, pod_start_delay_ms, pod_ready_delay_ms } => {
            let controllers = nodes.map(|nodes| opkit_bench::serve::ControllerSettings {
                nodes,
                pod_start_delay_ms,
                pod_ready_delay_ms,
            });
            child("serve", opkit_bench::serve::serve(backend, data_dir, controllers).await)
        }
        Command::Memcached(args) => memcached(args).await,
        Command::Ansible(args) => ansible(args).await,
        Command::OlmInstall(args) => opkit_bench::olm_install::main(args).await,
        Command::RealPods(args) => real_pods(args).await,
        Command::Admission(args) => admission(args).await,
        Command::Charts(args) => charts(args).await,
        Command::HelmTemplate(args) => helm_template(args),
        Command::OlmValidate(args) => olm_validate(args),
        Command::Crds(args) => crds(args).await,
        Command::WatchMemory(args) => watch_memory(args).await,
        Command::Kudo(args) => kudo(args).await,
        Command::KudoScale(args) => kudo_scale(args).await,
        Command::KudoKuttl(args) => kudo_kuttl(args).await,
        Command::KudoEngine { kubeconfig } => {
            child("kudo-engine", opkit_bench::kudo::run_engine_child(&kubeconfig).await)
        }
        Command::MemcachedOperator { kubeconfig } => {
            child("memcached-operator", opkit_bench::memcached::operator::run_child(&kubeconfig).await)
        }
        Command::Cluster(args) => cluster(args).await,
        Command::RuntimeManager => child("runtime-manager", opkit_bench::runtime::manager_proc::run_child().await),
        Command::Runtime(args) => runtime(args).await,
        Command::Scaling(args) => scaling(args).await,
        Command::Sharding(args) => sharding(args).await,
        Command::ShardingShard => child("sharding-shard", opkit_bench::sharding::run_shard().await),
        Command::Failover(args) => failover(args).await,
        Command::FailoverReplica { spec } => child("failover-replica", opkit_bench::failover::run_replica(spec).await),
        Command::CacheMemory => child("cache-memory", opkit_bench::scaling::cache_memory::run_child().await),
        Command::Apiserver(args) => apiserver(args).await,
    }
}

/// The exit of a hidden child command: success, or its error on stderr.
fn child<E: std::fmt::Display>(command: &str, result: Result<(), E>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("opkit-bench {command}: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn cluster(args: ClusterArgs) -> ExitCode {
    let mut w = if args.tiny {
        ClusterWorkload::tiny()
    } else if args.quick {
        ClusterWorkload::quick()
    } else {
        ClusterWorkload::full()
    };
    if let Some(n) = args.deployments {
        w.deployments = n.max(1);
    }
    if let Some(n) = args.replicas {
        w.replicas = n;
    }
    // Without --nodes, enough nodes for the pods (as many as the preset has at least).
    w.nodes = args.nodes.unwrap_or_else(|| w.nodes.max(w.min_nodes()));
    if let Some(ms) = args.pod_start_delay_ms {
        w.pod_start_delay_ms = ms;
    }
    if let Some(ms) = args.pod_ready_delay_ms {
        w.pod_ready_delay_ms = ms;
    }
    if let Some(n) = args.create_concurrency {
        w.create_concurrency = n.max(1);
    }
    if let Some(s) = args.limit_secs {
        w.limit_secs = s.max(1);
    }
    let exe = match own_exe() {
        Ok(exe) => exe,
        Err(code) => return code,
    };
    let opts = ClusterOptions { workload: w, exe, progress: !args.quiet };
    let result = opkit_bench::cluster::run(&opts).await;
    benchmark("cluster", result, &args.report, opkit_bench::cluster::render_text)
}

async fn runtime(args: RuntimeArgs) -> ExitCode {
    let mut workload = if args.tiny {
        RuntimeWorkload::tiny()
    } else if args.quick {
        RuntimeWorkload::quick()
    } else {
        RuntimeWorkload::full()
    };
    if !args.objects.is_empty() {
        workload.backlog_objects = args.objects;
    }
    if let Some(n) = args.repeats {
        workload.repeats = n.max(1);
    }
    if let Some(n) = args.concurrency {
        workload.concurrency = n.max(1);
    }
    if let Some(n) = args.live_objects {
        workload.live_objects = n;
    }
    if let Some(n) = args.memory_objects {
        workload.memory_objects = n;
    }
    let exe = match own_exe() {
        Ok(exe) => exe,
        Err(code) => return code,
    };
    let opts = RuntimeOptions { workload, exe, progress: !args.quiet };
    let result = opkit_bench::runtime::run(&opts).await;
    benchmark("runtime", result, &args.report, opkit_bench::runtime::render_text)
}

async fn scaling(args: ScalingArgs) -> ExitCode {
    let mut workload = if args.tiny {
        ScalingWorkload::tiny()
    } else if args.quick {
        ScalingWorkload::quick()
    } else {
        ScalingWorkload::full()
    };
    if let Some(n) = args.objects {
        workload.ryow_objects = n;
    }
    if let Some(n) = args.pods {
        workload.memory_pods = n;
    }
    if let Some(n) = args.repeats {
        workload.repeats = n.max(1);
    }
    let exe = match own_exe() {
        Ok(exe) => exe,
        Err(code) => return code,
    };
    let opts = ScalingOptions { workload, exe, progress: !args.quiet };
    let result = opkit_bench::scaling::run(&opts).await;
    benchmark("scaling", result, &args.report, opkit_bench::scaling::render_text)
}

async fn failover(args: FailoverArgs) -> ExitCode {
    let exe = match own_exe() {
        Ok(exe) => exe,
        Err(code) => return code,
    };
    let opts = opkit_bench::failover::FailoverOptions { runs: args.runs, exe, progress: !args.quiet };
    let result = opkit_bench::failover::run(&opts).await;
    benchmark("failover", result, &args.report, opkit_bench::failover::render_text)
}

async fn apiserver(args: ApiserverArgs) -> ExitCode {
    let mut workload = if args.tiny {
        Workload::tiny()
    } else if args.quick {
        Workload::quick()
    } else {
        Workload::full()
    };
    if let Some(n) = args.ops {
        workload.ops_concurrent = n;
    }
    if let Some(n) = args.memory_objects {
        workload.memory_objects = n;
    }
    let server_exe = match own_exe() {
        Ok(exe) => exe,
        Err(code) => return code,
    };
    let opts = Options {
        workload,
        backends: if args.backends.is_empty() { vec![Backend::Memory, Backend::Durable] } else { args.backends },
        etcd_bin: (!args.no_etcd).then_some(args.etcd_bin),
        server_exe,
        tmp_root: args.tmp_dir,
        progress: !args.quiet,
    };
    benchmark("apiserver", run(&opts).await, &args.report, render_text)
}

/// Flags of `opkit-bench apiserver`.
#[derive(clap::Args)]
struct ApiserverArgs {
    /// A shorter run with the same shape (about a minute).
    #[arg(long, conflicts_with = "tiny")]
    quick: bool,
    /// A seconds-long run on tiny numbers (a smoke test).
    #[arg(long)]
    tiny: bool,
    /// Backends to measure (repeatable; default both).
    #[arg(long = "backend", value_enum)]
    backends: Vec<Backend>,
    /// Operations per create/get/update phase at concurrency > 1.
    #[arg(long)]
    ops: Option<usize>,
    /// Objects created for the memory measurement.
    #[arg(long)]
    memory_objects: Option<usize>,
    /// The etcd binary for the baseline.
    #[arg(long, default_value = "etcd")]
    etcd_bin: PathBuf,
    /// Skip the etcd baseline.
    #[arg(long)]
    no_etcd: bool,
    /// Directory for the durable backend's data (default: the system temp dir).
    #[arg(long)]
    tmp_dir: Option<PathBuf>,
    #[command(flatten)]
    report: ReportArgs,
    /// No progress lines on stderr.
    #[arg(short, long)]
    quiet: bool,
}

/// Flags of `opkit-bench runtime`.
#[derive(clap::Args)]
struct RuntimeArgs {
    /// One run per row instead of five.
    #[arg(long, conflicts_with = "tiny")]
    quick: bool,
    /// A seconds-long run on tiny numbers (a smoke test).
    #[arg(long)]
    tiny: bool,
    /// Backlog sizes (repeatable; default 1000 and 10000).
    #[arg(long = "objects")]
    objects: Vec<usize>,
    /// Runs per scenario, size and runtime.
    #[arg(long)]
    repeats: Option<usize>,
    /// Concurrent reconciles of both controllers.
    #[arg(long)]
    concurrency: Option<usize>,
    /// Objects created while the controller runs (0 skips the live scenario).
    #[arg(long)]
    live_objects: Option<usize>,
    /// Objects the memory child caches (0 skips the memory measurement).
    #[arg(long)]
    memory_objects: Option<usize>,
    #[command(flatten)]
    report: ReportArgs,
    /// No progress lines on stderr.
    #[arg(short, long)]
    quiet: bool,
}

/// Flags of `opkit-bench failover`.
#[derive(clap::Args)]
struct FailoverArgs {
    /// Runs per deployment and signal.
    #[arg(long, default_value_t = 10)]
    runs: usize,
    #[command(flatten)]
    report: ReportArgs,
    /// No progress lines on stderr.
    #[arg(short, long)]
    quiet: bool,
}

/// Flags of `opkit-bench sharding`.
#[derive(clap::Args)]
struct ShardingArgs {
    /// A seconds-long run on tiny numbers (a smoke test).
    #[arg(long)]
    tiny: bool,
    /// Objects (default 10000).
    #[arg(long)]
    objects: Option<usize>,
    /// Bytes of payload per object (default 1024).
    #[arg(long)]
    payload: Option<usize>,
    /// The shard counts to run, comma-separated; 0 is one unsharded replica (default
    /// 0,1,2,3).
    #[arg(long, value_delimiter = ',')]
    shards: Vec<usize>,
    #[command(flatten)]
    report: ReportArgs,
    /// No progress lines on stderr.
    #[arg(short, long)]
    quiet: bool,
}

async fn sharding(args: ShardingArgs) -> ExitCode {
    let mut workload = if args.tiny {
        opkit_bench::sharding::ShardingWorkload::tiny()
    } else {
        opkit_bench::sharding::ShardingWorkload::full()
    };
    if let Some(n) = args.objects {
        workload.objects = n;
    }
    if let Some(n) = args.payload {
        workload.payload = n;
    }
    if !args.shards.is_empty() {
        workload.shard_counts = args.shards;
    }
    let exe = match own_exe() {
        Ok(exe) => exe,
        Err(code) => return code,
    };
    let opts = opkit_bench::sharding::ShardingOptions { workload, exe, progress: !args.quiet };
    let result = opkit_bench::sharding::run(&opts).await;
    benchmark("sharding", result, &args.report, opkit_bench::sharding::render_text)
}

/// Flags of `opkit-bench scaling`.
#[derive(clap::Args)]
struct ScalingArgs {
    /// One run each way instead of five.
    #[arg(long, conflicts_with = "tiny")]
    quick: bool,
    /// A seconds-long run on tiny numbers (a smoke test).
    #[arg(long)]
    tiny: bool,
    /// Objects each read-your-own-writes run writes (0 skips it; default 5000).
    #[arg(long)]
    objects: Option<usize>,
    /// Pods the memory measurement caches (0 skips it; default 10000).
    #[arg(long)]
    pods: Option<usize>,
    /// Runs with the guard on, and as many off.
    #[arg(long)]
    repeats: Option<usize>,
    #[command(flatten)]
    report: ReportArgs,
    /// No progress lines on stderr.
    #[arg(short, long)]
    quiet: bool,
}

/// Flags of `opkit-bench cluster`.
#[derive(clap::Args)]
struct ClusterArgs {
    /// 100 Deployments × 10 replicas on 10 nodes.
    #[arg(long, conflicts_with = "tiny")]
    quick: bool,
    /// A seconds-long run on tiny numbers (a smoke test): 5 × 2 on 2 nodes.
    #[arg(long)]
    tiny: bool,
    /// Deployments to create (default 1000).
    #[arg(long)]
    deployments: Option<usize>,
    /// Replicas of each Deployment (default 10).
    #[arg(long)]
    replicas: Option<usize>,
    /// Simulated nodes (default 100; at most 110 pods fit on one).
    #[arg(long)]
    nodes: Option<usize>,
    /// How long a scheduled pod stays Pending before it starts, in ms (default 0).
    #[arg(long)]
    pod_start_delay_ms: Option<u64>,
    /// How long a started pod takes to become Ready, in ms (default 0).
    #[arg(long)]
    pod_ready_delay_ms: Option<u64>,
    /// Concurrent Deployment create requests (default 8).
    #[arg(long)]
    create_concurrency: Option<usize>,
    /// Time limit from the first create, in seconds.
    #[arg(long)]
    limit_secs: Option<u64>,
    #[command(flatten)]
    report: ReportArgs,
    /// No progress lines on stderr.
    #[arg(short, long)]
    quiet: bool,
}

/// Flags of `opkit-bench admission`.
#[derive(clap::Args)]
struct AdmissionArgs {
    /// Measured creates per run (each run also makes 20 unmeasured ones first).
    #[arg(long, default_value_t = 1000)]
    requests: usize,
    #[command(flatten)]
    report: ReportArgs,
}

/// Flags of `opkit-bench real-pods`.
#[derive(clap::Args)]
struct RealPodsArgs {
    /// Pods started one after the other.
    #[arg(long, default_value_t = 20)]
    pods: usize,
    /// The Memcached operator's binary (e.g. target/release/memcached-operator).
    #[arg(long)]
    operator_binary: Option<PathBuf>,
    #[command(flatten)]
    report: ReportArgs,
}

/// Flags of `opkit-bench memcached`.
#[derive(clap::Args)]
struct MemcachedArgs {
    /// 5 CRs of size 1 on one node, once: a seconds-long smoke run.
    #[arg(long)]
    tiny: bool,
    /// Memcached CRs created at once (default 100).
    #[arg(long)]
    crs: Option<usize>,
    /// spec.size of each CR, 1 to 5 (default 3).
    #[arg(long)]
    size: Option<usize>,
    /// Simulated nodes, 110 pods each (default 5).
    #[arg(long)]
    nodes: Option<usize>,
    /// Runs, each on a fresh control plane and operator (default 3).
    #[arg(long)]
    repeats: Option<usize>,
    #[command(flatten)]
    report: ReportArgs,
    /// No progress lines on stderr.
    #[arg(short, long)]
    quiet: bool,
}

/// Runs `opkit-bench charts`.
#[derive(clap::Args)]
struct ChartsArgs {
    /// A directory of unpacked charts (e.g. ../shared/corpus/charts; repeatable, e.g. also
    /// tools/helm/charts).
    #[arg(long, required = true)]
    corpus: Vec<PathBuf>,
    /// The helm binary (tools/helm/fetch-helm.sh fetches one).
    #[arg(long, default_value = "helm")]
    helm: PathBuf,
    /// The expectations file (e.g. tools/helm/charts-expected.tsv); without it every chart
    /// must pass.
    #[arg(long)]
    expect: Option<PathBuf>,
    /// helm's --timeout for each waiting step, in seconds.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,
    /// Only this chart (repeatable).
    #[arg(long = "chart")]
    only: Vec<String>,
    #[command(flatten)]
    report: ReportArgs,
    /// No progress on stderr.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(clap::Args)]
struct HelmTemplateArgs {
    /// The corpus directory (holding charts/, charts-values/ and charts-expected/).
    #[arg(long, default_value = "../shared/corpus")]
    corpus: PathBuf,
    /// A real helm binary to time side by side (tools/helm/fetch-helm.sh fetches one).
    #[arg(long)]
    helm: Option<PathBuf>,
    /// Renders per case for the timing (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Only this chart's cases (repeatable).
    #[arg(long = "chart")]
    only: Vec<String>,
    /// Report format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Output,
    /// No progress on stderr.
    #[arg(short, long)]
    quiet: bool,
    /// Exit 1 when fewer deterministic cases than this render byte-identical (CI's guard
    /// against a regression; without it the report never fails the command).
    #[arg(long, value_name = "N")]
    min_passed: Option<usize>,
}

fn helm_template(args: HelmTemplateArgs) -> ExitCode {
    use opkit_bench::helm_template::{HelmTemplateOptions, render_text, run};
    let options = HelmTemplateOptions { corpus: args.corpus, helm: args.helm, repeats: args.repeats, only: args.only };
    let quiet = args.quiet;
    let result = run(&options, |case| {
        if !quiet {
            eprintln!("… {case}");
        }
    });
    corpus("helm-template", result, args.output, render_text, |report| {
        Verdict::at_least(report.passed, report.total, args.min_passed, "deterministic cases render as helm does")
    })
}

async fn charts(args: ChartsArgs) -> ExitCode {
    use opkit_bench::charts::{ChartsOptions, expect, render_text, run};
    let expectations = match &args.expect {
        None => Default::default(),
        Some(path) => match std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|t| expect::parse(&t).map_err(|e| e.to_string()))
        {
            Ok(e) => e,
            Err(e) => {
                eprintln!("opkit-bench charts: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        },
    };
    let opts = ChartsOptions {
        corpora: args.corpus,
        helm: args.helm,
        expectations,
        timeout: std::time::Duration::from_secs(args.timeout_secs),
        only: args.only,
        progress: !args.quiet,
    };
    let report = match run(&opts).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("opkit-bench charts: {e}");
            return ExitCode::FAILURE;
        }
    };
    let emitted = emit("charts", &report, &args.report, render_text);
    let regressions = report.regressions();
    if !regressions.is_empty() {
        let names: Vec<&str> = regressions.iter().map(|c| c.chart.as_str()).collect();
        eprintln!("opkit-bench charts: worse than expected: {}", names.join(", "));
        return ExitCode::FAILURE;
    }
    emitted
}

async fn admission(args: AdmissionArgs) -> ExitCode {
    let opts = opkit_bench::admission::AdmissionOptions { requests: args.requests };
    let result = opkit_bench::admission::run(&opts).await;
    benchmark("admission", result, &args.report, opkit_bench::admission::render_text)
}

async fn real_pods(args: RealPodsArgs) -> ExitCode {
    let opts = opkit_bench::real_pods::RealPodsOptions { pods: args.pods, operator_binary: args.operator_binary };
    let result = opkit_bench::real_pods::run(&opts).await;
    benchmark("real-pods", result, &args.report, opkit_bench::real_pods::render_text)
}

async fn memcached(args: MemcachedArgs) -> ExitCode {
    use opkit_bench::memcached::{MemcachedOptions, MemcachedWorkload};
    let mut workload = if args.tiny { MemcachedWorkload::tiny() } else { MemcachedWorkload::full() };
    workload.crs = args.crs.unwrap_or(workload.crs);
    workload.size = args.size.unwrap_or(workload.size);
    workload.nodes = args.nodes.unwrap_or(workload.nodes);
    workload.repeats = args.repeats.unwrap_or(workload.repeats);
    let exe = match own_exe() {
        Ok(exe) => exe,
        Err(code) => return code,
    };
    let opts = MemcachedOptions { workload, exe, progress: !args.quiet };
    let result = opkit_bench::memcached::run(&opts).await;
    benchmark("memcached", result, &args.report, opkit_bench::memcached::render_text)
}

#[derive(clap::Args)]
struct OlmValidateArgs {
    /// The corpus of bundles (`<operator>/<version>/manifests`).
    #[arg(long, default_value = "../shared/corpus/olm")]
    corpus: PathBuf,
    /// operator-sdk's verdicts (bundle, pass|fail, errors); a bundle judged otherwise fails the run.
    #[arg(long)]
    expect: Option<PathBuf>,
    /// Report format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Output,
}

fn olm_validate(args: OlmValidateArgs) -> ExitCode {
    use opkit_bench::olm_validate::{OlmValidateOptions, render_text, run};
    let result = run(&OlmValidateOptions { corpus: args.corpus, expect: args.expect });
    corpus("olm-validate", result, args.output, render_text, |report| Verdict::from_bool(report.mismatches == 0))
}

#[derive(clap::Args)]
struct CrdsArgs {
    /// The CRD corpus (CRD folders, and `*-examples*` folders and files).
    #[arg(long, default_value = "../shared/corpus/crds")]
    corpus: PathBuf,
    /// A real cluster's verdicts (object, accepted|status code, comment); any other fails the run.
    #[arg(long)]
    expect: Option<PathBuf>,
    /// Seconds a CRD may take to be Established and served.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    /// Report format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Output,
}

async fn crds(args: CrdsArgs) -> ExitCode {
    use opkit_bench::crds::{CrdsOptions, render_text, run};
    let options =
        CrdsOptions { corpus: args.corpus, expect: args.expect, timeout: std::time::Duration::from_secs(args.timeout) };
    corpus("crds", run(&options).await, args.output, render_text, |report| {
        if args.output == Output::Json {
            eprintln!("{}", report.summary());
        }
        if report.passed() { Verdict::Passed } else { Verdict::Failed(Some(report.summary())) }
    })
}

#[derive(clap::Args)]
struct WatchMemoryArgs {
    /// ConfigMaps the server holds.
    #[arg(long, default_value_t = 10_000)]
    objects: usize,
    /// Bytes of data in each ConfigMap.
    #[arg(long, default_value_t = 1024)]
    payload_bytes: usize,
    /// Watches opened, each on its own connection.
    #[arg(long, default_value_t = 1000)]
    watchers: usize,
    /// Each watch reads its initial events (by default it never reads).
    #[arg(long)]
    read: bool,
    /// Seconds the fill, the reads and the closing may each take.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// Report format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Output,
}

async fn watch_memory(args: WatchMemoryArgs) -> ExitCode {
    use opkit_bench::watch_memory::{WatchMemoryOptions, render_text, run};
    let server_exe = match own_exe() {
        Ok(exe) => exe,
        Err(code) => return code,
    };
    let options = WatchMemoryOptions {
        server_exe,
        objects: args.objects,
        payload_bytes: args.payload_bytes,
        watchers: args.watchers,
        read: args.read,
        timeout: std::time::Duration::from_secs(args.timeout),
    };
    corpus("watch-memory", run(&options).await, args.output, render_text, |_| Verdict::Passed)
}

#[derive(clap::Args)]
struct KudoArgs {
    /// The KUDO corpus (`<name>/operator/` per package).
    #[arg(long, default_value = "../shared/corpus/kudo")]
    corpus: PathBuf,
    /// Seconds a deploy plan may take.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Only this package (repeatable).
    #[arg(long = "package")]
    only: Vec<String>,
    /// Report format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Output,
    /// No progress on stderr.
    #[arg(short, long)]
    quiet: bool,
    /// Exit 1 when fewer deploy plans than this complete (CI's floor).
    #[arg(long, value_name = "N")]
    min_complete: Option<usize>,
}

async fn kudo(args: KudoArgs) -> ExitCode {
    use opkit_bench::kudo::{KudoCorpusOptions, render_corpus, run_corpus};
    let options = KudoCorpusOptions {
        corpus: args.corpus,
        timeout: std::time::Duration::from_secs(args.timeout),
        only: args.only,
    };
    let quiet = args.quiet;
    let result = run_corpus(&options, |name| {
        if !quiet {
            eprintln!("… {name}");
        }
    })
    .await;
    corpus("kudo", result, args.output, render_corpus, |report| {
        Verdict::at_least(report.complete, report.total, args.min_complete, "deploy plans completed")
    })
}

/// Flags of `opkit-bench ansible`.
#[derive(clap::Args)]
struct AnsibleArgs {
    /// Memcached CRs created at once.
    #[arg(long, default_value_t = 50)]
    crs: usize,
    /// spec.size of each CR.
    #[arg(long, default_value_t = 1)]
    size: usize,
    /// ansible-runner runs at once.
    #[arg(long, default_value_t = 2)]
    max_concurrent_reconciles: usize,
    /// Report format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Output,
    /// No progress lines on stderr.
    #[arg(short, long)]
    quiet: bool,
}

async fn ansible(args: AnsibleArgs) -> ExitCode {
    let mut opts = opkit_bench::ansible::AnsibleOptions::new(!args.quiet);
    opts.crs = args.crs.max(1);
    opts.size = args.size.max(1);
    opts.max_concurrent_reconciles = args.max_concurrent_reconciles.max(1);
    benchmark(
        "ansible",
        opkit_bench::ansible::run(&opts).await,
        &ReportArgs { output: args.output, save_json: None },
        opkit_bench::ansible::render_text,
    )
}

#[derive(clap::Args)]
struct KudoScaleArgs {
    /// The package (default: the engine tests' web fixture).
    #[arg(long, default_value = "crates/opkit-kudo/tests/fixtures/web-0.1.0")]
    package: PathBuf,
    /// How many Instances.
    #[arg(long, default_value_t = 50)]
    instances: usize,
    /// Seconds every deploy plan may take.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Report format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Output,
}

async fn kudo_scale(args: KudoScaleArgs) -> ExitCode {
    use opkit_bench::kudo::{KudoScaleOptions, render_scale, run_scale};
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("opkit-bench kudo-scale: {e}");
            return ExitCode::from(2);
        }
    };
    let options = KudoScaleOptions {
        package: args.package,
        instances: args.instances,
        exe,
        timeout: std::time::Duration::from_secs(args.timeout),
    };
    corpus("kudo-scale", run_scale(&options).await, args.output, render_scale, |report| {
        Verdict::from_bool(report.complete == report.instances)
    })
}

/// Flags of `opkit-bench kudo-kuttl`.
#[derive(clap::Args)]
struct KudoKuttlArgs {
    /// The KUDO corpus (`kuttl-test.yaml`, `SOURCES.tsv`, `<name>/operator`, `<name>/tests`).
    #[arg(long, default_value = "../shared/corpus/kudo")]
    corpus: PathBuf,
    /// The `opkit` binary that answers as `kubectl kudo` (default: next to this one).
    #[arg(long)]
    opkit: Option<PathBuf>,
    /// Seconds per step, instead of the suite's `timeout` (300).
    #[arg(long)]
    timeout: Option<u64>,
    /// Report format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Output,
    /// Print the kuttl log on stderr.
    #[arg(short, long)]
    verbose: bool,
    /// Exit 1 when fewer cases than this pass (CI's floor).
    #[arg(long, value_name = "N")]
    min_passed: Option<usize>,
}

async fn kudo_kuttl(args: KudoKuttlArgs) -> ExitCode {
    use opkit_bench::kudo_kuttl::{KudoKuttlOptions, render, run};
    let opkit = match args.opkit {
        Some(path) => path,
        None => match std::env::current_exe() {
            Ok(exe) => exe.with_file_name(format!("opkit{}", std::env::consts::EXE_SUFFIX)),
            Err(e) => {
                eprintln!("opkit-bench kudo-kuttl: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let options = KudoKuttlOptions { corpus: args.corpus, opkit, timeout: args.timeout, verbose: args.verbose };
    corpus("kudo-kuttl", run(&options).await, args.output, render, |report| {
        Verdict::at_least(report.passed, report.total, args.min_passed, "cases passed")
    })
}
