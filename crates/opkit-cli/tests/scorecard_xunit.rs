//! `opkit scorecard -o xunit`: operator-sdk's xunit report, parsed as XML and checked — a
//! passing bundle (every test case clean, one suite per scorecard suite) and a bundle
//! whose CSV lost its owned CRD's resources (a failure with the test's message and
//! log, exit 1). Also: `-o xunit` is refused by other commands, and the global
//! `--verbose` turns on opkit's debug lines (shown here on scorecard's).

use crate::olm_support::{copy_dir, opkit};

use std::path::{Path, PathBuf};

fn fixture_bundle() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../opkit-olm-bundle/tests/fixtures/memcached-0.0.1")
}

/// (suite name, tests, failures, [(case name, failure message if any)]) of the report.
type Suite = (String, usize, usize, Vec<(String, Option<String>)>);

fn suites(xml: &str) -> Vec<Suite> {
    let doc = roxmltree::Document::parse(xml).unwrap_or_else(|e| panic!("not XML ({e}):\n{xml}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(root.attribute("name"), Some("scorecard"));
    let number = |n: roxmltree::Node<'_, '_>, a: &str| n.attribute(a).and_then(|v| v.parse().ok()).expect("count");
    root.children()
        .filter(|n| n.has_tag_name("testsuite"))
        .map(|s| {
            let cases = s
                .children()
                .filter(|n| n.has_tag_name("testcase"))
                .map(|c| {
                    let failure = c.children().find(|n| n.has_tag_name("failure"));
                    (
                        c.attribute("name").expect("name").to_string(),
                        failure.map(|f| f.attribute("message").expect("message").to_string()),
                    )
                })
                .collect();
            (s.attribute("name").expect("name").to_string(), number(s, "tests"), number(s, "failures"), cases)
        })
        .collect()
}

#[test]
fn xunit_of_a_passing_bundle_has_a_clean_case_per_test_in_a_suite_per_suite() {
    let out = opkit(&fixture_bundle(), &["scorecard", "-o", "xunit", "."]);
    let xml = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{xml}\n{}", String::from_utf8_lossy(&out.stderr));
    let suites = suites(&xml);
    let names: Vec<_> = suites.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(names, ["basic", "olm"]);
    assert_eq!((suites[0].1, suites[0].2), (1, 0));
    assert_eq!(suites[0].3, [("basic-check-spec".to_string(), None)]);
    assert_eq!((suites[1].1, suites[1].2), (5, 0));
    assert!(suites[1].3.iter().all(|(_, failure)| failure.is_none()), "{xml}");
}

#[test]
fn xunit_of_a_failing_bundle_carries_the_failures_and_exits_1() {
    let tmp = tempfile::tempdir().expect("tempdir");
    copy_dir(&fixture_bundle(), tmp.path());
    let csv = tmp.path().join("manifests/memcached-operator.clusterserviceversion.yaml");
    let text = std::fs::read_to_string(&csv).expect("csv");
    // The owned CRD's `resources` (4 lines) go.
    let mut kept = Vec::new();
    let mut skip = 0;
    for line in text.lines() {
        if line == "      resources:" {
            skip = 4;
        }
        if skip > 0 {
            skip -= 1;
            continue;
        }
        kept.push(line);
    }
    assert_eq!(kept.len() + 4, text.lines().count(), "the fixture's CSV changed");
    std::fs::write(&csv, kept.join("\n")).expect("write csv");

    let out = opkit(tmp.path(), &["scorecard", "-o", "xunit", "--selector", "suite=olm", "."]);
    let xml = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{xml}\n{}", String::from_utf8_lossy(&out.stderr));
    let suites = suites(&xml);
    assert_eq!(suites.len(), 1, "{xml}");
    let (name, tests, failures, cases) = &suites[0];
    assert_eq!((name.as_str(), *tests, *failures), ("olm", 5, 1), "{xml}");
    let failure = |test: &str| cases.iter().find(|c| c.0 == test).and_then(|c| c.1.clone());
    let resources = failure("olm-crds-have-resources").expect("olm-crds-have-resources fails");
    assert!(resources.contains("Owned CRDs do not have resources specified"), "{resources}");
    for clean in ["olm-bundle-validation", "olm-crds-have-validation", "olm-spec-descriptors", "olm-status-descriptors"]
    {
        assert_eq!(failure(clean), None, "{xml}");
    }
}

#[test]
fn other_commands_refuse_xunit() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = opkit(tmp.path(), &["-o", "xunit", "version"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("scorecard"));
}

/// `opkit [--verbose] scorecard` with the given log variables (and no others); its stderr.
fn scorecard_stderr(verbose: bool, env: &[(&str, &str)]) -> String {
    let mut cmd = std::process::Command::new(crate::olm_support::opkit_bin());
    cmd.env_remove("OPKIT_LOG").env_remove("RUST_LOG").envs(env.iter().copied()).current_dir(fixture_bundle());
    if verbose {
        cmd.arg("--verbose");
    }
    let out = cmd.args(["scorecard", "."]).output().expect("run opkit");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn verbose_prints_opkits_debug_lines_unless_the_log_variables_say_otherwise() {
    let debug_line = "ran a scorecard test";
    let verbose = scorecard_stderr(true, &[]);
    assert!(verbose.contains("DEBUG") && verbose.contains(debug_line), "{verbose}");
    assert!(
        verbose.contains("test=\"olm-spec-descriptors\"") || verbose.contains("test=olm-spec-descriptors"),
        "{verbose}"
    );
    let quiet = scorecard_stderr(false, &[]);
    assert!(!quiet.contains(debug_line), "{quiet}");
    // OPKIT_LOG, then RUST_LOG, win over --verbose.
    for var in ["OPKIT_LOG", "RUST_LOG"] {
        let told = scorecard_stderr(true, &[(var, "warn")]);
        assert!(!told.contains(debug_line), "{var}=warn: {told}");
    }
    // ... and without --verbose they still turn debug on.
    let asked = scorecard_stderr(false, &[("OPKIT_LOG", "opkit_cli=debug")]);
    assert!(asked.contains(debug_line), "{asked}");
}
