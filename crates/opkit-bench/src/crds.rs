//! `opkit-bench crds`: the CRD corpus conformance run. An API server starts in this
//! process (no cluster controllers: a bare kube-apiserver, as envtest runs one); every
//! CustomResourceDefinition of the corpus's CRD folders (`<corpus>/<folder>/*.yaml`,
//! multi-document files included) is created and waited for until Established and served;
//! then every example object (the `*-examples*` folders and files) is created, built-in
//! kinds (Service, Deployment, ConfigMap, ClusterRoleBinding, ...) too, each namespaced
//! one in its namespace (`default` when it names none), created as needed. Each object's
//! verdict (accepted, or the status code and message) is compared with what a real
//! cluster with the same CRDs gives (`tools/crds/expected.tsv`). The corpus is read where
//! it lies; nothing of it is copied.
//!
//! Examples are alternatives more than a set: several user-guide files define the same
//! object (prometheus-operator's `example` Alertmanager), so an example of the kind,
//! namespace and name of an earlier one replaces it (the earlier is deleted first), as
//! following the guides one by one does. A document that is not a Kubernetes object (no
//! `apiVersion` or `kind`, such as an Alertmanager configuration file) is listed as
//! skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use kube::Client;
use kube::discovery::{Discovery, Scope};
use opkit_testenv::TestEnv;
use serde::Serialize;
use serde_json::{Value, json};

/// What the run is asked.
#[derive(Debug, Clone)]
pub struct CrdsOptions {
    /// The corpus directory (`certmanager/`, `prom/`, ... and `*-examples*`).
    pub corpus: PathBuf,
    /// The expectations file, if any.
    pub expect: Option<PathBuf>,
    /// How long a CRD may take to be Established and served.
    pub timeout: Duration,
}

/// One object's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// `crd/<name>`, or `<file>#<Kind>/<name>` for an example (`<generateName>*` when
    /// the server names it).
    pub id: String,
    /// `accepted`, or the status code of the refusal.
    pub verdict: String,
    /// The refusal's message (the Status's `message`).
    pub message: Option<String>,
    /// What a real cluster gives, from the expectations file.
    pub expected: Option<String>,
    /// Whether the verdict is the expected one (an object not in the file never is).
    pub matches: bool,
    /// The create (and, for a CRD, the wait until it is served), in ms.
    pub millis: f64,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct CrdsReport {
    /// Every CRD, in file order.
    pub crds: Vec<Outcome>,
    /// Every example object, in file order.
    pub examples: Vec<Outcome>,
    /// CRDs accepted (created and Established).
    pub crds_accepted: usize,
    /// Examples whose verdict is the expected one.
    pub examples_as_expected: usize,
    /// Entries of the expectations file that no object of the corpus matched.
    pub not_in_corpus: Vec<String>,
    /// Example documents that are not Kubernetes objects (`<file>#<index>`).
    pub skipped: Vec<String>,
    /// The whole run, in seconds.
    pub seconds: f64,
}

impl CrdsReport {
    /// Whether the run passes: every CRD accepted, every verdict as expected, every
    /// expectation met by an object.
    pub fn passed(&self) -> bool {
        self.crds_accepted == self.crds.len()
            && self.crds.iter().chain(&self.examples).all(|o| o.matches)
            && self.not_in_corpus.is_empty()
    }

    /// `crds: N of N accepted, M of M examples as expected`.
    pub fn summary(&self) -> String {
        format!(
            "crds: {} of {} accepted, {} of {} examples as expected",
            self.crds_accepted,
            self.crds.len(),
            self.examples_as_expected,
            self.examples.len()
        )
    }
}

/// Why the run could not happen.
#[derive(Debug, thiserror::Error)]
pub enum CrdsError {
    /// The corpus or the expectations could not be read.
    #[error("{}: {problem}", path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// What went wrong.
        problem: String,
    },
    /// The server could not be started or reached.
    #[error("{0}")]
    Server(String),
}

/// One document to create, with where it comes from.
struct Doc {
    file: String,
    object: Value,
}

/// Reads the expectations: `id<TAB>verdict[<TAB>comment]`, `#` starting a comment line.
fn expectations(path: &Path) -> Result<BTreeMap<String, String>, CrdsError> {
    let read = |problem: String| CrdsError::Read { path: path.into(), problem };
    let text = std::fs::read_to_string(path).map_err(|e| read(e.to_string()))?;
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let mut cols = line.split('\t');
        let (Some(id), Some(verdict)) = (cols.next(), cols.next()) else {
            return Err(read(format!("line {}: expected `id<TAB>verdict[<TAB>comment]`", i + 1)));
        };
        let verdict = verdict.trim();
        if verdict != "accepted" && verdict.parse::<u16>().is_err() {
            return Err(read(format!("line {}: the verdict is `accepted` or a status code, not {verdict:?}", i + 1)));
        }
        if out.insert(id.trim().to_string(), verdict.to_string()).is_some() {
            return Err(read(format!("line {}: {} is listed twice", i + 1, id.trim())));
        }
    }
    Ok(out)
}

/// The documents of every `.yaml` file of `dir` (recursively) or of the file `dir`.
fn documents(corpus: &Path, path: &Path, out: &mut Vec<Doc>) -> Result<(), CrdsError> {
    let read = |p: &Path, problem: String| CrdsError::Read { path: p.into(), problem };
    if path.is_dir() {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(path).map_err(|e| read(path, e.to_string()))?.flatten().map(|e| e.path()).collect();
        entries.sort();
        for entry in entries {
            documents(corpus, &entry, out)?;
        }
        return Ok(());
    }
    if !path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
        return Ok(());
    }
    let text = std::fs::read_to_string(path).map_err(|e| read(path, e.to_string()))?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|e| read(path, e.to_string()))?;
    let file = path.strip_prefix(corpus).unwrap_or(path).display().to_string();
    out.extend(docs.into_iter().filter(Value::is_object).map(|object| Doc { file: file.clone(), object }));
    Ok(())
}

/// The corpus's CRD documents and example documents.
fn corpus_documents(corpus: &Path) -> Result<(Vec<Doc>, Vec<Doc>), CrdsError> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(corpus)
        .map_err(|e| CrdsError::Read { path: corpus.into(), problem: e.to_string() })?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    let (mut crds, mut examples) = (Vec::new(), Vec::new());
    for entry in entries {
        let name = entry.file_name().unwrap_or_default().to_string_lossy().to_string();
        if name.contains("-examples") {
            documents(corpus, &entry, &mut examples)?;
        } else if entry.is_dir() {
            documents(corpus, &entry, &mut crds)?;
        }
    }
    Ok((crds, examples))
}

/// A response: its status code and body.
struct Response {
    code: u16,
    body: Value,
}

impl Response {
    fn verdict(&self) -> (String, Option<String>) {
        if (200..300).contains(&self.code) {
            ("accepted".to_string(), None)
        } else {
            let message = self.body["message"].as_str().map(String::from);
            (self.code.to_string(), message.or_else(|| Some(self.body.to_string())))
        }
    }
}

async fn request(client: &Client, method: &str, path: &str, body: Option<&Value>) -> Result<Response, CrdsError> {
    let mut req = http::Request::builder().method(method).uri(path);
    let bytes = match body {
        Some(b) => {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
            serde_json::to_vec(b).map_err(|e| CrdsError::Server(e.to_string()))?
        }
        None => Vec::new(),
    };
    let req = req.body(kube::client::Body::from(bytes)).map_err(|e| CrdsError::Server(e.to_string()))?;
    let res = client.send(req).await.map_err(|e| CrdsError::Server(format!("{method} {path}: {e}")))?;
    let code = res.status().as_u16();
    let body = res.into_body().collect().await.map_err(|e| CrdsError::Server(format!("{method} {path}: {e}")))?;
    let body = serde_json::from_slice(&body.to_bytes()).unwrap_or(Value::Null);
    Ok(Response { code, body })
}

/// Whether the CRD's status says Established.
fn established(crd: &Value) -> bool {
    crd["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True")
}

/// Waits until CRD `name` is Established and its storage version's collection is served.
async fn until_served(client: &Client, crd: &Value, timeout: Duration) -> Result<(), String> {
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
    let versions = crd["spec"]["versions"].as_array().cloned().unwrap_or_default();
    let version = versions
        .iter()
        .find(|v| v["storage"] == true)
        .or(versions.first())
        .and_then(|v| v["name"].as_str())
        .unwrap_or_default();
    let deadline = Instant::now() + timeout;
    let crd_path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
    let list = format!("/apis/{group}/{version}/{plural}?limit=1");
    loop {
        let crd_ok = request(client, "GET", &crd_path, None).await.is_ok_and(|r| established(&r.body));
        if crd_ok && request(client, "GET", &list, None).await.is_ok_and(|r| r.code == 200) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("not Established and served within {timeout:?}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Deletes the object at `path` (an earlier example of the same name) and waits until
/// it is gone.
async fn replace(client: &Client, path: &str, timeout: Duration) -> Result<(), CrdsError> {
    request(client, "DELETE", path, None).await?;
    let deadline = Instant::now() + timeout;
    while request(client, "GET", path, None).await?.code != 404 {
        if Instant::now() > deadline {
            return Err(CrdsError::Server(format!("{path} was not deleted within {timeout:?}")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// The id of an example document.
fn example_id(doc: &Doc) -> String {
    let kind = doc.object["kind"].as_str().unwrap_or("?");
    let meta = &doc.object["metadata"];
    let name = match meta["name"].as_str() {
        Some(name) => name.to_string(),
        None => format!("{}*", meta["generateName"].as_str().unwrap_or("")),
    };
    format!("{}#{kind}/{name}", doc.file)
}

/// Where an object of `obj`'s kind is created (`None`: the server serves no such kind),
/// and the namespace it goes in.
fn collection(discovery: &Discovery, obj: &Value) -> Option<(String, Option<String>)> {
    let api_version = obj["apiVersion"].as_str()?;
    let kind = obj["kind"].as_str()?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = discovery.resolve_gvk(&gvk)?;
    let prefix = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") };
    Some(match caps.scope {
        Scope::Namespaced => {
            let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
            (format!("{prefix}/namespaces/{ns}/{}", resource.plural), Some(ns))
        }
        Scope::Cluster => (format!("{prefix}/{}", resource.plural), None),
    })
}

fn outcome(
    id: String,
    verdict: (String, Option<String>),
    expected: &BTreeMap<String, String>,
    started: Instant,
) -> Outcome {
    let want = expected.get(&id).cloned();
    let matches = want.as_deref() == Some(verdict.0.as_str());
    Outcome { id, verdict: verdict.0, message: verdict.1, expected: want, matches, millis: millis(started) }
}

fn millis(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

/// Runs the corpus.
pub async fn run(options: &CrdsOptions) -> Result<CrdsReport, CrdsError> {
    let started = Instant::now();
    let expected = match &options.expect {
        Some(path) => expectations(path)?,
        None => BTreeMap::new(),
    };
    let (crd_docs, example_docs) = corpus_documents(&options.corpus)?;
    if !crd_docs.iter().any(|d| d.object["kind"] == "CustomResourceDefinition") {
        let problem = "no CustomResourceDefinition in its folders".to_string();
        return Err(CrdsError::Read { path: options.corpus.clone(), problem });
    }
    let env = TestEnv::builder()
        .without_controllers()
        .start()
        .await
        .map_err(|e| CrdsError::Server(format!("starting the server: {e}")))?;
    let client = env.client();

    let crds = create_crds(&client, &crd_docs, &expected, options.timeout).await?;
    let discovery =
        Discovery::new(client.clone()).run().await.map_err(|e| CrdsError::Server(format!("discovery: {e}")))?;
    let mut applier = ExampleApplier {
        client: &client,
        discovery: &discovery,
        timeout: options.timeout,
        namespaces: BTreeSet::from(["default".to_string()]),
        created: BTreeSet::new(),
    };
    let mut examples = Vec::new();
    let mut skipped = Vec::new();
    for (i, doc) in example_docs.iter().enumerate() {
        if !doc.object["apiVersion"].is_string() || !doc.object["kind"].is_string() {
            let index = example_docs[..i].iter().filter(|d| d.file == doc.file).count();
            skipped.push(format!("{}#{index}", doc.file));
            continue;
        }
        let begun = Instant::now();
        let verdict = applier.create(doc).await?;
        examples.push(outcome(example_id(doc), verdict, &expected, begun));
    }

    let seen: BTreeSet<&str> = crds.iter().chain(&examples).map(|o| o.id.as_str()).collect();
    let not_in_corpus = expected.keys().filter(|id| !seen.contains(id.as_str())).cloned().collect();
    Ok(CrdsReport {
        crds_accepted: crds.iter().filter(|o| o.verdict == "accepted").count(),
        examples_as_expected: examples.iter().filter(|o| o.matches).count(),
        crds,
        examples,
        not_in_corpus,
        skipped,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Creates each CRD of the corpus and, when accepted, waits until it is served.
async fn create_crds(
    client: &Client,
    crd_docs: &[Doc],
    expected: &BTreeMap<String, String>,
    timeout: Duration,
) -> Result<Vec<Outcome>, CrdsError> {
    let mut crds = Vec::new();
    for doc in crd_docs.iter().filter(|d| d.object["kind"] == "CustomResourceDefinition") {
        let begun = Instant::now();
        let id = format!("crd/{}", doc.object["metadata"]["name"].as_str().unwrap_or("?"));
        let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        let res = request(client, "POST", path, Some(&doc.object)).await?;
        let mut verdict = res.verdict();
        if res.code == 201
            && let Err(problem) = until_served(client, &doc.object, timeout).await
        {
            verdict = ("not-established".to_string(), Some(problem));
        }
        crds.push(outcome(id, verdict, expected, begun));
    }
    Ok(crds)
}

/// Creates the example objects one by one, creating their namespaces on the way and
/// replacing an object of the same name created before.
struct ExampleApplier<'a> {
    /// The server.
    client: &'a Client,
    /// What the server serves, after the CRDs were created.
    discovery: &'a Discovery,
    /// How long a replaced object may take to go away.
    timeout: Duration,
    /// Namespaces that exist.
    namespaces: BTreeSet<String>,
    /// Object paths created so far.
    created: BTreeSet<String>,
}

impl ExampleApplier<'_> {
    /// Creates one example; returns the server's verdict.
    async fn create(&mut self, doc: &Doc) -> Result<(String, Option<String>), CrdsError> {
        let Some((path, ns)) = collection(self.discovery, &doc.object) else {
            return Ok(("404".to_string(), Some(format!("the server serves no {}", doc.object["kind"]))));
        };
        if let Some(ns) = ns.filter(|ns| !self.namespaces.contains(ns)) {
            let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            let res = request(self.client, "POST", "/api/v1/namespaces", Some(&namespace)).await?;
            if res.code != 201 && res.code != 409 {
                return Err(CrdsError::Server(format!("creating namespace {ns}: HTTP {}", res.code)));
            }
            self.namespaces.insert(ns);
        }
        if let Some(name) = doc.object["metadata"]["name"].as_str() {
            let existing = format!("{path}/{name}");
            if !self.created.insert(existing.clone()) {
                replace(self.client, &existing, self.timeout).await?;
            }
        }
        Ok(request(self.client, "POST", &path, Some(&doc.object)).await?.verdict())
    }
}

/// The report as a table, with the summary line last.
pub fn render_text(report: &CrdsReport) -> String {
    let mut out = format!("{:<96} {:<16} {:<10} {:>8}\n", "OBJECT", "VERDICT", "EXPECTED", "MS");
    for o in report.crds.iter().chain(&report.examples) {
        let expected = match (&o.expected, o.matches) {
            (Some(_), true) => "ok".to_string(),
            (Some(e), false) => format!("{e} (!)"),
            (None, _) => "unlisted (!)".to_string(),
        };
        out.push_str(&format!("{:<96} {:<16} {:<10} {:>8.1}\n", o.id, o.verdict, expected, o.millis));
        if let Some(message) = &o.message {
            let mut message = message.clone();
            if message.len() > 400 {
                let cut = (0..=400).rev().find(|i| message.is_char_boundary(*i)).unwrap_or(0);
                message.truncate(cut);
                message.push_str("...");
            }
            out.push_str(&format!("    {message}\n"));
        }
    }
    for doc in &report.skipped {
        out.push_str(&format!("skipped (not a Kubernetes object): {doc}\n"));
    }
    for id in &report.not_in_corpus {
        out.push_str(&format!("expected but not in the corpus: {id}\n"));
    }
    out.push_str(&format!("\n{} ({:.1} s)\n", report.summary(), report.seconds));
    out
}
