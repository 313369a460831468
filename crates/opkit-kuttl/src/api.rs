//! kuttl's configuration objects (`kuttl.dev/v1beta1`, also read under KUDO's older
//! `kudo.dev` group): the [`TestSuite`] of `kuttl-test.yaml`, the [`TestStep`] a step file
//! may hold, the [`TestAssert`] of an assert file, and the [`Command`]s, object references
//! and collectors they use. Unknown fields are ignored, as kuttl's converter ignores them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The API groups whose `TestSuite`, `TestStep`, `TestAssert` and `TestFile` kinds are
/// harness objects rather than objects to apply.
pub(crate) const HARNESS_GROUPS: [&str; 2] = ["kuttl.dev", "kudo.dev"];

/// Whether a document of `api_version`/`kind` is the harness object `expected_kind`.
pub(crate) fn is_harness_kind(api_version: &str, kind: &str, expected_kind: &str) -> bool {
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    kind == expected_kind && HARNESS_GROUPS.contains(&group)
}

/// Object metadata of a harness object (only its name is read).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct HarnessMeta {
    /// The name (a `TestStep`'s overrides the step's name).
    #[serde(default)]
    pub name: Option<String>,
}

/// `kuttl-test.yaml`: the settings of a whole run.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TestSuite {
    /// Its name (the report's name).
    pub metadata: HarnessMeta,
    /// CRDs to install (and wait for) before the tests.
    pub crd_dir: String,
    /// Directories of manifests to apply before the tests.
    pub manifest_dirs: Vec<String>,
    /// Directories whose subdirectories are test cases.
    pub test_dirs: Vec<String>,
    /// kuttl's mocked control plane; opkit starts its own control plane unless a
    /// kubeconfig is given, so this is noted and otherwise ignored.
    pub start_control_plane: bool,
    /// kind is not used by opkit: noted and ignored.
    #[serde(rename = "startKIND")]
    pub start_kind: bool,
    /// kind's configuration file: ignored.
    pub kind_config: String,
    /// kind's context: ignored.
    pub kind_context: String,
    /// kind's node image cache: ignored.
    pub kind_node_cache: bool,
    /// Images to load into kind: ignored (with a note).
    pub kind_containers: Vec<String>,
    /// Keep what the tests created (and their namespaces).
    pub skip_delete: bool,
    /// Keep the cluster: the in-process control plane lives only as long as the run.
    pub skip_cluster_delete: bool,
    /// The default step timeout in seconds (0: 30).
    pub timeout: u64,
    /// How many test cases run at once (0: 8).
    pub parallel: usize,
    /// Where the report is written (default: the working directory).
    pub artifacts_dir: String,
    /// Commands run before the tests (in namespace `default`); `background` ones run
    /// until the end of the run.
    pub commands: Vec<Command>,
    /// `json` or `xml` (JUnit): the report to write; none when empty.
    pub report_format: String,
    /// The report's file name without extension (default `kuttl-report`).
    pub report_name: String,
    /// `step` (default: each step a JUnit test case) or `test`.
    pub report_granularity: String,
    /// One namespace for every test (created when missing); none: one per test.
    pub namespace: String,
    /// Log kinds not printed: `events`.
    pub suppress: Vec<String>,
    /// File name patterns not reported as ignored (default `README*`).
    pub ignore_files: Option<Vec<String>>,
}

impl TestSuite {
    /// The step timeout in seconds: `timeout`, or kuttl's default of 30.
    pub fn effective_timeout(&self) -> u64 {
        if self.timeout == 0 { 30 } else { self.timeout }
    }

    /// How many test cases run at once: `parallel`, or kuttl's default of 8.
    pub fn effective_parallel(&self) -> usize {
        if self.parallel == 0 { 8 } else { self.parallel }
    }
}

/// A command of a suite, a step or a collector.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Command {
    /// A command line (split as a shell would, `$VARS` expanded, no pipes).
    pub command: String,
    /// A shell script run with `sh -c`.
    pub script: String,
    /// Append `--namespace <test namespace>` unless the command names one.
    pub namespaced: bool,
    /// A non-zero exit is not a failure.
    pub ignore_failure: bool,
    /// Runs until the end of the run (suite commands only).
    pub background: bool,
    /// Seconds before the command is killed (0: the suite's timeout; negative: none).
    pub timeout: i64,
    /// Its output is not logged.
    pub skip_log_output: bool,
}

impl Command {
    /// How kuttl names the command in messages: the command line, or the script's first
    /// meaningful line.
    pub fn display(&self) -> String {
        match (self.command.is_empty(), self.script.is_empty()) {
            (true, true) => "(invalid command with neither Command nor Script set)".into(),
            (false, false) => "(invalid command with both Command and Script set)".into(),
            (false, true) => self.command.clone(),
            (true, false) => {
                let lines: Vec<&str> = self
                    .script
                    .lines()
                    .map(str::trim)
                    .enumerate()
                    .filter(|(i, l)| !(l.is_empty() || l.starts_with('#') || (*i == 0 && l.starts_with("set -"))))
                    .map(|(_, l)| l)
                    .collect();
                match lines.as_slice() {
                    [] => String::new(),
                    [one] => (*one).to_string(),
                    [first, rest @ ..] => format!("{first} [... {} more lines]", rest.len()),
                }
            }
        }
    }
}

/// A `TestStep` object in a step file.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct TestStep {
    /// Its name overrides the step's.
    pub metadata: HarnessMeta,
    /// Overrides the step's index (from its file name) when not 0.
    pub index: i64,
    /// More files (or directories) to apply, relative to the test case.
    pub apply: Vec<String>,
    /// More files (or directories) to assert.
    pub assert: Vec<String>,
    /// More errors files (or directories).
    pub error: Vec<String>,
    /// Objects deleted (and waited for) at the start of the step.
    pub delete: Vec<ObjectReference>,
    /// Marks a step as safe without a cluster; read, and otherwise run as any step.
    pub unit_test: bool,
    /// Commands run before the step's objects are applied.
    pub commands: Vec<Command>,
    /// A kubeconfig for this step's objects and commands (relative to the test case).
    pub kubeconfig: String,
}

/// An object (or objects) to delete: by name, by labels, or every one of the kind.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct ObjectReference {
    /// The API version.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// The name; when empty, every object matching `labels`.
    pub name: String,
    /// The namespace (default: the test's).
    pub namespace: String,
    /// A label selector used when no name is given.
    pub labels: BTreeMap<String, String>,
}

/// A `TestAssert` object in an assert file.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct TestAssert {
    /// The step's timeout in seconds (0: the suite's).
    pub timeout: u64,
    /// What to gather when the step fails.
    pub collectors: Vec<Collector>,
    /// Commands that must succeed for the assert to hold.
    pub commands: Vec<AssertCommand>,
    /// Objects the CEL expressions see, each as a variable.
    pub resource_refs: Vec<ResourceRef>,
    /// CEL expressions that must all be true.
    pub assert_all: Vec<Assertion>,
    /// CEL expressions of which at least one must be true.
    pub assert_any: Vec<Assertion>,
}

/// An object bound to a variable of a `TestAssert`'s CEL expressions.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct ResourceRef {
    /// The API version.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// The namespace (default: the test's).
    pub namespace: String,
    /// The name.
    pub name: String,
    /// The variable's name.
    #[serde(rename = "ref")]
    pub reference: String,
}

impl ResourceRef {
    /// Why the reference is incomplete, as kuttl says it.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.api_version.is_empty() || self.api_version.split('/').count() > 2 {
            Err("apiVersion not of the format (<group>/)<version>".into())
        } else if self.kind.is_empty() {
            Err("kind not specified".into())
        } else if self.name.is_empty() {
            Err("name not specified".into())
        } else if self.reference.is_empty() {
            Err("ref not specified".into())
        } else {
            Ok(())
        }
    }

    /// kuttl's description of the reference.
    pub(crate) fn describe(&self) -> String {
        format!(
            "apiVersion={}, kind={}, namespace={}, name={}, ref={}",
            self.api_version, self.kind, self.namespace, self.name, self.reference
        )
    }
}

/// A CEL expression of a `TestAssert`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Assertion {
    /// The expression.
    pub cel_expr: String,
}

/// A command of a `TestAssert`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct AssertCommand {
    /// A command line.
    pub command: String,
    /// A shell script.
    pub script: String,
    /// Append `--namespace`.
    pub namespaced: bool,
    /// Its output is not logged.
    pub skip_log_output: bool,
}

impl AssertCommand {
    /// The [`Command`] it runs as: never ignoring failure, never in the background, with
    /// the time left of the step.
    pub(crate) fn to_command(&self, timeout: i64) -> Command {
        Command {
            command: self.command.clone(),
            script: self.script.clone(),
            namespaced: self.namespaced,
            skip_log_output: self.skip_log_output,
            timeout,
            ..Command::default()
        }
    }
}

/// What to collect when a step fails: a pod's logs, the namespace's events, or a
/// command's output.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Collector {
    /// `pod`, `events` or `command` (default: `command` when `command` is set, else `pod`).
    #[serde(rename = "type")]
    pub kind: String,
    /// The pod.
    pub pod: String,
    /// The namespace (default: the test's).
    pub namespace: String,
    /// One container (default: all).
    pub container: String,
    /// A label selector for pods.
    pub selector: String,
    /// How many lines (default: 10 with a selector, all with a pod name).
    pub tail: i64,
    /// The command of a `command` collector.
    pub command: String,
}

impl Collector {
    fn kind(&self) -> String {
        if self.kind.is_empty() {
            if self.command.is_empty() { "pod".into() } else { "command".into() }
        } else {
            self.kind.to_lowercase()
        }
    }

    /// Why the collector is invalid, as kuttl says it.
    pub(crate) fn validate(&self) -> Result<(), String> {
        match self.kind().as_str() {
            "command" if self.command.is_empty() => Err("command collector requires a command".into()),
            "command"
                if !(self.pod.is_empty()
                    && self.namespace.is_empty()
                    && self.container.is_empty()
                    && self.selector.is_empty()) =>
            {
                Err("command collectors can NOT have pod, namespace, container or selectors".into())
            }
            "command" => Ok(()),
            "pod" if !self.command.is_empty() => Err("pod collector can NOT have a command".into()),
            "pod" if self.pod.is_empty() && self.selector.is_empty() => {
                Err("pod collector requires a pod or selector".into())
            }
            "pod" => Ok(()),
            "events" if !(self.command.is_empty() && self.selector.is_empty() && self.container.is_empty()) => {
                Err("event collector can not have a selector, container or command".into())
            }
            "events" => Ok(()),
            other => Err(format!("collector type {other:?} unknown")),
        }
    }

    /// The command that collects (kubectl for pods and events), as kuttl builds it.
    pub(crate) fn to_command(&self) -> Option<Command> {
        self.validate().ok()?;
        let ns = if self.namespace.is_empty() { "$NAMESPACE" } else { &self.namespace };
        let line = match self.kind().as_str() {
            "command" => self.command.clone(),
            "events" => {
                let pod = if self.pod.is_empty() { String::new() } else { format!(" {}", self.pod) };
                format!("kubectl get events{pod} -n {ns}")
            }
            _ => {
                let mut b = String::from("kubectl logs --prefix");
                if !self.pod.is_empty() {
                    b.push_str(&format!(" {}", self.pod));
                }
                if !self.selector.is_empty() {
                    b.push_str(&format!(" -l {}", self.selector));
                }
                b.push_str(&format!(" -n {ns}"));
                if self.container.is_empty() {
                    b.push_str(" --all-containers");
                } else {
                    b.push_str(&format!(" -c {}", self.container));
                }
                let tail = match self.tail {
                    0 if !self.selector.is_empty() => 10,
                    0 => -1,
                    t => t,
                };
                b.push_str(&format!(" --tail={tail}"));
                b
            }
        };
        Some(Command { command: line, ignore_failure: true, ..Command::default() })
    }

    /// How kuttl describes the collector in its log: `[type==pod,pod==web,namespace: ns]`.
    pub(crate) fn describe(&self) -> String {
        if let Err(e) = self.validate() {
            return format!("[collector invalid: {e}]");
        }
        let mut details = vec![format!("type=={}", self.kind())];
        if !self.pod.is_empty() {
            details.push(format!("pod=={}", self.pod));
        }
        if !self.selector.is_empty() {
            details.push(format!("label: {}", self.selector));
        }
        if !self.namespace.is_empty() {
            details.push(format!("namespace: {}", self.namespace));
        }
        if !self.container.is_empty() {
            details.push(format!("container: {}", self.container));
        }
        if !self.command.is_empty() {
            details.push(format!("command: {}", self.command));
        }
        format!("[{}]", details.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectors_build_kuttls_kubectl_commands() {
        let pod = Collector { pod: "web".into(), ..Collector::default() };
        assert_eq!(
            pod.to_command().map(|c| c.command).as_deref(),
            Some("kubectl logs --prefix web -n $NAMESPACE --all-containers --tail=-1")
        );
        let selected = Collector { selector: "app=web".into(), container: "c".into(), ..Collector::default() };
        assert_eq!(
            selected.to_command().map(|c| c.command).as_deref(),
            Some("kubectl logs --prefix -l app=web -n $NAMESPACE -c c --tail=10")
        );
        let events = Collector { kind: "events".into(), namespace: "x".into(), ..Collector::default() };
        assert_eq!(events.to_command().map(|c| c.command).as_deref(), Some("kubectl get events -n x"));
        let invalid = Collector::default();
        assert!(invalid.to_command().is_none());
        assert_eq!(invalid.describe(), "[collector invalid: pod collector requires a pod or selector]");
    }

    #[test]
    fn scripts_are_named_by_their_first_line() {
        let c = Command { script: "set -e\n# x\nkubectl get pods\necho done\n".into(), ..Command::default() };
        assert_eq!(c.display(), "kubectl get pods [... 1 more lines]");
    }
}
