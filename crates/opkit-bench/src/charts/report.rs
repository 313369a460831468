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
    /// `helm status` says deployed, revision 1.
    pub status: Step,
    /// Every object of `helm get manifest` is in the cluster as the release's.
    pub manifest: Step,
    /// The manifest holds the value the chart's `lookup` read (charts that look up
    /// [`super::LOOKUP_SOURCE`]).
    pub lookup: Step,
    /// `helm install --dry-run=server` of a second release created nothing.
    pub dry_run: Step,
    /// `helm upgrade --reuse-values --wait`.
    pub upgrade: Step,
    /// `helm history` lists revision 1 superseded and 2 deployed.
    pub history: Step,
    /// `helm rollback REL 1 --wait` made revision 3 with revision 1's manifest.
    pub rollback: Step,
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
    /// A chart's result before any step ran: `lookup` does not apply until the run says so.
    pub fn new(chart: &str, expectation: Option<String>) -> ChartResult {
        ChartResult {
            chart: chart.into(),
            install: Step::Skipped,
            ready: Step::Skipped,
            status: Step::Skipped,
            manifest: Step::Skipped,
            lookup: Step::None,
            dry_run: Step::Skipped,
            upgrade: Step::Skipped,
            history: Step::Skipped,
            rollback: Step::Skipped,
            test: Step::Skipped,
            uninstall_clean: Step::Skipped,
            seconds: 0.0,
            failure: None,
            verdict: Verdict::Regression,
            expectation,
        }
    }

    /// Every step, in the order they run.
    fn steps(&self) -> [Step; 11] {
        [
            self.install,
            self.ready,
            self.status,
            self.manifest,
            self.lookup,
            self.dry_run,
            self.upgrade,
            self.history,
            self.rollback,
            self.test,
            self.uninstall_clean,
        ]
    }

    /// Whether every step that applies succeeded.
    pub fn passed(&self) -> bool {
        self.steps().iter().all(|s| matches!(s, Step::Ok | Step::None))
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

/// The table's step columns, in the order of [`ChartResult::steps`].
const COLUMNS: [&str; 11] = [
    "install",
    "ready",
    "status",
    "manifest",
    "lookup",
    "dry-run",
    "upgrade",
    "history",
    "rollback",
    "test",
    "uninstall",
];

/// The report as a table, then the failures and the verdict.
pub fn render_text(r: &ChartsReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "chart conformance with {} (install, --wait ready, status, get manifest, lookup, install \
         --dry-run=server, upgrade --reuse-values, history, rollback, test, uninstall --wait)",
        r.helm_version
    );
    let _ = write!(s, "{:<26}", "chart");
    for title in COLUMNS {
        let _ = write!(s, " {title:>w$}", w = title.len().max(4));
    }
    let _ = writeln!(s, " {:>7}  verdict", "seconds");
    for c in &r.charts {
        let _ = write!(s, "{:<26}", c.chart);
        for (title, step) in COLUMNS.iter().zip(c.steps()) {
            let _ = write!(s, " {:>w$}", step.mark(), w = title.len().max(4));
        }
        let _ = writeln!(s, " {:>7.1}  {:?}", c.seconds, c.verdict);
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
        let mut c = ChartResult::new(name, None);
        for step in [&mut c.install, &mut c.ready, &mut c.status, &mut c.manifest, &mut c.dry_run, &mut c.upgrade] {
            *step = Step::Ok;
        }
        (c.history, c.rollback, c.test, c.uninstall_clean) = (Step::Ok, Step::Ok, test, Step::Ok);
        (c.seconds, c.verdict) = (1.5, verdict);
        c.failure = (test == Step::Failed).then(|| "pod failed".into());
        c
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
