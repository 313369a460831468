//! `opkit-bench olm-install --corpus DIR`: OLM on the local control plane over a corpus of
//! real bundles (`DIR/<operator>/<version>/`, as `../shared/corpus/olm` holds them).
//!
//! - Every bundle is installed with `run bundle` (its own catalog, OperatorGroup and
//!   Subscription) in a namespace of its own; it passes when its CSV reaches Succeeded.
//!   A bundle whose dependencies no catalog provides is reported as "requirements not met"
//!   (OLM's `ConstraintsNotSatisfiable`) and left out of the pass rate, as the issue asks.
//!   Each is then removed with `cleanup`, which must leave nothing of it.
//! - Every operator with two versions or more is installed from a catalog holding all its
//!   versions, with an Automatic subscription starting at the oldest bundle of its default
//!   channel; it passes when OLM walks the channel one step at a time to the head and only
//!   the head's CSV is left, Succeeded.
//!
//! Each operator gets its own control plane (API server, cluster controllers and OLM's
//! controllers in this process).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::api::{Api, ListParams, PostParams};
use opkit::{Manager, ManagerOptions};
use opkit_olm::fbc::Catalog;
use opkit_olm::run_bundle::{self, RunOptions};
use opkit_olm::types::{ClusterServiceVersion, OperatorGroup, OperatorGroupSpec, Subscription};
use opkit_olm_bundle::Bundle;
use serde::Serialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Flags of `opkit-bench olm-install`.
#[derive(Debug, clap::Args)]
pub struct OlmInstallArgs {
    /// The corpus directory: `<operator>/<version>/` bundle directories.
    #[arg(long)]
    pub corpus: PathBuf,
    /// Seconds each install or upgrade chain may take.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// How many operators run at once, each on its own control plane.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub jobs: usize,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when fewer bundles than this (of those whose requirements are met) install.
    #[arg(long, value_name = "N")]
    pub min_installed: Option<usize>,
    /// Exit 1 when fewer version chains than this upgrade to their head.
    #[arg(long, value_name = "N")]
    pub min_upgraded: Option<usize>,
}

/// One bundle's install.
#[derive(Debug, Clone, Serialize)]
pub struct BundleResult {
    /// `<operator>/<version>`.
    pub bundle: String,
    /// `succeeded`, `failed` or `requirements-not-met`.
    pub outcome: String,
    /// Seconds from `run bundle` to Succeeded.
    pub seconds: Option<f64>,
    /// Why it did not succeed.
    pub cause: Option<String>,
}

/// One operator's upgrade chain.
#[derive(Debug, Clone, Serialize)]
pub struct ChainResult {
    /// The operator.
    pub operator: String,
    /// The channel followed.
    pub channel: String,
    /// The CSVs the subscription installed, in order.
    pub installed: Vec<String>,
    /// Whether it reached the head with only the head's CSV left.
    pub passed: bool,
    /// Why not.
    pub cause: Option<String>,
    /// Seconds for the whole chain.
    pub seconds: f64,
}

/// The report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Each bundle.
    pub bundles: Vec<BundleResult>,
    /// Each chain.
    pub chains: Vec<ChainResult>,
}

impl Report {
    /// Bundles whose CSV succeeded.
    pub fn installed(&self) -> usize {
        self.bundles.iter().filter(|b| b.outcome == "succeeded").count()
    }
    /// Bundles whose requirements are met.
    pub fn eligible(&self) -> usize {
        self.bundles.iter().filter(|b| b.outcome != "requirements-not-met").count()
    }
    /// Chains upgraded to their head.
    pub fn upgraded(&self) -> usize {
        self.chains.iter().filter(|c| c.passed).count()
    }
}

/// Runs the corpus and prints the report; the exit code says whether the floors hold.
pub async fn main(args: OlmInstallArgs) -> std::process::ExitCode {
    let report = match run(&args).await {
        Ok(report) => report,
        Err(e) => {
            eprintln!("opkit-bench olm-install: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        print!("{}", render_text(&report));
    }
    let short = |min: Option<usize>, got: usize| min.is_some_and(|m| got < m);
    if short(args.min_installed, report.installed()) || short(args.min_upgraded, report.upgraded()) {
        eprintln!(
            "opkit-bench olm-install: {} bundles installed (floor {:?}), {} chains upgraded (floor {:?})",
            report.installed(),
            args.min_installed,
            report.upgraded(),
            args.min_upgraded
        );
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}

/// The report as a table.
pub fn render_text(report: &Report) -> String {
    let mut out = String::from("BUNDLE                                   OUTCOME               SECONDS  CAUSE\n");
    for b in &report.bundles {
        out.push_str(&format!(
            "{:<40} {:<21} {:>7}  {}\n",
            b.bundle,
            b.outcome,
            b.seconds.map(|s| format!("{s:.2}")).unwrap_or_default(),
            b.cause.as_deref().unwrap_or_default()
        ));
    }
    out.push_str("\nCHAIN                      CHANNEL    PASSED  SECONDS  INSTALLED\n");
    for c in &report.chains {
        out.push_str(&format!(
            "{:<26} {:<10} {:<7} {:>7.2}  {}{}\n",
            c.operator,
            c.channel,
            c.passed,
            c.seconds,
            c.installed.join(" -> "),
            c.cause.as_deref().map(|c| format!("  ({c})")).unwrap_or_default()
        ));
    }
    out.push_str(&format!(
        "\n{} of {} bundles whose requirements are met installed to Succeeded ({} with unmet requirements); {} of {} version chains whose requirements are met upgraded through replaces\n",
        report.installed(),
        report.eligible(),
        report.bundles.len() - report.eligible(),
        report.upgraded(),
        report.chains.iter().filter(|c| !c.cause.as_deref().is_some_and(|c| c.contains("constraints not satisfiable"))).count()
    ));
    out
}

/// An operator's bundles, oldest first.
fn operators(corpus: &Path) -> Result<Vec<(String, Vec<Bundle>)>, String> {
    let mut operators = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(corpus)
        .map_err(|e| format!("{}: {e}", corpus.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut bundles = Vec::new();
        for version in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?.flatten() {
            let path = version.path();
            if path.join("metadata/annotations.yaml").is_file() {
                bundles.push(Bundle::load(&path).map_err(|e| e.to_string())?);
            }
        }
        bundles.sort_by_key(|b| opkit_olm::parse_version(&b.csv.spec.version));
        if !bundles.is_empty() {
            operators.push((name, bundles));
        }
    }
    Ok(operators)
}

/// A control plane with OLM; stops it when dropped.
struct Cluster {
    env: opkit_testenv::TestEnv,
    stop: CancellationToken,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn cluster() -> Result<Cluster, String> {
    let env = opkit_testenv::TestEnv::start().await.map_err(|e| e.to_string())?;
    opkit_olm::crds::install(&env.client(), Duration::from_secs(60)).await.map_err(|e| e.to_string())?;
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    opkit_olm::setup(&mgr).map_err(|e| e.to_string())?;
    let stop = CancellationToken::new();
    tokio::spawn(mgr.run_until(stop.clone()));
    Ok(Cluster { env, stop })
}

async fn namespace(client: &kube::Client, name: &str) -> Result<(), String> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": name}})).map_err(|e| e.to_string())?;
    api.create(&PostParams::default(), &ns).await.map_err(|e| e.to_string())?;
    Ok(())
}

/// Runs the corpus: `--jobs` operators at a time, each on its own control plane (their
/// installs mostly wait on controllers), with the results in the corpus's order.
pub async fn run(args: &OlmInstallArgs) -> Result<Report, String> {
    use futures::StreamExt;
    let timeout = Duration::from_secs(args.timeout);
    let operators = operators(&args.corpus)?;
    let results: Vec<Result<OperatorResult, String>> =
        futures::stream::iter(operators.iter().map(|(operator, bundles)| run_operator(operator, bundles, timeout)))
            .buffered(args.jobs.max(1))
            .collect()
            .await;
    let mut report = Report::default();
    for result in results {
        let result = result?;
        report.bundles.extend(result.bundles);
        report.chains.extend(result.chain);
    }
    Ok(report)
}

/// What one operator's bundles and chain gave.
struct OperatorResult {
    bundles: Vec<BundleResult>,
    chain: Option<ChainResult>,
}

/// Installs and removes each of an operator's bundles, then walks its upgrade chain, on a
/// control plane of its own.
async fn run_operator(operator: &str, bundles: &[Bundle], timeout: Duration) -> Result<OperatorResult, String> {
    let cluster = cluster().await?;
    let client = cluster.env.client();
    let mut results = Vec::new();
    for (i, bundle) in bundles.iter().enumerate() {
        let label = format!("{operator}/{}", bundle.dir.file_name().map(|n| n.to_string_lossy()).unwrap_or_default());
        eprintln!("… run bundle {label}");
        let ns = format!("bundle-{i}");
        namespace(&client, &ns).await?;
        let options = RunOptions { namespace: ns.clone(), install_mode: None, timeout };
        let result = match run_bundle::run_bundle(&client, bundle, &options, &|_| {}).await {
            Ok(installed) => BundleResult {
                bundle: label.clone(),
                outcome: "succeeded".into(),
                seconds: Some(installed.seconds),
                cause: None,
            },
            Err(e) => {
                let cause = e.to_string();
                let outcome =
                    if cause.contains("constraints not satisfiable") { "requirements-not-met" } else { "failed" };
                BundleResult { bundle: label.clone(), outcome: outcome.into(), seconds: None, cause: Some(cause) }
            }
        };
        if let Err(e) = run_bundle::cleanup(&client, bundle.package().unwrap_or_default(), &ns, timeout, &|_| {}).await
        {
            eprintln!("  cleanup of {label} failed: {e}");
        }
        results.push(result);
    }
    let chain = if chain_length(bundles) >= 2 {
        eprintln!("… upgrade chain {operator}");
        Some(chain(&client, operator, bundles, timeout).await)
    } else {
        None
    };
    Ok(OperatorResult { bundles: results, chain })
}

/// How many of an operator's bundles are in its default channel (a chain needs two).
fn chain_length(bundles: &[Bundle]) -> usize {
    let Ok(catalog) = Catalog::from_bundles(bundles) else { return 0 };
    opkit_olm::resolve::channel(&catalog, bundles[0].package().unwrap_or_default(), None, "chain")
        .map_or(0, |c| c.entries.len())
}

/// Installs an operator's oldest bundle of its default channel with an Automatic
/// subscription over a catalog of all its versions, and waits for the head.
async fn chain(client: &kube::Client, operator: &str, bundles: &[Bundle], timeout: Duration) -> ChainResult {
    let start = Instant::now();
    let mut result = ChainResult {
        operator: operator.into(),
        channel: String::new(),
        installed: Vec::new(),
        passed: false,
        cause: None,
        seconds: 0.0,
    };
    match walk_chain(client, bundles, timeout, &mut result).await {
        Ok(()) => result.passed = true,
        Err(e) => result.cause = Some(e),
    }
    result.seconds = start.elapsed().as_secs_f64();
    result
}

/// Installs the channel's first bundle and follows OLM's automatic upgrades to the head,
/// then checks that only the head's CSV is left, Succeeded.
async fn walk_chain(
    client: &kube::Client,
    bundles: &[Bundle],
    timeout: Duration,
    result: &mut ChainResult,
) -> Result<(), String> {
    let catalog = Catalog::from_bundles(bundles).map_err(|e| e.to_string())?;
    let package = opkit_olm::fbc::package_of(&bundles[0]).map_err(|e| e.to_string())?.to_string();
    let channel = opkit_olm::resolve::channel(&catalog, &package, None, "chain").map_err(|e| e.to_string())?;
    result.channel = channel.name.clone();
    let in_channel: Vec<&Bundle> =
        bundles.iter().filter(|b| channel.entries.iter().any(|e| e.name == b.csv.name())).collect();
    let (Some(first), Some(head)) = (in_channel.first(), opkit_olm::resolve::heads(&catalog, channel).first().copied())
    else {
        return Err("the default channel has no single head".into());
    };
    if in_channel.len() < 2 {
        return Err(format!("only one bundle of the corpus is in channel {}", channel.name));
    }
    let ns = "chain";
    let chain = ChainStart { ns, package: &package, channel: &channel.name, first };
    let subs = subscribe_at_first(client, &catalog, &chain).await?;
    let head = head.name.clone();
    let deadline = tokio::time::Instant::now() + timeout;
    follow_to_head(&subs, &package, &head, deadline, result).await?;
    let old: Vec<&str> = in_channel.iter().map(|b| b.csv.name()).filter(|n| *n != head).collect();
    check_only_head_left(client, ns, &old, &head, deadline).await
}

/// Where the chain walk starts: the namespace, package, channel and its first bundle.
struct ChainStart<'a> {
    /// The namespace everything is installed in.
    ns: &'a str,
    /// The package walked.
    package: &'a str,
    /// The channel walked.
    channel: &'a str,
    /// The channel's first bundle, the subscription's starting CSV.
    first: &'a Bundle,
}

/// Creates the namespace, the catalog, an OperatorGroup and a Subscription starting at
/// the first bundle with automatic approval; returns the Subscription API.
async fn subscribe_at_first(
    client: &kube::Client,
    catalog: &Catalog,
    chain: &ChainStart<'_>,
) -> Result<Api<Subscription>, String> {
    let ns = chain.ns;
    namespace(client, ns).await?;
    run_bundle::write_catalog(client, ns, "chain-catalog", catalog).await.map_err(|e| e.to_string())?;
    let targets =
        if chain.first.csv.supports_install_mode("AllNamespaces") { Vec::new() } else { vec![ns.to_string()] };
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), ns);
    let mut group =
        OperatorGroup::new("og", OperatorGroupSpec { target_namespaces: targets, extra: Default::default() });
    group.metadata.namespace = Some(ns.into());
    groups.create(&PostParams::default(), &group).await.map_err(|e| e.to_string())?;
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    let sub: Subscription = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": chain.package, "namespace": ns},
        "spec": {"source": "chain-catalog", "sourceNamespace": ns, "name": chain.package, "channel": chain.channel,
                 "startingCSV": chain.first.csv.name(), "installPlanApproval": "Automatic"},
    }))
    .map_err(|e| e.to_string())?;
    subs.create(&PostParams::default(), &sub).await.map_err(|e| e.to_string())?;
    Ok(subs)
}

/// Follows the subscription's installed CSVs until the head is installed and at latest,
/// recording each installed CSV in `result`.
async fn follow_to_head(
    subs: &Api<Subscription>,
    package: &str,
    head: &str,
    deadline: tokio::time::Instant,
    result: &mut ChainResult,
) -> Result<(), String> {
    let installed = std::sync::Mutex::new(Vec::<String>::new());
    let reached = |s: Option<&Subscription>| {
        let Some(status) = s.and_then(|s| s.status.as_ref()) else { return false };
        if let (Some(csv), Ok(mut seen)) = (&status.installed_csv, installed.lock())
            && seen.last() != Some(csv)
        {
            seen.push(csv.clone());
        }
        status.installed_csv.as_deref() == Some(head) && status.state.as_deref() == Some("AtLatestKnown")
    };
    let waited =
        tokio::time::timeout_at(deadline, kube::runtime::wait::await_condition(subs.clone(), package, reached)).await;
    result.installed = installed.lock().map(|s| s.clone()).unwrap_or_default();
    match waited {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => {
            let status = subs.get(package).await.ok().and_then(|s| s.status);
            Err(format!(
                "timed out before reaching {head}: subscription state {:?}, conditions {}",
                status.as_ref().and_then(|s| s.state.clone()),
                status.map(|s| json!(s.conditions).to_string()).unwrap_or_default()
            ))
        }
    }
}

/// Waits for the `old` CSVs to be removed, then checks only the head's is left, Succeeded.
async fn check_only_head_left(
    client: &kube::Client,
    ns: &str,
    old: &[&str],
    head: &str,
    deadline: tokio::time::Instant,
) -> Result<(), String> {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    let only_head = |list: Option<&ClusterServiceVersion>| list.is_none();
    for old in old {
        tokio::time::timeout_at(deadline, kube::runtime::wait::await_condition(csvs.clone(), old, only_head))
            .await
            .map_err(|_| format!("{old} was not removed after the upgrade"))?
            .map_err(|e| e.to_string())?;
    }
    let left = csvs.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
    let phases: Vec<String> = left
        .iter()
        .map(|c| {
            format!(
                "{}={}",
                c.metadata.name.clone().unwrap_or_default(),
                c.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()
            )
        })
        .collect();
    if phases != [format!("{head}=Succeeded")] {
        return Err(format!("CSVs left: {}", phases.join(", ")));
    }
    Ok(())
}
