//! `opkit test`: the opkit-kuttl fixture suites run through the binary, on its own
//! in-process control plane or on one given with `--kubeconfig`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use opkit_testenv::TestEnv;

use crate::support::scaffold as support;

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
    let out = opkit_test(fixture("passing"), &["--template-var", "color=blue"]).await;
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

/// The CRD `opkit generate` would write for the scaffolded Memcached (without building the
/// project): the sample test runs against a cluster with the CRD only.
const MEMCACHED_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: memcacheds.cache.example.com
spec:
  group: cache.example.com
  names: {kind: Memcached, listKind: MemcachedList, plural: memcacheds, singular: memcached}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

#[tokio::test]
async fn a_scaffolded_projects_sample_kuttl_test_passes_against_its_crd() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("memcached-operator");
    std::fs::create_dir(&dir).expect("project dir");
    support::ok(&dir, &["init", "--domain", "example.com", "--repo", "github.com/example/memcached-operator"]);
    support::ok(&dir, &["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached"]);
    let makefile = support::read(&dir, "Makefile");
    assert!(makefile.contains("test-kuttl: manifests"), "{makefile}");
    assert!(makefile.contains("$(OPKIT) test --config test/e2e/kuttl/kuttl-test.yaml"), "{makefile}");
    // The case's step applies and asserts config/samples' file itself, not a copy of it.
    let step = support::read(&dir, "test/e2e/kuttl/cache-v1alpha1-memcached/00-create.yaml");
    assert!(step.contains("kind: TestStep\n"), "{step}");
    assert!(step.contains("apply:\n- ../../../../config/samples/cache_v1alpha1_memcached.yaml\n"), "{step}");
    assert!(step.contains("assert:\n- ../../../../config/samples/cache_v1alpha1_memcached.yaml\n"), "{step}");
    assert!(!dir.join("test/e2e/kuttl/cache-v1alpha1-memcached/00-assert.yaml").exists());
    std::fs::create_dir_all(dir.join("config/crd/bases")).expect("bases");
    std::fs::write(dir.join("config/crd/bases/cache.example.com_memcacheds.yaml"), MEMCACHED_CRD).expect("crd");
    let out = opkit_test(dir.clone(), &["--config", "test/e2e/kuttl/kuttl-test.yaml"]).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("CustomResourceDefinition:/memcacheds.cache.example.com created"), "{stdout}");
    assert!(stdout.contains("/memcached-sample created"), "{stdout}");
    assert!(stdout.contains("--- PASS: kuttl/harness/cache-v1alpha1-memcached"), "{stdout}");

    // An edit of the sample in config/samples is what the test applies: a name the API
    // server refuses fails it.
    let sample = dir.join("config/samples/cache_v1alpha1_memcached.yaml");
    let text_before = std::fs::read_to_string(&sample).expect("sample");
    std::fs::write(&sample, text_before.replace("name: memcached-sample", "name: Memcached_Sample")).expect("edit");
    let out = opkit_test(dir, &["--config", "test/e2e/kuttl/kuttl-test.yaml", "--timeout", "2"]).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("Memcached_Sample"), "{stdout}");
}

/// A step that fails unless the `opkit` running it (the script's parent) ignores SIGPIPE.
const SIGPIPE_IGNORED_STEP: &str = r#"apiVersion: kuttl.dev/v1beta1
kind: TestStep
commands:
- script: |
    ignored=$(awk '/^SigIgn:/ {print $2}' /proc/$PPID/status)
    [ $(( 0x$ignored & 0x1000 )) -ne 0 ] || { echo "opkit (pid $PPID) does not ignore SIGPIPE: SigIgn $ignored"; exit 1; }
"#;

#[tokio::test]
async fn opkit_test_ignores_sigpipe_while_its_in_process_servers_run() {
    // A write to a connection its peer closed (TLS's close_notify is a `writev`, without
    // MSG_NOSIGNAL) killed `opkit test` by SIGPIPE when the CLI restored the signal for its
    // whole process; only a closed stdout or stderr may end it that way.
    let tmp = tempfile::tempdir().expect("tempdir");
    let case = tmp.path().join("tests/sigpipe");
    std::fs::create_dir_all(&case).expect("case dir");
    std::fs::write(case.join("00-check.yaml"), SIGPIPE_IGNORED_STEP).expect("step");
    let out = opkit_test(tmp.path().to_path_buf(), &["tests"]).await;
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
}
