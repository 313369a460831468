//! The real helm client (v3.17, from `tools/helm/fetch-helm.sh`) against the in-process
//! control plane, over this repository's own fixture charts (`tools/helm/charts`): the
//! conformance run of `opkit-bench charts`, without `../shared`.
//!
//! helm is found in `$OPKIT_HELM` (CI sets it), else at `target/tools/helm`, where
//! `tools/helm/fetch-helm.sh` caches it. Without it the test fails and says how to get it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use opkit_bench::charts::{ChartResult, ChartsOptions, Step, render_text, run};

/// The repository's root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
/// The chart's result, from the run's report.
fn result<'a>(charts: &'a [ChartResult], name: &str) -> &'a ChartResult {
    charts.iter().find(|c| c.chart == name).unwrap_or_else(|| panic!("the run has no result for {name}"))
}

/// webapp (a Deployment, its Service and a test hook pod) goes through install --wait,
/// status, get manifest, install --dry-run=server of a second release, upgrade --wait,
/// history, rollback --wait, helm test and uninstall --wait; lookup's template renders a
/// ConfigMap's value read from the cluster by `lookup`, both installed and in the dry run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_drives_the_fixture_charts_through_every_step() {
    let opts = ChartsOptions {
        corpora: vec![workspace().join("tools/helm/charts")],
        helm: opkit_testenv::helm_binary().unwrap_or_else(|missing| panic!("{missing}")),
        expectations: Default::default(),
        timeout: Duration::from_secs(60),
        only: vec![],
        progress: false,
    };
    let report = run(&opts).await.expect("the conformance run starts");
    let table = render_text(&report);
    assert!(report.helm_version.starts_with("v3.17."), "{table}");
    let webapp = result(&report.charts, "webapp");
    let steps = [
        ("install", webapp.install),
        ("ready", webapp.ready),
        ("status", webapp.status),
        ("get manifest", webapp.manifest),
        ("dry-run", webapp.dry_run),
        ("upgrade", webapp.upgrade),
        ("history", webapp.history),
        ("rollback", webapp.rollback),
        ("test", webapp.test),
        ("uninstall", webapp.uninstall_clean),
    ];
    for (step, outcome) in steps {
        assert_eq!(outcome, Step::Ok, "webapp's {step} step:\n{table}");
    }
    assert_eq!(webapp.lookup, Step::None, "webapp does not look anything up:\n{table}");
    let lookup = result(&report.charts, "lookup");
    assert_eq!(lookup.lookup, Step::Ok, "{table}");
    assert_eq!(lookup.dry_run, Step::Ok, "the dry run renders the looked-up value too:\n{table}");
    assert!(report.regressions().is_empty(), "{table}");
}

/// The lookup step is not vacuous: a chart that names the looked-up ConfigMap but does not
/// render its value fails that step alone, and the run calls it a regression.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chart_that_does_not_render_the_looked_up_value_fails_the_lookup_step() {
    let corpus = tempfile::tempdir().expect("tempdir");
    let chart = corpus.path().join("lookup-ignored");
    std::fs::create_dir_all(chart.join("templates")).expect("mkdir");
    std::fs::write(chart.join("Chart.yaml"), "apiVersion: v2\nname: lookup-ignored\nversion: 0.1.0\n").expect("write");
    let template = "{{- $source := lookup \"v1\" \"ConfigMap\" .Release.Namespace \"opkit-lookup-source\" }}\n\
        apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  value: constant\n";
    std::fs::write(chart.join("templates/configmap.yaml"), template).expect("write");
    let opts = ChartsOptions {
        corpora: vec![corpus.path().into()],
        helm: opkit_testenv::helm_binary().unwrap_or_else(|missing| panic!("{missing}")),
        expectations: Default::default(),
        timeout: Duration::from_secs(60),
        only: vec![],
        progress: false,
    };
    let report = run(&opts).await.expect("the conformance run starts");
    let table = render_text(&report);
    let chart = result(&report.charts, "lookup-ignored");
    assert_eq!(chart.lookup, Step::Failed, "{table}");
    assert_eq!(chart.dry_run, Step::Failed, "{table}");
    assert_eq!((chart.install, chart.rollback, chart.uninstall_clean), (Step::Ok, Step::Ok, Step::Ok), "{table}");
    assert!(chart.failure.as_deref().is_some_and(|f| f.starts_with("lookup: the manifest lacks")), "{table}");
    assert_eq!(report.regressions().len(), 1, "{table}");
}
