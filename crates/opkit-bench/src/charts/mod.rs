//! `opkit-bench charts`: the chart corpus conformance run. The local control plane (API
//! server and cluster controllers, with real pods for the built-in images) starts in this process; then the real helm client,
//! chart by chart, each in its own namespace, installs with default values and `--wait`,
//! checks `helm status` and `helm get manifest` against what is in the cluster (and, for a
//! chart that looks up [`LOOKUP_SOURCE`], that the looked-up value was rendered), runs
//! `helm install --dry-run=server` of a second release (nothing may be created), upgrades
//! with `--reuse-values --wait`, checks `helm history`, rolls back to revision 1 with
//! `--wait`, runs `helm test` where the chart has test hooks, uninstalls with `--wait`,
//! and checks that nothing the release made is left: no object of its manifest (but those
//! helm keeps by `helm.sh/resource-policy: keep`), no pod other than a hook's, and no
//! release record. Outcomes are compared with an expectations file ([`expect`]), so only
//! a chart doing worse than expected fails the run.

pub mod expect;
mod helm;
pub mod report;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, PostParams, ResourceExt};
use kube::discovery::Scope;
use opkit_testenv::TestEnv;

use expect::{Expectation, verdict};
use helm::Helm;
pub use report::{ChartResult, ChartsReport, Step, render_text};

/// The ConfigMap the run creates in a chart's namespace before installing a chart whose
/// templates name it, so that the chart's `lookup` finds it; its `value` key holds
/// [`lookup_value`] of the namespace, which the rendered manifest must then contain.
pub const LOOKUP_SOURCE: &str = "opkit-lookup-source";

/// The value [`LOOKUP_SOURCE`] holds in namespace `ns`.
pub fn lookup_value(ns: &str) -> String {
    format!("looked-up-in-{ns}")
}

/// What a run needs.
#[derive(Debug, Clone)]
pub struct ChartsOptions {
    /// Directories of unpacked charts (one per subdirectory); a chart name may appear once.
    pub corpora: Vec<PathBuf>,
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
    /// Two corpus directories hold a chart of the same name.
    #[error("two charts are named {0}: chart names are release names and must be unique")]
    DuplicateChart(String),
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

/// The chart directories of the corpora, in name order (only those asked for).
fn charts(opts: &ChartsOptions) -> Result<Vec<(String, PathBuf)>, ChartsError> {
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    for corpus in &opts.corpora {
        let read = std::fs::read_dir(corpus).map_err(|source| ChartsError::Corpus { path: corpus.clone(), source })?;
        out.extend(
            read.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join("Chart.yaml").is_file())
                .filter_map(|p| Some((p.file_name()?.to_str()?.to_string(), p)))
                .filter(|(name, _)| opts.only.is_empty() || opts.only.contains(name)),
        );
    }
    out.sort();
    if let Some(pair) = out.windows(2).find(|pair| pair[0].0 == pair[1].0) {
        return Err(ChartsError::DuplicateChart(pair[0].0.clone()));
    }
    Ok(out)
}

/// Runs the conformance over every chart.
pub async fn run(opts: &ChartsOptions) -> Result<ChartsReport, ChartsError> {
    let charts = charts(opts)?;
    // Real pods: the built-in images (busybox, alpine, bash, curl) run as processes, so a
    // chart's `helm test` pod really reaches its Service, as on a cluster; other images
    // stay simulated.
    let env = TestEnv::builder().real_pods().start().await?;
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

/// Whether a template of the chart at `dir` (or of its subcharts) names [`LOOKUP_SOURCE`].
fn looks_up_source(dir: &Path) -> bool {
    fn walk(dir: &Path) -> bool {
        let Ok(read) = std::fs::read_dir(dir) else { return false };
        read.filter_map(Result::ok).map(|e| e.path()).any(|p| {
            if p.is_dir() {
                walk(&p)
            } else {
                std::fs::read_to_string(&p).is_ok_and(|text| text.contains(LOOKUP_SOURCE))
            }
        })
    }
    walk(dir)
}

/// The steps for one chart.
async fn check_chart(env: &TestEnv, helm: &Helm, opts: &ChartsOptions, name: &str, dir: &Path) -> ChartResult {
    let started = Instant::now();
    let expectation = opts.expectations.get(name);
    let ns = namespace_of(name);
    let mut r = ChartResult::new(name, expectation.map(|e| e.reason.clone()).filter(|r| !r.is_empty()));
    let release = Release {
        env,
        helm,
        name,
        dir: dir.to_string_lossy().into_owned(),
        ns: ns.clone(),
        timeout: format!("{}s", opts.timeout.as_secs()),
        deadline: opts.timeout,
        flags: expectation.map(|e| e.flags.clone()).unwrap_or_default(),
    };
    let lookup = looks_up_source(dir);
    let mut namespaces = Ok(());
    for ns in [&release.ns, &release.dry_run_ns()] {
        if namespaces.is_ok() {
            namespaces = release.create_namespace(ns, lookup).await;
        }
    }
    match namespaces {
        Ok(()) => release.steps(&mut r, lookup).await,
        Err(e) => r.failure = Some(format!("cannot create the namespaces: {e}")),
    }
    r.seconds = started.elapsed().as_secs_f64();
    r.verdict = verdict(r.passed(), expectation);
    let namespaces: Api<Namespace> = Api::all(env.client());
    for ns in [&release.ns, &release.dry_run_ns()] {
        let _ = namespaces.delete(ns, &DeleteParams::default()).await;
    }
    r
}

/// One chart's release and what the steps need to drive it.
struct Release<'a> {
    env: &'a TestEnv,
    helm: &'a Helm,
    name: &'a str,
    dir: String,
    ns: String,
    timeout: String,
    /// How long a step may take, as `timeout` says it to helm.
    deadline: Duration,
    flags: Vec<String>,
}

/// Records a step's outcome in `step`, and its error as the chart's failure if it is the first.
fn record(step: &mut Step, failure: &mut Option<String>, label: &str, outcome: Result<(), String>) {
    *step = match outcome {
        Ok(()) => Step::Ok,
        Err(e) => {
            failure.get_or_insert(format!("{label}: {e}"));
            Step::Failed
        }
    };
}

impl Release<'_> {
    /// `helm ARGS -n NS`.
    async fn helm(&self, args: &[&str]) -> Result<String, String> {
        let mut all = args.to_vec();
        all.extend(["-n", self.ns.as_str()]);
        self.helm.run(&all).await
    }

    /// Namespace `ns` and, in it when `lookup`, [`LOOKUP_SOURCE`].
    async fn create_namespace(&self, ns: &str, lookup: bool) -> Result<(), kube::Error> {
        let client = self.env.client();
        let meta = |name: &str| ObjectMeta { name: Some(name.into()), ..Default::default() };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &Namespace { metadata: meta(ns), ..Default::default() })
            .await?;
        if lookup {
            let source = ConfigMap {
                metadata: meta(LOOKUP_SOURCE),
                data: Some([("value".to_string(), lookup_value(ns))].into()),
                ..Default::default()
            };
            Api::<ConfigMap>::namespaced(client, ns).create(&PostParams::default(), &source).await?;
        }
        Ok(())
    }

    /// The namespace of the second, dry-run release: another than the first's, so that
    /// charts naming their objects without the release name (argo-cd's ServiceAccounts)
    /// do not conflict with the first release's.
    fn dry_run_ns(&self) -> String {
        format!("{}-dry", self.ns)
    }

    /// Every step in order; records each and the first failure in `r`. `lookup`: the
    /// chart looks up [`LOOKUP_SOURCE`], so its manifests must hold [`lookup_value`].
    async fn steps(&self, r: &mut ChartResult, lookup: bool) {
        let (name, dir, timeout) = (self.name, self.dir.as_str(), self.timeout.as_str());
        let mut install = vec!["install", name, dir, "--create-namespace", "--wait", "--timeout", timeout];
        install.extend(self.flags.iter().map(String::as_str));
        if let Err(e) = self.helm(&install).await {
            let exists = self.helm(&["status", name]).await.is_ok();
            (r.install, r.ready) = if exists { (Step::Ok, Step::Failed) } else { (Step::Failed, Step::Skipped) };
            r.failure = Some(format!("install: {e}"));
            let _ = self.helm(&["uninstall", name, "--wait", "--timeout", timeout]).await;
            return;
        }
        (r.install, r.ready) = (Step::Ok, Step::Ok);
        let f = &mut r.failure;
        record(&mut r.status, f, "status", self.status(1).await);
        let manifest = self.helm(&["get", "manifest", name]).await;
        record(&mut r.manifest, f, "get manifest", self.installed(manifest.as_deref()).await);
        let manifest = manifest.unwrap_or_default();
        if lookup {
            let value = lookup_value(&self.ns);
            let rendered = manifest.contains(&value);
            record(&mut r.lookup, f, "lookup", rendered.then_some(()).ok_or(format!("the manifest lacks {value:?}")));
        }
        record(&mut r.dry_run, f, "install --dry-run=server", self.dry_run(lookup).await);
        let upgrade = self.helm(&["upgrade", name, dir, "--reuse-values", "--wait", "--timeout", timeout]).await;
        record(&mut r.upgrade, f, "upgrade", upgrade.map(drop));
        record(&mut r.history, f, "history", self.history(&[(1, "superseded"), (2, "deployed")]).await);
        record(&mut r.rollback, f, "rollback", self.rollback(&manifest).await);
        let hooks = self.helm(&["get", "hooks", name]).await.unwrap_or_default();
        if has_test_hooks(&hooks) {
            let test = self.helm(&["test", name, "--timeout", timeout]).await;
            record(&mut r.test, f, "test", test.map(drop));
        } else {
            r.test = Step::None;
        }
        if let Err(e) = self.helm(&["uninstall", name, "--wait", "--timeout", timeout]).await {
            r.uninstall_clean = Step::Failed;
            f.get_or_insert(format!("uninstall: {e}"));
            return;
        }
        let left = self.left_after_uninstall(&manifest).await;
        let clean = if left.is_empty() { Ok(()) } else { Err(format!("left behind: {}", left.join(", "))) };
        record(&mut r.uninstall_clean, f, "uninstall", clean);
    }

    /// What the release left behind once its pods had their grace period: `uninstall
    /// --wait` returns when the manifest's objects are gone, while the pods they owned are
    /// still terminating (a real pod gets up to its `terminationGracePeriodSeconds`).
    async fn left_after_uninstall(&self, manifest: &str) -> Vec<String> {
        let deadline = Instant::now() + self.deadline;
        loop {
            let mut left = leftovers(self.env, manifest, &self.ns).await;
            left.extend(release_records(self.env, &self.ns, self.name).await);
            if left.is_empty() || Instant::now() >= deadline {
                return left;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `helm status -o json` says the release is deployed at `revision`.
    async fn status(&self, revision: u64) -> Result<(), String> {
        let out = self.helm(&["status", self.name, "-o", "json"]).await?;
        let status: serde_json::Value = serde_json::from_str(&out).map_err(|e| format!("not JSON: {e}"))?;
        let seen = (status["info"]["status"].as_str(), status["version"].as_u64());
        if seen == (Some("deployed"), Some(revision)) {
            Ok(())
        } else {
            Err(format!("expected deployed at revision {revision}, helm says {seen:?}"))
        }
    }

    /// Every object of `helm get manifest` is in the cluster, annotated as this release's.
    async fn installed(&self, manifest: Result<&str, &String>) -> Result<(), String> {
        let manifest = manifest.map_err(Clone::clone)?;
        let objects = existing(self.env, manifest, &self.ns).await?;
        if objects.total == 0 {
            return Err("the manifest has no object".into());
        }
        let foreign: Vec<String> = objects
            .found
            .iter()
            .filter(|(_, o)| o.annotations().get("meta.helm.sh/release-name").map(String::as_str) != Some(self.name))
            .map(|(id, _)| id.clone())
            .collect();
        match (objects.missing.is_empty(), foreign.is_empty()) {
            (true, true) => Ok(()),
            (false, _) => Err(format!("not in the cluster: {}", objects.missing.join(", "))),
            (true, false) => Err(format!("not annotated as the release's: {}", foreign.join(", "))),
        }
    }

    /// `helm install --dry-run=server -o json` of a second release, in its own namespace:
    /// helm renders against the cluster (a lookup chart's manifest must hold the value
    /// looked up there) and nothing is created.
    async fn dry_run(&self, lookup: bool) -> Result<(), String> {
        let (second, ns) = (format!("{}-dry", self.name), self.dry_run_ns());
        let mut args = vec!["install", &second, &self.dir, "-n", &ns, "--dry-run=server", "-o", "json"];
        args.extend(self.flags.iter().map(String::as_str));
        let out = self.helm.run(&args).await?;
        let rendered: serde_json::Value = serde_json::from_str(&out).map_err(|e| format!("not JSON: {e}"))?;
        let manifest = rendered["manifest"].as_str().unwrap_or("");
        let value = lookup_value(&ns);
        if lookup && !manifest.contains(&value) {
            return Err(format!("the dry run's manifest lacks the looked-up {value:?}"));
        }
        let is_second = |o: &DynamicObject| o.annotations().get("meta.helm.sh/release-name") == Some(&second);
        let found = existing(self.env, manifest, &ns).await?.found;
        let mut created: Vec<String> = found.into_iter().filter(|(_, o)| is_second(o)).map(|(id, _)| id).collect();
        created.extend(release_records(self.env, &ns, &second).await);
        if created.is_empty() { Ok(()) } else { Err(format!("it created {}", created.join(", "))) }
    }

    /// `helm history -o json` lists exactly `expected` (revision, status), in order.
    async fn history(&self, expected: &[(u64, &str)]) -> Result<(), String> {
        let out = self.helm(&["history", self.name, "-o", "json"]).await?;
        let entries: Vec<serde_json::Value> = serde_json::from_str(&out).map_err(|e| format!("not JSON: {e}"))?;
        let seen: Vec<(u64, &str)> =
            entries.iter().map(|e| (e["revision"].as_u64().unwrap_or(0), e["status"].as_str().unwrap_or(""))).collect();
        if seen == expected { Ok(()) } else { Err(format!("expected revisions {expected:?}, helm lists {seen:?}")) }
    }

    /// `helm rollback REL 1 --wait` makes revision 3, deployed, with revision 1's manifest
    /// (`first`, as `helm get manifest` gave it after the install).
    async fn rollback(&self, first: &str) -> Result<(), String> {
        self.helm(&["rollback", self.name, "1", "--wait", "--timeout", &self.timeout]).await?;
        self.history(&[(1, "superseded"), (2, "superseded"), (3, "deployed")]).await?;
        self.status(3).await?;
        let now = self.helm(&["get", "manifest", self.name]).await?;
        if now == first { Ok(()) } else { Err("revision 3's manifest is not revision 1's".into()) }
    }
}

/// The release records (Secrets of type `helm.sh/release.v1`) of release `name` in `ns`,
/// found as helm finds them: by label selector.
async fn release_records(env: &TestEnv, ns: &str, name: &str) -> Vec<String> {
    let secrets: Api<Secret> = Api::namespaced(env.client(), ns);
    let selector = format!("owner=helm,name={name}");
    match secrets.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => list.items.iter().map(|s| format!("Secret/{}", s.metadata.name.as_deref().unwrap_or(""))).collect(),
        Err(e) => vec![format!("(listing release records failed: {e})")],
    }
}

/// The objects of a manifest, looked up in the cluster.
struct Existing {
    /// How many objects the manifest has.
    total: usize,
    /// `Kind/name` of those in the cluster, with what the cluster holds.
    found: Vec<(String, DynamicObject)>,
    /// `Kind/name` of those not in the cluster.
    missing: Vec<String>,
}

/// Looks up every object of `manifest` (namespaced ones in `ns` unless they name theirs).
async fn existing(env: &TestEnv, manifest: &str, ns: &str) -> Result<Existing, String> {
    let client = env.client();
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(manifest).map_err(|e| format!("the manifest is not YAML: {e}"))?;
    let mut out = Existing { total: 0, found: Vec::new(), missing: Vec::new() };
    for doc in docs.iter().filter(|d| d.is_object()) {
        let (Some(api_version), Some(kind), Some(name)) =
            (doc["apiVersion"].as_str(), doc["kind"].as_str(), doc["metadata"]["name"].as_str())
        else {
            continue;
        };
        out.total += 1;
        let id = format!("{kind}/{name}");
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        // One group/version at a time: a whole-cluster discovery fails while an aggregated
        // group is unavailable (metrics-server's, whose pod is simulated).
        let Ok((ar, caps)) = kube::discovery::pinned_kind(&client, &GroupVersionKind::gvk(group, version, kind)).await
        else {
            out.missing.push(id);
            continue;
        };
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => {
                Api::namespaced_with(client.clone(), doc["metadata"]["namespace"].as_str().unwrap_or(ns), &ar)
            }
            Scope::Cluster => Api::all_with(client.clone(), &ar),
        };
        match api.get_opt(name).await {
            Ok(Some(object)) => out.found.push((id, object)),
            Ok(None) => out.missing.push(id),
            Err(e) => return Err(format!("cannot read {id}: {e}")),
        }
    }
    Ok(out)
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
    let mut left = match existing(env, manifest, ns).await {
        Ok(objects) => objects
            .found
            .into_iter()
            .filter(|(_, o)| o.annotations().get("helm.sh/resource-policy").map(String::as_str) != Some("keep"))
            .map(|(id, _)| id)
            .collect(),
        Err(e) => vec![format!("({e})")],
    };
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
    fn charts_of_several_corpora_are_merged_and_must_have_unique_names() {
        let (a, b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
        let chart = |root: &std::path::Path, name: &str, template: &str| {
            let dir = root.join(name);
            std::fs::create_dir_all(dir.join("templates")).expect("mkdir");
            std::fs::write(dir.join("Chart.yaml"), format!("apiVersion: v2\nname: {name}\nversion: 0.1.0\n"))
                .expect("write");
            std::fs::write(dir.join("templates/t.yaml"), template).expect("write");
        };
        chart(a.path(), "zeta", "kind: ConfigMap");
        chart(b.path(), "alpha", "{{ lookup \"v1\" \"ConfigMap\" .Release.Namespace \"opkit-lookup-source\" }}");
        let mut opts = super::ChartsOptions {
            corpora: vec![a.path().into(), b.path().into()],
            helm: "helm".into(),
            expectations: Default::default(),
            timeout: std::time::Duration::from_secs(1),
            only: vec![],
            progress: false,
        };
        let found = super::charts(&opts).expect("readable");
        let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["alpha", "zeta"]);
        assert!(super::looks_up_source(&found[0].1) && !super::looks_up_source(&found[1].1));
        chart(b.path(), "zeta", "");
        assert!(matches!(super::charts(&opts), Err(super::ChartsError::DuplicateChart(n)) if n == "zeta"));
        opts.only = vec!["alpha".into()];
        assert_eq!(super::charts(&opts).expect("readable").len(), 1);
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
