//! The result of a run, and the reports kuttl writes from it: JUnit XML
//! (`kuttl-report.xml`) and its JSON twin, with a test suite per test directory and, at
//! kuttl's default `step` granularity, a nested suite per test case whose JUnit test
//! cases are its steps (`setup`, `step 0-install`, ...); at `test` granularity, one JUnit
//! test case per test case. A failure carries kuttl's message (`failed in step 1-scale`)
//! and its last error as text.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::KuttlError;

/// A step's failure.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StepFailure {
    /// `failed in step 0-install`.
    pub message: String,
    /// Its errors (a diff, then the mismatch).
    pub errors: Vec<String>,
}

/// A step's result (`setup` is the namespace's creation).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StepReport {
    /// `setup` or `step 0-install`.
    pub name: String,
    /// How many asserts and errors objects the step checked.
    pub assertions: usize,
    /// Why it failed.
    pub failure: Option<StepFailure>,
}

/// A test case's result.
#[derive(Debug, Clone, Default)]
pub struct CaseReport {
    /// The test case (its directory's name).
    pub name: String,
    /// The namespace it ran in.
    pub namespace: String,
    /// When it started.
    pub started: jiff::Timestamp,
    /// How long it took.
    pub duration: Duration,
    /// Its steps, up to the first failing one.
    pub steps: Vec<StepReport>,
    /// Its errors, as printed (empty when it passed).
    pub errors: Vec<String>,
    /// Its log, as printed.
    pub log: String,
}

impl CaseReport {
    /// Whether the test case passed.
    pub fn passed(&self) -> bool {
        self.errors.is_empty()
    }
}

/// The test cases of one test directory.
#[derive(Debug, Clone, Default)]
pub struct SuiteReport {
    /// The test directory, as the suite names it.
    pub dir: String,
    /// When it started.
    pub started: jiff::Timestamp,
    /// Its test cases, by name.
    pub cases: Vec<CaseReport>,
}

/// The result of a run.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    /// The suite's name (`metadata.name` of the TestSuite, usually empty).
    pub name: String,
    /// How long the run took.
    pub duration: Duration,
    /// One per test directory.
    pub suites: Vec<SuiteReport>,
    /// A failure of the run itself (setup: CRDs, manifests, suite commands).
    pub failure: Option<String>,
}

impl RunReport {
    /// Whether every test case passed and the setup did not fail.
    pub fn passed(&self) -> bool {
        self.failure.is_none() && self.cases().all(CaseReport::passed)
    }

    /// Every test case.
    pub fn cases(&self) -> impl Iterator<Item = &CaseReport> {
        self.suites.iter().flat_map(|s| s.cases.iter())
    }

    /// A summary for `-o json`: counts, and each case with its result and errors.
    pub fn summary(&self) -> Value {
        let cases: Vec<Value> = self
            .cases()
            .map(|c| {
                json!({
                    "name": c.name,
                    "namespace": c.namespace,
                    "passed": c.passed(),
                    "seconds": secs(c.duration).parse::<f64>().unwrap_or_default(),
                    "steps": c.steps,
                    "errors": c.errors,
                })
            })
            .collect();
        let failed = self.cases().filter(|c| !c.passed()).count();
        json!({
            "passed": self.passed(),
            "tests": cases.len(),
            "failures": failed,
            "seconds": secs(self.duration).parse::<f64>().unwrap_or_default(),
            "failure": self.failure,
            "cases": cases,
        })
    }

    /// The report as kuttl's JSON (`reportFormat: json`); `granularity` is `step` or `test`.
    pub fn to_kuttl_json(&self, granularity: &str) -> String {
        let value = self.tree(granularity).to_json();
        let mut out = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(b"  ");
        let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
        if serde::Serialize::serialize(&value, &mut serializer).is_err() {
            return String::new();
        }
        // Go's MarshalIndent with prefix " ": every line after the first starts with it.
        String::from_utf8_lossy(&out).replace('\n', "\n ")
    }

    /// The report as kuttl's JUnit XML (`reportFormat: xml`).
    pub fn to_junit_xml(&self, granularity: &str) -> String {
        let mut out = String::new();
        self.tree(granularity).to_xml(&mut out, 0);
        out.trim_end_matches('\n').to_string()
    }

    /// Writes `<dir>/<name>.xml` or `.json` as kuttl does; returns the path.
    pub fn write(
        &self,
        dir: &Path,
        name: &str,
        format: ReportFormat,
        granularity: &str,
    ) -> Result<PathBuf, KuttlError> {
        std::fs::create_dir_all(dir).map_err(|source| KuttlError::Io { path: dir.to_path_buf(), source })?;
        let (path, text) = match format {
            ReportFormat::Xml => (dir.join(format!("{name}.xml")), self.to_junit_xml(granularity)),
            ReportFormat::Json => (dir.join(format!("{name}.json")), self.to_kuttl_json(granularity)),
        };
        std::fs::write(&path, text).map_err(|source| KuttlError::Io { path: path.clone(), source })?;
        Ok(path)
    }

    fn tree(&self, granularity: &str) -> Node {
        let mut suites = Vec::new();
        for suite in &self.suites {
            let mut node = Node::suite("testsuite", &suite.dir, suite.started);
            let suite_start = suite.started;
            let mut end = suite_start;
            for case in &suite.cases {
                let case_end = case.started + case.duration;
                if case_end > end {
                    end = case_end;
                }
                if granularity == "test" {
                    let mut tc = Node::case(&case.name, &base_name(&suite.dir), case.started, case.duration);
                    for step in &case.steps {
                        tc.assertions += step.assertions;
                        if let Some(f) = &step.failure {
                            tc.failure = Some(f.clone());
                        }
                    }
                    node.children.push(tc);
                } else {
                    let mut sub = Node::suite("testsuite", &case.name, case.started);
                    // kuttl makes each step's JUnit case when the test ends: stamped then,
                    // with no time of its own.
                    let ended = case.started + case.duration;
                    for step in &case.steps {
                        let mut tc = Node::case(&step.name, &case.name, ended, Duration::ZERO);
                        tc.assertions = step.assertions;
                        tc.failure = step.failure.clone();
                        sub.children.push(tc);
                    }
                    sub.children.sort_by(|a, b| a.name.cmp(&b.name));
                    sub.summarize(case.duration);
                    node.children.push(sub);
                }
            }
            node.children.sort_by(|a, b| (a.element, &a.name).cmp(&(b.element, &b.name)));
            let elapsed = end.duration_since(suite_start).unsigned_abs();
            node.summarize(elapsed);
            suites.push(node);
        }
        suites.sort_by(|a, b| a.name.cmp(&b.name));
        let mut root = Node::suite("testsuites", &self.name, jiff::Timestamp::now());
        root.tests = suites.iter().map(|s| s.tests).sum();
        root.failures = suites.iter().map(|s| s.failures).sum();
        root.time = secs(self.duration);
        root.children = suites;
        root.failure = self.failure.clone().map(|message| StepFailure { message, errors: Vec::new() });
        root
    }
}

/// The report file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    /// JUnit XML.
    Xml,
    /// kuttl's JSON.
    Json,
}

impl ReportFormat {
    /// `xml`/`junit` or `json` (any case); `None` otherwise.
    pub fn parse(text: &str) -> Option<ReportFormat> {
        match text.to_lowercase().as_str() {
            "xml" | "junit" => Some(ReportFormat::Xml),
            "json" => Some(ReportFormat::Json),
            _ => None,
        }
    }
}

fn base_name(dir: &str) -> String {
    Path::new(dir).file_name().and_then(|n| n.to_str()).unwrap_or(dir).to_string()
}

fn secs(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

/// A `testsuites`, `testsuite` or `testcase` element.
struct Node {
    element: &'static str,
    name: String,
    classname: String,
    timestamp: jiff::Timestamp,
    time: String,
    tests: usize,
    failures: usize,
    assertions: usize,
    failure: Option<StepFailure>,
    children: Vec<Node>,
}

impl Node {
    fn suite(element: &'static str, name: &str, timestamp: jiff::Timestamp) -> Node {
        Node {
            element,
            name: name.to_string(),
            classname: String::new(),
            timestamp,
            time: String::new(),
            tests: 0,
            failures: 0,
            assertions: 0,
            failure: None,
            children: Vec::new(),
        }
    }

    fn case(name: &str, classname: &str, timestamp: jiff::Timestamp, duration: Duration) -> Node {
        let mut node = Node::suite("testcase", name, timestamp);
        node.classname = classname.to_string();
        node.time = secs(duration);
        node
    }

    fn summarize(&mut self, elapsed: Duration) {
        for child in &self.children {
            match child.element {
                "testcase" => {
                    self.tests += 1;
                    self.failures += usize::from(child.failure.is_some());
                }
                _ => {
                    self.tests += child.tests;
                    self.failures += child.failures;
                }
            }
        }
        self.time = secs(elapsed);
    }

    fn failure_json(f: &StepFailure) -> Value {
        let mut v = serde_json::Map::new();
        if let Some(text) = f.errors.last() {
            v.insert("text".into(), json!(text));
        }
        v.insert("message".into(), json!(f.message));
        Value::Object(v)
    }

    fn to_json(&self) -> Value {
        let mut v = serde_json::Map::new();
        let cases: Vec<Value> = self.children.iter().filter(|c| c.element == "testcase").map(Node::to_json).collect();
        let suites: Vec<Value> = self.children.iter().filter(|c| c.element != "testcase").map(Node::to_json).collect();
        match self.element {
            "testsuites" => {
                v.insert("name".into(), json!(self.name));
                v.insert("tests".into(), json!(self.tests));
                v.insert("failures".into(), json!(self.failures));
                v.insert("time".into(), json!(self.time));
                if !suites.is_empty() {
                    v.insert("testsuite".into(), Value::Array(suites));
                }
                if let Some(f) = &self.failure {
                    v.insert("failure".into(), Node::failure_json(f));
                }
            }
            "testsuite" => {
                v.insert("tests".into(), json!(self.tests));
                v.insert("failures".into(), json!(self.failures));
                v.insert("timestamp".into(), json!(self.timestamp.to_string()));
                v.insert("time".into(), json!(self.time));
                v.insert("name".into(), json!(self.name));
                if !cases.is_empty() {
                    v.insert("testcase".into(), Value::Array(cases));
                }
                if !suites.is_empty() {
                    v.insert("testsuite".into(), Value::Array(suites));
                }
            }
            _ => {
                v.insert("classname".into(), json!(self.classname));
                v.insert("name".into(), json!(self.name));
                v.insert("timestamp".into(), json!(self.timestamp.to_string()));
                v.insert("time".into(), json!(self.time));
                if self.assertions > 0 {
                    v.insert("assertions".into(), json!(self.assertions));
                }
                if let Some(f) = &self.failure {
                    v.insert("failure".into(), Node::failure_json(f));
                }
            }
        }
        Value::Object(v)
    }

    fn to_xml(&self, out: &mut String, depth: usize) {
        let pad = format!(" {}", "  ".repeat(depth));
        let attrs = match self.element {
            "testsuites" => format!(
                "name=\"{}\" tests=\"{}\" failures=\"{}\" time=\"{}\"",
                escape(&self.name),
                self.tests,
                self.failures,
                self.time
            ),
            "testsuite" => format!(
                "tests=\"{}\" failures=\"{}\" timestamp=\"{}\" time=\"{}\" name=\"{}\"",
                self.tests,
                self.failures,
                self.timestamp,
                self.time,
                escape(&self.name)
            ),
            _ => format!(
                "classname=\"{}\" name=\"{}\" timestamp=\"{}\" time=\"{}\" assertions=\"{}\"",
                escape(&self.classname),
                escape(&self.name),
                self.timestamp,
                self.time,
                self.assertions
            ),
        };
        out.push_str(&format!("{pad}<{} {attrs}>", self.element));
        let ordered: Vec<&Node> = match self.element {
            "testsuite" => self
                .children
                .iter()
                .filter(|c| c.element == "testcase")
                .chain(self.children.iter().filter(|c| c.element != "testcase"))
                .collect(),
            _ => self.children.iter().collect(),
        };
        let mut inner = String::new();
        for child in ordered {
            child.to_xml(&mut inner, depth + 1);
        }
        if let Some(f) = &self.failure {
            let text = f.errors.last().map(|t| escape(t)).unwrap_or_default();
            inner.push_str(&format!("{pad}  <failure message=\"{}\" type=\"\">{text}</failure>\n", escape(&f.message)));
        }
        if inner.is_empty() {
            out.push_str(&format!("</{}>\n", self.element));
        } else {
            out.push('\n');
            out.push_str(&inner);
            out.push_str(&format!("{pad}</{}>\n", self.element));
        }
    }
}

/// Go's `xml.EscapeText`: text and attribute values for the XML reports (kuttl's JUnit
/// here, scorecard's xunit in opkit-cli).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\t' => out.push_str("&#x9;"),
            '\n' => out.push_str("&#xA;"),
            '\r' => out.push_str("&#xD;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RunReport {
        let t = jiff::Timestamp::UNIX_EPOCH;
        let step = |name: &str, failure: Option<StepFailure>| StepReport { name: name.into(), assertions: 1, failure };
        let failed = StepFailure {
            message: "failed in step 1-scale".into(),
            errors: vec!["diff".into(), "resource \"x\" <bad>".into()],
        };
        RunReport {
            name: String::new(),
            duration: Duration::from_millis(1500),
            suites: vec![SuiteReport {
                dir: "./tests".into(),
                started: t,
                cases: vec![CaseReport {
                    name: "web".into(),
                    started: t,
                    duration: Duration::from_secs(1),
                    steps: vec![step("setup", None), step("step 0-install", None), step("step 1-scale", Some(failed))],
                    errors: vec!["failed".into()],
                    ..CaseReport::default()
                }],
            }],
            failure: None,
        }
    }

    #[test]
    fn junit_xml_nests_steps_under_each_test_as_kuttl_does() {
        let xml = sample().to_junit_xml("step");
        let expected = [
            " <testsuites name=\"\" tests=\"3\" failures=\"1\" time=\"1.500\">",
            "   <testsuite tests=\"3\" failures=\"1\" timestamp=\"1970-01-01T00:00:00Z\" time=\"1.000\" name=\"./tests\">",
            "     <testsuite tests=\"3\" failures=\"1\" timestamp=\"1970-01-01T00:00:00Z\" time=\"1.000\" name=\"web\">",
            "       <testcase classname=\"web\" name=\"setup\" timestamp=\"1970-01-01T00:00:01Z\" time=\"0.000\" assertions=\"1\"></testcase>",
            "       <testcase classname=\"web\" name=\"step 0-install\" timestamp=\"1970-01-01T00:00:01Z\" time=\"0.000\" assertions=\"1\"></testcase>",
            "       <testcase classname=\"web\" name=\"step 1-scale\" timestamp=\"1970-01-01T00:00:01Z\" time=\"0.000\" assertions=\"1\">",
            "         <failure message=\"failed in step 1-scale\" type=\"\">resource &#34;x&#34; &lt;bad&gt;</failure>",
            "       </testcase>",
            "     </testsuite>",
            "   </testsuite>",
            " </testsuites>",
        ]
        .join("\n");
        assert_eq!(xml, expected);
    }

    #[test]
    fn test_granularity_makes_one_junit_case_per_test() {
        let json: Value = serde_json::from_str(&sample().to_kuttl_json("test")).expect("json");
        let case = &json["testsuite"][0]["testcase"][0];
        assert_eq!(case["name"], "web");
        assert_eq!(case["classname"], "tests");
        assert_eq!(case["assertions"], 3);
        assert_eq!(case["failure"]["message"], "failed in step 1-scale");
        assert_eq!(json["failures"], 1);
    }
}
