//! `opkit-bench olm-validate`: `opkit bundle validate` over every bundle of the OLM corpus
//! (`../shared/corpus/olm/<operator>/<version>/`), required validators and the
//! `operatorframework` suite, compared with what operator-sdk says of each bundle where
//! that is established (`tools/olm/validate-expected.tsv`: the verdict and the errors'
//! count, worked out from operator-framework/api's validators).

use std::path::{Path, PathBuf};
use std::time::Instant;

use opkit_olm_bundle::Bundle;
use opkit_olm_bundle::validate::{Selector, ValidateOptions, validate};
use serde::Serialize;

/// What the run is asked.
#[derive(Debug, Clone)]
pub struct OlmValidateOptions {
    /// The corpus directory.
    pub corpus: PathBuf,
    /// The expectations file, if any.
    pub expect: Option<PathBuf>,
}

/// One bundle's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct BundleOutcome {
    /// `<operator>/<version>`.
    pub bundle: String,
    /// Whether the required validators passed.
    pub passed: bool,
    /// Errors of the required validators.
    pub errors: usize,
    /// Warnings of the required validators.
    pub warnings: usize,
    /// Errors of the `operatorframework` suite on top.
    pub suite_errors: usize,
    /// Warnings of the `operatorframework` suite on top.
    pub suite_warnings: usize,
    /// The distinct error messages (required validators), with the bundle's name replaced.
    pub causes: Vec<String>,
    /// What operator-sdk says, when established: (passed, errors).
    pub expected: Option<(bool, usize)>,
    /// Whether the outcome matches the expectation (true when there is none).
    pub matches: bool,
    /// Load and validation time, in ms.
    pub millis: f64,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct OlmValidateReport {
    /// Every bundle.
    pub bundles: Vec<BundleOutcome>,
    /// Bundles the required validators pass.
    pub passed: usize,
    /// Bundles compared with an expectation.
    pub compared: usize,
    /// Bundles whose outcome differs from the expectation.
    pub mismatches: usize,
}

/// Why the run could not happen.
#[derive(Debug, thiserror::Error)]
pub enum OlmValidateError {
    /// The corpus or the expectations could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

fn expectations(path: &Path) -> Result<Vec<(String, bool, usize)>, OlmValidateError> {
    let text = std::fs::read_to_string(path).map_err(|source| OlmValidateError::Io { path: path.into(), source })?;
    Ok(text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            Some((cols.first()?.to_string(), *cols.get(1)? == "pass", cols.get(2)?.parse().ok()?))
        })
        .collect())
}

fn bundle_dirs(corpus: &Path) -> Result<Vec<PathBuf>, OlmValidateError> {
    let read = |p: &Path| std::fs::read_dir(p).map_err(|source| OlmValidateError::Io { path: p.into(), source });
    let mut dirs = Vec::new();
    for operator in read(corpus)?.flatten() {
        if !operator.path().is_dir() {
            continue;
        }
        for version in read(&operator.path())?.flatten() {
            if version.path().join("manifests").is_dir() {
                dirs.push(version.path());
            }
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// Validates every bundle of the corpus.
pub fn run(options: &OlmValidateOptions) -> Result<OlmValidateReport, OlmValidateError> {
    let expected = match &options.expect {
        Some(path) => expectations(path)?,
        None => Vec::new(),
    };
    let suite = Selector::parse("suite=operatorframework").ok();
    let mut bundles = Vec::new();
    for dir in bundle_dirs(&options.corpus)? {
        let name = dir.strip_prefix(&options.corpus).unwrap_or(&dir).display().to_string();
        let started = Instant::now();
        let (passed, errors, warnings, suite_errors, suite_warnings, causes) = match Bundle::load(&dir) {
            Ok(bundle) => {
                let required = validate(&bundle, &ValidateOptions::default());
                let with_suite =
                    validate(&bundle, &ValidateOptions { select_optional: suite.clone(), ..Default::default() });
                let csv = bundle.csv.name().to_string();
                let mut causes: Vec<String> = required
                    .errors()
                    .map(|f| f.detail.replace(&csv, "<csv>").split(". ").next().unwrap_or_default().to_string())
                    .collect();
                causes.sort();
                causes.dedup();
                let (e, w) = (required.errors().count(), required.warnings().count());
                (required.passed(), e, w, with_suite.errors().count() - e, with_suite.warnings().count() - w, causes)
            }
            Err(e) => (false, 1, 0, 0, 0, vec![format!("load: {e}")]),
        };
        let millis = started.elapsed().as_secs_f64() * 1000.0;
        let expectation = expected.iter().find(|(b, _, _)| *b == name).map(|(_, p, e)| (*p, *e));
        let matches = expectation.is_none_or(|(p, e)| p == passed && e == errors);
        bundles.push(BundleOutcome {
            bundle: name,
            passed,
            errors,
            warnings,
            suite_errors,
            suite_warnings,
            causes,
            expected: expectation,
            matches,
            millis,
        });
    }
    Ok(OlmValidateReport {
        passed: bundles.iter().filter(|b| b.passed).count(),
        compared: bundles.iter().filter(|b| b.expected.is_some()).count(),
        mismatches: bundles.iter().filter(|b| !b.matches).count(),
        bundles,
    })
}

/// The report as a table.
pub fn render_text(report: &OlmValidateReport) -> String {
    let mut out = format!(
        "{:<40} {:<6} {:>6} {:>8} {:>12} {:>14} {:>9} {:>8}\n",
        "BUNDLE", "VALID", "ERRORS", "WARNINGS", "SUITE-ERRORS", "SUITE-WARNINGS", "EXPECTED", "MS"
    );
    for b in &report.bundles {
        let expected = match b.expected {
            Some((p, e)) if b.matches => format!("ok ({}{e})", if p { "pass," } else { "fail," }),
            Some(_) => "MISMATCH".to_string(),
            None => "-".to_string(),
        };
        out.push_str(&format!(
            "{:<40} {:<6} {:>6} {:>8} {:>12} {:>14} {:>9} {:>8.1}\n",
            b.bundle,
            if b.passed { "yes" } else { "no" },
            b.errors,
            b.warnings,
            b.suite_errors,
            b.suite_warnings,
            expected,
            b.millis
        ));
        for cause in &b.causes {
            out.push_str(&format!("    {cause}\n"));
        }
    }
    out.push_str(&format!(
        "\n{} of {} bundles pass the required validators; {} compared with operator-sdk's verdict, {} mismatch(es)\n",
        report.passed,
        report.bundles.len(),
        report.compared,
        report.mismatches
    ));
    out
}
