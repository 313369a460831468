//! `opkit-bench helm-template`: the chart corpus rendered by `opkit-helm` and compared
//! byte for byte with what the real `helm template` printed (`charts-expected/CASES.tsv`),
//! with the render time of each case next to the real helm's when a helm binary is given.
//! Cases marked nondeterministic (random values, generated certificates) are skipped.
//! Failing cases are reported, not fatal: only a usage error fails the run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde::Serialize;

/// What to run.
#[derive(Debug, Clone)]
pub struct HelmTemplateOptions {
    /// The corpus directory holding `charts/`, `charts-values/` and `charts-expected/`.
    pub corpus: PathBuf,
    /// A real helm binary to time side by side (none: opkit-helm alone).
    pub helm: Option<PathBuf>,
    /// Renders per case for the timing (the median is reported).
    pub repeats: usize,
    /// Only cases whose chart is named here (empty: all).
    pub only: Vec<String>,
}

/// Why the run could not start.
#[derive(Debug, thiserror::Error)]
pub enum HelmTemplateError {
    /// The corpus is missing or its case list is malformed.
    #[error("{0}")]
    Corpus(String),
}

/// The outcome of one case.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Byte-identical to helm's output.
    Pass,
    /// Different: the first differing line (1-based) and both sides of it.
    Fail {
        /// The first line that differs.
        line: usize,
        /// opkit-helm's line there.
        got: String,
        /// helm's line there.
        want: String,
    },
    /// Marked nondeterministic in CASES.tsv.
    Skipped,
}

/// One case's result.
#[derive(Debug, Clone, Serialize)]
pub struct CaseReport {
    /// `chart/expected-file`.
    pub case: String,
    /// Pass, fail or skipped.
    pub outcome: Outcome,
    /// Median render time of opkit-helm, in milliseconds.
    pub opkit_ms: Option<f64>,
    /// Median time of `helm template` (a process per run), in milliseconds.
    pub helm_ms: Option<f64>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct HelmTemplateReport {
    /// Every case, in CASES.tsv order.
    pub cases: Vec<CaseReport>,
    /// Deterministic cases that pass.
    pub passed: usize,
    /// Deterministic cases.
    pub total: usize,
}

/// One line of CASES.tsv, with its `helm template` command parsed.
struct Case {
    name: String,
    expected: String,
    deterministic: bool,
    chart: String,
    options: opkit_helm::TemplateOptions,
    value_paths: Vec<String>,
    helm_args: Vec<String>,
}

fn parse_cases(corpus: &Path) -> Result<Vec<Case>, HelmTemplateError> {
    let path = corpus.join("charts-expected/CASES.tsv");
    let text =
        std::fs::read_to_string(&path).map_err(|e| HelmTemplateError::Corpus(format!("{}: {e}", path.display())))?;
    let mut cases = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 7 {
            return Err(HelmTemplateError::Corpus(format!("{}:{}: expected 7 columns", path.display(), n + 1)));
        }
        let words: Vec<&str> =
            cols[6].split_whitespace().take_while(|w| !w.starts_with('>') && !w.starts_with("2>")).collect();
        let start = words.iter().position(|w| *w == "template").ok_or_else(|| {
            HelmTemplateError::Corpus(format!("{}:{}: the command is not `helm template`", path.display(), n + 1))
        })?;
        let args: Vec<String> = words[start + 1..].iter().map(|w| w.to_string()).collect();
        let mut options = opkit_helm::TemplateOptions::default();
        let mut positional = Vec::new();
        let mut value_paths = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let next = args.get(i + 1).cloned().unwrap_or_default();
            match args[i].as_str() {
                "--namespace" | "-n" => {
                    options.namespace = next;
                    i += 1;
                }
                "--kube-version" => {
                    options.kube_version = Some(next);
                    i += 1;
                }
                "--api-versions" | "-a" => {
                    options.api_versions.extend(next.split(',').map(String::from));
                    i += 1;
                }
                "-f" | "--values" => {
                    value_paths.push(next);
                    i += 1;
                }
                "--set" => {
                    options.set.push(next);
                    i += 1;
                }
                "--set-string" => {
                    options.set_string.push(next);
                    i += 1;
                }
                "--include-crds" => options.include_crds = true,
                "--skip-tests" => options.skip_tests = true,
                other => positional.push(other.to_string()),
            }
            i += 1;
        }
        let [release, chart] = positional.as_slice() else {
            return Err(HelmTemplateError::Corpus(format!("{}:{}: expected NAME and CHART", path.display(), n + 1)));
        };
        options.release_name = release.clone();
        cases.push(Case {
            name: cols[0].to_string(),
            expected: cols[2].to_string(),
            deterministic: cols[4] == "yes",
            chart: chart.clone(),
            options,
            value_paths,
            helm_args: args,
        });
    }
    Ok(cases)
}

/// The first differing line (1-based) of two outputs, with both lines.
fn first_difference(got: &str, want: &str) -> Option<(usize, String, String)> {
    if got == want {
        return None;
    }
    let (g, w): (Vec<&str>, Vec<&str>) = (got.split('\n').collect(), want.split('\n').collect());
    let i = (0..g.len().max(w.len())).find(|&i| g.get(i) != w.get(i)).unwrap_or(0);
    Some((
        i + 1,
        g.get(i).unwrap_or(&"<end of output>").to_string(),
        w.get(i).unwrap_or(&"<end of output>").to_string(),
    ))
}

fn median_ms(mut samples: Vec<Duration>) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    samples.sort();
    Some(samples[samples.len() / 2].as_secs_f64() * 1000.0)
}

/// Renders one case with opkit-helm: its output, or helm's error text (`Error: ...`).
fn render(case: &Case, corpus: &Path) -> Result<String, HelmTemplateError> {
    let mut options = case.options.clone();
    for p in &case.value_paths {
        let path = corpus.join(p);
        options.values_files.push(
            std::fs::read_to_string(&path)
                .map_err(|e| HelmTemplateError::Corpus(format!("{}: {e}", path.display())))?,
        );
    }
    Ok(match opkit_helm::template(&corpus.join(&case.chart), &options) {
        Ok(out) => out,
        Err(e) => format!("Error: {e}\n"),
    })
}

/// Runs every case.
pub fn run(
    options: &HelmTemplateOptions,
    mut progress: impl FnMut(&str),
) -> Result<HelmTemplateReport, HelmTemplateError> {
    if !options.corpus.join("charts").is_dir() {
        return Err(HelmTemplateError::Corpus(format!("{} has no charts/ directory", options.corpus.display())));
    }
    let cases = parse_cases(&options.corpus)?;
    let mut reports = Vec::new();
    let (mut passed, mut total) = (0, 0);
    for case in &cases {
        if !options.only.is_empty() && !options.only.contains(&case.name) {
            continue;
        }
        let label = case.expected.trim_start_matches("charts-expected/").to_string();
        if !case.deterministic {
            reports.push(CaseReport { case: label, outcome: Outcome::Skipped, opkit_ms: None, helm_ms: None });
            continue;
        }
        progress(&label);
        total += 1;
        let expected_path = options.corpus.join(&case.expected);
        let want = std::fs::read_to_string(&expected_path)
            .map_err(|e| HelmTemplateError::Corpus(format!("{}: {e}", expected_path.display())))?;
        let mut samples = Vec::new();
        let mut got = String::new();
        for _ in 0..options.repeats.max(1) {
            let start = Instant::now();
            got = render(case, &options.corpus)?;
            samples.push(start.elapsed());
        }
        let outcome = match first_difference(&got, &want) {
            None => {
                passed += 1;
                Outcome::Pass
            }
            Some((line, got, want)) => Outcome::Fail { line, got, want },
        };
        let helm_ms = options.helm.as_ref().and_then(|helm| {
            let mut samples = Vec::new();
            for _ in 0..options.repeats.max(1) {
                let start = Instant::now();
                let status = Command::new(helm)
                    .arg("template")
                    .args(&case.helm_args)
                    .current_dir(&options.corpus)
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status();
                status.ok()?;
                samples.push(start.elapsed());
            }
            median_ms(samples)
        });
        reports.push(CaseReport { case: label, outcome, opkit_ms: median_ms(samples), helm_ms });
    }
    Ok(HelmTemplateReport { cases: reports, passed, total })
}

fn shorten(s: &str) -> String {
    let s: String = s.chars().take(60).collect();
    format!("{s:?}")
}

/// The report as a table, then the pass rate.
pub fn render_text(report: &HelmTemplateReport) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<58} {:<6} {:>10} {:>10} {:>8}  first difference\n",
        "case", "result", "opkit ms", "helm ms", "speedup"
    ));
    for c in &report.cases {
        let (result, diff) = match &c.outcome {
            Outcome::Pass => ("pass", String::new()),
            Outcome::Skipped => ("skip", "nondeterministic".to_string()),
            Outcome::Fail { line, got, want } => {
                ("FAIL", format!("line {line}: got {} want {}", shorten(got), shorten(want)))
            }
        };
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        let speedup = match (c.opkit_ms, c.helm_ms) {
            (Some(o), Some(h)) if o > 0.0 => format!("{:.1}x", h / o),
            _ => "-".into(),
        };
        out.push_str(&format!(
            "{:<58} {:<6} {:>10} {:>10} {:>8}  {diff}\n",
            c.case,
            result,
            ms(c.opkit_ms),
            ms(c.helm_ms),
            speedup
        ));
    }
    let rate = if report.total == 0 { 0.0 } else { report.passed as f64 * 100.0 / report.total as f64 };
    out.push_str(&format!(
        "\n{} of {} deterministic cases byte-identical to helm template ({rate:.0}%); {} skipped as nondeterministic\n",
        report.passed,
        report.total,
        report.cases.iter().filter(|c| c.outcome == Outcome::Skipped).count()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A corpus of one fixture chart with three cases: one whose expected output is
    /// helm's, one whose expected output was altered, one marked nondeterministic.
    fn corpus() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../opkit-helm/tests");
        let chart_src = fixtures.join("charts/gotemplate");
        let chart_dst = dir.path().join("charts/gotemplate/templates");
        std::fs::create_dir_all(&chart_dst).expect("chart dir");
        for name in ["Chart.yaml", "values.yaml"] {
            std::fs::copy(chart_src.join(name), dir.path().join("charts/gotemplate").join(name)).expect("copy");
        }
        for entry in std::fs::read_dir(chart_src.join("templates")).expect("templates") {
            let entry = entry.expect("entry");
            std::fs::copy(entry.path(), chart_dst.join(entry.file_name())).expect("copy template");
        }
        let expected = std::fs::read_to_string(fixtures.join("expected/gotemplate.yaml")).expect("expected");
        std::fs::create_dir_all(dir.path().join("charts-expected/gotemplate")).expect("expected dir");
        std::fs::write(dir.path().join("charts-expected/gotemplate/default.yaml"), &expected).expect("write");
        std::fs::write(
            dir.path().join("charts-expected/gotemplate/altered.yaml"),
            expected.replacen("int: \"3\"", "int: \"4\"", 1),
        )
        .expect("write");
        let command = "bin/helm template rel ./charts/gotemplate --namespace ns1 --kube-version 1.33.0";
        let cases = format!(
            "name\tvalues_file\texpected_file\tstatus\tdeterministic\tnondeterminism_sources\tcommand\n\
             gotemplate\t-\tcharts-expected/gotemplate/default.yaml\tok\tyes\t-\t{command} > x\n\
             gotemplate\t-\tcharts-expected/gotemplate/altered.yaml\tok\tyes\t-\t{command} > x\n\
             gotemplate\t-\tcharts-expected/gotemplate/random.yaml\tok\tno\trandAlpha\t{command} > x\n"
        );
        std::fs::write(dir.path().join("charts-expected/CASES.tsv"), cases).expect("CASES.tsv");
        dir
    }

    #[test]
    fn compares_each_case_and_reports_the_first_difference() {
        let corpus = corpus();
        let options =
            HelmTemplateOptions { corpus: corpus.path().to_path_buf(), helm: None, repeats: 1, only: Vec::new() };
        let report = run(&options, |_| {}).expect("runs");
        assert_eq!((report.passed, report.total), (1, 2));
        assert_eq!(report.cases[0].outcome, Outcome::Pass);
        let Outcome::Fail { line, got, want } = &report.cases[1].outcome else { panic!("{:?}", report.cases[1]) };
        assert_eq!((got.as_str(), want.as_str()), ("  int: \"3\"", "  int: \"4\""), "line {line}");
        assert_eq!(report.cases[2].outcome, Outcome::Skipped);
        let text = render_text(&report);
        assert!(text.contains("1 of 2 deterministic cases byte-identical to helm template (50%); 1 skipped"), "{text}");
    }

    #[test]
    fn a_missing_corpus_is_an_error() {
        let options = HelmTemplateOptions { corpus: "/nonexistent".into(), helm: None, repeats: 1, only: Vec::new() };
        assert!(matches!(run(&options, |_| {}), Err(HelmTemplateError::Corpus(_))));
    }
}
