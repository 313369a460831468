//! Pod Security admission (kube's `PodSecurity` plugin): a namespace's
//! `pod-security.kubernetes.io/{enforce,audit,warn}` labels (and their `-version`) choose
//! a level (`privileged`, `baseline`, `restricted`) per mode. `enforce` rejects pods that
//! violate it; `audit` adds an audit annotation; `warn` answers with warnings, for pods and
//! for workload objects with a pod template. Labelling a namespace with a stricter
//! `enforce` level warns about the pods already there. No namespace, user or runtime
//! class is exempt (kube's default configuration).

mod checks;

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde_json::Value;

use super::super::{Attributes, Operation, Verdict};
use crate::error::{ApiError, ApiResult};
use crate::registry::parse_stored;
use crate::registry::view::StoreView;
use crate::schema::FieldError;
use crate::storage::ResourceId;

/// A Pod Security Standards level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Level {
    /// Unrestricted.
    Privileged,
    /// Known privilege escalations prevented.
    Baseline,
    /// Hardened.
    Restricted,
}

impl Level {
    fn parse(s: &str) -> Option<Level> {
        match s {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// A level at a policy version: `v1.<minor>`, or `latest` (None).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct LevelVersion {
    /// The level.
    pub level: Level,
    /// The minor version of `v1.x`, None for `latest`.
    pub minor: Option<u32>,
}

impl fmt::Display for LevelVersion {
    /// `restricted:latest`, `baseline:v1.29`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.minor {
            Some(minor) => write!(f, "{}:v1.{minor}", self.level.as_str()),
            None => write!(f, "{}:latest", self.level.as_str()),
        }
    }
}

/// The level and version of each mode for one namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Policy {
    enforce: LevelVersion,
    audit: LevelVersion,
    warn: LevelVersion,
}

const LABEL_PREFIX: &str = "pod-security.kubernetes.io/";
const PRIVILEGED_LATEST: LevelVersion = LevelVersion { level: Level::Privileged, minor: None };

/// kube's `api.PolicyToEvaluate` from a namespace's labels: unset modes are
/// `privileged:latest`; an invalid enforce level is `restricted`, an invalid audit or warn
/// level `privileged`, an invalid version `latest`. Also returns the label errors.
fn policy_of(labels: &Value) -> (Policy, Vec<FieldError>) {
    let mut policy = Policy { enforce: PRIVILEGED_LATEST, audit: PRIVILEGED_LATEST, warn: PRIVILEGED_LATEST };
    let mut errors = Vec::new();
    let modes: [(&str, &mut LevelVersion, Level); 3] = [
        ("enforce", &mut policy.enforce, Level::Restricted),
        ("audit", &mut policy.audit, Level::Privileged),
        ("warn", &mut policy.warn, Level::Privileged),
    ];
    for (mode, lv, fallback) in modes {
        let level_label = format!("{LABEL_PREFIX}{mode}");
        if let Some(value) = labels[&level_label].as_str() {
            lv.level = Level::parse(value).unwrap_or_else(|| {
                errors.push(FieldError::invalid_str(
                    &format!("metadata.labels[{level_label}]"),
                    value,
                    "must be one of privileged, baseline, restricted",
                ));
                fallback
            });
        }
        let version_label = format!("{LABEL_PREFIX}{mode}-version");
        if let Some(value) = labels[&version_label].as_str() {
            lv.minor = match parse_version(value) {
                Ok(minor) => minor,
                Err(()) => {
                    errors.push(FieldError::invalid_str(
                        &format!("metadata.labels[{version_label}]"),
                        value,
                        "must be \"latest\" or \"v1.x\"",
                    ));
                    None
                }
            };
        }
    }
    (policy, errors)
}

/// `latest` (None) or `v1.<minor>`.
fn parse_version(s: &str) -> Result<Option<u32>, ()> {
    if s == "latest" {
        return Ok(None);
    }
    let minor = s.strip_prefix("v1.").ok_or(())?;
    if minor.is_empty() || !minor.bytes().all(|b| b.is_ascii_digit()) || (minor.len() > 1 && minor.starts_with('0')) {
        return Err(());
    }
    minor.parse().map(Some).map_err(|_| ())
}

/// kube's `AggregateCheckResult.ForbiddenDetail`: `reason (detail), reason (detail)`.
fn forbidden_detail(violations: &[checks::Violation]) -> String {
    let parts: Vec<String> = violations
        .iter()
        .map(|v| if v.detail.is_empty() { v.reason.clone() } else { format!("{} ({})", v.reason, v.detail) })
        .collect();
    parts.join(", ")
}

/// kube's `AggregateCheckResult.ForbiddenReason`: the reasons alone.
fn forbidden_reason(violations: &[checks::Violation]) -> String {
    let parts: Vec<&str> = violations.iter().map(|v| v.reason.as_str()).collect();
    parts.join(", ")
}

/// The audit annotation key of this plugin.
fn audit_key(key: &str) -> String {
    format!("{LABEL_PREFIX}{key}")
}

/// Pod Security for one request: namespaces (their labels), pods, and the workload
/// kinds that carry a pod template.
pub(super) async fn validate(view: StoreView<'_>, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<Verdict> {
    if !matches!(attrs.operation, Operation::Create | Operation::Update) {
        return Ok(Verdict::default());
    }
    let info = &attrs.target.info;
    match (info.group.as_str(), info.resource.as_str()) {
        ("", "namespaces") => validate_namespace(view, attrs, obj),
        ("", "pods") => validate_pod(view, attrs, obj).await,
        (group, resource) => match pod_template(group, resource, obj) {
            Some(template) if attrs.subresource.is_none() => validate_controller(view, attrs, template).await,
            _ => Ok(Verdict::default()),
        },
    }
}

/// The pod template of a workload object (kube's `DefaultPodSpecExtractor`).
fn pod_template<'a>(group: &str, resource: &str, obj: &'a Value) -> Option<&'a Value> {
    let template = match (group, resource) {
        ("", "podtemplates") => &obj["template"],
        ("", "replicationcontrollers")
        | ("apps", "replicasets" | "deployments" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => &obj["spec"]["template"],
        ("batch", "cronjobs") => &obj["spec"]["jobTemplate"]["spec"]["template"],
        _ => return None,
    };
    template.is_object().then_some(template)
}

/// The labels of the request's namespace, Null when it does not exist.
async fn namespace_labels(view: StoreView<'_>, attrs: &Attributes<'_>) -> ApiResult<Value> {
    let ns = attrs.target.namespace.clone().unwrap_or_default();
    let id = ResourceId::new("", "namespaces");
    let Some(entry) = view.get(&id, &(String::new(), ns)).await? else {
        return Ok(Value::Null);
    };
    Ok(parse_stored(&entry.value)?["metadata"]["labels"].take())
}

/// Pod subresources that do not change a pod's spec.
const IGNORED_POD_SUBRESOURCES: [&str; 8] =
    ["exec", "attach", "binding", "eviction", "log", "portforward", "proxy", "status"];

async fn validate_pod(view: StoreView<'_>, attrs: &Attributes<'_>, pod: &Value) -> ApiResult<Verdict> {
    if attrs.subresource.is_some_and(|s| IGNORED_POD_SUBRESOURCES.contains(&s)) {
        return Ok(Verdict::default());
    }
    let (policy, errors) = policy_of(&namespace_labels(view, attrs).await?);
    if errors.is_empty() && policy.enforce.level == Level::Privileged && fully_privileged_reporting(&policy) {
        return Ok(Verdict::default());
    }
    if let Some(old) = attrs.old
        && !is_significant_pod_update(pod, old)
    {
        return Ok(Verdict::default());
    }
    let name = attrs.name;
    evaluate(&policy, &errors, &pod["metadata"], &pod["spec"], Some(name))
}

/// Whether audit and warn are both privileged.
fn fully_privileged_reporting(policy: &Policy) -> bool {
    policy.audit.level == Level::Privileged && policy.warn.level == Level::Privileged
}

async fn validate_controller(view: StoreView<'_>, attrs: &Attributes<'_>, template: &Value) -> ApiResult<Verdict> {
    let (policy, errors) = policy_of(&namespace_labels(view, attrs).await?);
    if errors.is_empty() && fully_privileged_reporting(&policy) {
        return Ok(Verdict::default());
    }
    evaluate(&policy, &errors, &template["metadata"], &template["spec"], None)
}

/// kube's `EvaluatePod`: enforce (only for pods: `enforce_name` is the pod's name), then
/// audit, then warn, reusing an evaluation of the same level and version.
fn evaluate(
    policy: &Policy,
    errors: &[FieldError],
    meta: &Value,
    spec: &Value,
    enforce_name: Option<&str>,
) -> ApiResult<Verdict> {
    let mut verdict = Verdict::default();
    if !errors.is_empty() {
        let text: Vec<String> = errors.iter().map(FieldError::to_message).collect();
        verdict.audit_annotations.insert(audit_key("error"), format!("Failed to parse policy: {}", text.join(", ")));
    }
    let mut cache: BTreeMap<String, Vec<checks::Violation>> = BTreeMap::new();
    let mut results = |lv: LevelVersion| -> Vec<checks::Violation> {
        cache.entry(lv.to_string()).or_insert_with(|| checks::evaluate(lv, meta, spec)).clone()
    };
    if let Some(name) = enforce_name {
        let violations = results(policy.enforce);
        if !violations.is_empty() {
            let why = format!("violates PodSecurity \"{}\": {}", policy.enforce, forbidden_detail(&violations));
            return Err(ApiError::forbidden_object("", "pods", name, &why));
        }
        verdict.audit_annotations.insert(audit_key("enforce-policy"), policy.enforce.to_string());
    }
    let audit = results(policy.audit);
    if !audit.is_empty() {
        verdict.audit_annotations.insert(
            audit_key("audit-violations"),
            format!("would violate PodSecurity \"{}\": {}", policy.audit, forbidden_detail(&audit)),
        );
    }
    let warn = results(policy.warn);
    if !warn.is_empty() {
        verdict.warnings.push(format!("would violate PodSecurity \"{}\": {}", policy.warn, forbidden_detail(&warn)));
    }
    Ok(verdict)
}

/// kube's `isSignificantPodUpdate`: the pod spec is immutable but for images and
/// ephemeral containers (and the deprecated seccomp annotations).
fn is_significant_pod_update(pod: &Value, old: &Value) -> bool {
    let list = |p: &Value, l: &str| p["spec"][l].as_array().cloned().unwrap_or_default();
    let seccomp = |p: &Value, c: &Value| {
        let key = format!("container.seccomp.security.alpha.kubernetes.io/{}", c["name"].as_str().unwrap_or_default());
        p["metadata"]["annotations"][&key].clone()
    };
    let changed = |c: &Value, o: &Value| c["image"] != o["image"] || seccomp(pod, c) != seccomp(old, o);
    for l in ["containers", "initContainers"] {
        let (new, prev) = (list(pod, l), list(old, l));
        if new.len() != prev.len() || new.iter().zip(&prev).any(|(c, o)| changed(c, o)) {
            return true;
        }
    }
    let prev = list(old, "ephemeralContainers");
    list(pod, "ephemeralContainers").iter().any(|c| match prev.iter().find(|o| o["name"] == c["name"]) {
        None => true,
        Some(o) => changed(c, o),
    })
}

/// Namespaces: the labels must be valid (on update, when their errors changed); a new,
/// stricter `enforce` policy is checked against the namespace's pods, as warnings.
fn validate_namespace(view: StoreView<'_>, attrs: &Attributes<'_>, ns: &Value) -> ApiResult<Verdict> {
    if attrs.subresource.is_some() {
        return Ok(Verdict::default());
    }
    let (policy, errors) = policy_of(&ns["metadata"]["labels"]);
    let name = ns["metadata"]["name"].as_str().unwrap_or_default();
    let invalid = || ApiError::invalid("", "Namespace", name, &errors);
    let Some(old) = attrs.old else {
        return if errors.is_empty() { Ok(Verdict::default()) } else { Err(invalid()) };
    };
    let (old_policy, old_errors) = policy_of(&old["metadata"]["labels"]);
    if !errors.is_empty() && (old_errors.is_empty() || errors != old_errors) {
        return Err(invalid());
    }
    let (new, prev) = (policy.enforce, old_policy.enforce);
    if new == prev || new.level == Level::Privileged || (new.minor == prev.minor && new.level <= prev.level) {
        return Ok(Verdict::default());
    }
    Ok(Verdict { warnings: check_existing_pods(view, name, new), ..Verdict::default() })
}

/// kube's `EvaluatePodsInNamespace`: one warning per distinct set of reasons, naming the
/// first pod (and how many others), after a header; one pod per controller first.
fn check_existing_pods(view: StoreView<'_>, namespace: &str, enforce: LevelVersion) -> Vec<String> {
    let mut pods: Vec<Value> = view
        .values(&ResourceId::new("", "pods"))
        .into_iter()
        .filter(|((ns, _), _)| ns == namespace)
        .filter_map(|(_, bytes)| parse_stored(&bytes).ok())
        .collect();
    let controller_uid = |p: &Value| {
        p["metadata"]["ownerReferences"]
            .as_array()
            .and_then(|refs| refs.iter().find(|r| r["controller"] == true))
            .and_then(|r| r["uid"].as_str())
            .map(str::to_string)
    };
    let mut seen = HashSet::new();
    let (first, duplicates): (Vec<Value>, Vec<Value>) =
        pods.drain(..).partition(|p| controller_uid(p).is_none_or(|uid| seen.insert(uid)));
    // reason → (lexically first pod, count), in order of first appearance.
    let mut order: Vec<String> = Vec::new();
    let mut counts: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for pod in first.iter().chain(&duplicates) {
        let violations = checks::evaluate(enforce, &pod["metadata"], &pod["spec"]);
        if violations.is_empty() {
            continue;
        }
        let reason = forbidden_reason(&violations);
        let pod_name = pod["metadata"]["name"].as_str().unwrap_or_default().to_string();
        match counts.get_mut(&reason) {
            Some((name, count)) => {
                if pod_name < *name {
                    *name = pod_name;
                }
                *count += 1;
            }
            None => {
                order.push(reason.clone());
                counts.insert(reason, (pod_name, 1));
            }
        }
    }
    if order.is_empty() {
        return Vec::new();
    }
    let mut pod_warnings: Vec<String> = order
        .into_iter()
        .map(|reason| {
            let (name, count) = &counts[&reason];
            match count {
                1 => format!("{name}: {reason}"),
                2 => format!("{name} (and 1 other pod): {reason}"),
                n => format!("{name} (and {} other pods): {reason}", n - 1),
            }
        })
        .collect();
    pod_warnings.sort();
    let header =
        format!("existing pods in namespace \"{namespace}\" violate the new PodSecurity enforce level \"{enforce}\"");
    std::iter::once(header).chain(pod_warnings).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn labels_choose_levels_and_versions() {
        let labels = json!({
            "pod-security.kubernetes.io/enforce": "baseline",
            "pod-security.kubernetes.io/enforce-version": "v1.29",
            "pod-security.kubernetes.io/warn": "restricted",
        });
        let (policy, errors) = policy_of(&labels);
        assert!(errors.is_empty());
        assert_eq!(policy.enforce.to_string(), "baseline:v1.29");
        assert_eq!(policy.warn.to_string(), "restricted:latest");
        assert_eq!(policy.audit.to_string(), "privileged:latest");
    }

    #[test]
    fn invalid_labels_fall_back_as_kube_does() {
        let labels = json!({
            "pod-security.kubernetes.io/enforce": "strict",
            "pod-security.kubernetes.io/warn": "nope",
            "pod-security.kubernetes.io/audit-version": "1.29",
        });
        let (policy, errors) = policy_of(&labels);
        assert_eq!(policy.enforce.level, Level::Restricted);
        assert_eq!(policy.warn.level, Level::Privileged);
        let messages: Vec<String> = errors.iter().map(FieldError::to_message).collect();
        assert_eq!(
            messages,
            [
                "metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted",
                "metadata.labels[pod-security.kubernetes.io/audit-version]: Invalid value: \"1.29\": must be \"latest\" or \"v1.x\"",
                "metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: \"nope\": must be one of privileged, baseline, restricted",
            ]
        );
    }

    #[test]
    fn versions_are_latest_or_v1_minor() {
        assert_eq!(parse_version("latest"), Ok(None));
        assert_eq!(parse_version("v1.0"), Ok(Some(0)));
        assert_eq!(parse_version("v1.33"), Ok(Some(33)));
        assert!(parse_version("v1.033").is_err());
        assert!(parse_version("v2.1").is_err());
        assert!(parse_version("v1.").is_err());
    }
}
