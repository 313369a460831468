//! A whole run, as kuttl's `Harness` makes it: the suite's CRDs installed (and waited
//! for), its manifests applied and its commands run (background ones kept until the
//! end), every test case of every test directory run (at most `parallel` at once), the
//! output printed as `kubectl kuttl test` prints it, and the report written.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use regex::Regex;

use crate::KuttlError;
use crate::api::{Command, TestSuite, is_harness_kind};
use crate::case::{CaseSettings, TestCase};
use crate::cluster::{Cluster, go_gvk};
use crate::command::{Background, CommandEnv, run_commands};
use crate::diff::resource_id;
use crate::files::sorted_entries;
use crate::log::{CaseLog, Sink, decorate};
use crate::report::{ReportFormat, RunReport, SuiteReport};
use crate::step::load_objects;

impl TestSuite {
    /// Reads `kuttl-test.yaml`: its `TestSuite` document (other documents are reported
    /// in the returned notes, as kuttl logs them).
    pub fn load(path: &Path) -> Result<(TestSuite, Vec<String>), KuttlError> {
        let mut suite = None;
        let mut notes = Vec::new();
        for object in load_objects(path)? {
            let api_version = object["apiVersion"].as_str().unwrap_or_default().to_string();
            let kind = object["kind"].as_str().unwrap_or_default().to_string();
            if is_harness_kind(&api_version, &kind, "TestSuite") {
                suite = Some(
                    serde_json::from_value(object)
                        .map_err(|e| KuttlError::Yaml { path: path.to_path_buf(), message: e.to_string() })?,
                );
            } else if kind == "TestSuite" {
                notes.push(format!("bad configuration in file {:?}", path.display().to_string()));
            } else {
                notes.push(format!("unknown object type: {kind}"));
            }
        }
        let suite = suite.ok_or_else(|| KuttlError::Load(format!("{} holds no TestSuite", path.display())))?;
        Ok((suite, notes))
    }
}

/// Runs a [`TestSuite`] against a [`Cluster`].
pub struct Harness {
    suite: TestSuite,
    cluster: Arc<Cluster>,
    work_dir: PathBuf,
    only: Option<Regex>,
    sink: Sink,
    cluster_note: String,
    template_vars: serde_json::Map<String, serde_json::Value>,
}

impl Harness {
    /// A harness for `suite` on `cluster`; relative paths are resolved against the current
    /// directory, and output goes to stdout.
    pub fn new(suite: TestSuite, cluster: Arc<Cluster>) -> Harness {
        Harness {
            suite,
            cluster,
            work_dir: std::env::current_dir().unwrap_or_default(),
            only: None,
            sink: Arc::new(|line: &str| println!("{line}")),
            cluster_note: "running tests using configured kubeconfig.".into(),
            template_vars: serde_json::Map::new(),
        }
    }

    /// Resolves the suite's relative paths against `dir` (and runs suite commands there).
    pub fn work_dir(mut self, dir: impl Into<PathBuf>) -> Harness {
        self.work_dir = dir.into();
        self
    }

    /// Runs only the test cases whose name matches `pattern` (a regular expression, as
    /// `kuttl test --test` passes to Go's `-run`).
    pub fn only(mut self, pattern: &str) -> Result<Harness, KuttlError> {
        let re = Regex::new(pattern).map_err(|e| KuttlError::Load(format!("--test {pattern:?}: {e}")))?;
        self.only = Some(re);
        Ok(self)
    }

    /// Sends the printed output to `sink` instead of stdout.
    pub fn output(mut self, sink: Sink) -> Harness {
        self.sink = sink;
        self
    }

    /// Sets what `.gotmpl.yaml` files see as `.Vars` (kuttl's `--template-var`).
    pub fn template_vars(mut self, vars: serde_json::Map<String, serde_json::Value>) -> Harness {
        self.template_vars = vars;
        self
    }

    /// Says how the cluster was obtained, in the run's first lines.
    pub fn cluster_note(mut self, note: impl Into<String>) -> Harness {
        self.cluster_note = note.into();
        self
    }

    fn print(&self, line: &str) {
        (self.sink)(line);
    }

    fn harness_log(&self, site: u32, message: &str) {
        self.print(&decorate(&format!("harness.go:{site}"), message));
    }

    fn resolve(&self, path: &str) -> PathBuf {
        let path = Path::new(path);
        if path.is_absolute() { path.to_path_buf() } else { self.work_dir.join(path) }
    }

    /// Runs the suite: setup, every test case, teardown, and the report file when the
    /// suite asks for one. The returned report says what passed; `Err` only when the
    /// report could not be written.
    pub async fn run(&self) -> Result<RunReport, KuttlError> {
        let clock = Instant::now();
        let mut report =
            RunReport { name: self.suite.metadata.name.clone().unwrap_or_default(), ..RunReport::default() };
        self.print("=== RUN   kuttl");
        self.harness_log(496, "starting setup");
        self.harness_log(258, &self.cluster_note);
        for note in self.ignored_settings() {
            self.harness_log(252, &note);
        }
        let setup_log = CaseLog::new("harness");
        let (background, setup) = self.setup(&setup_log).await;
        for line in setup_log.text().lines() {
            self.print(line);
        }
        // What background commands (an operator under test) log from here on is shown
        // when the run fails, after they are stopped.
        let printed = setup_log.len();
        if let Err(e) = setup {
            self.harness_log(563, &format!("fatal error {e}"));
            report.failure = Some(e);
        } else {
            self.run_tests(&mut report).await;
        }
        self.print("=== NAME  kuttl");
        self.harness_log(547, "cleaning up");
        let had_background = !background.is_empty();
        for process in background {
            self.harness_log(563, &format!("killing process {:?}", process.display));
            let stopped = process.stop().await;
            self.harness_log(574, &stopped);
        }
        if had_background && !report.passed() {
            let later = setup_log.lines_after(printed);
            self.harness_log(
                576,
                &format!("output of the background commands during the tests ({} lines):", later.len()),
            );
            for line in later {
                self.print(&line);
            }
        }
        report.duration = clock.elapsed();
        self.print_summary(&report);
        if let Some(format) = ReportFormat::parse(&self.suite.report_format) {
            let dir = self.resolve(&self.suite.artifacts_dir);
            let name = if self.suite.report_name.is_empty() { "kuttl-report" } else { &self.suite.report_name };
            let granularity =
                if self.suite.report_granularity.is_empty() { "step" } else { &self.suite.report_granularity };
            report.write(&dir, name, format, granularity)?;
        }
        Ok(report)
    }

    /// What of the suite opkit does not use, as notes for the log.
    fn ignored_settings(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.suite.start_kind || !self.suite.kind_config.is_empty() {
            notes.push(
                "startKIND is ignored: opkit test runs against its in-process control plane or --kubeconfig".into(),
            );
        }
        if !self.suite.kind_containers.is_empty() {
            notes.push(format!(
                "kindContainers {:?} are not loaded: the opkit control plane simulates pods (images are not pulled)",
                self.suite.kind_containers
            ));
        }
        if self.suite.start_control_plane {
            notes
                .push("startControlPlane: the opkit control plane (API server and cluster controllers) is used".into());
        }
        notes
    }

    /// Installs CRDs and manifests and runs the suite's commands.
    async fn setup(&self, log: &CaseLog) -> (Vec<Background>, Result<(), String>) {
        if !self.suite.crd_dir.is_empty()
            && let Err(e) = self.install_crds(log).await
        {
            return (Vec::new(), Err(format!("installing crds: {e}")));
        }
        for dir in &self.suite.manifest_dirs {
            if let Err(e) = self.install_manifests(&self.resolve(dir), None, log).await {
                return (Vec::new(), Err(format!("installing manifests: {e}")));
            }
        }
        let env = CommandEnv {
            namespace: "default".into(),
            kubeconfig: self.cluster.kubeconfig().to_path_buf(),
            work_dir: self.work_dir.clone(),
            cwd: self.work_dir.clone(),
        };
        let commands: Vec<Command> = self.suite.commands.clone();
        let (background, result) = run_commands(&commands, &env, self.suite.timeout as i64, log).await;
        (background, result.map_err(|e| format!("running commands: {e}")))
    }

    /// Applies every object of the YAML files of a directory (only `kinds` when given).
    async fn install_manifests(
        &self,
        dir: &Path,
        kinds: Option<&[&str]>,
        log: &CaseLog,
    ) -> Result<Vec<String>, String> {
        let mut names = Vec::new();
        let entries =
            if dir.is_dir() { sorted_entries(dir).map_err(|e| e.to_string())? } else { vec![dir.to_path_buf()] };
        for file in entries.iter().filter(|f| f.extension().is_some_and(|e| e == "yaml" || e == "yml" || e == "json")) {
            for mut object in load_objects(file).map_err(|e| e.to_string())? {
                let kind_name = object["kind"].as_str().unwrap_or_default().to_string();
                if kinds.is_some_and(|k| !k.contains(&kind_name.as_str())) {
                    continue;
                }
                let (kind, namespace) = self.cluster.namespaced(&mut object, "default").await?;
                let updated =
                    self.cluster.create_or_update(&kind, namespace.as_deref(), &object).await.map_err(|e| {
                        format!(
                            "applying {} {}: {e}",
                            go_gvk(object["apiVersion"].as_str().unwrap_or_default(), &kind_name),
                            object["metadata"]["name"].as_str().unwrap_or_default()
                        )
                    })?;
                log.log(format!("{} {}", resource_id(&object), if updated { "updated" } else { "created" }));
                names.push(object["metadata"]["name"].as_str().unwrap_or_default().to_string());
            }
        }
        Ok(names)
    }

    /// Installs the CRDs of `crdDir` and waits until each is established.
    async fn install_crds(&self, log: &CaseLog) -> Result<(), String> {
        let names = self
            .install_manifests(&self.resolve(&self.suite.crd_dir), Some(&["CustomResourceDefinition"]), log)
            .await?;
        let api: Api<CustomResourceDefinition> = Api::all(self.cluster.client());
        for name in names {
            opkit_crd_wait(&api, &name).await?;
        }
        Ok(())
    }

    /// The test cases of a test directory: its subdirectories.
    fn load_cases(&self, dir: &str) -> Result<Vec<TestCase>, String> {
        let path = self.resolve(dir);
        let entries = sorted_entries(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(entries
            .into_iter()
            .filter(|p| p.is_dir())
            .filter_map(|p| {
                let name = p.file_name()?.to_str()?.to_string();
                Some(TestCase { name, dir: p })
            })
            .filter(|c| self.only.as_ref().is_none_or(|re| re.is_match(&c.name)))
            .collect())
    }

    async fn run_tests(&self, report: &mut RunReport) {
        let timeout = self.suite.effective_timeout();
        self.harness_log(392, "running tests");
        let mut loaded = Vec::new();
        for dir in &self.suite.test_dirs {
            match self.load_cases(dir) {
                Ok(cases) => {
                    self.harness_log(
                        80,
                        &format!("going to run test suite with timeout of {timeout} seconds for each step"),
                    );
                    self.harness_log(404, &format!("testsuite: {dir} has {} tests", cases.len()));
                    loaded.push((dir.clone(), cases));
                }
                Err(e) => {
                    self.harness_log(402, &e);
                    report.failure = Some(e);
                    return;
                }
            }
        }
        self.print("=== RUN   kuttl/harness");
        for (_, cases) in &loaded {
            for case in cases {
                self.print(&format!("=== RUN   kuttl/harness/{}", case.name));
                self.print(&format!("=== PAUSE kuttl/harness/{}", case.name));
            }
        }
        let ignore = self.suite.ignore_files.clone().unwrap_or_else(|| vec!["README*".to_string()]);
        let settings = CaseSettings {
            cluster: &self.cluster,
            timeout,
            skip_delete: self.suite.skip_delete,
            namespace: Some(self.suite.namespace.as_str()).filter(|n| !n.is_empty()),
            ignore_files: &ignore,
            suppress_events: self.suite.suppress.iter().any(|s| s.eq_ignore_ascii_case("events")),
            work_dir: &self.work_dir,
            template_vars: &self.template_vars,
        };
        // As kuttl's `t.Parallel()` cases under one `harness` group: the cases of every
        // test directory share the `parallel` slots, so one directory does not wait for another.
        let started = jiff::Timestamp::now();
        let dirs: Vec<String> = loaded.iter().map(|(dir, _)| dir.clone()).collect();
        let settings = &settings;
        let cases = loaded.into_iter().enumerate().flat_map(|(i, (_, cases))| cases.into_iter().map(move |c| (i, c)));
        let mut results: Vec<(usize, _)> = futures::stream::iter(cases)
            .map(|(i, case)| async move {
                let result = case.run(settings).await;
                self.print(&format!("=== CONT  kuttl/harness/{}", result.name));
                if !result.log.is_empty() {
                    self.print(&result.log);
                }
                (i, result)
            })
            .buffer_unordered(self.suite.effective_parallel())
            .collect()
            .await;
        results.sort_by(|(a, x), (b, y)| a.cmp(b).then_with(|| x.name.cmp(&y.name)));
        for (i, dir) in dirs.into_iter().enumerate() {
            let cases = results.iter().filter(|(d, _)| *d == i).map(|(_, c)| c.clone()).collect();
            report.suites.push(SuiteReport { dir, started, cases });
        }
        self.harness_log(430, "run tests finished");
    }

    fn print_summary(&self, report: &RunReport) {
        let verdict = |passed: bool| if passed { "PASS" } else { "FAIL" };
        let secs = |d: Duration| format!("{:.2}s", d.as_secs_f64());
        self.print(&format!("--- {}: kuttl ({})", verdict(report.passed()), secs(report.duration)));
        if report.failure.is_none() {
            let all_passed = report.cases().all(|c| c.passed());
            self.print(&format!("    --- {}: kuttl/harness (0.00s)", verdict(all_passed)));
            for case in report.cases() {
                self.print(&format!(
                    "        --- {}: kuttl/harness/{} ({})",
                    verdict(case.passed()),
                    case.name,
                    secs(case.duration)
                ));
            }
        }
        self.print(verdict(report.passed()));
    }
}

/// Waits (up to kuttl's 10 seconds) until a CRD is established.
async fn opkit_crd_wait(api: &Api<CustomResourceDefinition>, name: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut pause = Duration::from_millis(20);
    loop {
        let crd = api.get_opt(name).await.map_err(|e| crate::cluster::short(&e))?;
        let established = crd
            .and_then(|c| c.status)
            .and_then(|s| s.conditions)
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Established" && c.status == "True"));
        if established {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!("waiting for CRD {name} to be established: context deadline exceeded"));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}
