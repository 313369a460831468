//! `opkit olm`, `opkit catalog`, `opkit run bundle|bundle-upgrade` and `opkit cleanup` as a
//! user runs them, against an in-process control plane, with the bundles of
//! `crates/opkit-olm/tests/fixtures` (memcached-operator 0.0.1 and 0.0.2, which replaces it).

use crate::olm_support;
use crate::support::workflow as support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use opkit_testenv::{TestEnv, wait_for};
use serde_json::Value;
use support::{OPKIT, command, opkit};

const WAIT: Duration = Duration::from_secs(60);

fn bundle(version: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../opkit-olm/tests/fixtures/memcached-operator")
        .join(version)
        .display()
        .to_string()
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Whether process `pid` is alive.
fn alive(pid: u64) -> bool {
    Command::new("kill").args(["-0", &pid.to_string()]).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn olm_install_run_bundle_upgrade_cleanup_and_uninstall() {
    let env = TestEnv::start().await.expect("control plane");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let kubeconfig = env.kubeconfig_path().display().to_string();

    let runner = olm_support::OlmRunner::install(dir, &kubeconfig);
    let pid = runner.pid;
    let status =
        json(&opkit(dir, None, &["olm", "status", "--version", "latest", "--kubeconfig", &kubeconfig, "-o", "json"]));
    assert_eq!(status["installed"], true, "{status}");
    // operator-sdk's --version names the OLM release to fetch; opkit's OLM is built in.
    let versioned = command(OPKIT, dir, None)
        .args(["olm", "status", "--version", "0.28.0", "--kubeconfig", &kubeconfig])
        .output()
        .expect("olm status --version");
    assert!(versioned.status.success());
    assert!(String::from_utf8_lossy(&versioned.stderr).contains("--version 0.28.0: opkit's OLM is built in"));
    assert!(status["running"].as_str().is_some_and(|r| r.starts_with(&format!("opkit-olm-{pid}@"))), "{status}");

    // A catalog rendered from both bundles validates.
    let rendered = opkit(dir, None, &["catalog", "render", &bundle("0.0.1"), &bundle("0.0.2")]);
    assert!(rendered.starts_with("{\n    \"schema\": \"olm.package\""), "{rendered}");
    std::fs::create_dir(dir.join("catalog")).expect("catalog dir");
    std::fs::write(dir.join("catalog/index.json"), &rendered).expect("write catalog");
    let valid = json(&opkit(dir, None, &["catalog", "validate", "catalog", "-o", "json"]));
    assert_eq!(valid["bundles"], 2, "{valid}");

    let start = Instant::now();
    let run = json(&opkit(dir, None, &["run", "bundle", &bundle("0.0.1"), "--kubeconfig", &kubeconfig, "-o", "json"]));
    let run_seconds = start.elapsed().as_secs_f64();
    assert_eq!(run["csv"], "memcached-operator.v0.0.1", "{run}");
    eprintln!("run bundle → Succeeded in {run_seconds:.2}s (the CLI's own measure: {}s)", run["seconds"]);
    let deployments: Api<Deployment> = Api::namespaced(env.client(), "default");
    let available =
        |d: Option<&Deployment>| d.and_then(|d| d.status.as_ref()).and_then(|s| s.available_replicas).unwrap_or(0) >= 1;
    wait_for(&deployments, "memcached-operator-controller-manager", "to be available", available, WAIT)
        .await
        .expect("the operator's Deployment is available");

    let mut upgrade = command(OPKIT, dir, None);
    upgrade.args(["run", "bundle-upgrade", &bundle("0.0.2"), "--kubeconfig", &kubeconfig]);
    let out = upgrade.output().expect("run bundle-upgrade");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("Found ClusterServiceVersion \"default/memcached-operator.v0.0.2\" phase: Succeeded"),
        "{stderr}"
    );
    assert!(stderr.contains("Successfully upgraded to \"memcached-operator.v0.0.2\""), "{stderr}");

    // operator-sdk's flags, as its defaults are.
    let cleanup = [
        "cleanup",
        "memcached-operator",
        "--delete-all",
        "--delete-crds",
        "--delete-operator-groups",
        "--kubeconfig",
        &kubeconfig,
        "-o",
        "json",
    ];
    let cleaned = json(&opkit(dir, None, &cleanup));
    let deleted: Vec<&str> = cleaned["deleted"].as_array().expect("deleted").iter().filter_map(Value::as_str).collect();
    assert!(deleted.contains(&"clusterserviceversion \"memcached-operator.v0.0.2\" deleted"), "{cleaned}");
    assert!(deleted.contains(&"customresourcedefinition \"memcacheds.cache.example.com\" deleted"), "{cleaned}");
    assert!(deleted.contains(&"operatorgroup \"operator-sdk-og\" deleted"), "{cleaned}");

    opkit(dir, None, &["olm", "uninstall", "--version", "latest", "--kubeconfig", &kubeconfig]);
    let deadline = Instant::now() + WAIT;
    while alive(pid) {
        assert!(Instant::now() < deadline, "the OLM controllers (pid {pid}) did not stop");
        // Not our child: its exit can only be polled.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = command(OPKIT, dir, None)
        .args(["olm", "status", "--kubeconfig", &kubeconfig, "-o", "json"])
        .output()
        .expect("olm status");
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stdout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_bundle_without_olm_and_an_invalid_catalog_fail_clearly() {
    let env = TestEnv::start().await.expect("control plane");
    let tmp = tempfile::tempdir().expect("tempdir");
    let kubeconfig = env.kubeconfig_path().display().to_string();
    let out = Command::new(OPKIT)
        .args(["run", "bundle", &bundle("0.0.1"), "--kubeconfig", &kubeconfig, "-o", "json"])
        .output()
        .expect("run bundle");
    assert_eq!(out.status.code(), Some(1));
    let error = json(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(error["error"]["kind"], "usage", "{error}");
    assert!(error["error"]["message"].as_str().is_some_and(|m| m.contains("opkit olm install")), "{error}");

    let catalog: PathBuf = tmp.path().join("catalog");
    std::fs::create_dir(&catalog).expect("dir");
    std::fs::write(catalog.join("index.yaml"), "schema: olm.package\nname: p\ndefaultChannel: stable\n")
        .expect("write");
    let out = Command::new(OPKIT).args(["catalog", "validate", "-o", "json"]).arg(&catalog).output().expect("validate");
    assert_eq!(out.status.code(), Some(1));
    let error = json(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(error["error"]["kind"], "invalid-catalog", "{error}");
    assert!(
        error["error"]["message"].as_str().is_some_and(|m| m.contains("default channel \"stable\" not found")),
        "{error}"
    );
}
