//! `opkit helm template` as a user runs it: the `opkit` binary renders opkit-helm's fixture
//! charts and prints exactly what the real helm printed for the same flags (kept in
//! `crates/opkit-helm/tests/expected/`); a bad chart path fails with a message.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../opkit-helm/tests")
}

fn opkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opkit")).args(args).output().expect("opkit runs")
}

fn expected(name: &str) -> String {
    std::fs::read_to_string(fixtures().join("expected").join(name)).expect("expected output")
}

fn chart(name: &str) -> String {
    fixtures().join("charts").join(name).display().to_string()
}

#[test]
fn prints_what_helm_template_prints() {
    let out =
        opkit(&["helm", "template", "rel", &chart("gotemplate"), "--namespace", "ns1", "--kube-version", "1.33.0"]);
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected("gotemplate.yaml"));
}

#[test]
fn values_files_set_flags_and_api_versions_reach_the_chart() {
    let override_file = chart("parent-override.yaml");
    let out = opkit(&[
        "helm",
        "template",
        "rel",
        &chart("parent"),
        "-n",
        "ns1",
        "--kube-version",
        "1.33.0",
        "-f",
        &override_file,
        "--set",
        "second.replicas=7,fromChild.kept=null",
        "--set-string",
        "child.image=007",
    ]);
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected("parent-override.yaml"));

    let out = opkit(&[
        "helm",
        "template",
        "rel",
        &chart("sprig"),
        "-n",
        "ns1",
        "--kube-version",
        "1.33.0",
        "--api-versions",
        "monitoring.coreos.com/v1",
    ]);
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected("sprig.yaml"));
}

#[test]
fn json_output_carries_the_manifest() {
    let out = opkit(&[
        "-o",
        "json",
        "helm",
        "template",
        "rel",
        &chart("gotemplate"),
        "-n",
        "ns1",
        "--kube-version",
        "1.33.0",
    ]);
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(json["manifest"].as_str(), Some(expected("gotemplate.yaml").as_str()));
}

#[test]
fn a_failing_chart_or_a_missing_path_is_reported() {
    let out = opkit(&["helm", "template", "rel", &chart("errors"), "--set", "failCall=true", "-n", "ns1"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("execution error at (errors/templates/cm.yaml:14:8): stopped on purpose"), "{stderr}");

    let out = opkit(&["helm", "template", "rel", "/nonexistent/chart"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/nonexistent/chart"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let missing_values = chart("no-such-values.yaml");
    let out = opkit(&["helm", "template", "rel", &chart("gotemplate"), "-f", &missing_values]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("reading values file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
