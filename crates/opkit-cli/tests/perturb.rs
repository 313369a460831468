//! `opkit test --perturb` on a kuttl suite whose operator is a Python process (the
//! official kubernetes client): the language-agnostic path. The seeded bug (it marks its
//! progress before creating the child) is found by a crash plan, its plan file replays
//! it, and the correct twin, run as the suite's own background command, passes clean.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/perturb_fixture")
}

/// Runs `opkit test --perturb ARGS` in the fixture, off the async runtime.
async fn perturb(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_opkit"))
            .args(["test", "--perturb"])
            .args(&args)
            .current_dir(fixture())
            .output()
            .expect("run opkit")
    })
    .await
    .expect("opkit task")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn a_crash_between_two_writes_of_a_python_operator_is_found_and_its_plan_replays_it() {
    let artifacts = tempfile::tempdir().expect("tempdir");
    let dir = artifacts.path().display().to_string();
    let args = ["--operator", "python3 operator.py --bug", "--classes", "intermediate-state", "--artifacts-dir", &dir];
    let out = perturb(&args).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.starts_with("3 plans from 3 writes"), "{stdout}");
    assert!(
        stdout.contains(
            "EndState after crash after write 1 (patch configmaps/opkit-perturb-test/app):\n    - configmaps/app-child: missing"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("app-child: created 0 and deleted 0 times (fault-free: 1 and 0)"), "{stdout}");
    let plan = artifacts.path().join("perturb-plans/finding-1.json");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).expect("plan file")).expect("JSON");
    assert_eq!((saved["class"].as_str(), saved["nthWrite"].as_u64()), (Some("intermediateState"), Some(1)), "{saved}");

    let plan = plan.display().to_string();
    let replay = perturb(&["--operator", "python3 operator.py --bug", "--replay", &plan, "-o", "json"]).await;
    assert_eq!(replay.status.code(), Some(1), "{}", text(&replay.stderr));
    let report: serde_json::Value = serde_json::from_slice(&replay.stdout).expect("one JSON document");
    let oracles: Vec<&str> =
        report["findings"].as_array().expect("findings").iter().filter_map(|f| f["oracle"].as_str()).collect();
    assert_eq!(oracles, ["endState", "lifecycle"], "{report}");
}

#[tokio::test]
async fn the_correct_twin_run_as_the_suites_background_command_passes_every_plan() {
    let artifacts = tempfile::tempdir().expect("tempdir");
    let dir = artifacts.path().display().to_string();
    let out = perturb(&["--artifacts-dir", &dir, "-o", "json"]).await;
    assert!(out.status.success(), "{}\n{}", text(&out.stdout), text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(report["learnedWrites"], 2, "{report}");
    // A crash, a stale restart and a 504 after each of 2 writes; a 500 on the create, a
    // 409 and a 500 on the patch. Its lists are quorum reads: a stale restart cannot
    // show it an old state.
    assert_eq!(report["plans"].as_array().map(Vec::len), Some(9), "{report}");
    assert_eq!(report["findings"], serde_json::json!([]), "{report}");
    assert!(!artifacts.path().join("perturb-plans").exists(), "no finding, no plan file");
}

#[tokio::test]
async fn a_bad_plan_file_or_no_operator_exits_2_naming_what_is_wrong() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("plan.json");
    std::fs::write(&bad, "{ not a plan").expect("write");
    let bad = bad.display().to_string();
    let out = perturb(&["--operator", "true", "--replay", &bad]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(&format!("the plan file {bad} is not a plan")), "{}", text(&out.stderr));
    let suite = dir.path().join("kuttl-test.yaml");
    std::fs::write(&suite, "apiVersion: kuttl.dev/v1beta1\nkind: TestSuite\ntestDirs: [tests]\n").expect("write");
    let suite = suite.display().to_string();
    let out = perturb(&["--config", &suite]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no operator to perturb: give --operator CMD"), "{}", text(&out.stderr));
}
