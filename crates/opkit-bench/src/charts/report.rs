//! The chart conformance report: per chart, each step's outcome, the time taken, the first
//! failure's cause and the verdict against the expectations; rendered as a table for
//! people, serialised for `-o json`.

use std::fmt::Write as _;

use serde::Serialize;

use super::expect::Verdict;

/// The outcome of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    /// It succeeded.
    Ok,
    /// It failed (the chart's `failure` says why).
    Failed,
    /// It was not run because an earlier step failed.
    Skipped,
    /// It does not apply (a chart without test hooks).
    None,
}

impl Step {
    fn mark(self) -> &'static str {
        match self {
            Step::Ok => "ok",
            Step::Failed => "FAIL",
            Step::Skipped => "-",
            Step::None => "none",
        }
    }
}

/// What happened to one chart.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChartResult {
    /// The chart's directory name (also its release name).
    pub chart: String,
    /// `helm install` created the release.
    pub install: Step,
    /// `--wait` saw every object ready.
    pub ready: Step,
    /// `helm upgrade --reuse-values --wait`.
    pub upgrade: Step,
    /// `helm test`, where the chart has test hooks.
    pub test: Step,
    /// `helm uninstall --wait` removed everything the release made.
    pub uninstall_clean: Step,
    /// Seconds for all the steps.
    pub seconds: f64,
    /// The first failure's cause.
    pub failure: Option<String>,
    /// Against the expectations file.
    pub verdict: Verdict,
    /// The expectations file's reason, for a known gap or the flags a chart needs.
    pub expectation: Option<String>,
}

impl ChartResult {
    /// Whether every step that applies succeeded.
    pub fn passed(&self) -> bool {
        [self.install, self.ready, self.upgrade, self.test, self.uninstall_clean]
            .iter()
            .all(|s| matches!(s, Step::Ok | Step::None))
    }
}

/// One conformance run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChartsReport {
    /// `helm version --short`.
    pub helm_version: String,
    /// One entry per chart, in name order.
    pub charts: Vec<ChartResult>,
}

impl ChartsReport {
    /// Charts that did worse than expected.
    pub fn regressions(&self) -> Vec<&ChartResult> {
        self.charts.iter().filter(|c| c.verdict == Verdict::Regression).collect()
    }
}

/// The report as a table, then the failures and the verdict.
pub fn render_text(r: &ChartsReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "chart conformance with {} (install, --wait ready, upgrade --reuse-values, test, uninstall --wait)",
        r.helm_version
    );
    let _ = writeln!(
        s,
        "{:<26} {:>7} {:>5} {:>7} {:>5} {:>9} {:>7}  verdict",
        "chart", "install", "ready", "upgrade", "test", "uninstall", "seconds"
    );
    for c in &r.charts {
        let _ = writeln!(
            s,
            "{:<26} {:>7} {:>5} {:>7} {:>5} {:>9} {:>7.1}  {:?}",
            c.chart,
            c.install.mark(),
            c.ready.mark(),
            c.upgrade.mark(),
            c.test.mark(),
            c.uninstall_clean.mark(),
            c.seconds,
            c.verdict
        );
    }
    for c in r.charts.iter().filter(|c| c.failure.is_some() || c.expectation.is_some()) {
        let _ = writeln!(s, "\n{}:", c.chart);
        if let Some(why) = &c.expectation {
            let _ = writeln!(s, "  expected: {why}");
        }
        if let Some(f) = &c.failure {
            let _ = writeln!(s, "  failure: {f}");
        }
    }
    let passed = r.charts.iter().filter(|c| c.passed()).count();
    let _ =
        writeln!(s, "\n{passed} of {} charts passed every step; {} regressions", r.charts.len(), r.regressions().len());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(name: &str, test: Step, verdict: Verdict) -> ChartResult {
        ChartResult {
            chart: name.into(),
            install: Step::Ok,
            ready: Step::Ok,
            upgrade: Step::Ok,
            test,
            uninstall_clean: Step::Ok,
            seconds: 1.5,
            failure: (test == Step::Failed).then(|| "pod failed".into()),
            verdict,
            expectation: None,
        }
    }

    #[test]
    fn table_and_counts() {
        let r = ChartsReport {
            helm_version: "v3.17.1".into(),
            charts: vec![
                chart("hello", Step::None, Verdict::Passed),
                chart("broken", Step::Failed, Verdict::Regression),
            ],
        };
        assert!(r.charts[0].passed() && !r.charts[1].passed());
        assert_eq!(r.regressions().len(), 1);
        let text = render_text(&r);
        assert!(text.contains("broken") && text.contains("FAIL") && text.contains("failure: pod failed"), "{text}");
        assert!(text.contains("1 of 2 charts passed every step; 1 regressions"), "{text}");
        let json = serde_json::to_value(&r).expect("serialises");
        assert_eq!(json["charts"][1]["uninstallClean"], "ok");
        assert_eq!(json["charts"][1]["verdict"], "regression");
    }
}
