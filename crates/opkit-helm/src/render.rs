//! Rendering a chart as `helm template` does: values combined, dependencies processed,
//! every chart's templates parsed into one set (deepest paths first, so a parent's
//! definitions win) and executed with that chart's data, then the manifests split,
//! hooks separated, sorted by Helm's install order and printed with `# Source:` headers.

use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

use crate::HelmError;
use crate::chart::Chart;
use crate::head::{Head, parse_head};
use crate::template::{Exec, TemplateError, Templates};
use crate::value::Object;
use crate::value::{Map, Value};
use crate::values;

/// What `helm template` is told on its command line.
#[derive(Debug, Clone)]
pub struct TemplateOptions {
    /// The release name.
    pub release_name: String,
    /// The release namespace.
    pub namespace: String,
    /// `--kube-version` (default v1.32.0, as helm v3.17 assumes).
    pub kube_version: Option<String>,
    /// `--api-versions`, added to Helm's default set.
    pub api_versions: Vec<String>,
    /// Contents of `-f` files, in order.
    pub values_files: Vec<String>,
    /// `--set` arguments, in order.
    pub set: Vec<String>,
    /// `--set-string` arguments, in order.
    pub set_string: Vec<String>,
    /// `--include-crds`.
    pub include_crds: bool,
    /// `--skip-tests`.
    pub skip_tests: bool,
    /// `.Release.Revision` (1 for `helm template` and an install).
    pub revision: i64,
    /// `.Release.IsUpgrade` (and not `.Release.IsInstall`): the release is being upgraded.
    pub is_upgrade: bool,
}

impl Default for TemplateOptions {
    fn default() -> TemplateOptions {
        TemplateOptions {
            release_name: "release-name".into(),
            namespace: "default".into(),
            kube_version: None,
            api_versions: Vec::new(),
            values_files: Vec::new(),
            set: Vec::new(),
            set_string: Vec::new(),
            include_crds: false,
            skip_tests: false,
            revision: 1,
            is_upgrade: false,
        }
    }
}

/// The group/versions `helm template` assumes are served (client-go's scheme, with the
/// apiextensions groups Helm registers).
const DEFAULT_API_VERSIONS: &[&str] = &[
    "v1",
    "admissionregistration.k8s.io/v1",
    "admissionregistration.k8s.io/v1alpha1",
    "admissionregistration.k8s.io/v1beta1",
    "internal.apiserver.k8s.io/v1alpha1",
    "apps/v1",
    "apps/v1beta1",
    "apps/v1beta2",
    "authentication.k8s.io/v1",
    "authentication.k8s.io/v1alpha1",
    "authentication.k8s.io/v1beta1",
    "authorization.k8s.io/v1",
    "authorization.k8s.io/v1beta1",
    "autoscaling/v1",
    "autoscaling/v2",
    "autoscaling/v2beta1",
    "autoscaling/v2beta2",
    "batch/v1",
    "batch/v1beta1",
    "certificates.k8s.io/v1",
    "certificates.k8s.io/v1alpha1",
    "certificates.k8s.io/v1beta1",
    "coordination.k8s.io/v1",
    "coordination.k8s.io/v1alpha2",
    "coordination.k8s.io/v1beta1",
    "discovery.k8s.io/v1",
    "discovery.k8s.io/v1beta1",
    "events.k8s.io/v1",
    "events.k8s.io/v1beta1",
    "extensions/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1",
    "flowcontrol.apiserver.k8s.io/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1beta2",
    "flowcontrol.apiserver.k8s.io/v1beta3",
    "networking.k8s.io/v1",
    "networking.k8s.io/v1alpha1",
    "networking.k8s.io/v1beta1",
    "node.k8s.io/v1",
    "node.k8s.io/v1alpha1",
    "node.k8s.io/v1beta1",
    "policy/v1",
    "policy/v1beta1",
    "rbac.authorization.k8s.io/v1",
    "rbac.authorization.k8s.io/v1alpha1",
    "rbac.authorization.k8s.io/v1beta1",
    "resource.k8s.io/v1alpha3",
    "resource.k8s.io/v1beta1",
    "scheduling.k8s.io/v1",
    "scheduling.k8s.io/v1alpha1",
    "scheduling.k8s.io/v1beta1",
    "storage.k8s.io/v1",
    "storage.k8s.io/v1alpha1",
    "storage.k8s.io/v1beta1",
    "storagemigration.k8s.io/v1alpha1",
    "apiextensions.k8s.io/v1",
    "apiextensions.k8s.io/v1beta1",
];

/// Helm's kind install order (`releaseutil.InstallOrder`).
const INSTALL_ORDER: &[&str] = &[
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
];

const HOOK_EVENTS: &[&str] = &[
    "pre-install",
    "post-install",
    "pre-delete",
    "post-delete",
    "pre-upgrade",
    "post-upgrade",
    "pre-rollback",
    "post-rollback",
    "test",
    "test-success",
];

/// `helm template NAME CHART` for the chart at `chart_path`: the exact output.
pub fn template(chart_path: &Path, options: &TemplateOptions) -> Result<String, HelmError> {
    let chart = crate::chart::load(chart_path)?;
    template_chart(chart, options)
}

/// `helm template` of an already loaded chart.
pub fn template_chart(chart: Chart, options: &TemplateOptions) -> Result<String, HelmError> {
    render_release(chart, options).map(|release| release.manifest)
}

/// What an install or upgrade renders: the output `helm template` prints and the root
/// chart's rendered `NOTES.txt`, which Helm stores as the release's `info.notes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedRelease {
    /// The manifests and hooks, as `helm template` prints them.
    pub manifest: String,
    /// The root chart's `templates/NOTES.txt` rendered (empty when it has none).
    pub notes: String,
}

/// Renders a loaded chart as an install or upgrade does: [`template_chart`]'s output and
/// the release notes.
pub fn render_release(mut chart: Chart, options: &TemplateOptions) -> Result<RenderedRelease, HelmError> {
    let missing: Vec<&str> = chart
        .dependencies
        .iter()
        .filter(|d| !chart.subcharts.iter().any(|s| s.name == d.name))
        .map(|d| d.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(HelmError::Load(format!(
            "An error occurred while checking for chart dependencies. You may need to run `helm dependency build` to fetch missing dependencies: found in Chart.yaml, but missing in charts/ directory: {}",
            missing.join(", ")
        )));
    }
    let user = user_values(options)?;
    let caps = capabilities(options)?;
    if let Some(constraint) = chart.metadata.get("kubeVersion").and_then(|k| k.as_str()) {
        let kube = kube_version_string(options)?;
        if !constraint.is_empty() && !crate::funcs::semver_compare(constraint, &kube).unwrap_or(true) {
            return Err(HelmError::Load(format!(
                "chart requires kubeVersion: {constraint} which is incompatible with Kubernetes {kube}"
            )));
        }
    }
    values::process_dependency_enabled(&mut chart, &user, "")?;
    values::process_import_values(&mut chart);
    chart.set_full_path(None);
    let Value::Map(vals) = Value::Map(user).deep_copy() else {
        return Err(HelmError::Values("values are not a map".into()));
    };
    values::coalesce(&chart, &vals, false);
    crate::schema::validate_chart(&chart, &vals)?;
    let release = Value::map(BTreeMap::from([
        ("Name".to_string(), Value::str(options.release_name.as_str())),
        ("Namespace".to_string(), Value::str(options.namespace.as_str())),
        ("IsUpgrade".to_string(), Value::Bool(options.is_upgrade)),
        ("IsInstall".to_string(), Value::Bool(!options.is_upgrade)),
        ("Revision".to_string(), Value::int(options.revision)),
        ("Service".to_string(), Value::str("Helm")),
    ]));
    let mut renderables = Vec::new();
    chart_data(&chart, &Value::Map(vals), &release, &caps, true, &mut renderables);
    let rendered = render(&renderables)?;
    // Helm's `renderResources`: only the root chart's notes (no `--render-subchart-notes`).
    let notes = rendered.get(&format!("{}/templates/NOTES.txt", chart.full_path)).cloned().unwrap_or_default();
    let mut out = String::new();
    if options.include_crds {
        crds(&chart, &mut out);
    }
    let (manifests, hooks) = sort_manifests(&rendered)?;
    for m in &manifests {
        out.push_str(&format!("---\n# Source: {}\n{}\n", m.path, m.content));
    }
    let mut text = String::new();
    text.push_str(out.trim_matches(|c: char| c.is_whitespace()));
    text.push('\n');
    for h in &hooks {
        if options.skip_tests && h.is_test {
            continue;
        }
        text.push_str(&format!("---\n# Source: {}\n{}\n", h.path, h.content));
    }
    Ok(RenderedRelease { manifest: text, notes })
}

fn user_values(options: &TemplateOptions) -> Result<Map, HelmError> {
    let Value::Map(mut user) = Value::map(BTreeMap::new()) else {
        return Err(HelmError::Values("values are not a map".into()));
    };
    for f in &options.values_files {
        let file = values::read_values_file(f)?;
        user = values::merge_maps(&user, &file);
    }
    for s in &options.set {
        values::parse_set_into(s, &user, false)?;
    }
    for s in &options.set_string {
        values::parse_set_into(s, &user, true)?;
    }
    Ok(user)
}

fn kube_version_string(options: &TemplateOptions) -> Result<String, HelmError> {
    match &options.kube_version {
        None => Ok("v1.32.0".into()),
        Some(v) => {
            let parsed =
                crate::funcs::parse_version(v).map_err(|_| HelmError::Values(format!("invalid kube version {v:?}")))?;
            Ok(format!("v{}.{}.{}", parsed.0, parsed.1, parsed.2))
        }
    }
}

fn capabilities(options: &TemplateOptions) -> Result<Value, HelmError> {
    let version = kube_version_string(options)?;
    let mut parts = version.trim_start_matches('v').split('.');
    let major = parts.next().unwrap_or("1").to_string();
    let minor = parts.next().unwrap_or("32").to_string();
    let mut apis: Vec<String> = DEFAULT_API_VERSIONS.iter().map(|s| s.to_string()).collect();
    apis.extend(options.api_versions.iter().cloned());
    Ok(Value::map(BTreeMap::from([
        ("KubeVersion".to_string(), Value::Object(Rc::new(Object::KubeVersion { version, major, minor }))),
        ("APIVersions".to_string(), Value::Object(Rc::new(Object::ApiVersions(apis)))),
        (
            "HelmVersion".to_string(),
            Value::map(BTreeMap::from([
                ("Version".to_string(), Value::str("v3.17.1")),
                ("GitCommit".to_string(), Value::str("980d8ac1939e39138101364400756af2bdee1da5")),
                ("GitTreeState".to_string(), Value::str("clean")),
                ("GoVersion".to_string(), Value::str("go1.23.6")),
            ])),
        ),
    ])))
}

/// `.Chart`: the metadata with Go's field names (unset strings are "").
fn chart_value(chart: &Chart, is_root: bool) -> Value {
    let m = &chart.metadata;
    let s = |k: &str| Value::str(m.get(k).and_then(|v| v.as_str()).unwrap_or_default());
    let list = |k: &str| {
        m.get(k)
            .map(Value::from_json)
            .filter(|v| matches!(v, Value::List(_)))
            .unwrap_or_else(|| Value::list(Vec::new()))
    };
    let maintainers = match m.get("maintainers").and_then(|v| v.as_array()) {
        Some(a) => Value::list(
            a.iter()
                .map(|x| {
                    let f = |k: &str| Value::str(x.get(k).and_then(|v| v.as_str()).unwrap_or_default());
                    Value::map(BTreeMap::from([
                        ("Name".to_string(), f("name")),
                        ("Email".to_string(), f("email")),
                        ("URL".to_string(), f("url")),
                    ]))
                })
                .collect(),
        ),
        None => Value::list(Vec::new()),
    };
    let annotations = m
        .get("annotations")
        .map(Value::from_json)
        .filter(|v| matches!(v, Value::Map(_)))
        .unwrap_or_else(|| Value::map(BTreeMap::new()));
    let dependencies = Value::list(
        chart
            .dependencies
            .iter()
            .map(|d| {
                Value::map(BTreeMap::from([
                    ("Name".to_string(), Value::str(d.name.as_str())),
                    ("Version".to_string(), Value::str(d.version.as_str())),
                    (
                        "Repository".to_string(),
                        Value::str(d.raw.get("repository").and_then(|v| v.as_str()).unwrap_or_default()),
                    ),
                    ("Condition".to_string(), Value::str(d.condition.as_str())),
                    ("Tags".to_string(), Value::list(d.tags.iter().map(|t| Value::str(t.as_str())).collect())),
                    ("Enabled".to_string(), Value::Bool(true)),
                    ("ImportValues".to_string(), Value::list(d.import_values.clone())),
                    ("Alias".to_string(), Value::str(d.alias.as_str())),
                ]))
            })
            .collect(),
    );
    Value::map(BTreeMap::from([
        ("Name".to_string(), Value::str(chart.name.as_str())),
        ("Home".to_string(), s("home")),
        ("Sources".to_string(), list("sources")),
        ("Version".to_string(), s("version")),
        ("Description".to_string(), s("description")),
        ("Keywords".to_string(), list("keywords")),
        ("Maintainers".to_string(), maintainers),
        ("Icon".to_string(), s("icon")),
        ("APIVersion".to_string(), s("apiVersion")),
        ("Condition".to_string(), s("condition")),
        ("Tags".to_string(), s("tags")),
        ("AppVersion".to_string(), s("appVersion")),
        ("Deprecated".to_string(), Value::Bool(m.get("deprecated").and_then(|v| v.as_bool()).unwrap_or(false))),
        ("Annotations".to_string(), annotations),
        ("KubeVersion".to_string(), s("kubeVersion")),
        ("Dependencies".to_string(), dependencies),
        ("Type".to_string(), s("type")),
        ("IsRoot".to_string(), Value::Bool(is_root)),
    ]))
}

/// One template to parse and (unless a partial) execute, with its chart's data.
struct Renderable {
    name: String,
    source: String,
    data: Map,
    base_path: String,
}

/// Helm's `recAllTpls`: each chart's data (`.Values` scoped to it) and templates.
fn chart_data(
    chart: &Chart,
    values: &Value,
    release: &Value,
    caps: &Value,
    is_root: bool,
    out: &mut Vec<Renderable>,
) -> Value {
    let scoped = if is_root {
        values.clone()
    } else {
        match values {
            Value::Map(m) => match m.borrow().get(&chart.name) {
                Some(v @ Value::Map(_)) => v.clone(),
                _ => Value::map(BTreeMap::new()),
            },
            _ => Value::map(BTreeMap::new()),
        }
    };
    let files: BTreeMap<String, Rc<[u8]>> = chart.files.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let subcharts = BTreeMap::new();
    let data = BTreeMap::from([
        ("Chart".to_string(), chart_value(chart, is_root)),
        ("Files".to_string(), Value::Object(Rc::new(Object::Files(files)))),
        ("Release".to_string(), release.clone()),
        ("Capabilities".to_string(), caps.clone()),
        ("Values".to_string(), scoped.clone()),
        ("Subcharts".to_string(), Value::map(subcharts)),
    ]);
    let Value::Map(data) = Value::map(data) else { return Value::Nil };
    for sub in &chart.subcharts {
        let sub_data = chart_data(sub, &scoped, release, caps, false, out);
        if let Some(Value::Map(subs)) = data.borrow().get("Subcharts") {
            subs.borrow_mut().insert(sub.name.clone(), sub_data);
        }
    }
    for (name, source) in &chart.templates {
        let base = name.rsplit('/').next().unwrap_or(name);
        if chart.is_library() && !base.starts_with('_') {
            continue;
        }
        out.push(Renderable {
            name: format!("{}/{}", chart.full_path, name),
            source: source.clone(),
            data: data.clone(),
            base_path: format!("{}/templates", chart.full_path),
        });
    }
    Value::Map(data)
}

/// Parses every template into one set and executes the non-partials.
fn render(renderables: &[Renderable]) -> Result<BTreeMap<String, String>, HelmError> {
    let mut order: Vec<usize> = (0..renderables.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&renderables[a].name, &renderables[b].name);
        let (cx, cy) = (x.matches('/').count(), y.matches('/').count());
        cy.cmp(&cx).then_with(|| y.cmp(x))
    });
    let mut templates = Templates::new();
    for &i in &order {
        let r = &renderables[i];
        templates.add(&r.name, &r.source).map_err(|e| HelmError::Render(parse_error_message(&r.name, &e)))?;
    }
    let mut exec = Exec::new(&templates);
    let mut rendered = BTreeMap::new();
    for &i in &order {
        let r = &renderables[i];
        let base = r.name.rsplit('/').next().unwrap_or(&r.name);
        if base.starts_with('_') {
            continue;
        }
        r.data.borrow_mut().insert(
            "Template".to_string(),
            Value::map(BTreeMap::from([
                ("Name".to_string(), Value::str(r.name.as_str())),
                ("BasePath".to_string(), Value::str(r.base_path.as_str())),
            ])),
        );
        let out = exec
            .execute(&r.name, &Value::Map(r.data.clone()))
            .map_err(|e| HelmError::Render(exec_error_message(&r.name, &e)))?;
        rendered.insert(r.name.clone(), out.replace("<no value>", ""));
    }
    Ok(rendered)
}

/// Helm's `cleanupParseError`.
fn parse_error_message(name: &str, e: &TemplateError) -> String {
    let msg = e.to_string();
    let tokens: Vec<&str> = msg.split(": ").collect();
    match tokens.as_slice() {
        [_, location, .., last] => format!("parse error at ({location}): {last}"),
        _ => format!("parse error in ({name}): {msg}"),
    }
}

/// Helm's `reformatExecErrorMsg`: `fail`/`required` become `execution error at (...)`.
fn exec_error_message(name: &str, e: &TemplateError) -> String {
    let msg = e.to_string();
    let tokens: Vec<&str> = msg.splitn(3, ": ").collect();
    if tokens.len() != 3 {
        return format!("{msg}\n  ({name})");
    }
    let location = tokens[1];
    for marker in ["error calling fail: ", "error calling required: "] {
        if let Some(i) = tokens[2].find(marker) {
            return format!("execution error at ({location}): {}", &tokens[2][i + marker.len()..]);
        }
    }
    msg
}

fn crds(chart: &Chart, out: &mut String) {
    for (name, data) in &chart.files {
        if name.starts_with("crds/") && (name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json")) {
            out.push_str(&format!("---\n# Source: {}/{}\n{}\n", chart.full_path, name, String::from_utf8_lossy(data)));
        }
    }
    for sub in &chart.subcharts {
        crds(sub, out);
    }
}

/// One document of the rendered output.
struct Manifest {
    path: String,
    content: String,
    kind: String,
    is_test: bool,
}

/// Helm's `SplitManifests`: documents separated by `---` lines, trimmed, empty ones dropped.
fn split_manifests(text: &str) -> Vec<String> {
    static SEP: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"(?:^|\s*\n)---\s*").expect("a constant regex"));
    SEP.split(text.trim()).filter(|d| !d.is_empty()).map(|d| d.trim().to_string()).collect()
}

/// Helm's `SortManifests`: files in path order, documents in file order, hooks apart,
/// both stably sorted by kind install order (unknown kinds last, by kind name).
fn sort_manifests(rendered: &BTreeMap<String, String>) -> Result<(Vec<Manifest>, Vec<Manifest>), HelmError> {
    let mut docs: Vec<(&String, String)> = Vec::new();
    for (path, content) in rendered {
        if path.ends_with("NOTES.txt") {
            continue;
        }
        let base = path.rsplit('/').next().unwrap_or(path);
        if base.starts_with('_') || content.trim().is_empty() {
            continue;
        }
        docs.extend(split_manifests(content).into_iter().map(|doc| (path, doc)));
    }
    let heads = parse_heads(&docs);
    let mut generic = Vec::new();
    let mut hooks = Vec::new();
    for ((path, doc), head) in docs.into_iter().zip(heads) {
        let head = head.map_err(|e| HelmError::Render(format!("YAML parse error on {path}: {e}")))?;
        let manifest = Manifest { path: path.clone(), content: doc, kind: head.kind, is_test: false };
        match head.hook.as_deref().filter(|h| !h.is_empty()) {
            Some(events) => {
                let events: Vec<String> = events.split(',').map(|e| e.trim().to_lowercase()).collect();
                if events.iter().any(|e| !HOOK_EVENTS.contains(&e.as_str())) {
                    continue;
                }
                let is_test = events.iter().any(|e| e == "test" || e == "test-success");
                hooks.push(Manifest { is_test, ..manifest });
            }
            None => generic.push(manifest),
        }
    }
    sort_by_kind(&mut generic);
    sort_by_kind(&mut hooks);
    Ok((generic, hooks))
}

/// Output below this size is parsed on one thread (starting threads costs more).
const PARALLEL_HEADS_FROM_BYTES: usize = 256 * 1024;

/// Every document's head, in order; large outputs are parsed on several threads.
fn parse_heads(docs: &[(&String, String)]) -> Vec<Result<Head, String>> {
    let bytes: usize = docs.iter().map(|(_, d)| d.len()).sum();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    if threads < 2 || bytes < PARALLEL_HEADS_FROM_BYTES {
        return docs.iter().map(|(_, d)| parse_head(d)).collect();
    }
    // Chunks of about equal size in bytes, so one huge document does not hold up the rest.
    let per_chunk = bytes.div_ceil(threads);
    let mut chunks: Vec<&[(&String, String)]> = Vec::new();
    let (mut start, mut size) = (0, 0);
    for (i, (_, d)) in docs.iter().enumerate() {
        size += d.len();
        if size >= per_chunk {
            chunks.push(&docs[start..=i]);
            (start, size) = (i + 1, 0);
        }
    }
    chunks.push(&docs[start..]);
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| scope.spawn(move || chunk.iter().map(|(_, d)| parse_head(d)).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|_| vec![Err("the YAML parser panicked".to_string())]))
            .collect()
    })
}

fn sort_by_kind(manifests: &mut [Manifest]) {
    let rank = |k: &str| INSTALL_ORDER.iter().position(|o| *o == k);
    manifests.sort_by(|a, b| match (rank(&a.kind), rank(&b.kind)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.kind.cmp(&b.kind),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_of_large_outputs_are_parsed_in_order_and_errors_kept() {
        let path = "chart/templates/x.yaml".to_string();
        let mut docs: Vec<(&String, String)> = (0..400)
            .map(|i| {
                let body = format!("  field{i}: {}\n", "v".repeat(1000));
                let hook = if i % 7 == 0 { "  annotations:\n    helm.sh/hook: test\n" } else { "" };
                (&path, format!("kind: Kind{i}\nmetadata:\n  name: n{i}\n{hook}spec:\n{body}"))
            })
            .collect();
        docs[250].1.push_str("  bad: [unclosed\n");
        assert!(docs.iter().map(|(_, d)| d.len()).sum::<usize>() > PARALLEL_HEADS_FROM_BYTES);
        let heads = parse_heads(&docs);
        assert_eq!(heads.len(), docs.len());
        for (i, head) in heads.iter().enumerate() {
            match head {
                Ok(head) if i != 250 => {
                    assert_eq!(head.kind, format!("Kind{i}"));
                    assert_eq!(head.hook.as_deref(), (i % 7 == 0).then_some("test"));
                }
                Err(_) if i == 250 => {}
                other => panic!("document {i}: {other:?}"),
            }
        }
    }
}
