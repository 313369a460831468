//! Helpers of the OLM suites on the Memcached example (`olm_bundle.rs`,
//! `olm_memcached.rs`): a copy of the example, `make bundle VERSION=0.0.1` then 0.0.2
//! replacing it (each bundle kept in a directory of its own, as each would be an image),
//! and the `bundle validate` + `scorecard` check both must pass. The example's CRDs are
//! already generated, so `make -o manifests` skips building the operator.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The `opkit` binary under test.
pub(crate) fn opkit_bin() -> &'static str {
    env!("CARGO_BIN_EXE_opkit")
}

/// Runs `opkit ARGS` in `dir`.
pub(crate) fn opkit(dir: &Path, args: &[&str]) -> Output {
    Command::new(opkit_bin()).args(args).current_dir(dir).output().expect("run opkit")
}

/// `examples/memcached-operator`.
pub(crate) fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/memcached-operator")
}

/// Copies `from` into `to`, leaving out build output and earlier bundles.
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let name = entry.file_name();
        if ["target", "bundle", "bundle.Dockerfile"].iter().any(|n| name == *n) {
            continue;
        }
        let target = to.join(&name);
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// `make bundle VERSION=<version>` in project `dir`, with this `opkit`; its stdout.
pub(crate) fn make_bundle(dir: &Path, version: &str) -> String {
    let out = Command::new("make")
        .args(["-o", "manifests", "bundle", &format!("VERSION={version}"), &format!("OPKIT={}", opkit_bin())])
        .current_dir(dir)
        .output()
        .expect("run make");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "make bundle failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// The JSON document a command printed on stdout.
pub(crate) fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// The CSV of bundle directory `bundle`.
pub(crate) fn csv(bundle: &Path) -> Value {
    let text =
        std::fs::read_to_string(bundle.join("manifests/memcached-operator.clusterserviceversion.yaml")).expect("csv");
    opkit_olm_bundle::yaml::first_document(&text).expect("yaml").expect("a CSV")
}

/// `opkit bundle validate` passes on `bundle`, and so do scorecard's basic and OLM tests.
pub(crate) fn assert_validates_and_scores(bundle: &Path) {
    let dir = bundle.parent().expect("parent");
    let rel = bundle.file_name().and_then(|n| n.to_str()).expect("name");
    let validate = opkit(dir, &["bundle", "validate", rel, "-o", "json"]);
    let report = json_of(&validate);
    assert_eq!(report["passed"], true, "{report:#}");
    assert!(validate.status.success());
    let scorecard = opkit(dir, &["scorecard", rel, "-o", "json"]);
    let list = json_of(&scorecard);
    let items = list["items"].as_array().expect("items");
    let names: Vec<&str> = items.iter().filter_map(|i| i["status"]["results"][0]["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "basic-check-spec",
            "olm-bundle-validation",
            "olm-crds-have-validation",
            "olm-crds-have-resources",
            "olm-spec-descriptors",
            "olm-status-descriptors"
        ]
    );
    for item in items {
        assert_eq!(item["status"]["results"][0]["state"], "pass", "{item:#}");
    }
    assert!(scorecard.status.success());
}

/// The Memcached example's two bundles, made as operator-sdk's tutorial makes them.
pub(crate) struct MemcachedBundles {
    /// The copy of the example they were made in.
    pub project: PathBuf,
    /// `make bundle VERSION=0.0.1`'s `bundle/`, copied.
    pub v1: PathBuf,
    /// `make bundle VERSION=0.0.2`'s `bundle/` (its CSV `replaces` 0.0.1), copied.
    pub v2: PathBuf,
    /// What the first `make bundle` printed.
    pub first_output: String,
}

/// Copies the example under `root`, makes bundle 0.0.1, declares `replaces:
/// memcached-operator.v0.0.1` in the CSV base (operator-sdk has no flag for it: its users
/// edit the base) and makes 0.0.2; `root/bundle-0.0.1` and `root/bundle-0.0.2` keep them.
pub(crate) fn make_memcached_bundles(root: &Path) -> MemcachedBundles {
    let project = root.join("memcached-operator");
    copy_dir(&example(), &project);
    let first_output = make_bundle(&project, "0.0.1");
    let v1 = root.join("bundle-0.0.1");
    copy_dir(&project.join("bundle"), &v1);

    let base_path = project.join("config/manifests/bases/memcached-operator.clusterserviceversion.yaml");
    let base = std::fs::read_to_string(&base_path).expect("base");
    std::fs::write(&base_path, base.replacen("\nspec:\n", "\nspec:\n  replaces: memcached-operator.v0.0.1\n", 1))
        .expect("write");
    make_bundle(&project, "0.0.2");
    let v2 = root.join("bundle-0.0.2");
    copy_dir(&project.join("bundle"), &v2);
    MemcachedBundles { project, v1, v2, first_output }
}

/// The OLM controllers `opkit olm install` started in the background; stopped (SIGTERM)
/// when dropped, also when the test fails.
pub(crate) struct OlmRunner {
    /// The runner's process id.
    pub pid: u64,
}

impl OlmRunner {
    /// `opkit olm install` on the cluster of `kubeconfig`, its log in `dir/olm.log`.
    pub(crate) fn install(dir: &Path, kubeconfig: &str) -> OlmRunner {
        let log = dir.join("olm.log").display().to_string();
        let out = opkit(dir, &["olm", "install", "--kubeconfig", kubeconfig, "--log-file", &log, "-o", "json"]);
        assert!(out.status.success(), "opkit olm install: {}", String::from_utf8_lossy(&out.stderr));
        let installed = json_of(&out);
        OlmRunner { pid: installed["pid"].as_u64().expect("the runner's pid") }
    }
}

impl Drop for OlmRunner {
    fn drop(&mut self) {
        let _ =
            Command::new("kill").args(["-TERM", &self.pid.to_string()]).stderr(std::process::Stdio::null()).status();
    }
}
