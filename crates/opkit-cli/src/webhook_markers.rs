//! `+kubebuilder:webhook:...` markers (controller-gen's `webhook` markers) and the admission
//! webhook configurations `opkit generate` writes from them to config/webhook/manifests.yaml.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::rbac::{RbacError, comment_of, sources};

/// The marker prefix.
const PREFIX: &str = "+kubebuilder:webhook:";

/// Where the configurations are written, relative to the project.
pub(crate) const MANIFESTS: &str = "config/webhook/manifests.yaml";

/// A malformed webhook marker, or a source that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WebhookMarkerError {
    /// A marker could not be parsed.
    #[error("{}:{line}: webhook marker: {reason}", file.display())]
    Marker {
        /// File holding the marker.
        file: PathBuf,
        /// 1-based line number.
        line: usize,
        /// Why the marker is rejected.
        reason: String,
    },
    /// A source file could not be read.
    #[error(transparent)]
    Source(#[from] RbacError),
}

/// One `+kubebuilder:webhook` marker.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WebhookMarker {
    /// `name=`: the webhook's name (`vflightticket-v1.kb.io`).
    pub name: String,
    /// `path=`: the path the server serves it at.
    pub path: String,
    /// `mutating=`.
    pub mutating: bool,
    /// `failurePolicy=` (`Fail` or `Ignore`).
    pub failure_policy: String,
    /// `sideEffects=` (`None`, `NoneOnDryRun`, `Some`, `Unknown`).
    pub side_effects: String,
    /// `groups=` (`""` is the core group).
    pub groups: Vec<String>,
    /// `resources=`.
    pub resources: Vec<String>,
    /// `versions=`.
    pub versions: Vec<String>,
    /// `verbs=` as operations (`CREATE`, `UPDATE`, `DELETE`, `CONNECT`, `*`).
    pub operations: Vec<String>,
    /// `admissionReviewVersions=`.
    pub admission_review_versions: Vec<String>,
    /// `matchPolicy=` (`Exact` or `Equivalent`), if given.
    pub match_policy: Option<String>,
    /// `reinvocationPolicy=` (`Never` or `IfNeeded`), if given (mutating only).
    pub reinvocation_policy: Option<String>,
    /// `timeoutSeconds=`, if given.
    pub timeout_seconds: Option<u32>,
}

/// Every webhook marker in the `*.rs` files under `src_dir`, in file order.
pub(crate) fn scan(src_dir: &Path) -> Result<Vec<WebhookMarker>, WebhookMarkerError> {
    let mut out = Vec::new();
    for (file, text) in sources(src_dir)? {
        for (idx, raw) in text.lines().enumerate() {
            let Some(body) = comment_of(raw).and_then(|c| c.strip_prefix(PREFIX)) else { continue };
            let marker = parse(body).map_err(|reason| WebhookMarkerError::Marker {
                file: file.clone(),
                line: idx + 1,
                reason,
            })?;
            out.push(marker);
        }
    }
    Ok(out)
}

/// Capitalizes an enum value as the API spells it (`fail` → `Fail`, `none` → `None`).
fn enum_value(key: &str, value: &str, allowed: &[&str]) -> Result<String, String> {
    allowed
        .iter()
        .find(|a| a.eq_ignore_ascii_case(value))
        .map(|a| (*a).to_owned())
        .ok_or_else(|| format!("{key}={value}: expected one of {}", allowed.join(", ")))
}

/// Parses the `key=value,...` body of a marker.
pub(crate) fn parse(body: &str) -> Result<WebhookMarker, String> {
    let mut m = WebhookMarker {
        name: String::new(),
        path: String::new(),
        mutating: false,
        failure_policy: "Fail".into(),
        side_effects: String::new(),
        groups: Vec::new(),
        resources: Vec::new(),
        versions: Vec::new(),
        operations: Vec::new(),
        admission_review_versions: Vec::new(),
        match_policy: None,
        reinvocation_policy: None,
        timeout_seconds: None,
    };
    let mut mutating = None;
    for pair in body.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').ok_or_else(|| format!("{pair:?} is not key=value"))?;
        let value = value.trim().trim_matches('"');
        let list = || value.split(';').map(|v| v.trim().trim_matches('"').to_owned()).collect::<Vec<_>>();
        match key.trim() {
            "name" => m.name = value.to_owned(),
            "path" => m.path = value.to_owned(),
            "mutating" => {
                mutating =
                    Some(value.parse::<bool>().map_err(|_| format!("mutating={value}: expected true or false"))?);
            }
            "failurePolicy" => m.failure_policy = enum_value(key, value, &["Fail", "Ignore"])?,
            "sideEffects" => m.side_effects = enum_value(key, value, &["None", "NoneOnDryRun", "Some", "Unknown"])?,
            "groups" => m.groups = list(),
            "resources" => m.resources = list(),
            "versions" => m.versions = list(),
            "verbs" => {
                m.operations = list()
                    .iter()
                    .map(|v| enum_value("verbs", v, &["CREATE", "UPDATE", "DELETE", "CONNECT", "*"]))
                    .collect::<Result<_, _>>()?;
            }
            "admissionReviewVersions" => m.admission_review_versions = list(),
            "matchPolicy" => m.match_policy = Some(enum_value(key, value, &["Exact", "Equivalent"])?),
            "reinvocationPolicy" => m.reinvocation_policy = Some(enum_value(key, value, &["Never", "IfNeeded"])?),
            "timeoutSeconds" => {
                m.timeout_seconds =
                    Some(value.parse().map_err(|_| format!("timeoutSeconds={value}: expected a number of seconds"))?);
            }
            // controller-gen's marker names the configuration's API version; only v1 exists.
            "webhookVersions" if value == "v1" || value == "{v1}" => {}
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    m.mutating = mutating.ok_or("missing mutating=true|false")?;
    for (what, missing) in [
        ("name", m.name.is_empty()),
        ("path", m.path.is_empty()),
        ("sideEffects", m.side_effects.is_empty()),
        ("groups", m.groups.is_empty()),
        ("resources", m.resources.is_empty()),
        ("versions", m.versions.is_empty()),
        ("verbs", m.operations.is_empty()),
        ("admissionReviewVersions", m.admission_review_versions.is_empty()),
    ] {
        if missing {
            return Err(format!("missing {what}="));
        }
    }
    if !m.path.starts_with('/') {
        return Err(format!("path={}: must start with /", m.path));
    }
    Ok(m)
}

/// The webhook entry of a configuration, as controller-gen writes it.
fn webhook(m: &WebhookMarker) -> Value {
    let mut w = json!({
        "admissionReviewVersions": m.admission_review_versions,
        "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": m.path}},
        "failurePolicy": m.failure_policy,
        "name": m.name,
        "rules": [{
            "apiGroups": m.groups,
            "apiVersions": m.versions,
            "operations": m.operations,
            "resources": m.resources,
        }],
        "sideEffects": m.side_effects,
    });
    if let Some(p) = &m.match_policy {
        w["matchPolicy"] = json!(p);
    }
    if let (Some(p), true) = (&m.reinvocation_policy, m.mutating) {
        w["reinvocationPolicy"] = json!(p);
    }
    if let Some(t) = m.timeout_seconds {
        w["timeoutSeconds"] = json!(t);
    }
    w
}

/// The MutatingWebhookConfiguration and ValidatingWebhookConfiguration of `markers` (each
/// only when it has webhooks), their webhooks sorted by name as controller-gen sorts them.
pub(crate) fn configurations(markers: &[WebhookMarker]) -> Vec<Value> {
    let mut out = Vec::new();
    for (mutating, kind, name) in [
        (true, "MutatingWebhookConfiguration", "mutating-webhook-configuration"),
        (false, "ValidatingWebhookConfiguration", "validating-webhook-configuration"),
    ] {
        let mut selected: Vec<&WebhookMarker> = markers.iter().filter(|m| m.mutating == mutating).collect();
        if selected.is_empty() {
            continue;
        }
        selected.sort_by(|a, b| a.name.cmp(&b.name));
        selected.dedup_by(|a, b| a.name == b.name);
        out.push(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name},
            "webhooks": selected.into_iter().map(webhook).collect::<Vec<_>>(),
        }));
    }
    out
}

/// config/webhook/manifests.yaml for `configurations`.
pub(crate) fn render(configurations: &[Value]) -> Result<String, String> {
    let mut out = String::new();
    for c in configurations {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(c).map_err(|e| format!("webhook configuration as YAML: {e}"))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALIDATE: &str = "path=/validate-flights-com-v1-flightticket,mutating=false,failurePolicy=fail,sideEffects=None,groups=flights.com,resources=flighttickets,verbs=create;update,versions=v1,name=vflightticket-v1.kb.io,admissionReviewVersions=v1";

    #[test]
    fn markers_become_controller_gen_configurations() {
        let v = parse(VALIDATE).expect("marker");
        let m = parse(&VALIDATE.replace("mutating=false", "mutating=true").replace("vflight", "mflight")).expect("m");
        let configs = configurations(&[v, m]);
        assert_eq!(configs.len(), 2);
        assert_eq!(configs[0]["kind"], "MutatingWebhookConfiguration");
        assert_eq!(configs[1]["metadata"]["name"], "validating-webhook-configuration");
        assert_eq!(
            configs[1]["webhooks"][0],
            json!({
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"service": {"name": "webhook-service", "namespace": "system",
                                             "path": "/validate-flights-com-v1-flightticket"}},
                "failurePolicy": "Fail",
                "name": "vflightticket-v1.kb.io",
                "rules": [{"apiGroups": ["flights.com"], "apiVersions": ["v1"],
                           "operations": ["CREATE", "UPDATE"], "resources": ["flighttickets"]}],
                "sideEffects": "None",
            })
        );
        let yaml = render(&configs).expect("yaml");
        assert!(
            yaml.starts_with("---\napiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration"),
            "{yaml}"
        );
    }

    #[test]
    fn malformed_markers_are_refused() {
        for (body, want) in [
            (VALIDATE.replace("mutating=false,", ""), "missing mutating"),
            (VALIDATE.replace("failurePolicy=fail", "failurePolicy=maybe"), "failurePolicy=maybe"),
            (VALIDATE.replace("verbs=create;update", "verbs=create;patch"), "verbs=patch"),
            (format!("{VALIDATE},colour=blue"), "unknown argument \"colour\""),
            (VALIDATE.replace(",name=vflightticket-v1.kb.io", ""), "missing name="),
        ] {
            let err = parse(&body).expect_err(&body);
            assert!(err.contains(want), "{err} does not contain {want}");
        }
    }
}
