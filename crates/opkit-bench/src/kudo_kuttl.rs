//! `opkit-bench kudo-kuttl`: the KUDO corpus's kuttl suites under opkit's kuttl runner.
//!
//! The corpus keeps each package as `<corpus>/<name>/{operator,tests}`, while its suite
//! file (`<corpus>/kuttl-test.yaml`, from the KUDO operators repository) names paths of
//! that repository (`./repository/<name>/operator/`, `./bin/kubectl-kudo`). The run builds
//! that layout in a temporary work directory, as links into the corpus (the operators'
//! paths from `SOURCES.tsv`, so `flink-demo` is at
//! `repository/flink/docs/demo/financial-fraud/demo-operator`), with `bin/kubectl-kudo` a
//! link to the `opkit` binary (which answers as `kubectl kudo` under that name). It then
//! runs the suite, unchanged except that its `testDirs` are every package's `tests/`
//! (the repository's file lists only zookeeper's and kafka's), with `opkit-kuttl` against
//! an in-process control plane (API server, cluster controllers with simulated pods) and
//! the KUDO engine in this process (the manager pod the suite's `kubectl kudo init` makes
//! is simulated there: the in-process cluster has no image store to load it into).
//!
//! Every failing case is classified ([`Cause`]): a test naming an OperatorVersion the
//! suite does not install, one that needs a container's process (simulated pods run no
//! image), one that needs the network, or an engine or runner fault.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use kube::api::{Api, DynamicObject, ListParams};
use opkit_kuttl::{CaseReport, Cluster, Harness, TestSuite};
use serde::Serialize;

use crate::BenchError;

/// What the run does.
#[derive(Debug, Clone)]
pub struct KudoKuttlOptions {
    /// The corpus directory (`kuttl-test.yaml`, `SOURCES.tsv`, `<name>/operator`, `<name>/tests`).
    pub corpus: PathBuf,
    /// The `opkit` binary, linked as `bin/kubectl-kudo`.
    pub opkit: PathBuf,
    /// Seconds per step, instead of the suite's `timeout`.
    pub timeout: Option<u64>,
    /// Prints the kuttl log as it comes (else only the table).
    pub verbose: bool,
}

/// Why a case did not pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// It passed.
    Passed,
    /// The test names an OperatorVersion the suite does not install (KUDO fails it too).
    StaleOperatorVersion,
    /// It needs a container's process to answer (simulated pods run no image).
    NeedsRealProcess,
    /// It needs the network (a package from KUDO's repository).
    NeedsNetwork,
    /// The engine or the runner: counted as a failure.
    EngineOrRunner,
}

impl Cause {
    fn label(self) -> &'static str {
        match self {
            Cause::Passed => "passed",
            Cause::StaleOperatorVersion => "stale OperatorVersion",
            Cause::NeedsRealProcess => "needs a real process",
            Cause::NeedsNetwork => "needs network",
            Cause::EngineOrRunner => "engine/runner",
        }
    }
}

/// One test case's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct CaseOutcome {
    /// The package whose `tests/` holds it.
    pub package: String,
    /// The test case.
    pub case: String,
    /// Steps that passed, of those that ran.
    pub steps_passed: usize,
    /// The failing step (empty when it passed).
    pub failed_step: String,
    /// Seconds it took.
    pub seconds: f64,
    /// The classification.
    pub cause: Cause,
    /// Why (the cause's evidence, then kuttl's last error).
    pub reason: String,
}

/// The run's report.
#[derive(Debug, Clone, Serialize)]
pub struct KudoKuttlReport {
    /// The suite's setup error (its commands), if any.
    pub setup_failure: Option<String>,
    /// Cases run.
    pub total: usize,
    /// Cases passed.
    pub passed: usize,
    /// Cases that failed through the engine or the runner.
    pub engine_failures: usize,
    /// Every case.
    pub cases: Vec<CaseOutcome>,
    /// Seconds for the whole run.
    pub seconds: f64,
}

/// `(package, operator path in the operators repository)` for every package of the corpus:
/// `SOURCES.tsv`'s `path_in_repo` of its `operator` part, else `repository/<name>/operator`.
fn operator_paths(corpus: &Path) -> Result<Vec<(String, String)>, BenchError> {
    let sources = std::fs::read_to_string(corpus.join("SOURCES.tsv")).unwrap_or_default();
    let from_sources: BTreeMap<&str, &str> = sources
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            (cols.len() > 3 && cols[1] == "operator" && cols[2] == "kudobuilder/operators").then(|| (cols[0], cols[3]))
        })
        .collect();
    let mut out = Vec::new();
    for entry in std::fs::read_dir(corpus).map_err(|e| BenchError::Setup(format!("{}: {e}", corpus.display())))? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if corpus.join(&name).join("operator/operator.yaml").is_file() {
            let path = from_sources
                .get(name.as_str())
                .map_or_else(|| format!("repository/{name}/operator"), |p| p.to_string());
            out.push((name, path));
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(unix)]
fn link(target: &Path, link: &Path) -> Result<(), BenchError> {
    if let Some(parent) = link.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::os::unix::fs::symlink(target, link)
        .map_err(|e| BenchError::Setup(format!("linking {} to {}: {e}", link.display(), target.display())))
}

#[cfg(not(unix))]
fn link(_target: &Path, _link: &Path) -> Result<(), BenchError> {
    Err(BenchError::Setup("the KUDO kuttl run links the corpus into a work directory: unix only".into()))
}

/// Builds the operators repository's layout in `work`; returns the packages with tests.
fn lay_out(corpus: &Path, opkit: &Path, work: &Path) -> Result<Vec<String>, BenchError> {
    let corpus = corpus.canonicalize().map_err(|e| BenchError::Setup(format!("{}: {e}", corpus.display())))?;
    let opkit = opkit.canonicalize().map_err(|e| {
        BenchError::Setup(format!("{}: {e} (build it first: cargo build -p opkit-cli)", opkit.display()))
    })?;
    link(&opkit, &work.join("bin/kubectl-kudo"))?;
    let mut with_tests = Vec::new();
    for (name, path) in operator_paths(&corpus)? {
        link(&corpus.join(&name).join("operator"), &work.join(path.trim_end_matches('/')))?;
        let tests = corpus.join(&name).join("tests");
        if tests.is_dir() {
            link(&tests, &work.join("repository").join(&name).join("tests"))?;
            with_tests.push(name);
        }
    }
    Ok(with_tests)
}

/// The OperatorVersions the case's Instances name that are not installed, each with
/// what is installed of that operator: `(named, installed)`.
async fn missing_operator_versions(client: &kube::Client, case_dir: &Path) -> Vec<(String, Vec<String>)> {
    let mut missing = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(case_dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect())
        .unwrap_or_default();
    files.sort();
    for file in files {
        let Ok(objects) = opkit_kuttl::load_objects(&file) else { continue };
        for object in objects.iter().filter(|o| o["kind"] == "Instance") {
            let Some(name) = object.pointer("/spec/operatorVersion/name").and_then(|v| v.as_str()) else { continue };
            let namespace =
                object.pointer("/spec/operatorVersion/namespace").and_then(|v| v.as_str()).unwrap_or("default");
            let ovs: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                namespace,
                &opkit_kudo::resources::api_resource("OperatorVersion"),
            );
            if matches!(ovs.get_opt(name).await, Ok(Some(_))) || missing.iter().any(|(m, _)| m == name) {
                continue;
            }
            // KUDO's `NAME-APPVERSION-VERSION`: the operator is what precedes the first number.
            let operator: Vec<&str> =
                name.split('-').take_while(|part| !part.starts_with(|c: char| c.is_ascii_digit())).collect();
            let prefix = format!("{}-", operator.join("-"));
            let installed = ovs
                .list(&ListParams::default())
                .await
                .map(|l| {
                    l.items.into_iter().filter_map(|o| o.metadata.name).filter(|n| n.starts_with(&prefix)).collect()
                })
                .unwrap_or_default();
            missing.push((name.to_string(), installed));
        }
    }
    missing
}

/// What a failing step's errors say only a container's process could have done: a
/// command that execs into a pod or reads its logs, or a Job's success.
fn needs_real_process(errors: &[String]) -> Option<String> {
    let text = errors.join("\n");
    let job_success = text.contains("Job:") && text.contains(".status.succeeded");
    ["kubectl exec", "kubectl logs"]
        .into_iter()
        .find(|needle| text.contains(needle))
        .map(|needle| format!("the step runs `{needle}`, which needs the container's process"))
        .or_else(|| job_success.then(|| "the assert waits for a Job to succeed, which needs its process".into()))
}

fn last_error(case: &CaseReport) -> String {
    let line = case.errors.last().cloned().unwrap_or_default();
    let line = line.lines().last().unwrap_or_default().trim().to_string();
    if line.len() > 200 { format!("{}…", &line[..line.floor_char_boundary(200)]) } else { line }
}

/// Runs the suites (see the module docs).
pub async fn run(options: &KudoKuttlOptions) -> Result<KudoKuttlReport, BenchError> {
    let started = Instant::now();
    let work = tempfile::tempdir()?;
    let with_tests = lay_out(&options.corpus, &options.opkit, work.path())?;
    let (mut suite, _notes) = TestSuite::load(&options.corpus.join("kuttl-test.yaml"))
        .map_err(|e| BenchError::Setup(format!("the corpus's suite: {e}")))?;
    suite.test_dirs = with_tests.iter().map(|name| format!("./repository/{name}/tests")).collect();
    if let Some(timeout) = options.timeout {
        suite.timeout = timeout;
    }
    let (env, stop) = crate::kudo::control_plane().await?;
    let client = env.client();
    let cluster = Cluster::new(client.clone(), env.kubeconfig_path());
    let verbose = options.verbose;
    let harness = Harness::new(suite, Arc::new(cluster))
        .work_dir(work.path())
        .output(Arc::new(move |line: &str| {
            if verbose {
                eprintln!("{line}");
            }
        }))
        .cluster_note("running tests with the opkit control plane and the KUDO engine in process");
    let report = harness.run().await.map_err(|e| BenchError::Setup(e.to_string()))?;
    let mut cases = Vec::new();
    for suite in &report.suites {
        let package = suite.dir.trim_start_matches("./repository/").trim_end_matches("/tests").to_string();
        for case in &suite.cases {
            let failed = case.steps.iter().find(|s| s.failure.is_some());
            let mut outcome = CaseOutcome {
                package: package.clone(),
                case: case.name.clone(),
                steps_passed: case.steps.iter().filter(|s| s.failure.is_none() && s.name != "setup").count(),
                failed_step: failed.map(|s| s.name.clone()).unwrap_or_default(),
                seconds: case.duration.as_secs_f64(),
                cause: Cause::Passed,
                reason: String::new(),
            };
            if !case.passed() {
                let errors = failed.and_then(|s| s.failure.as_ref()).map(|f| f.errors.clone()).unwrap_or_default();
                let case_dir = work.path().join(&suite.dir).join(&case.name);
                let missing = missing_operator_versions(&client, &case_dir).await;
                (outcome.cause, outcome.reason) = if !missing.is_empty() {
                    let named: Vec<String> = missing
                        .iter()
                        .map(|(ov, installed)| format!("{ov}, the suite installs {}", installed.join(", ")))
                        .collect();
                    (Cause::StaleOperatorVersion, format!("names {}", named.join("; ")))
                } else if let Some(why) = needs_real_process(&errors) {
                    (Cause::NeedsRealProcess, why)
                } else {
                    (Cause::EngineOrRunner, String::new())
                };
                let last = last_error(case);
                outcome.reason =
                    [outcome.reason, last].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(": ");
            }
            cases.push(outcome);
        }
    }
    stop.cancel();
    let setup_failure = report.failure.clone();
    let total = cases.len();
    let passed = cases.iter().filter(|c| c.cause == Cause::Passed).count();
    let engine_failures = cases.iter().filter(|c| c.cause == Cause::EngineOrRunner).count();
    Ok(KudoKuttlReport {
        setup_failure,
        total,
        passed,
        engine_failures,
        cases,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The report as a table.
pub fn render(report: &KudoKuttlReport) -> String {
    let mut out = format!(
        "KUDO kuttl suites: {} of {} cases passed, {} engine/runner failures ({:.0}s)\n",
        report.passed, report.total, report.engine_failures, report.seconds
    );
    if let Some(setup) = &report.setup_failure {
        out.push_str(&format!("suite setup failed: {setup}\n"));
    }
    out.push_str(&format!(
        "\n{:<22} {:<28} {:>5} {:<18} {:>7}  {:<22} reason\n",
        "package", "case", "steps", "failed step", "seconds", "cause"
    ));
    for c in &report.cases {
        out.push_str(&format!(
            "{:<22} {:<28} {:>5} {:<18} {:>7.1}  {:<22} {}\n",
            c.package,
            c.case,
            c.steps_passed,
            c.failed_step,
            c.seconds,
            c.cause.label(),
            c.reason
        ));
    }
    out
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    /// The suite's `./repository/...` paths and `./bin/kubectl-kudo` resolve in the work
    /// directory: operators where `SOURCES.tsv` says the repository has them.
    #[test]
    fn the_work_directory_has_the_operators_repository_layout() {
        let corpus = tempfile::tempdir().expect("tempdir");
        let work = tempfile::tempdir().expect("tempdir");
        let c = corpus.path();
        write(&c.join("zk/operator/operator.yaml"), "name: zk\n");
        write(&c.join("zk/tests/case/00-assert.yaml"), "{}\n");
        write(&c.join("demo/operator/operator.yaml"), "name: demo\n");
        write(
            &c.join("SOURCES.tsv"),
            "name\tpart\tsource_repo\tpath_in_repo\n\
             demo\toperator\tkudobuilder/operators\trepository/flink/docs/demo/financial-fraud/demo-operator\n",
        );
        let opkit = c.join("opkit");
        write(&opkit, "");
        let with_tests = lay_out(c, &opkit, work.path()).expect("lay out");
        assert_eq!(with_tests, ["zk"]);
        let w = work.path();
        assert!(w.join("repository/zk/operator/operator.yaml").is_file());
        assert!(w.join("repository/zk/tests/case/00-assert.yaml").is_file());
        assert!(w.join("repository/flink/docs/demo/financial-fraud/demo-operator/operator.yaml").is_file());
        assert!(!w.join("repository/demo").exists());
        assert!(w.join("bin/kubectl-kudo").is_file());
    }

    #[test]
    fn only_a_process_s_answers_are_classified_as_needing_one() {
        let exec = vec!["command \"kubectl exec zk-0 -- zkCli.sh\" failed".to_string()];
        assert!(needs_real_process(&exec).is_some());
        let job = vec!["resource Job:ns/load: .status.succeeded: key is missing from map".to_string()];
        assert!(needs_real_process(&job).is_some());
        let mismatch =
            vec!["resource StatefulSet:ns/zk: .spec.replicas: value mismatch, expected: 3 != actual: 1".into()];
        assert_eq!(needs_real_process(&mismatch), None);
    }
}
