//! `opkit-bench charts`: the chart corpus conformance run. The local control plane (API
//! server and cluster controllers) starts in this process; then the real helm client,
//! chart by chart, each in its own namespace, installs with default values and `--wait`,
//! upgrades with `--reuse-values --wait`, runs `helm test` where the chart has test hooks,
//! uninstalls with `--wait`, and checks that nothing the release made is left: no object
//! of its manifest (but those helm keeps by `helm.sh/resource-policy: keep`) and no pod
//! other than a hook's. Outcomes are compared with an expectations file
//! ([`expect`]), so only a chart doing worse than expected fails the run.

pub mod expect;
mod helm;
pub mod report;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use kube::discovery::{Discovery, Scope};
use opkit_testenv::TestEnv;

use expect::{Expectation, verdict};
use helm::Helm;
pub use report::{ChartResult, ChartsReport, Step, render_text};

/// What a run needs.
#[derive(Debug, Clone)]
pub struct ChartsOptions {
    /// The directory of unpacked charts (one per subdirectory).
    pub corpus: PathBuf,
    /// The helm binary.
    pub helm: PathBuf,
    /// Expected outcomes by chart name.
    pub expectations: BTreeMap<String, Expectation>,
    /// helm's `--timeout` for each waiting step.
    pub timeout: Duration,
    /// Only these charts (all when empty).
    pub only: Vec<String>,
    /// Progress on stderr.
    pub progress: bool,
}

/// Why a run could not happen at all.
#[derive(Debug, thiserror::Error)]
pub enum ChartsError {
    /// The corpus directory cannot be read.
    #[error("cannot read the chart corpus {path}: {source}")]
    Corpus {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// helm does not run.
    #[error("helm does not run: {0}")]
    Helm(String),
    /// The control plane did not start.
    #[error("the control plane did not start: {0}")]
    ControlPlane(#[from] opkit_testenv::TestEnvError),
    /// A temporary directory for helm's state.
    #[error("cannot make a directory for helm's state: {0}")]
    Home(std::io::Error),
}

/// The chart directories of the corpus, in name order (only those asked for).
fn charts(opts: &ChartsOptions) -> Result<Vec<(String, PathBuf)>, ChartsError> {
    let read =
        std::fs::read_dir(&opts.corpus).map_err(|source| ChartsError::Corpus { path: opts.corpus.clone(), source })?;
    let mut out: Vec<(String, PathBuf)> = read
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("Chart.yaml").is_file())
        .filter_map(|p| Some((p.file_name()?.to_str()?.to_string(), p)))
        .filter(|(name, _)| opts.only.is_empty() || opts.only.contains(name))
        .collect();
    out.sort();
    Ok(out)
}

/// Runs the conformance over every chart.
pub async fn run(opts: &ChartsOptions) -> Result<ChartsReport, ChartsError> {
    let charts = charts(opts)?;
    let env = TestEnv::start().await?;
    let home = tempfile::tempdir().map_err(ChartsError::Home)?;
    let helm = Helm::new(&opts.helm, env.kubeconfig_path(), home.path(), opts.timeout + Duration::from_secs(30));
    let helm_version = helm.run(&["version", "--short"]).await.map_err(ChartsError::Helm)?.trim().to_string();
    let bar = opts.progress.then(|| {
        let bar = indicatif::ProgressBar::new(charts.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{pos}/{len} charts [{elapsed}] {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let mut results = Vec::new();
    for (name, dir) in &charts {
        if let Some(bar) = &bar {
            bar.set_message(name.clone());
        }
        let result = check_chart(&env, &helm, opts, name, dir).await;
        if let Some(bar) = &bar {
            bar.inc(1);
            bar.println(format!("{name}: {:?}", result.verdict));
        }
        results.push(result);
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(ChartsReport { helm_version, charts: results })
}

/// The namespace a chart is installed in.
fn namespace_of(chart: &str) -> String {
    let name: String =
        chart.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    format!("chart-{}", name.trim_matches('-'))
}

/// The steps for one chart.
async fn check_chart(env: &TestEnv, helm: &Helm, opts: &ChartsOptions, name: &str, dir: &Path) -> ChartResult {
    let started = Instant::now();
    let expectation = opts.expectations.get(name);
    let ns = namespace_of(name);
    let timeout = format!("{}s", opts.timeout.as_secs());
    let dir = dir.to_string_lossy().to_string();
    let mut r = ChartResult {
        chart: name.into(),
        install: Step::Skipped,
        ready: Step::Skipped,
        upgrade: Step::Skipped,
        test: Step::Skipped,
        uninstall_clean: Step::Skipped,
        seconds: 0.0,
        failure: None,
        verdict: expect::Verdict::Regression,
        expectation: expectation.map(|e| e.reason.clone()).filter(|r| !r.is_empty()),
    };
    let release = [name, dir.as_str(), "-n", ns.as_str()];
    let mut install: Vec<&str> = vec!["install"];
    install.extend(release);
    install.extend(["--create-namespace", "--wait", "--timeout", &timeout]);
    let flags = expectation.map(|e| e.flags.clone()).unwrap_or_default();
    install.extend(flags.iter().map(String::as_str));
    steps(env, helm, &mut r, &install, &release, &ns, &timeout).await;
    r.seconds = started.elapsed().as_secs_f64();
    r.verdict = verdict(r.passed(), expectation);
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(env.client());
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    r
}

/// Install, upgrade, test, uninstall; records each step and the first failure in `r`.
async fn steps(
    env: &TestEnv,
    helm: &Helm,
    r: &mut ChartResult,
    install: &[&str],
    release: &[&str; 4],
    ns: &str,
    timeout: &str,
) {
    let [name, dir, _, _] = *release;
    let in_ns = ["-n", ns];
    if let Err(e) = helm.run(install).await {
        let exists = helm.run(&["status", name, "-n", ns]).await.is_ok();
        (r.install, r.ready) = if exists { (Step::Ok, Step::Failed) } else { (Step::Failed, Step::Skipped) };
        r.failure = Some(format!("install: {e}"));
        let _ = helm.run(&["uninstall", name, "-n", ns, "--wait", "--timeout", timeout]).await;
        return;
    }
    (r.install, r.ready) = (Step::Ok, Step::Ok);
    let manifest = helm.run(&["get", "manifest", name, "-n", ns]).await.unwrap_or_default();
    match helm.run(&["upgrade", name, dir, "-n", ns, "--reuse-values", "--wait", "--timeout", timeout]).await {
        Ok(_) => r.upgrade = Step::Ok,
        Err(e) => {
            r.upgrade = Step::Failed;
            r.failure.get_or_insert(format!("upgrade: {e}"));
        }
    }
    let hooks = helm.run(&["get", "hooks", name, "-n", ns]).await.unwrap_or_default();
    r.test = if !has_test_hooks(&hooks) {
        Step::None
    } else {
        match helm.run(&["test", name, in_ns[0], in_ns[1], "--timeout", timeout]).await {
            Ok(_) => Step::Ok,
            Err(e) => {
                r.failure.get_or_insert(format!("test: {e}"));
                Step::Failed
            }
        }
    };
    if let Err(e) = helm.run(&["uninstall", name, "-n", ns, "--wait", "--timeout", timeout]).await {
        r.uninstall_clean = Step::Failed;
        r.failure.get_or_insert(format!("uninstall: {e}"));
        return;
    }
    let left = leftovers(env, &manifest, ns).await;
    r.uninstall_clean = if left.is_empty() { Step::Ok } else { Step::Failed };
    if !left.is_empty() {
        r.failure.get_or_insert(format!("uninstall left behind: {}", left.join(", ")));
    }
}

/// Whether `helm get hooks` lists a test hook (`helm.sh/hook: test`, or helm 2's
/// `test-success`, possibly among other hook kinds).
fn has_test_hooks(hooks: &str) -> bool {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(hooks).unwrap_or_default();
    docs.iter().any(|d| {
        d["metadata"]["annotations"]["helm.sh/hook"]
            .as_str()
            .is_some_and(|kinds| kinds.split(',').any(|k| matches!(k.trim(), "test" | "test-success")))
    })
}

/// What the release made that is still there: objects of its manifest (but those helm
/// keeps on purpose) and pods that are neither hooks nor owned by a Job still present.
async fn leftovers(env: &TestEnv, manifest: &str, ns: &str) -> Vec<String> {
    let client = env.client();
    let mut left = Vec::new();
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(manifest).unwrap_or_default();
    let discovery = match Discovery::new(client.clone()).run().await {
        Ok(d) => d,
        Err(e) => return vec![format!("(discovery failed: {e})")],
    };
    for doc in docs.iter().filter(|d| d.is_object()) {
        let (Some(api_version), Some(kind), Some(name)) =
            (doc["apiVersion"].as_str(), doc["kind"].as_str(), doc["metadata"]["name"].as_str())
        else {
            continue;
        };
        if doc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep" {
            continue;
        }
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let Some((ar, caps)) = discovery.resolve_gvk(&GroupVersionKind::gvk(group, version, kind)) else {
            continue;
        };
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => {
                Api::namespaced_with(client.clone(), doc["metadata"]["namespace"].as_str().unwrap_or(ns), &ar)
            }
            Scope::Cluster => Api::all_with(client.clone(), &ar),
        };
        if let Ok(Some(_)) = api.get_opt(name).await {
            left.push(format!("{kind}/{name}"));
        }
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let jobs: Api<Job> = Api::namespaced(client, ns);
    for pod in pods.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default() {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let is_hook = pod.metadata.annotations.as_ref().is_some_and(|a| a.contains_key("helm.sh/hook"));
        let job = pod.metadata.owner_references.iter().flatten().find(|o| o.kind == "Job").map(|o| o.name.clone());
        let job_present = match job {
            Some(job) => matches!(jobs.get_opt(&job).await, Ok(Some(_))),
            None => false,
        };
        if !is_hook && !job_present {
            left.push(format!("Pod/{name}"));
        }
    }
    left
}

#[cfg(test)]
mod tests {
    #[test]
    fn namespaces_are_dns_labels() {
        assert_eq!(super::namespace_of("kube-state-metrics"), "chart-kube-state-metrics");
        assert_eq!(super::namespace_of("My_Chart"), "chart-my-chart");
    }

    #[test]
    fn test_hooks_are_found_in_helm_get_hooks() {
        let hooks = "---\n# Source: c/templates/tests/t.yaml\napiVersion: v1\nkind: Pod\nmetadata:\n  name: t\n  annotations:\n    \"helm.sh/hook\": test\n";
        assert!(super::has_test_hooks(hooks));
        let install_hook = hooks.replace("test", "pre-install");
        assert!(!super::has_test_hooks(&install_hook));
        assert!(!super::has_test_hooks(""));
    }
}
