//! Public charts from other repositories (`tests/fixtures/charts/`, sources and licences in
//! `tests/fixtures/SOURCES.tsv`) rendered for every case of `tests/fixtures/CASES.tsv` and
//! compared byte for byte with what the real `helm template` (v3.17.1) printed for the same
//! command (`tests/fixtures/expected/`). A case whose expected file ends in `.error` holds
//! helm's standard error: the render must fail with that message.

use std::path::{Path, PathBuf};

use opkit_helm::TemplateOptions;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// One line of CASES.tsv: the chart, its expected output and the `helm template` command.
struct Case {
    label: String,
    expected: PathBuf,
    chart: PathBuf,
    options: TemplateOptions,
}

/// Parses `helm template NAME CHART [flags]` as helm's flags mean it; paths are relative
/// to the fixtures directory, where the expected outputs were made.
fn parse_case(line: &str) -> Case {
    let cols: Vec<&str> = line.split('\t').collect();
    assert_eq!(cols.len(), 3, "CASES.tsv line {line:?}: chart, expected, command");
    let words: Vec<&str> = cols[2].split_whitespace().collect();
    assert_eq!(&words[..2], ["helm", "template"], "{line}");
    let mut options = TemplateOptions::default();
    let mut positional = Vec::new();
    let mut args = words[2..].iter();
    while let Some(arg) = args.next() {
        let mut value = || args.next().map(|v| v.to_string()).unwrap_or_default();
        match *arg {
            "--namespace" | "-n" => options.namespace = value(),
            "--kube-version" => options.kube_version = Some(value()),
            "--api-versions" | "-a" => options.api_versions.push(value()),
            "-f" | "--values" => {
                let path = fixtures().join(value());
                options.values_files.push(std::fs::read_to_string(&path).expect("values file"));
            }
            "--set" => options.set.push(value()),
            "--set-string" => options.set_string.push(value()),
            "--include-crds" => options.include_crds = true,
            "--skip-tests" => options.skip_tests = true,
            flag if flag.starts_with('-') => panic!("{line}: flag {flag} is not handled by this test"),
            other => positional.push(other.to_string()),
        }
    }
    let [release, chart] = positional.as_slice() else { panic!("{line}: expected NAME and CHART") };
    options.release_name = release.clone();
    Case { label: cols[1].to_string(), expected: fixtures().join(cols[1]), chart: fixtures().join(chart), options }
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(fixtures().join("CASES.tsv")).expect("CASES.tsv");
    text.lines().skip(1).filter(|l| !l.trim().is_empty()).map(parse_case).collect()
}

/// What helm printed: its output, or its error without the hint it adds after render errors.
fn expected(case: &Case) -> String {
    let text = std::fs::read_to_string(&case.expected).expect("expected output");
    match text.strip_suffix("\n\nUse --debug flag to render out invalid YAML\n") {
        Some(error) => format!("{error}\n"),
        None => text,
    }
}

/// The first differing line (1-based) of two outputs, with both lines.
fn first_difference(got: &str, want: &str) -> Option<String> {
    if got == want {
        return None;
    }
    let (g, w): (Vec<&str>, Vec<&str>) = (got.split('\n').collect(), want.split('\n').collect());
    let i = (0..g.len().max(w.len())).find(|&i| g.get(i) != w.get(i)).unwrap_or(0);
    Some(format!("line {}: got {:?}, want {:?}", i + 1, g.get(i), w.get(i)))
}

#[test]
fn every_public_chart_case_renders_as_helm_renders_it() {
    let cases = cases();
    assert!(cases.len() >= 20, "{} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let got = match opkit_helm::template(&case.chart, &case.options) {
            Ok(out) => out,
            Err(e) => format!("Error: {e}\n"),
        };
        if case.label.ends_with(".error") != got.starts_with("Error: ") {
            failures.push(format!("{}: {}", case.label, got.lines().next().unwrap_or_default()));
        } else if let Some(diff) = first_difference(&got, &expected(case)) {
            failures.push(format!("{}: {diff}", case.label));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from helm:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn at_least_two_cases_expect_helms_error() {
    let errors = cases().iter().filter(|c| c.label.ends_with(".error")).count();
    assert!(errors >= 2, "{errors} error cases");
}
