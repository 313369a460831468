//! The expectations file of the chart conformance run (`tools/helm/charts-expected.tsv`):
//! one line per chart with its expected outcome, the helm flags it needs (for a chart
//! whose own values validation rejects its defaults) and why. Lines are tab-separated;
//! `#` starts a comment.

use std::collections::BTreeMap;

/// What a chart is expected to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expected {
    /// Every step passes.
    Pass,
    /// A known gap makes some step fail.
    Fail,
}

/// One chart's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    /// The expected outcome.
    pub expected: Expected,
    /// Extra flags for `helm install` (e.g. `--set policy=upsert-only`).
    pub flags: Vec<String>,
    /// Why the flags or the failure.
    pub reason: String,
}

/// A line that could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}: {problem}")]
pub struct ExpectationError {
    /// The 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub problem: String,
}

/// Reads an expectations file: `chart<TAB>pass|fail[<TAB>flags[<TAB>reason]]`.
pub fn parse(text: &str) -> Result<BTreeMap<String, Expectation>, ExpectationError> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        let error = |problem: String| ExpectationError { line: line_no, problem };
        let chart = cols[0].trim();
        let expected = match cols.get(1).map(|c| c.trim()) {
            Some("pass") => Expected::Pass,
            Some("fail") => Expected::Fail,
            other => return Err(error(format!("the outcome must be pass or fail, not {other:?}"))),
        };
        let flags = cols.get(2).map(|f| f.split_whitespace().map(String::from).collect()).unwrap_or_default();
        let reason = cols.get(3).map(|r| r.trim().to_string()).unwrap_or_default();
        if expected == Expected::Fail && reason.is_empty() {
            return Err(error(format!("{chart} is expected to fail but no reason is given")));
        }
        if out.insert(chart.to_string(), Expectation { expected, flags, reason }).is_some() {
            return Err(error(format!("{chart} is listed twice")));
        }
    }
    Ok(out)
}

/// How an outcome compares with the expectation (a chart not listed must pass).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Passed, as expected.
    Passed,
    /// Failed, as expected (a known gap).
    KnownGap,
    /// Passed although expected to fail: the expectations file is out of date.
    NowPasses,
    /// Failed although expected to pass: a regression.
    Regression,
}

/// The verdict for a chart that `passed` (or not), given its expectation.
pub fn verdict(passed: bool, expectation: Option<&Expectation>) -> Verdict {
    let expected = expectation.map_or(Expected::Pass, |e| e.expected);
    match (passed, expected) {
        (true, Expected::Pass) => Verdict::Passed,
        (true, Expected::Fail) => Verdict::NowPasses,
        (false, Expected::Fail) => Verdict::KnownGap,
        (false, Expected::Pass) => Verdict::Regression,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# chart\toutcome\tflags\treason\n\
        hello\tpass\n\
        dns\tpass\t--set policy=upsert-only\tits schema rejects the default policy: null\n\
        \n\
        metrics\tfail\t\tAPIService is not served\n";

    #[test]
    fn reads_outcomes_flags_and_reasons() {
        let e = parse(FILE).expect("valid");
        assert_eq!(e.len(), 3);
        assert_eq!(e["hello"], Expectation { expected: Expected::Pass, flags: vec![], reason: String::new() });
        assert_eq!(e["dns"].flags, ["--set", "policy=upsert-only"]);
        assert_eq!((e["metrics"].expected, e["metrics"].reason.as_str()), (Expected::Fail, "APIService is not served"));
    }

    #[test]
    fn bad_lines_are_reported_with_their_number() {
        assert_eq!(
            parse("a\tmaybe").map_err(|e| e.to_string()),
            Err("line 1: the outcome must be pass or fail, not Some(\"maybe\")".into())
        );
        assert_eq!(parse("a\tpass\n\na\tpass").map_err(|e| e.line), Err(3));
        assert!(parse("a\tfail").is_err(), "a failure needs a reason");
    }

    #[test]
    fn only_a_worse_outcome_is_a_regression() {
        let e = parse(FILE).expect("valid");
        assert_eq!(verdict(true, e.get("hello")), Verdict::Passed);
        assert_eq!(verdict(false, e.get("hello")), Verdict::Regression);
        assert_eq!(verdict(false, e.get("metrics")), Verdict::KnownGap);
        assert_eq!(verdict(true, e.get("metrics")), Verdict::NowPasses);
        assert_eq!(verdict(false, None), Verdict::Regression, "an unlisted chart must pass");
    }
}
