//! The optional validators `--select-optional` picks by label: the `operatorframework`
//! suite (operatorhubv2, capabilities, categories, alpha-deprecated-apis, good-practices)
//! and the deprecated `operatorhub` one.

use std::collections::BTreeMap;

use super::{Finding, Level, Selector, ordered};
use crate::bundle::Bundle;
use crate::crd::CRD_V1BETA1;
use crate::generate::manifests::is_semver;

/// An optional validator: its name, labels and description, as `--list-optional` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionalValidator {
    /// The `name` label.
    pub name: &'static str,
    /// The `suite` label, when it is in one.
    pub suite: Option<&'static str>,
    /// What it checks.
    pub description: &'static str,
}

/// The optional validators opkit implements, in operator-sdk's order.
pub const OPTIONAL_VALIDATORS: [OptionalValidator; 6] = [
    OptionalValidator {
        name: "operatorhubv2",
        suite: Some("operatorframework"),
        description: "OperatorHub.io metadata validation. ",
    },
    OptionalValidator {
        name: "capabilities",
        suite: Some("operatorframework"),
        description: "OperatorHub.io capabilities metadata validation. ",
    },
    OptionalValidator {
        name: "categories",
        suite: Some("operatorframework"),
        description: "OperatorHub.io categories metadata validation. ",
    },
    OptionalValidator {
        name: "operatorhub",
        suite: None,
        description: "Deprecated OperatorHub.io metadata validation. ",
    },
    OptionalValidator {
        name: "alpha-deprecated-apis",
        suite: Some("operatorframework"),
        description: "(stage: alpha) Deprecated APIs bundle validation. This validator can help you out verify if your bundle contains manifests which uses deprecated APIs. More info: https://kubernetes.io/docs/reference/using-api/deprecation-guide/",
    },
    OptionalValidator {
        name: "good-practices",
        suite: Some("operatorframework"),
        description: "Good Practices bundle validation. This validator validates the bundle against criteria and suggestions defined as good practices for bundles under the operator-framework solutions. More info: https://sdk.operatorframework.io/docs/best-practices/.",
    },
];

const STANDARD_CAPABILITIES: [&str; 5] =
    ["Basic Install", "Seamless Upgrades", "Full Lifecycle", "Deep Insights", "Auto Pilot"];
const STANDARD_CATEGORIES: [&str; 16] = [
    "AI/Machine Learning",
    "Application Runtime",
    "Big Data",
    "Cloud Provider",
    "Developer Tools",
    "Database",
    "Integration & Delivery",
    "Logging & Tracing",
    "Monitoring",
    "Modernization & Migration",
    "Networking",
    "OpenShift Optional",
    "Security",
    "Storage",
    "Streaming & Messaging",
    "Observability",
];
const VALID_ICON_TYPES: [&str; 4] = ["image/gif", "image/jpeg", "image/png", "image/svg+xml"];

pub(super) fn validate(bundle: &Bundle, selector: &Selector, values: &[(String, String)]) -> Vec<Finding> {
    let k8s_version = values.iter().find(|(k, _)| k == "k8s-version").map(|(_, v)| v.as_str()).unwrap_or_default();
    let mut out = Vec::new();
    for v in OPTIONAL_VALIDATORS {
        let mut labels = vec![("name", v.name)];
        if let Some(suite) = v.suite {
            labels.push(("suite", suite));
        }
        if !selector.matches(&labels) {
            continue;
        }
        let findings = match v.name {
            "operatorhubv2" => operatorhub(bundle, k8s_version, false),
            "operatorhub" => operatorhub(bundle, k8s_version, true),
            "capabilities" => capabilities(bundle),
            "categories" => categories(bundle),
            "alpha-deprecated-apis" => deprecated_apis(bundle, k8s_version, false),
            _ => good_practices(bundle),
        };
        out.extend(ordered(findings));
    }
    out
}

fn csv_finding(bundle: &Bundle, level: Level, detail: String, field: &str) -> Finding {
    Finding::new(level, "CSVFileNotValid", format!("({}) {detail}", bundle.csv.name()))
        .value("")
        .field(field)
        .file(&bundle.csv_file)
}

fn failed(bundle: &Bundle, level: Level, detail: String) -> Finding {
    Finding::new(level, "ValidationFailed", detail).value(bundle.csv.name()).file(&bundle.csv_file)
}

fn operatorhub(bundle: &Bundle, k8s_version: &str, deprecated: bool) -> Vec<Finding> {
    let spec = &bundle.csv.spec;
    let mut errs: Vec<(String, &str)> = Vec::new();
    let mut warns: Vec<(String, &str)> = Vec::new();
    if spec.provider.name.trim().is_empty() {
        errs.push(("csv.Spec.Provider.Name not specified".into(), "spec.provider.name"));
    }
    for m in &spec.maintainers {
        if m.name.is_empty() || m.email.is_empty() {
            errs.push(("csv.Spec.Maintainers elements should contain both name and email".into(), "spec.maintainers"));
        }
        if !m.email.is_empty() && !valid_email(&m.email) {
            errs.push((
                format!("csv.Spec.Maintainers email {} is invalid: mail: missing '@' or angle-addr", m.email),
                "spec.maintainers",
            ));
        }
    }
    for l in &spec.links {
        if l.name.is_empty() || l.url.is_empty() {
            errs.push(("csv.Spec.Links elements should contain both name and url".into(), "spec.links"));
        }
        if !(l.url.is_empty() || l.url.starts_with('/') || l.url.contains(':')) {
            errs.push((
                format!("csv.Spec.Links url {} is invalid: parse {:?}: invalid URI for request", l.url, l.url),
                "spec.links",
            ));
        }
    }
    if spec.version.is_empty() {
        errs.push(("csv.Spec.Version must be set".into(), "spec.version"));
    }
    if spec.icon.is_empty() {
        warns.push(("csv.Spec.Icon not specified".into(), "spec.icon"));
    } else {
        if spec.icon.len() != 1 {
            errs.push(("csv.Spec.Icon should only have one element".into(), "spec.icon"));
        }
        let icon = &spec.icon[0];
        if icon.mediatype.is_empty() || icon.base64data.is_empty() {
            errs.push(("csv.Spec.Icon elements should contain both data and mediatype".into(), "spec.icon"));
        }
        if !icon.mediatype.is_empty() && !VALID_ICON_TYPES.contains(&icon.mediatype.as_str()) {
            errs.push((format!("csv.Spec.Icon {} does not have a valid mediatype", icon.mediatype), "spec.icon"));
        }
    }
    if spec.min_kube_version.trim().is_empty() {
        warns.push((super::required::min_kube_version_warning().into(), "spec.minKubeVersion"));
    } else if !is_semver(&spec.min_kube_version) {
        errs.push((
            format!("csv.Spec.MinKubeVersion has an invalid value: {}", spec.min_kube_version),
            "spec.minKubeVersion",
        ));
    }
    if deprecated {
        errs.extend(capability_errors(bundle).into_iter().map(|e| (e, "metadata.annotations.capabilities")));
        errs.extend(category_errors(bundle).into_iter().map(|e| (e, "metadata.annotations.categories")));
    }
    let mut out: Vec<Finding> = errs.into_iter().map(|(e, f)| csv_finding(bundle, Level::Error, e, f)).collect();
    out.extend(warns.into_iter().map(|(w, f)| csv_finding(bundle, Level::Warning, w, f)));
    out.extend(deprecated_apis(bundle, k8s_version, true));
    out
}

/// What Go's `mail.ParseAddress` accepts, roughly: `local@domain` or `Name <local@domain>`.
fn valid_email(email: &str) -> bool {
    let address = match (email.find('<'), email.rfind('>')) {
        (Some(a), Some(b)) if a < b => &email[a + 1..b],
        _ => email.trim(),
    };
    match address.split_once('@') {
        Some((local, domain)) => !local.is_empty() && !domain.is_empty() && !address.contains(char::is_whitespace),
        None => false,
    }
}

fn capability_errors(bundle: &Bundle) -> Vec<String> {
    match bundle.csv.metadata.annotations.as_ref().and_then(|a| a.get("capabilities")) {
        Some(c) if !STANDARD_CAPABILITIES.contains(&c.as_str()) => {
            vec![format!("csv.Metadata.Annotations.Capabilities {c:?} is not a valid capabilities level")]
        }
        _ => Vec::new(),
    }
}

fn category_errors(bundle: &Bundle) -> Vec<String> {
    let Some(categories) = bundle.csv.metadata.annotations.as_ref().and_then(|a| a.get("categories")) else {
        return Vec::new();
    };
    categories
        .split(',')
        .map(str::trim)
        .filter(|c| !STANDARD_CATEGORIES.contains(c))
        .map(|c| {
            format!("csv.Metadata.Annotations[\"categories\"] value {c:?} is not in the set of standard categories")
        })
        .collect()
}

fn capabilities(bundle: &Bundle) -> Vec<Finding> {
    capability_errors(bundle)
        .into_iter()
        .map(|e| csv_finding(bundle, Level::Error, e, "metadata.annotations.capabilities"))
        .collect()
}

fn categories(bundle: &Bundle) -> Vec<Finding> {
    category_errors(bundle)
        .into_iter()
        .map(|e| csv_finding(bundle, Level::Error, e, "metadata.annotations.categories"))
        .collect()
}

/// Go's `%+q` of a list of strings.
fn quoted_list(items: &[String]) -> String {
    format!("[{}]", items.iter().map(|i| format!("{i:?}")).collect::<Vec<_>>().join(" "))
}

/// The APIs of the bundle removed in Kubernetes 1.22, 1.25 and 1.26: errors when the
/// `k8s-version` value or minKubeVersion reaches that release, warnings otherwise.
/// APIs a Kubernetes release removed, as operator-framework's deprecated-APIs validator
/// lists them.
struct RemovedApis {
    /// The release: major, minor.
    release: (u64, u64),
    /// Whether the release removed `apiextensions.k8s.io/v1beta1` CRDs.
    crds_v1beta1: bool,
    /// The removed kinds, by apiVersion.
    kinds: &'static [(&'static str, &'static [&'static str])],
}

/// The releases the deprecated-APIs validator checks, oldest first.
const REMOVED_APIS: [RemovedApis; 3] = [
    RemovedApis {
        release: (1, 22),
        crds_v1beta1: true,
        kinds: &[
            ("scheduling.k8s.io/v1beta1", &["PriorityClass"]),
            ("rbac.authorization.k8s.io/v1beta1", &["Role", "ClusterRoleBinding", "RoleBinding", "ClusterRole"]),
            ("apiregistration.k8s.io/v1beta1", &["APIService"]),
            ("authentication.k8s.io/v1beta1", &["TokenReview"]),
            (
                "authorization.k8s.io/v1beta1",
                &["LocalSubjectAccessReview", "SelfSubjectAccessReview", "SubjectAccessReview"],
            ),
            (
                "admissionregistration.k8s.io/v1beta1",
                &["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"],
            ),
            ("coordination.k8s.io/v1beta1", &["Lease"]),
            ("extensions/v1beta1", &["Ingress"]),
            ("networking.k8s.io/v1beta1", &["Ingress", "IngressClass"]),
            ("storage.k8s.io/v1beta1", &["CSIDriver", "CSINode", "StorageClass", "VolumeAttachment"]),
            ("certificates.k8s.io/v1beta1", &["CertificateSigningRequest"]),
        ],
    },
    RemovedApis {
        release: (1, 25),
        crds_v1beta1: false,
        kinds: &[
            ("batch/v1beta1", &["CronJob"]),
            ("discovery.k8s.io/v1beta1", &["EndpointSlice"]),
            ("events.k8s.io/v1beta1", &["Event"]),
            ("autoscaling/v2beta1", &["HorizontalPodAutoscaler"]),
            ("policy/v1beta1", &["PodDisruptionBudget", "PodSecurityPolicy"]),
            ("node.k8s.io/v1beta1", &["RuntimeClass"]),
        ],
    },
    RemovedApis {
        release: (1, 26),
        crds_v1beta1: false,
        kinds: &[("autoscaling/v2beta2", &["HorizontalPodAutoscaler"])],
    },
];

impl RemovedApis {
    /// The bundle's objects of these APIs: names by kind (`CRD` for v1beta1 CRDs).
    fn used_by(&self, bundle: &Bundle) -> BTreeMap<String, Vec<String>> {
        let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
        if self.crds_v1beta1 {
            let crds: Vec<String> =
                bundle.crds.iter().filter(|c| c.api_version == CRD_V1BETA1).map(|c| c.name.clone()).collect();
            if !crds.is_empty() {
                found.insert("CRD".into(), crds);
            }
        }
        for object in &bundle.objects {
            let (api_version, kind) = (object.api_version(), object.kind());
            if self.kinds.iter().any(|(v, kinds)| *v == api_version && kinds.contains(&kind)) {
                found.entry(kind.to_string()).or_default().push(object.name().to_string());
            }
        }
        found
    }
}

/// A Kubernetes version's major and minor (`v1.22`, `1.22.3`; minor 0 when absent).
fn kube_release(v: &str) -> Option<(u64, u64)> {
    let v = v.trim().trim_start_matches('v');
    let mut parts = v.split('.');
    Some((parts.next()?.parse().ok()?, parts.next().unwrap_or("0").parse().ok()?))
}

/// The alpha deprecated-APIs validator: objects of APIs a release removed, errors when the
/// `k8s-version` given or `spec.minKubeVersion` reaches that release, warnings otherwise.
fn deprecated_apis(bundle: &Bundle, k8s_version: &str, _inside_operatorhub: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    if !k8s_version.is_empty() && kube_release(k8s_version).is_none() {
        out.push(failed(
            bundle,
            Level::Error,
            format!("invalid value informed via the k8s key option : {k8s_version}"),
        ));
    }
    let min_kube_version = &bundle.csv.spec.min_kube_version;
    let min_kube = if min_kube_version.is_empty() { None } else { kube_release(min_kube_version) };
    if !min_kube_version.is_empty() && min_kube.is_none() {
        out.push(failed(bundle, Level::Error, format!("unable to use csv.Spec.MinKubeVersion to verify the CRD/Webhook apis because it has an invalid value: {min_kube_version}")));
    }
    let provided = kube_release(k8s_version);
    for removed in &REMOVED_APIS {
        let found = removed.used_by(bundle);
        if found.is_empty() {
            continue;
        }
        let (major, minor) = removed.release;
        let apis: Vec<String> = found.iter().map(|(k, v)| format!("{k}: ({})", quoted_list(v))).collect();
        let message = format!(
            "this bundle is using APIs which were deprecated and removed in v{major}.{minor}. More info: https://kubernetes.io/docs/reference/using-api/deprecation-guide/#v{major}-{minor}. Migrate the API(s) for {}",
            apis.join(",")
        );
        let reached = |v: Option<(u64, u64)>| v.is_some_and(|v| v >= removed.release);
        let level = if reached(provided) || reached(min_kube) { Level::Error } else { Level::Warning };
        out.push(failed(bundle, level, message));
    }
    out
}

/// The good-practices validator, one check per practice.
fn good_practices(bundle: &Bundle) -> Vec<Finding> {
    const CHECKS: [fn(&Bundle) -> Vec<Finding>; 6] =
        [has_deployment, resource_requests, crd_descriptions, channel_names, no_crd_permissions, csv_name_convention];
    CHECKS.iter().flat_map(|check| check(bundle)).collect()
}

/// The CSV installs a Deployment.
fn has_deployment(bundle: &Bundle) -> Vec<Finding> {
    if bundle.csv.spec.install.spec.deployments.is_empty()
        && bundle.csv_object.pointer("/spec/install/spec/deployments").is_none()
    {
        return vec![failed(bundle, Level::Error, "unable to find a deployment to install in the CSV".into())];
    }
    Vec::new()
}

/// Every container asks for resources.
fn resource_requests(bundle: &Bundle) -> Vec<Finding> {
    let mut out = Vec::new();
    for d in &bundle.csv.spec.install.spec.deployments {
        for c in d.spec.template.spec.iter().flat_map(|p| p.containers.iter()) {
            if c.resources.as_ref().and_then(|r| r.requests.as_ref()).is_none() {
                out.push(failed(bundle, Level::Warning, format!("unable to find the resource requests for the container: ({}). It is recommended to ensure the resource request for CPU and Memory. Be aware that for some clusters configurations it is required to specify requests or limits for those values. Otherwise, the system or quota may reject Pod creation. More info: https://master.sdk.operatorframework.io/docs/best-practices/managing-resources/", c.name)));
            }
        }
    }
    out
}

/// Every owned and required CRD has a description.
fn crd_descriptions(bundle: &Bundle) -> Vec<Finding> {
    let crds = &bundle.csv.spec.customresourcedefinitions;
    let mut out = Vec::new();
    for (list, relation) in [(&crds.owned, "owned"), (&crds.required, "required")] {
        for crd in list.iter().filter(|crd| crd.description.is_empty()) {
            out.push(failed(bundle, Level::Warning, format!("{relation} CRD {:?} has an empty description", crd.name)));
        }
    }
    out
}

/// Channels are named `candidate…`, `stable…` or `fast…`.
fn channel_names(bundle: &Bundle) -> Vec<Finding> {
    let mut channels = bundle.channels();
    if let Some(default) = bundle.annotations.as_ref().and_then(|a| a.default_channel()) {
        channels.push(default.to_string());
    }
    let mut unconventional: Vec<String> = Vec::new();
    for c in channels {
        let c = c.trim().to_string();
        if !c.is_empty()
            && !["candidate", "stable", "fast"].iter().any(|p| c.starts_with(p))
            && !unconventional.contains(&c)
        {
            unconventional.push(c);
        }
    }
    if unconventional.is_empty() {
        return Vec::new();
    }
    vec![failed(
        bundle,
        Level::Warning,
        format!(
            "channel(s) {} are not following the recommended naming convention: https://olm.operatorframework.io/docs/best-practices/channel-naming",
            quoted_list(&unconventional)
        ),
    )]
}

/// The operator may not create CRDs.
fn no_crd_permissions(bundle: &Bundle) -> Vec<Finding> {
    let strategy = &bundle.csv.spec.install.spec;
    let creates_crds = strategy.permissions.iter().chain(&strategy.cluster_permissions).any(|p| {
        p.rules.iter().any(|r| {
            r.api_groups.iter().flatten().any(|g| g == "apiextensions.k8s.io")
                && r.resources
                    .iter()
                    .flatten()
                    .any(|res| ["customresourcedefinitions", "*", "[*]"].contains(&res.as_str()))
                && r.verbs.iter().any(|v| ["create", "*", "[*]", "patch"].contains(&v.as_str()))
        })
    });
    if !creates_crds {
        return Vec::new();
    }
    vec![failed(bundle, Level::Warning, "CSV contains permissions to create CRD. An Operator shouldn't deploy or manage other operators (such patterns are known as meta or super operators or include CRDs in its Operands). It's the Operator Lifecycle Manager's job to manage the deployment and lifecycle of operators.  Please, review the design of your solution and if you should not be using Dependency Resolution from OLM instead. More info: https://sdk.operatorframework.io/docs/best-practices/common-recommendation/".into())]
}

/// The CSV is named `<operator-name>.v<semver>`.
fn csv_name_convention(bundle: &Bundle) -> Vec<Finding> {
    let name = bundle.csv.name();
    let mut out = Vec::new();
    let semver_suffix = name
        .char_indices()
        .filter(|(i, c)| c.is_ascii_digit() && (*i == 0 || !name.as_bytes()[i - 1].is_ascii_digit()))
        .any(|(i, _)| is_semver(&name[i..]));
    if !semver_suffix {
        out.push(failed(bundle, Level::Warning, format!("csv.metadata.Name {name} is not following the versioning convention (MAJOR.MINOR.PATCH e.g 0.0.1): https://semver.org/")));
    }
    if name.split(".v").count() != 2 {
        out.push(failed(bundle, Level::Warning, format!("csv.metadata.Name {name} is not following the recommended naming convention: <operator-name>.v<semver> e.g. memcached-operator.v0.0.1")));
    }
    out
}
