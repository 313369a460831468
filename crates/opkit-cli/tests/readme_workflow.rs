//! The README's operator-sdk workflow, run headless as written: the `sh` block under
//! "The operator-sdk workflow with `opkit`" becomes a bash script, line by line, with only
//! what a terminal user does by hand put in code:
//! - the `opkit` these tests built is on PATH instead of `cargo install`;
//! - the tutorial's edits are the files of `examples/memcached-operator`;
//! - `make install run` runs in the background; the sample is applied once its CRD is
//!   established (the README runs it in another shell), and the run gets Ctrl-C once the
//!   sample's Deployment exists;
//! - the cluster takes a free port (`--port 0`), `make run`'s manager serves no metrics or
//!   probe port (its environment, as other suites may run operators beside it), and
//!   `make cluster-load` builds the dev
//!   profile (the README's release build is the same commands, only slower);
//! - `kubectl logs` waits for the rollout first.
//!
//! Any other line runs unchanged, so a README step that stops working fails this test.
//! Then the README's "OLM bundles" block runs in the same project, as written, with the
//! `logo.svg` its first line names written first.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::workflow as support;

use support::*;

/// The commands of the README's workflow block, without comments.
fn readme_workflow() -> Vec<String> {
    readme_block("## The operator-sdk workflow with `opkit`")
}

/// The commands of the first `sh` block under the README's `heading`, without comments.
fn readme_block(heading: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(workspace().join("README.md")).expect("README.md");
    let section = readme.split(heading).nth(1).unwrap_or_else(|| panic!("the README has no {heading:?}"));
    let block = section.split("```sh\n").nth(1).and_then(|b| b.split("```").next()).expect("its sh block");
    block
        .lines()
        .map(|line| match line.find(" #") {
            Some(at) if !line.trim_start().starts_with('#') => line[..at].trim_end().to_string(),
            _ => line.trim_end().to_string(),
        })
        .filter(|line| !line.is_empty())
        .collect()
}

/// The bash lines one README line becomes.
fn script_lines(line: &str, example: &Path) -> Vec<String> {
    if line.starts_with("cargo install ") {
        return vec!["opkit version --client   # instead of cargo install: the opkit these tests built".into()];
    }
    if line.starts_with("# edit ") {
        let files = [
            "src/api/cache_v1alpha1/memcached.rs",
            "src/controller/memcached.rs",
            "config/samples/cache_v1alpha1_memcached.yaml",
        ];
        return files.iter().map(|f| format!("cp '{}' {f}", example.join(f).display())).collect();
    }
    if line.starts_with("#") {
        return Vec::new();
    }
    if line == "opkit cluster start --detach" {
        return vec![format!("{line} --port 0")];
    }
    if line == "make install run" {
        return vec!["set -m".into(), format!("{line} > make-run.log 2>&1 &"), "RUN_PID=$!".into(), "set +m".into()];
    }
    if line == "kubectl apply -k config/samples/" {
        // The README's reader runs this in another shell once `make install` has installed
        // the CRD; the script waits for that instead (a loaded machine is slow to get there).
        let crd = "crd/memcacheds.cache.example.com";
        return vec![
            format!("kubectl wait --for=create {crd} --timeout=600s || {{ cat make-run.log; exit 1; }}"),
            format!("kubectl wait --for=condition=Established {crd} --timeout=600s"),
            line.to_string(),
            "kubectl wait --for=create deployment/memcached-sample --timeout=600s || { cat make-run.log; exit 1; }"
                .into(),
            "kill -INT -- -$RUN_PID".into(),
            "wait $RUN_PID || true".into(),
            "RUN_PID=".into(),
        ];
    }
    if line.starts_with("make cluster-load ") {
        return vec![format!("CARGO_PROFILE=dev {line}")];
    }
    if let Some(rest) = line.strip_prefix("kubectl logs ") {
        return vec![format!("kubectl rollout status {rest} --timeout=600s"), line.to_string()];
    }
    vec![line.to_string()]
}

/// Stops the README's cluster however the test ends.
struct ClusterGuard(PathBuf);

impl Drop for ClusterGuard {
    fn drop(&mut self) {
        let _ =
            Command::new(OPKIT).args(["cluster", "stop", "--ignore-not-running", "--data-dir"]).arg(&self.0).status();
    }
}

#[test]
fn the_readme_workflow_runs_as_written() {
    let lines = readme_workflow();
    assert!(
        lines.iter().any(|l| l == "opkit cluster start --detach"),
        "the README starts no detached cluster: {lines:?}"
    );
    assert!(lines.iter().any(|l| l == "opkit cluster stop"), "the README does not stop its cluster: {lines:?}");
    let example = workspace().join("examples/memcached-operator");
    // A `make run` left in the background by a failing line is stopped with the script.
    let mut script = vec![
        r#"trap 'if [ -n "${RUN_PID:-}" ]; then kill -INT -- -$RUN_PID 2>/dev/null || true; fi' EXIT"#.to_string(),
    ];
    script.extend(lines.iter().flat_map(|l| script_lines(l, &example)));

    let tmp = tempfile::tempdir().expect("tmp");
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir bin");
    std::os::unix::fs::symlink(OPKIT, bin.join("opkit")).expect("symlink opkit");
    let _cluster = ClusterGuard(tmp.path().join("memcached-operator/.opkit/cluster"));

    let mut cmd = command("bash", tmp.path(), None);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    // `make run`'s manager takes no fixed port (the README's reader has :8080 and :8081 to
    // itself; here other suites' operators may run beside it): set by the manager's own
    // environment variables, so the commands stay as written.
    cmd.env("PATH", path)
        .env("METRICS_BIND_ADDRESS", "0")
        .env("HEALTH_PROBE_BIND_ADDRESS", "0")
        .env_remove("KUBECONFIG")
        .args(["-euxo", "pipefail", "-c", &script.join("\n")]);
    let out = cmd.output().expect("run the README's workflow");
    assert!(
        out.status.success(),
        "the README's workflow failed ({}); script:\n{}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        script.join("\n"),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let project = tmp.path().join("memcached-operator");
    assert!(project.join("dist/install.yaml").is_file(), "make build-installer wrote no dist/install.yaml");
    olm_bundles_block(&project);
    let status = Command::new(OPKIT)
        .args(["cluster", "status", "--data-dir"])
        .arg(project.join(".opkit/cluster"))
        .output()
        .expect("cluster status");
    assert_eq!(status.status.code(), Some(3), "the cluster still runs after opkit cluster stop");
}

/// The README's "OLM bundles" block in the tutorial's `project`: every line must succeed,
/// `bundle validate` with OperatorHub's checks and scorecard's six tests included.
fn olm_bundles_block(project: &Path) {
    let lines = readme_block("## OLM bundles");
    assert!(lines.iter().any(|l| l.starts_with("make bundle ")), "the OLM block makes no bundle: {lines:?}");
    std::fs::write(project.join("logo.svg"), r#"<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16"/>"#)
        .expect("write logo.svg");
    let bin = project.join("../bin");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut cmd = command("bash", project, None);
    cmd.env("PATH", path).args(["-euxo", "pipefail", "-c", &lines.join("\n")]);
    let out = cmd.output().expect("run the README's OLM block");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the README's OLM block failed ({}):\n{}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        lines.join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("State: fail"), "a scorecard test failed:\n{stdout}");
}
