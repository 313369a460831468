//! `opkit test`: the opkit-kuttl fixture suites run through the binary, on its own
//! in-process control plane or on one given with `--kubeconfig`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use opkit_testenv::TestEnv;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../opkit-kuttl/tests/fixtures").join(name)
}

/// Runs `opkit test ARGS` in `dir`, off the async runtime.
async fn opkit_test(dir: PathBuf, args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_opkit")).arg("test").args(&args).current_dir(dir).output().expect("run opkit")
    })
    .await
    .expect("opkit task")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn the_passing_suite_passes_on_the_in_process_control_plane() {
    let out = opkit_test(fixture("passing"), &[]).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("running tests with the in-process opkit control plane"), "{stdout}");
    assert!(stdout.contains("        --- PASS: kuttl/harness/deployment ("), "{stdout}");
    assert!(stdout.contains("        --- PASS: kuttl/harness/widget ("), "{stdout}");
    assert!(stdout.ends_with("\nPASS\n"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_exit_non_zero_with_a_json_summary_and_report_against_a_kubeconfig() {
    let env = TestEnv::start().await.expect("control plane");
    let artifacts = tempfile::tempdir().expect("tempdir");
    let kubeconfig = env.kubeconfig_path().display().to_string();
    let artifacts_dir = artifacts.path().display().to_string();
    let args = ["--kubeconfig", &kubeconfig, "-o", "json", "--report", "json", "--artifacts-dir", &artifacts_dir];
    let out = opkit_test(fixture("failing"), &args).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document on stdout");
    assert_eq!(summary["passed"], false);
    assert_eq!(summary["tests"], 2);
    assert_eq!(summary["failures"], 2);
    let wrong = summary["cases"].as_array().and_then(|c| c.iter().find(|c| c["name"] == "wrong-color")).expect("case");
    assert_eq!(wrong["errors"][0], "failed in step 0-configmap");
    assert!(wrong["errors"][1].as_str().is_some_and(|d| d.contains("-  color: green\n+  color: blue")), "{wrong}");
    // kuttl's log went to stderr, with the configured cluster.
    assert!(text(&out.stderr).contains("running tests using configured kubeconfig."));
    let report = std::fs::read_to_string(artifacts.path().join("kuttl-report.json")).expect("report");
    let report: serde_json::Value = serde_json::from_str(&report).expect("report is JSON");
    assert_eq!(report["failures"], 2);
}

#[tokio::test]
async fn test_selects_cases_by_name_and_no_dirs_is_a_usage_error() {
    let out = opkit_test(fixture("failing"), &["--test", "^wrong", "--timeout", "1"]).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("testsuite: ./tests has 1 tests"), "{stdout}");
    assert!(!stdout.contains("forbidden-object"), "{stdout}");

    let empty = tempfile::tempdir().expect("tempdir");
    let out = opkit_test(empty.path().to_path_buf(), &["-o", "json"]).await;
    assert_eq!(out.status.code(), Some(1));
    let error: serde_json::Value = serde_json::from_slice(&out.stderr).expect("JSON error");
    assert_eq!(error["error"]["kind"], "usage");
    assert!(error["error"]["message"].as_str().is_some_and(|m| m.starts_with("no test directories provided")));
}
