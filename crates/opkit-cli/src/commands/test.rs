//! `opkit test`: kuttl tests run by `opkit-kuttl`, against an in-process control plane
//! with the cluster controllers (kuttl's `--start-control-plane`, with nodes, workloads
//! and namespaces that really finalize) or against `--kubeconfig`. The command line
//! overrides the suite file as `kubectl kuttl test`'s flags do; the exit code is 1 when
//! a test fails, and `-o json` prints a summary.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use opkit_kuttl::{Cluster, Harness, ReportFormat, TestSuite};

use crate::cli::TestArgs;
use crate::commands::CliError;
use crate::output::Output;

/// The suite file read when `--config` is not given.
const DEFAULT_CONFIG: &str = "kuttl-test.yaml";

/// Runs the tests.
pub(super) async fn test(args: TestArgs, out: &mut Output) -> Result<(), CliError> {
    let suite = suite(&args, out)?;
    if args.perturb {
        return super::test_perturb::perturb(&args, suite, out).await;
    }
    let json = out.json();
    // With -o json, stdout is the summary alone: kuttl's log goes to stderr.
    let sink: opkit_kuttl::Sink =
        if json { Arc::new(|line: &str| eprintln!("{line}")) } else { Arc::new(|line: &str| println!("{line}")) };
    let (cluster, env, note) = match &args.kubeconfig {
        Some(path) => (Cluster::from_kubeconfig(path).await?, None, "running tests using configured kubeconfig."),
        None => {
            let env = opkit_testenv::TestEnv::start().await.map_err(|e| CliError::Client(e.to_string()))?;
            let cluster = Cluster::new(env.client(), env.kubeconfig_path());
            (
                cluster,
                Some(env),
                "running tests with the in-process opkit control plane (API server and cluster controllers).",
            )
        }
    };
    let mut harness = Harness::new(suite, Arc::new(cluster)).output(sink).cluster_note(note);
    harness = harness.template_vars(template_vars(&args.template_var)?);
    if let Some(pattern) = &args.test {
        harness = harness.only(pattern)?;
    }
    let report = harness.run().await?;
    // The control plane (and its temporary directory) goes only after the run.
    drop(env);
    if json {
        out.result("", report.summary());
    }
    if report.passed() { Ok(()) } else { Err(CliError::Reported { code: 1 }) }
}

/// The suite: the file (`--config`, else `./kuttl-test.yaml` when present), with the
/// command line's overrides.
fn suite(args: &TestArgs, out: &Output) -> Result<TestSuite, CliError> {
    let config = args.config.clone().or_else(|| Some(PathBuf::from(DEFAULT_CONFIG)).filter(|p| p.is_file()));
    let mut suite = match &config {
        Some(path) => {
            let (suite, notes) = TestSuite::load(path)?;
            for note in notes {
                out.warn(&note);
            }
            suite
        }
        None => TestSuite::default(),
    };
    let text = |p: &Path| p.display().to_string();
    if !args.dirs.is_empty() {
        suite.test_dirs = args.dirs.iter().map(|d| text(d)).collect();
    }
    if let Some(dir) = &args.crd_dir {
        suite.crd_dir = text(dir);
    }
    if !args.manifest_dir.is_empty() {
        suite.manifest_dirs = args.manifest_dir.iter().map(|d| text(d)).collect();
    }
    if let Some(parallel) = args.parallel {
        suite.parallel = parallel;
    }
    if let Some(timeout) = args.timeout {
        // kuttl's timeouts are whole seconds: a fraction rounds up.
        suite.timeout = timeout.get().as_millis().div_ceil(1000) as u64;
    }
    if let Some(report) = &args.report {
        let format =
            ReportFormat::parse(report).ok_or_else(|| CliError::Usage(format!("unknown report format {report:?}")))?;
        suite.report_format = match format {
            ReportFormat::Xml => "xml".into(),
            ReportFormat::Json => "json".into(),
        };
    }
    if let Some(name) = &args.report_name {
        suite.report_name = name.clone();
    }
    if let Some(dir) = &args.artifacts_dir {
        suite.artifacts_dir = text(dir);
    }
    if let Some(namespace) = &args.namespace {
        if namespace.trim().is_empty() {
            return Err(CliError::Usage(
                r#"setting namespace explicitly to "" or empty string is not supported"#.into(),
            ));
        }
        suite.namespace = namespace.clone();
    }
    if args.skip_delete {
        suite.skip_delete = true;
    }
    if suite.test_dirs.is_empty() {
        return Err(CliError::Usage(
            "no test directories provided, please provide either --config or test directories on the command line"
                .into(),
        ));
    }
    Ok(suite)
}

/// `--template-var NAME=VALUE` flags as kuttl reads them: each value parsed as YAML
/// (`3` is a number, `[a, b]` a list), a value that is not YAML kept as a string.
fn template_vars(flags: &[String]) -> Result<serde_json::Map<String, serde_json::Value>, CliError> {
    let mut vars = serde_json::Map::new();
    for flag in flags {
        let (name, value) = flag
            .split_once('=')
            .filter(|(name, _)| !name.is_empty())
            .ok_or_else(|| CliError::Usage(format!("invalid --template-var {flag:?}: want NAME=VALUE")))?;
        let parsed = serde_saphyr::from_str::<serde_json::Value>(value)
            .unwrap_or_else(|_| serde_json::Value::String(value.to_string()));
        vars.insert(name.to_string(), parsed);
    }
    Ok(vars)
}
