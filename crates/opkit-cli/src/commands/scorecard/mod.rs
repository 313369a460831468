//! `opkit scorecard DIR`: operator-sdk's scorecard on a bundle directory. The tests are
//! those of `--config` (default: the bundle's `tests/scorecard/config.yaml`, else the six
//! built-in ones), stage by stage, a parallel stage's tests at once. The built-in tests
//! run in-process (`opkit_olm_bundle::scorecard`); a custom test runs as a pod of its
//! image in the kubeconfig's cluster ([`pods`]). The results print in scorecard's text or
//! JSON format or as operator-sdk's xunit XML (`-o xunit`, [`xunit`]). A test that does
//! not pass makes the command exit 1, as scorecard does.

mod pods;
mod xunit;

use std::path::Path;

use futures::future::join_all;
use opkit_olm_bundle::Bundle;
use opkit_olm_bundle::scorecard::{Configuration, Stage, State, Test, TestConfiguration, run_test, to_json, to_text};
use opkit_olm_bundle::validate::Selector;
use serde_json::json;

use self::pods::{PodRunner, PodSettings};
use super::CliError;
use crate::cli::{OutputFormat, ScorecardArgs};
use crate::output::Output;

/// Where a bundle keeps its scorecard configuration.
const BUNDLE_CONFIG: &str = "tests/scorecard/config.yaml";

/// Runs the selected tests on the bundle.
pub(super) async fn scorecard(args: ScorecardArgs, out: &mut Output) -> Result<(), CliError> {
    let selector = args
        .selector
        .as_deref()
        .map(Selector::parse)
        .transpose()
        .map_err(|e| CliError::Usage(format!("--selector: {e}")))?;
    let config = configuration(&args)?.selected(selector.as_ref());
    if args.list {
        let tests: Vec<&TestConfiguration> = config.tests().collect();
        let text: Vec<String> = tests.iter().map(|t| list_line(t)).collect();
        out.result(&text.join("\n"), json!({"tests": tests}));
        return Ok(());
    }
    let bundle = Bundle::load(&args.dir)?;
    tracing::debug!(dir = %args.dir.display(), csv = %bundle.csv.name(), "loaded the bundle");
    let runner = match config.tests().any(|t| t.builtin().is_none()) {
        true => Some(pod_runner(&args, &config, &bundle.dir).await?),
        false => None,
    };
    let mut tests = Vec::new();
    for stage in &config.stages {
        tests.extend(run_stage(stage, &bundle, runner.as_ref(), tests.len()).await);
    }
    if let Some(runner) = runner {
        runner.finish().await;
    }
    let failed = tests.iter().any(|t| !t.passed());
    if out.format() == OutputFormat::Xunit {
        out.result(&xunit::to_xunit(&tests), json!({}));
    } else if out.json() {
        out.result("", to_json(&tests));
    } else if tests.is_empty() {
        out.result("0 tests selected", json!({}));
    } else {
        let text: String = tests.iter().map(to_text).collect();
        out.result(text.trim_end(), json!({}));
    }
    if failed { Err(CliError::Reported { code: 1 }) } else { Ok(()) }
}

/// `--config`, else the bundle's own configuration, else the built-in tests.
fn configuration(args: &ScorecardArgs) -> Result<Configuration, CliError> {
    let in_bundle = args.dir.join(BUNDLE_CONFIG);
    match &args.config {
        Some(path) => Ok(Configuration::load(path)?),
        None if in_bundle.is_file() => Ok(Configuration::load(&in_bundle)?),
        None => Ok(Configuration::builtin()),
    }
}

/// A test as `--list` prints it: its name and labels.
fn list_line(test: &TestConfiguration) -> String {
    let name = test.builtin().map(String::from).unwrap_or_else(|| test.entrypoint.join(" "));
    let labels: Vec<String> = test.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{name}\t({})", labels.join(","))
}

/// The runner of the custom tests, in the namespace and as the ServiceAccount the flags
/// (else the configuration and the kubeconfig) give.
async fn pod_runner(args: &ScorecardArgs, config: &Configuration, bundle_dir: &Path) -> Result<PodRunner, CliError> {
    let kube_config = super::kubeconfig::config(args.kubeconfig.as_deref(), None).await?;
    let namespace = args.namespace.clone().unwrap_or_else(|| kube_config.default_namespace.clone());
    let client = kube::Client::try_from(kube_config).map_err(|e| CliError::Kubeconfig(e.to_string()))?;
    let service_account =
        args.service_account.clone().or_else(|| config.serviceaccount.clone()).unwrap_or_else(|| "default".into());
    let settings = PodSettings {
        namespace,
        service_account,
        wait_time: args.wait_time,
        untar_image: args.untar_image.clone(),
        skip_cleanup: args.skip_cleanup,
    };
    PodRunner::start(client, settings, bundle_dir).await
}

/// Runs one stage's tests, at once when it is parallel; `first` numbers its tests' pods.
async fn run_stage(stage: &Stage, bundle: &Bundle, runner: Option<&PodRunner>, first: usize) -> Vec<Test> {
    let runs = stage.tests.iter().enumerate().map(|(i, spec)| run_one(spec, bundle, runner, first + i));
    if stage.parallel {
        join_all(runs).await
    } else {
        let mut done = Vec::new();
        for run in runs {
            done.push(run.await);
        }
        done
    }
}

/// Runs one test: in-process when built in, else as the `index`th pod of the run.
async fn run_one(spec: &TestConfiguration, bundle: &Bundle, runner: Option<&PodRunner>, index: usize) -> Test {
    let results = match (spec.builtin(), runner) {
        (Some(name), _) => vec![run_test(bundle, name)],
        (None, Some(runner)) => runner.run(index, spec).await,
        (None, None) => Vec::new(),
    };
    let test = spec.builtin().map(str::to_string).or_else(|| spec.labels.get("test").cloned()).unwrap_or_default();
    tracing::debug!(test, image = %spec.image, passed = results.iter().all(|r| r.state == State::Pass), "ran a scorecard test");
    Test { spec: spec.clone(), results }
}
