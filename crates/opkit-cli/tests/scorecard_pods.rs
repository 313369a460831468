//! `opkit scorecard` with custom tests, as operator-sdk runs them: the bundle's
//! `tests/scorecard/config.yaml` names built-in tests (run in-process) and custom ones,
//! each run as a pod of its image on a cluster with real pods (scripts loaded as images),
//! the bundle unpacked at `/bundle` by busybox's tar; the pods' printed `v1alpha3`
//! results are the report, stage by stage. A failing custom test exits 1, one printing
//! no result is an error, one whose image is not loaded says so, and the run leaves
//! nothing behind unless `--skip-cleanup`.

use crate::olm_support::copy_dir;

use std::path::{Path, PathBuf};
use std::process::Output;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use opkit_testenv::TestEnv;
use serde_json::Value;

fn fixture_bundle() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../opkit-olm-bundle/tests/fixtures/memcached-0.0.1")
}

/// A test image that checks the unpacked bundle names its package.
const PACKAGE_TEST: &str = r#"pkg=$(grep 'bundle.package.v1:' /bundle/metadata/annotations.yaml | sed 's/.*: *//')
if [ -n "$pkg" ]; then
  printf '{"results":[{"name":"bundle-package","log":"package %s in %s","state":"pass"}]}\n' "$pkg" "$SCORECARD_NAMESPACE"
else
  printf '{"results":[{"name":"bundle-package","state":"fail","errors":["no package annotation"]}]}\n'
fi"#;
/// A test image whose test fails.
const FAILING_TEST: &str = r#"printf '{"results":[{"name":"always-fails","state":"fail","errors":["the check failed"],"suggestions":["fix it"]}]}\n'"#;
/// A test image that prints no result.
const SILENT_TEST: &str = "echo not json";

const CONFIG: &str = "apiVersion: scorecard.operatorframework.io/v1alpha3
kind: Configuration
metadata:
  name: config
stages:
- parallel: true
  tests:
  - entrypoint: [scorecard-test, basic-check-spec]
    image: quay.io/operator-framework/scorecard-test:v1.42.0
    labels: {suite: basic, test: basic-check-spec-test}
  - entrypoint: [package-test]
    image: example.com/package-test:v1
    labels: {suite: custom, test: package-test}
- parallel: false
  tests:
  - entrypoint: [failing-test]
    image: example.com/failing-test:v1
    labels: {suite: custom, test: failing-test}
  - entrypoint: [silent-test]
    image: example.com/silent-test:v1
    labels: {suite: custom, test: silent-test}
  - entrypoint: [missing-test]
    image: example.com/not-loaded:v1
    labels: {suite: unloaded, test: missing-test}
";

/// Loads `script` (a `/bin/sh` program) as `image`.
fn load(env: &TestEnv, dir: &Path, image: &str, script: &str) {
    let path = dir.join(image.replace(['/', ':'], "_"));
    std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).expect("write the script");
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    env.load_image(image, &path).expect("load the image");
}

async fn scorecard(env: &TestEnv, bundle: &Path, args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_opkit"));
    command.arg("scorecard").arg(bundle).args(args).env("KUBECONFIG", env.kubeconfig_path()).env_remove("OPKIT_LOG");
    command.output().await.expect("run opkit scorecard")
}

/// The `(name, state)` of every result, in report order.
fn states(report: &Value) -> Vec<(String, String)> {
    let items = report["items"].as_array().expect("items");
    items
        .iter()
        .flat_map(|i| i["status"]["results"].as_array().cloned().unwrap_or_default())
        .map(|r| {
            (r["name"].as_str().unwrap_or_default().to_string(), r["state"].as_str().unwrap_or_default().to_string())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_tests_run_as_pods_of_their_images_and_report_stage_by_stage() {
    let env = TestEnv::builder().real_pods().start().await.expect("testenv");
    let tmp = tempfile::tempdir().expect("tmp");
    for (image, script) in [
        ("example.com/package-test:v1", PACKAGE_TEST),
        ("example.com/failing-test:v1", FAILING_TEST),
        ("example.com/silent-test:v1", SILENT_TEST),
    ] {
        load(&env, tmp.path(), image, script);
    }
    let bundle = tmp.path().join("bundle");
    copy_dir(&fixture_bundle(), &bundle);
    std::fs::create_dir_all(bundle.join("tests/scorecard")).expect("mkdir");
    std::fs::write(bundle.join("tests/scorecard/config.yaml"), CONFIG).expect("config");

    let out =
        scorecard(&env, &bundle, &["-o", "json", "--wait-time", "60s", "--selector", "suite in (basic,custom)"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failing test exits 1:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(
        states(&report),
        [("basic-check-spec", "pass"), ("bundle-package", "pass"), ("always-fails", "fail"), ("silent-test", "error")]
            .map(|(n, s)| (n.to_string(), s.to_string()))
    );
    let package = &report["items"][1];
    assert_eq!(package["spec"]["image"], "example.com/package-test:v1");
    assert_eq!(package["status"]["results"][0]["log"], "package memcached-operator in default");
    assert_eq!(report["items"][2]["status"]["results"][0]["suggestions"][0], "fix it");
    let silent = report["items"][3]["status"]["results"][0]["errors"][0].as_str().unwrap_or_default();
    assert!(silent.contains("printed no scorecard result") && silent.contains("not json"), "{silent}");

    // Only the passing ones: exit 0. Nothing is left behind.
    let out = scorecard(&env, &bundle, &["--wait-time", "60s", "--selector", "test=package-test"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("Image:      example.com/package-test:v1\nEntrypoint: [package-test]\n"), "{text}");
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let left = config_maps.list(&ListParams::default().labels("app=scorecard-test")).await.expect("list");
    assert!(left.items.is_empty(), "the bundle's ConfigMaps were left behind");

    // An image the cluster does not have: its pod is simulated, and the error says so.
    let out =
        scorecard(&env, &bundle, &["-o", "json", "--wait-time", "5s", "--selector", "suite=unloaded", "-x"]).await;
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let error = report["items"][0]["status"]["results"][0]["errors"][0].as_str().unwrap_or_default();
    assert!(error.contains("example.com/not-loaded:v1 is not loaded into this opkit cluster"), "{error}");
    let left = config_maps.list(&ListParams::default().labels("app=scorecard-test")).await.expect("list");
    assert_eq!(left.items.len(), 1, "--skip-cleanup keeps the bundle's ConfigMap");
}
