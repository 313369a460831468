//! `opkit test --perturb`: the kuttl suite is the workload and the operator a process
//! (`--operator`, or the suite's background command) that `opkit_testenv::perturb` runs
//! as an identity of its own, kills and restarts. Every run gets a fresh in-process
//! control plane and runs the tests in one fixed namespace, kept at the end, whose
//! objects are compared with the fault-free run's. Each finding's plan is written as a
//! file that `--replay` runs again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use opkit_kuttl::{Cluster, Harness, TestSuite};
use opkit_testenv::perturb::{OperatorUnderTest, Perturber, Plan, PlanClass, WorkloadTarget};

use crate::cli::TestArgs;
use crate::commands::CliError;
use crate::output::{Output, print_error};

/// The namespace every test case runs in, unless `--namespace` names one.
const NAMESPACE: &str = "opkit-perturb-test";

/// Where the plans of findings go, under the artifacts directory.
const PLAN_DIR: &str = "perturb-plans";

/// Runs the suite under perturbations.
pub(super) async fn perturb(args: &TestArgs, mut suite: TestSuite, out: &mut Output) -> Result<(), CliError> {
    if args.kubeconfig.is_some() {
        return usage(out, "--perturb runs on the in-process control plane: it cannot use --kubeconfig");
    }
    let Some(operator) = take_operator(args, &mut suite) else {
        return usage(
            out,
            "no operator to perturb: give --operator CMD, or mark the suite's operator command `background: true`",
        );
    };
    let plan = match &args.replay {
        Some(path) => match read_plan(path) {
            Ok(plan) => Some(plan),
            Err(message) => return usage(out, &message),
        },
        None => None,
    };
    if suite.namespace.is_empty() {
        suite.namespace = NAMESPACE.into();
    }
    suite.skip_delete = true;
    let namespace = suite.namespace.clone();
    let artifacts = PathBuf::from(if suite.artifacts_dir.is_empty() { "." } else { suite.artifacts_dir.as_str() });
    let suite = Arc::new(suite);
    let perturber =
        Perturber::of(OperatorUnderTest::process(&operator), move |target| run_suite(suite.clone(), target))
            .namespace(namespace)
            .classes(&classes(&args.classes));
    out.step(&format!("learning what {operator:?} does: the suite, twice, without faults"));
    let report = match plan {
        Some(plan) => {
            out.step(&format!("replaying: {}", plan.describe()));
            perturber.replay(&plan).await.map_err(perturb_error)?
        }
        None => perturber.run().await.map_err(perturb_error)?,
    };
    let written = write_plans(&artifacts, &report)?;
    if out.json() {
        let mut json = serde_json::to_value(&report).map_err(|e| CliError::Client(e.to_string()))?;
        json["planFiles"] = serde_json::json!(written.iter().map(|p| p.display().to_string()).collect::<Vec<_>>());
        out.result("", json);
    } else {
        println!("{}", report.render());
        for path in &written {
            println!("plan file: {} (replay: opkit test --perturb --replay {})", path.display(), path.display());
        }
    }
    if report.findings.is_empty() { Ok(()) } else { Err(CliError::Reported { code: 1 }) }
}

/// Prints a usage error and exits 2.
fn usage(out: &Output, message: &str) -> Result<(), CliError> {
    print_error(out.format(), "usage", message);
    Err(CliError::Reported { code: 2 })
}

fn perturb_error(e: opkit_testenv::perturb::PerturbError) -> CliError {
    CliError::Client(e.to_string())
}

/// The operator's command: `--operator`, which replaces the suite's background
/// commands, else the suite's first background command, which the suite then does not
/// start itself.
fn take_operator(args: &TestArgs, suite: &mut TestSuite) -> Option<String> {
    if let Some(command) = &args.operator {
        suite.commands.retain(|c| !c.background);
        return Some(command.clone());
    }
    let index = suite.commands.iter().position(|c| c.background)?;
    let command = suite.commands.remove(index);
    Some(if command.script.is_empty() { command.command } else { command.script })
}

fn classes(names: &[String]) -> Vec<PlanClass> {
    if names.is_empty() {
        return PlanClass::ALL.to_vec();
    }
    names
        .iter()
        .filter_map(|n| match n.as_str() {
            "intermediate-state" => Some(PlanClass::IntermediateState),
            "stale-state" => Some(PlanClass::StaleState),
            "api-error" => Some(PlanClass::ApiError),
            "timeout-after-commit" => Some(PlanClass::TimeoutAfterCommit),
            _ => None,
        })
        .collect()
}

fn read_plan(path: &Path) -> Result<Plan, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading the plan file {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("the plan file {} is not a plan: {e}", path.display()))
}

/// One run of the suite on the run's control plane: Ok when every test passed, else
/// the failures.
async fn run_suite(suite: Arc<TestSuite>, target: WorkloadTarget) -> Result<(), String> {
    let cluster = Cluster::new(target.client, &target.kubeconfig);
    let quiet: opkit_kuttl::Sink = Arc::new(|_: &str| {});
    let report = Harness::new((*suite).clone(), Arc::new(cluster))
        .output(quiet)
        .run()
        .await
        .map_err(|e| format!("the suite did not run: {e}"))?;
    if report.passed() {
        return Ok(());
    }
    let failures: Vec<String> = report
        .cases()
        .filter(|c| !c.passed())
        .flat_map(|c| c.errors.iter().map(move |e| format!("{}: {e}", c.name)))
        .collect();
    Err(failures.join("; "))
}

/// Writes each finding's plan to `<artifacts>/perturb-plans/finding-N.json`.
fn write_plans(artifacts: &Path, report: &opkit_testenv::perturb::PerturbReport) -> Result<Vec<PathBuf>, CliError> {
    let plans: Vec<&Plan> = report.findings.iter().filter_map(|f| f.plan.as_ref()).collect();
    let mut unique: Vec<&Plan> = Vec::new();
    for plan in plans {
        if !unique.contains(&plan) {
            unique.push(plan);
        }
    }
    if unique.is_empty() {
        return Ok(Vec::new());
    }
    let dir = artifacts.join(PLAN_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| CliError::Client(format!("creating {}: {e}", dir.display())))?;
    let mut written = Vec::new();
    for (i, plan) in unique.iter().enumerate() {
        let path = dir.join(format!("finding-{}.json", i + 1));
        let text = serde_json::to_string_pretty(plan).map_err(|e| CliError::Client(e.to_string()))?;
        std::fs::write(&path, text).map_err(|e| CliError::Client(format!("writing {}: {e}", path.display())))?;
        written.push(path);
    }
    Ok(written)
}
