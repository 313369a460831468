//! `watches.yaml` in operator-sdk's format (`internal/ansible/watches`): for each
//! group/version/kind, the `role` or `playbook` that reconciles it, with `vars`,
//! `reconcilePeriod`, `manageStatus`, `watchDependentResources`,
//! `watchClusterScopedResources`, a `finalizer {name, role|playbook, vars}`, a label
//! `selector`, `maxRunnerArtifacts`, `snakeCaseParameters`, `markUnsafe`,
//! `watchAnnotationsChanges` and `blacklist`. `${VAR}` references are replaced from the
//! environment first (left as written when unset). Errors name the entry and the field.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Map, Value};

use crate::OperatorError;

/// operator-sdk's default `maxRunnerArtifacts`.
pub(crate) const DEFAULT_MAX_RUNNER_ARTIFACTS: usize = 20;

/// The fields an entry may have; others are ignored with a warning, as operator-sdk
/// ignores them.
const FIELDS: &[&str] = &[
    "group",
    "version",
    "kind",
    "playbook",
    "role",
    "vars",
    "maxRunnerArtifacts",
    "reconcilePeriod",
    "manageStatus",
    "watchDependentResources",
    "watchClusterScopedResources",
    "snakeCaseParameters",
    "watchAnnotationsChanges",
    "markUnsafe",
    "blacklist",
    "finalizer",
    "selector",
];

/// What Ansible runs: a role (a directory) or a playbook (a file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runnable {
    /// A role directory; its parent is passed as the roles path.
    Role(PathBuf),
    /// A playbook file.
    Playbook(PathBuf),
}

impl Runnable {
    /// The role directory or playbook file.
    pub fn path(&self) -> &Path {
        match self {
            Runnable::Role(p) | Runnable::Playbook(p) => p,
        }
    }
}

/// A watch's `finalizer`: its name, and what runs when a resource carrying it is deleted.
#[derive(Debug, Clone)]
pub struct Finalizer {
    /// The finalizer's name, added to every reconciled resource.
    pub name: String,
    /// The finalizer's role or playbook; `None` runs the watch's own with `vars`.
    pub runnable: Option<Runnable>,
    /// Extra vars of the finalizer run.
    pub vars: Map<String, Value>,
}

/// A group/version/kind a dependent watch leaves out (`blacklist`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupVersionKind {
    /// The group (empty for the core group).
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind.
    pub kind: String,
}

/// One watched kind and how it is reconciled.
#[derive(Debug, Clone)]
pub struct Watch {
    /// The custom resource's group.
    pub group: String,
    /// The custom resource's version.
    pub version: String,
    /// The custom resource's kind.
    pub kind: String,
    /// The role or playbook each reconcile runs.
    pub runnable: Runnable,
    /// Extra vars added to every run.
    pub vars: Map<String, Value>,
    /// How many artifact directories `ansible-runner` keeps per resource (default 20).
    pub max_runner_artifacts: usize,
    /// How often a resource is reconciled without events (zero: only on events).
    pub reconcile_period: Duration,
    /// Whether the operator writes the Running/Successful/Failure conditions (default true).
    pub manage_status: bool,
    /// Whether changes to what a run created trigger a reconcile (default true).
    pub watch_dependent_resources: bool,
    /// Whether cluster-scoped dependents are watched too (default false).
    pub watch_cluster_scoped_resources: bool,
    /// Whether the spec's keys are snake-cased into extra vars (default true).
    pub snake_case_parameters: bool,
    /// Whether annotation changes trigger a reconcile (default false).
    pub watch_annotations_changes: bool,
    /// Whether the spec's strings are marked `__ansible_unsafe` (default false).
    pub mark_unsafe: bool,
    /// Dependent kinds never watched nor read from the cache.
    pub blacklist: Vec<GroupVersionKind>,
    /// The finalizer, if the watch has one.
    pub finalizer: Option<Finalizer>,
    /// Only resources whose labels match are reconciled.
    pub selector: Option<LabelSelector>,
    /// How many resources of this kind are reconciled at once (`--max-concurrent-reconciles`,
    /// or `MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP>`).
    pub max_concurrent_reconciles: usize,
}

impl Watch {
    /// `group/version, Kind=kind`, as operator-sdk prints a GVK.
    pub fn gvk_string(&self) -> String {
        format!("{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// Reads `watches.yaml`; relative role and playbook paths are resolved against its
/// directory, and `max_concurrent_reconciles` is the default for every kind.
pub fn load_watches(path: &Path, max_concurrent_reconciles: usize) -> Result<Vec<Watch>, OperatorError> {
    let base = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let env = |name: &str| std::env::var(name).ok();
    Ok(opkit::watches_file::load(path, |text| parse_watches(text, &base, &env, max_concurrent_reconciles))?)
}

/// Parses the text of a watches file. `env` expands `${VAR}`; relative paths are taken
/// from `base` (roles also from `ANSIBLE_ROLES_PATH` and, for `ns.collection.role`, the
/// collections paths).
pub fn parse_watches(
    text: &str,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    max_concurrent_reconciles: usize,
) -> Result<Vec<Watch>, String> {
    let text = expand_env(text, env);
    let doc: Value = serde_saphyr::from_str(&text).map_err(|e| e.to_string())?;
    let entries = match doc {
        Value::Array(entries) => entries,
        Value::Null => Vec::new(),
        _ => return Err("expected a list of watches".to_string()),
    };
    let mut watches: Vec<Watch> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.into_iter().enumerate() {
        let Value::Object(map) = entry else { return Err(format!("entry {i}: expected a map")) };
        for key in map.keys().filter(|k| !FIELDS.contains(&k.as_str())) {
            tracing::warn!(entry = i, field = %key, "unknown field in watches.yaml, ignored");
        }
        let (group, version, kind) = entry_kind(i, &map)?;
        let gvk = format!("{group}/{version}, Kind={kind}");
        if watches.iter().any(|w| w.group == group && w.version == version && w.kind == kind) {
            return Err(format!("duplicate GVK: {gvk}"));
        }
        let fields = EntryFields { map: &map, prefix: format!("entry {i} ({gvk})") };
        let role = string(&map, "role").map_err(|e| format!("{}: {e}", fields.at("role")))?;
        let playbook = string(&map, "playbook").map_err(|e| format!("{}: {e}", fields.at("playbook")))?;
        let runnable = resolve_runnable(base, env, role.as_deref(), playbook.as_deref())
            .map_err(|e| format!("{}: {e}", fields.prefix))?
            .ok_or_else(|| format!("{}: must specify role or playbook", fields.prefix))?;
        let vars = object(&map, "vars").map_err(|e| format!("{}: {e}", fields.at("vars")))?;
        let max_runner_artifacts = fields.max_runner_artifacts()?;
        let reconcile_period = fields.reconcile_period()?;
        let finalizer = fields.finalizer(base, env)?;
        let selector = fields.selector()?;
        let blacklist = fields.blacklist()?;
        let max_concurrent_reconciles = concurrency_from_env(&group, &kind, env).unwrap_or(max_concurrent_reconciles);
        watches.push(Watch {
            runnable,
            vars,
            max_runner_artifacts,
            reconcile_period,
            manage_status: fields.flag("manageStatus", true)?,
            watch_dependent_resources: fields.flag("watchDependentResources", true)?,
            watch_cluster_scoped_resources: fields.flag("watchClusterScopedResources", false)?,
            snake_case_parameters: fields.flag("snakeCaseParameters", true)?,
            watch_annotations_changes: fields.flag("watchAnnotationsChanges", false)?,
            mark_unsafe: fields.flag("markUnsafe", false)?,
            blacklist,
            finalizer,
            selector,
            max_concurrent_reconciles: max_concurrent_reconciles.max(1),
            group,
            version,
            kind,
        });
    }
    Ok(watches)
}

/// The group, version and kind of entry `i` (version and kind must not be empty).
fn entry_kind(i: usize, map: &Map<String, Value>) -> Result<(String, String, String), String> {
    let at = |field: &str| format!("entry {i}: {field}");
    let group = string(map, "group").map_err(|e| format!("{}: {e}", at("group")))?.unwrap_or_default();
    let version = string(map, "version").map_err(|e| format!("{}: {e}", at("version")))?.unwrap_or_default();
    let kind = string(map, "kind").map_err(|e| format!("{}: {e}", at("kind")))?.unwrap_or_default();
    if version.is_empty() {
        return Err(format!("{}: must not be empty", at("version")));
    }
    if kind.is_empty() {
        return Err(format!("{}: must not be empty", at("kind")));
    }
    Ok((group, version, kind))
}

/// The fields of one `watches.yaml` entry; errors name the entry and the field.
struct EntryFields<'a> {
    map: &'a Map<String, Value>,
    /// `entry N (GROUP/VERSION, Kind=KIND)`.
    prefix: String,
}

impl EntryFields<'_> {
    /// Where `field` is, for an error.
    fn at(&self, field: &str) -> String {
        format!("{}: {field}", self.prefix)
    }

    /// A boolean field, `default` when absent.
    fn flag(&self, name: &str, default: bool) -> Result<bool, String> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(format!("{}: expected true or false, got {other}", self.at(name))),
        }
    }

    /// `maxRunnerArtifacts` (absent or 0: the default).
    fn max_runner_artifacts(&self) -> Result<usize, String> {
        match self.map.get("maxRunnerArtifacts") {
            None | Some(Value::Null) => Ok(DEFAULT_MAX_RUNNER_ARTIFACTS),
            Some(Value::Number(n)) if n.as_u64() == Some(0) => Ok(DEFAULT_MAX_RUNNER_ARTIFACTS),
            Some(Value::Number(n)) => n
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| format!("{}: expected a non-negative integer, got {n}", self.at("maxRunnerArtifacts"))),
            Some(other) => Err(format!("{}: expected an integer, got {other}", self.at("maxRunnerArtifacts"))),
        }
    }

    /// `reconcilePeriod` (absent: zero, the operator's `--reconcile-period`).
    fn reconcile_period(&self) -> Result<Duration, String> {
        let at = self.at("reconcilePeriod");
        match string(self.map, "reconcilePeriod").map_err(|e| format!("{at}: {e}"))? {
            Some(p) => {
                opkit_apimachinery::duration::parse(&p).map_err(|e| format!("{at}: {p:?} is not a duration: {e}"))
            }
            None => Ok(Duration::ZERO),
        }
    }

    /// `finalizer`: a name, and a role, a playbook or vars.
    fn finalizer(&self, base: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<Finalizer>, String> {
        let f = match self.map.get("finalizer") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Object(f)) => f,
            Some(other) => return Err(format!("{}: expected a map, got {other}", self.at("finalizer"))),
        };
        let name = string(f, "name").map_err(|e| format!("{}: {e}", self.at("finalizer.name")))?.unwrap_or_default();
        if name.is_empty() {
            return Err(format!("{}: finalizer must have name", self.at("finalizer.name")));
        }
        let role = string(f, "role").map_err(|e| format!("{}: {e}", self.at("finalizer.role")))?;
        let playbook = string(f, "playbook").map_err(|e| format!("{}: {e}", self.at("finalizer.playbook")))?;
        let vars = object(f, "vars").map_err(|e| format!("{}: {e}", self.at("finalizer.vars")))?;
        let runnable = resolve_runnable(base, env, role.as_deref(), playbook.as_deref())
            .map_err(|e| format!("{}: finalizer.{e}", self.prefix))?;
        if runnable.is_none() && vars.is_empty() {
            return Err(format!(
                "{}: must specify role, playbook or vars (to run the watch's own with them)",
                self.at("finalizer")
            ));
        }
        Ok(Some(Finalizer { name, runnable, vars }))
    }

    /// `selector`: a label selector (an empty one selects everything: `None`).
    fn selector(&self) -> Result<Option<LabelSelector>, String> {
        let Some(s) = self.map.get("selector").filter(|s| !s.is_null()) else { return Ok(None) };
        let selector: LabelSelector =
            serde_json::from_value(s.clone()).map_err(|e| format!("{}: {e}", self.at("selector")))?;
        kube::core::Selector::try_from(selector.clone()).map_err(|e| format!("{}: {e}", self.at("selector")))?;
        let empty = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
            && selector.match_expressions.as_ref().is_none_or(|m| m.is_empty());
        Ok((!empty).then_some(selector))
    }

    /// `blacklist`: dependent kinds never watched nor read from the cache.
    fn blacklist(&self) -> Result<Vec<GroupVersionKind>, String> {
        match self.map.get("blacklist") {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => Ok(items
                .iter()
                .map(|item| {
                    let get = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
                    GroupVersionKind { group: get("group"), version: get("version"), kind: get("kind") }
                })
                .collect()),
            Some(other) => Err(format!("{}: expected a list, got {other}", self.at("blacklist"))),
        }
    }
}

fn string(map: &Map<String, Value>, field: &str) -> Result<Option<String>, String> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("expected a string, got {other}")),
    }
}

/// A map field (empty when absent).
fn object(map: &Map<String, Value>, field: &str) -> Result<Map<String, Value>, String> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(other) => Err(format!("expected a map, got {other}")),
    }
}

/// The role or playbook an entry names, resolved and checked to exist (the error names
/// the field).
fn resolve_runnable(
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    role: Option<&str>,
    playbook: Option<&str>,
) -> Result<Option<Runnable>, String> {
    if let Some(playbook) = playbook.filter(|p| !p.is_empty()) {
        let path = if Path::new(playbook).is_absolute() { PathBuf::from(playbook) } else { base.join(playbook) };
        if !path.is_file() {
            return Err(format!("playbook: {} was not found", path.display()));
        }
        return Ok(Some(Runnable::Playbook(path)));
    }
    if let Some(role) = role.filter(|r| !r.is_empty()) {
        let candidates = role_candidates(base, env, role);
        return match candidates.iter().find(|p| p.is_dir()) {
            Some(found) => Ok(Some(Runnable::Role(found.clone()))),
            None => Err(format!(
                "role: {role} was not found (looked in {})",
                candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            )),
        };
    }
    Ok(None)
}

/// Where operator-sdk looks for a role: an absolute path; `ns.collection.role` in the
/// collections paths; `ANSIBLE_ROLES_PATH` (with and without `roles/`); `roles/<role>`.
fn role_candidates(base: &Path, env: &dyn Fn(&str) -> Option<String>, role: &str) -> Vec<PathBuf> {
    if Path::new(role).is_absolute() {
        return vec![PathBuf::from(role)];
    }
    let mut out = Vec::new();
    let parts: Vec<&str> = role.split('.').collect();
    if let [namespace, collection, name] = parts[..] {
        let paths = env("ANSIBLE_COLLECTIONS_PATH").filter(|p| !p.is_empty()).unwrap_or_else(|| {
            let home = env("HOME").map(|h| format!(":{h}/.ansible/collections")).unwrap_or_default();
            format!("/usr/share/ansible/collections{home}")
        });
        for parent in paths.split(':').filter(|p| !p.is_empty()) {
            out.push(
                Path::new(parent).join("ansible_collections").join(namespace).join(collection).join("roles").join(name),
            );
        }
    }
    if let Some(paths) = env("ANSIBLE_ROLES_PATH").filter(|p| !p.is_empty()) {
        for parent in paths.split(':').filter(|p| !p.is_empty()) {
            out.push(Path::new(parent).join(role));
            out.push(Path::new(parent).join("roles").join(role));
        }
    }
    out.push(base.join("roles").join(role));
    out
}

/// `MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP>` (or the deprecated `WORKER_<KIND>_<GROUP>`),
/// upper-cased with dots as underscores.
fn concurrency_from_env(group: &str, kind: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<usize> {
    let name = |prefix: &str| format!("{prefix}_{kind}_{group}").to_uppercase().replace('.', "_");
    env(&name("MAX_CONCURRENT_RECONCILES"))
        .or_else(|| env(&name("WORKER")))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
}

/// Go's `os.Expand` as operator-sdk uses it: `$VAR` and `${VAR}` replaced by the
/// variable, kept as `${VAR}` when it is unset.
pub(crate) fn expand_env(text: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    opkit::watches_file::expand(text, &|name| env(name).unwrap_or_else(|| format!("${{{name}}}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("roles/memcached/tasks")).expect("role");
        std::fs::create_dir_all(dir.path().join("roles/cleanup")).expect("role");
        std::fs::create_dir_all(dir.path().join("playbooks")).expect("playbooks");
        std::fs::write(dir.path().join("playbooks/memcached.yml"), "- hosts: localhost\n").expect("playbook");
        dir
    }

    #[test]
    fn every_operator_sdk_field_is_read() {
        let dir = project();
        let text = "---\n- version: v1alpha1\n  group: cache.example.com\n  kind: Memcached\n  role: memcached\n  vars:\n    foo: ${FOO}\n  maxRunnerArtifacts: 5\n  reconcilePeriod: 30s\n  manageStatus: false\n  watchDependentResources: false\n  watchClusterScopedResources: true\n  snakeCaseParameters: false\n  watchAnnotationsChanges: true\n  markUnsafe: true\n  blacklist:\n  - group: apps\n    version: v1\n    kind: ReplicaSet\n  finalizer:\n    name: cache.example.com/finalizer\n    role: cleanup\n    vars:\n      state: absent\n  selector:\n    matchLabels:\n      tier: cache\n- version: v1\n  group: cache.example.com\n  kind: Other\n  playbook: playbooks/memcached.yml\n";
        let env = |name: &str| match name {
            "FOO" => Some("bar".to_string()),
            "MAX_CONCURRENT_RECONCILES_OTHER_CACHE_EXAMPLE_COM" => Some("4".to_string()),
            _ => None,
        };
        let watches = parse_watches(text, dir.path(), &env, 2).expect("valid");
        let w = &watches[0];
        assert_eq!(w.gvk_string(), "cache.example.com/v1alpha1, Kind=Memcached");
        assert_eq!(w.runnable, Runnable::Role(dir.path().join("roles/memcached")));
        assert_eq!(w.vars["foo"], "bar");
        assert_eq!(w.max_runner_artifacts, 5);
        assert_eq!(w.reconcile_period, Duration::from_secs(30));
        assert!(!w.manage_status && !w.watch_dependent_resources && w.watch_cluster_scoped_resources);
        assert!(!w.snake_case_parameters && w.watch_annotations_changes && w.mark_unsafe);
        assert_eq!(w.blacklist[0].kind, "ReplicaSet");
        let f = w.finalizer.as_ref().expect("finalizer");
        assert_eq!(f.name, "cache.example.com/finalizer");
        assert_eq!(f.runnable, Some(Runnable::Role(dir.path().join("roles/cleanup"))));
        assert_eq!(f.vars["state"], "absent");
        assert!(w.selector.is_some());
        assert_eq!(w.max_concurrent_reconciles, 2);
        let o = &watches[1];
        assert_eq!(o.runnable, Runnable::Playbook(dir.path().join("playbooks/memcached.yml")));
        assert!(o.manage_status && o.watch_dependent_resources && !o.watch_cluster_scoped_resources);
        assert!(o.snake_case_parameters && !o.watch_annotations_changes && !o.mark_unsafe);
        assert_eq!(o.max_runner_artifacts, DEFAULT_MAX_RUNNER_ARTIFACTS);
        assert_eq!(o.reconcile_period, Duration::ZERO);
        assert_eq!(o.max_concurrent_reconciles, 4, "MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP> wins");
    }

    #[test]
    fn errors_name_the_entry_and_field() {
        let dir = project();
        let none = |_: &str| None;
        let err = |text: &str| parse_watches(text, dir.path(), &none, 1).expect_err(text);
        assert_eq!(err("- {group: g, kind: K, role: memcached}"), "entry 0: version: must not be empty");
        assert_eq!(err("- {group: g, version: v1, role: memcached}"), "entry 0: kind: must not be empty");
        assert_eq!(err("- {group: g, version: v1, kind: K}"), "entry 0 (g/v1, Kind=K): must specify role or playbook");
        assert!(
            err("- {group: g, version: v1, kind: K, role: nope}")
                .starts_with("entry 0 (g/v1, Kind=K): role: nope was not found")
        );
        assert!(err("- {group: g, version: v1, kind: K, playbook: nope.yml}").contains("playbook: "));
        assert_eq!(
            err("- {group: g, version: v1, kind: K, role: memcached, manageStatus: maybe}"),
            "entry 0 (g/v1, Kind=K): manageStatus: expected true or false, got \"maybe\""
        );
        assert!(
            err("- {group: g, version: v1, kind: K, role: memcached, reconcilePeriod: soon}")
                .starts_with("entry 0 (g/v1, Kind=K): reconcilePeriod: \"soon\" is not a duration")
        );
        assert_eq!(
            err("- {group: g, version: v1, kind: K, role: memcached, finalizer: {role: cleanup}}"),
            "entry 0 (g/v1, Kind=K): finalizer.name: finalizer must have name"
        );
        assert!(
            err("- {group: g, version: v1, kind: K, role: memcached, finalizer: {name: f}}")
                .contains("finalizer: must specify")
        );
        assert_eq!(
            err(
                "- {group: g, version: v1, kind: K, role: memcached}\n- {group: g, version: v1, kind: K, role: memcached}"
            ),
            "duplicate GVK: g/v1, Kind=K"
        );
    }

    #[test]
    fn env_expansion_keeps_unset_variables() {
        let env = |name: &str| (name == "SET").then(|| "x".to_string());
        assert_eq!(expand_env("a ${SET} $SET ${UNSET} $UNSET $ b", &env), "a x x ${UNSET} ${UNSET} $ b");
    }
}
