//! The runner on the in-process control plane (API server and cluster controllers),
//! through the library: the fixture suites under `tests/fixtures/`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use opkit_kuttl::{Cluster, Harness, RunReport, TestSuite};
use opkit_testenv::TestEnv;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// Runs a fixture suite on a fresh control plane; returns the report and what was printed.
async fn run(name: &str, env: &TestEnv, adjust: impl FnOnce(&mut TestSuite)) -> (RunReport, String) {
    let dir = fixture(name);
    let (mut suite, notes) = TestSuite::load(&dir.join("kuttl-test.yaml")).expect("suite loads");
    assert!(notes.is_empty(), "{notes:?}");
    adjust(&mut suite);
    let printed = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&printed);
    let cluster = Cluster::new(env.client(), env.kubeconfig_path());
    let mut vars = serde_json::Map::new();
    vars.insert("color".into(), "blue".into());
    let harness = Harness::new(suite, Arc::new(cluster))
        .work_dir(&dir)
        .template_vars(vars)
        .output(Arc::new(move |line: &str| sink.lock().expect("lock").push(line.to_string())));
    let report = harness.run().await.expect("run");
    let text = printed.lock().expect("lock").join("\n");
    (report, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suite_rolls_out_scales_deletes_and_cleans_up() {
    let env = TestEnv::start().await.expect("control plane");
    let (report, printed) = run("passing", &env, |_| {}).await;
    assert!(report.passed(), "{printed}");
    let names: Vec<&str> = report.cases().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["deployment", "widget"]);
    let deployment = report.cases().find(|c| c.name == "deployment").expect("deployment case");
    let steps: Vec<&str> = deployment.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(steps, ["setup", "step 0-install", "step 1-scale", "step 2-delete"]);
    for expected in [
        "=== RUN   kuttl/harness/deployment",
        "| deployment/0-install | Deployment:",
        "| deployment/1-scale | Deployment:",
        "/web updated",
        "| deployment/2-delete | Deployment:",
        "/web deleted",
        "running command: [kubectl label configmap from-command step=two --namespace kuttl-test-",
        "kindContainers [\"example.com/never-loaded:latest\"] are not loaded",
        "killing process \"kubectl create configmap background-command",
        "--- PASS: kuttl/harness/deployment",
        "--- PASS: kuttl/harness/widget",
        "| widget/1-templated | ConfigMap:kuttl-test-",
    ] {
        assert!(printed.contains(expected), "missing {expected:?} in:\n{printed}");
    }
    // README.md is ignored silently (the default ignoreFiles).
    assert!(!printed.contains("README"), "{printed}");
    // Every test namespace was deleted.
    let namespaces: Api<Namespace> = Api::all(env.client());
    let left: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .expect("namespaces")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .filter(|n| n.starts_with("kuttl-test-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_print_kuttls_diff_and_errors() {
    let env = TestEnv::start().await.expect("control plane");
    let artifacts = tempfile::tempdir().expect("tempdir");
    let (report, printed) = run("failing", &env, |suite| {
        suite.report_format = "xml".into();
        suite.artifacts_dir = artifacts.path().display().to_string();
    })
    .await;
    assert!(!report.passed());
    let wrong = report.cases().find(|c| c.name == "wrong-color").expect("wrong-color");
    assert_eq!(wrong.errors[0], "failed in step 0-configmap");
    assert!(wrong.errors[1].starts_with("--- ConfigMap:kuttl-test-"), "{:?}", wrong.errors);
    assert!(wrong.errors[1].contains("\n data:\n-  color: green\n+  color: blue\n"), "{}", wrong.errors[1]);
    assert!(
        wrong.errors[2].ends_with("/settings: .data.color: value mismatch, expected: green != actual: blue"),
        "{:?}",
        wrong.errors
    );
    assert_eq!(
        wrong.errors[3],
        "not all assertAll expressions evaluated to true: expression \"settings.data.color == 'green'\" evaluated to 'false'"
    );
    let forbidden = report.cases().find(|c| c.name == "forbidden-object").expect("forbidden-object");
    assert_eq!(forbidden.errors[1], "resource /v1, Kind=Secret leaked matched error assertion");
    for expected in [
        "    case.go:333: failed in step 0-configmap",
        "    case.go:335: --- ConfigMap:kuttl-test-",
        "        +++ ConfigMap:kuttl-test-",
        "collecting log output for [type==command,command: kubectl get configmap settings",
        "| wrong-color/0-configmap | blue",
        "--- FAIL: kuttl/harness/wrong-color",
        "--- FAIL: kuttl/harness/forbidden-object",
        "output of the background commands during the tests (",
    ] {
        assert!(printed.contains(expected), "missing {expected:?} in:\n{printed}");
    }
    // The background command logged only while the tests ran, and that is shown, after
    // the heading (the setup's own output was printed before the tests).
    let heading = printed.find("output of the background commands during the tests").expect("heading");
    let line = printed.find("| harness | stand-in operator: reconciling settings").expect("background output shown");
    assert!(line > heading, "{printed}");
    assert!(printed.ends_with("\nFAIL"), "{printed}");
    let junit = std::fs::read_to_string(artifacts.path().join("kuttl-report.xml")).expect("report written");
    assert!(junit.starts_with(" <testsuites name=\"\" tests=\"4\" failures=\"2\""), "{junit}");
    assert!(
        junit.contains("<failure message=\"failed in step 0-configmap\" type=\"\">not all assertAll expressions"),
        "{junit}"
    );
}

/// kuttl runs the cases of every test directory in parallel (one `harness` group), not one
/// directory after another: the two directories' cases here wait for each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cases_of_different_test_directories_run_at_once() {
    let env = TestEnv::start().await.expect("control plane");
    let (report, printed) = run("two-dirs", &env, |_| {}).await;
    assert!(report.passed(), "{printed}");
    let dirs: Vec<(&str, usize)> = report.suites.iter().map(|s| (s.dir.as_str(), s.cases.len())).collect();
    assert_eq!(dirs, [("./first", 1), ("./second", 1)]);
}
