//! A bundle from the objects of `kustomize build config/manifests`, as `operator-sdk
//! generate bundle` makes it: the CSV base completed with the install strategy
//! (Deployments; the rules of the Roles and ClusterRoles bound to their ServiceAccounts as
//! permissions and clusterPermissions), the owned CRDs, `alm-examples` from the samples and
//! webhookdefinitions from the webhook configurations and conversion webhooks; the other
//! objects OLM can create kept beside it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, ValidatingWebhook, WebhookClientConfig};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use crate::bundle::{Bundle, BundleObject};
use crate::crd::BundleCrd;
use crate::csv::{
    ALM_EXAMPLES, CSV_KIND, ClusterServiceVersion, CrdDescription, DEPLOYMENT_STRATEGY, StrategyDeploymentPermissions,
    StrategyDeploymentSpec, WebhookDescription,
};

/// The kinds OLM creates from a bundle's manifests besides the CSV and CRDs
/// (operator-registry's supported kinds).
pub(crate) const SUPPORTED_KINDS: [&str; 19] = [
    "Secret",
    "ClusterRole",
    "ClusterRoleBinding",
    "ConfigMap",
    "ServiceAccount",
    "Service",
    "Role",
    "RoleBinding",
    "PrometheusRule",
    "ServiceMonitor",
    "PodDisruptionBudget",
    "PriorityClass",
    "VerticalPodAutoscaler",
    "ConsoleYAMLSample",
    "ConsoleQuickStart",
    "ConsoleCLIDownload",
    "ConsoleLink",
    "ConsolePlugin",
    "NetworkPolicy",
];

/// What makes a bundle besides the objects.
#[derive(Debug, Clone, Default)]
pub struct BundleOptions {
    /// The package (operator) name; the CSV is named `<package>.v<version>`.
    pub package: String,
    /// The semantic version; empty keeps the base's.
    pub version: String,
    /// `operators.operatorframework.io/builder` (`opkit-v0.1.0`).
    pub builder: String,
    /// `operators.operatorframework.io/project_layout` (the PROJECT's layout).
    pub project_layout: String,
    /// The `createdAt` annotation (RFC 3339), as operator-sdk stamps it.
    pub created_at: String,
}

/// Why the objects do not make a bundle.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// No ClusterServiceVersion among the objects and no base given.
    #[error("no ClusterServiceVersion base: run `opkit generate kustomize manifests` first")]
    NoBase,
    /// An object is not of the shape its kind needs.
    #[error("{what}: {message}")]
    Object {
        /// The object (`Kind/name`).
        what: String,
        /// What is wrong.
        message: String,
    },
    /// The version is not a semantic version.
    #[error("{0:?} is not a valid semantic version")]
    Version(String),
}

/// A generated bundle and the scorecard configuration found among the objects.
#[derive(Debug, Clone)]
pub struct GeneratedBundle {
    /// The bundle (in memory; its paths are empty).
    pub bundle: Bundle,
    /// The scorecard `Configuration`, when config/scorecard was part of the build.
    pub scorecard_config: Option<Value>,
}

fn what(obj: &Value) -> String {
    format!(
        "{}/{}",
        obj.get("kind").and_then(Value::as_str).unwrap_or("?"),
        obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("?")
    )
}

fn typed<T: serde::de::DeserializeOwned>(obj: &Value) -> Result<T, GenerateError> {
    serde_json::from_value(obj.clone()).map_err(|e| GenerateError::Object { what: what(obj), message: e.to_string() })
}

/// Whether `v` is a semantic version (`MAJOR.MINOR.PATCH[-pre][+build]`).
pub fn is_semver(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) && (p.len() == 1 || !p.starts_with('0')))
        && v[core.len()..].chars().all(|c| c.is_ascii_alphanumeric() || ".-+".contains(c))
}

/// Builds the bundle from `objects` (the base CSV among them, or `base`).
pub fn generate_bundle(
    objects: &[Value],
    base: Option<ClusterServiceVersion>,
    options: &BundleOptions,
) -> Result<GeneratedBundle, GenerateError> {
    if !options.version.is_empty() && !is_semver(&options.version) {
        return Err(GenerateError::Version(options.version.clone()));
    }
    let mut csv = match objects.iter().find(|o| kind_of(o) == CSV_KIND) {
        Some(o) => typed::<ClusterServiceVersion>(o)?,
        None => base.ok_or(GenerateError::NoBase)?,
    };
    let crds: Vec<BundleCrd> = objects
        .iter()
        .filter(|o| kind_of(o) == "CustomResourceDefinition")
        .map(|o| BundleCrd::from_object(PathBuf::new(), strip_namespace(o)))
        .collect();
    let mut sorted = SortedObjects::sort(objects, &crds)?;

    // The ServiceAccounts the operator runs as: OLM creates them and binds their rules.
    let csv_accounts = operator_accounts(&sorted.deployments);
    let (permissions, cluster_permissions, rbac_out) = split_permissions(&sorted.rbac, &csv_accounts);
    sorted.others.extend(rbac_out.into_iter().map(|o| strip_namespace(&o)));
    for account in &sorted.accounts {
        let name = account.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        if !csv_accounts.contains(name) {
            sorted.others.push(strip_namespace(account));
        }
    }
    fill_install_strategy(&mut csv, permissions, cluster_permissions, &sorted.deployments);
    csv.spec.customresourcedefinitions.owned = owned_crd_descriptions(&csv, &crds);
    annotate(&mut csv, &sorted.samples, options)?;
    csv.spec.webhookdefinitions =
        webhook_definitions(&sorted.validating, &sorted.mutating, &sorted.services, &sorted.deployments, &crds);
    name_csv(&mut csv, options);

    let csv_object = serde_json::to_value(&csv)
        .map_err(|e| GenerateError::Object { what: "the ClusterServiceVersion".into(), message: e.to_string() })?;
    let bundle = Bundle {
        dir: PathBuf::new(),
        manifests_dir: PathBuf::new(),
        csv,
        csv_object,
        csv_file: PathBuf::new(),
        crds,
        objects: sorted.others.into_iter().map(|object| BundleObject { file: PathBuf::new(), object }).collect(),
        annotations: None,
        annotations_file: None,
        dependencies: None,
    };
    Ok(GeneratedBundle { bundle, scorecard_config: sorted.scorecard_config })
}

/// An object's `kind`.
fn kind_of(object: &Value) -> String {
    object.get("kind").and_then(Value::as_str).unwrap_or_default().to_string()
}

/// The input objects sorted by where they go: into the CSV's install strategy and webhook
/// definitions, into `alm-examples`, or into the bundle as they are.
#[derive(Default)]
struct SortedObjects {
    deployments: Vec<Deployment>,
    services: Vec<Service>,
    validating: Vec<ValidatingWebhook>,
    mutating: Vec<MutatingWebhook>,
    /// Roles, ClusterRoles and their bindings.
    rbac: Vec<Value>,
    accounts: Vec<Value>,
    /// Custom resources of the owned CRDs.
    samples: Vec<Value>,
    /// The objects the bundle carries beside the CSV and CRDs (without namespace).
    others: Vec<Value>,
    scorecard_config: Option<Value>,
}

impl SortedObjects {
    /// Sorts the objects; `crds` decides which custom resources are samples.
    fn sort(objects: &[Value], crds: &[BundleCrd]) -> Result<SortedObjects, GenerateError> {
        let owned_gvks: BTreeSet<(String, String)> = crds
            .iter()
            .flat_map(|c| c.versions.iter().map(move |v| (format!("{}/{}", c.group, v.name), c.kind.clone())))
            .collect();
        let mut sorted = SortedObjects::default();
        for object in objects {
            let kind = kind_of(object);
            let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
            match kind.as_str() {
                CSV_KIND | "CustomResourceDefinition" | "Namespace" => {}
                "Deployment" => sorted.deployments.push(typed::<Deployment>(object)?),
                "Service" => {
                    sorted.services.push(typed::<Service>(object)?);
                    sorted.others.push(strip_namespace(object));
                }
                "ValidatingWebhookConfiguration" => sorted.validating.extend(
                    object.get("webhooks").map(typed::<Vec<ValidatingWebhook>>).transpose()?.unwrap_or_default(),
                ),
                "MutatingWebhookConfiguration" => sorted
                    .mutating
                    .extend(object.get("webhooks").map(typed::<Vec<MutatingWebhook>>).transpose()?.unwrap_or_default()),
                "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding" => sorted.rbac.push(object.clone()),
                "ServiceAccount" => sorted.accounts.push(object.clone()),
                "Configuration" if api_version.starts_with("scorecard.operatorframework.io/") => {
                    sorted.scorecard_config = Some(object.clone())
                }
                _ if owned_gvks.contains(&(api_version.clone(), kind.clone())) => sorted.samples.push(object.clone()),
                _ if SUPPORTED_KINDS.contains(&kind.as_str()) => sorted.others.push(strip_namespace(object)),
                _ => {}
            }
        }
        Ok(sorted)
    }
}

/// The ServiceAccounts the Deployments run as (`default` when they name none).
fn operator_accounts(deployments: &[Deployment]) -> BTreeSet<String> {
    deployments
        .iter()
        .map(|d| {
            d.spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref())
                .and_then(|p| p.service_account_name.clone())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "default".into())
        })
        .collect()
}

/// Fills the CSV's `deployment` install strategy: permissions, cluster permissions and
/// Deployments, and reads `WATCH_NAMESPACE` from the OperatorGroup.
fn fill_install_strategy(
    csv: &mut ClusterServiceVersion,
    permissions: Permissions,
    cluster_permissions: Permissions,
    deployments: &[Deployment],
) {
    let strategy = &mut csv.spec.install;
    if strategy.strategy.is_empty() {
        strategy.strategy = DEPLOYMENT_STRATEGY.into();
    }
    strategy.spec.permissions = permissions;
    strategy.spec.cluster_permissions = cluster_permissions;
    strategy.spec.deployments = deployments
        .iter()
        .map(|d| StrategyDeploymentSpec {
            name: d.metadata.name.clone().unwrap_or_default(),
            spec: d.spec.clone().unwrap_or_default(),
            label: d.metadata.labels.clone().unwrap_or_default(),
        })
        .collect();
    set_watch_namespace(csv);
}

/// Owned CRDs: the base's description where it has one, else name, version and kind.
fn owned_crd_descriptions(csv: &ClusterServiceVersion, crds: &[BundleCrd]) -> Vec<CrdDescription> {
    let mut owned = Vec::new();
    for crd in crds {
        for version in &crd.versions {
            let described = csv
                .spec
                .customresourcedefinitions
                .owned
                .iter()
                .find(|d| d.name == crd.name && d.version == version.name && d.kind == crd.kind);
            owned.push(described.cloned().unwrap_or_else(|| CrdDescription {
                name: crd.name.clone(),
                version: version.name.clone(),
                kind: crd.kind.clone(),
                ..CrdDescription::default()
            }));
        }
    }
    owned
}

/// Sets `alm-examples` from the samples, and `createdAt`, the builder and the project
/// layout when the options give them.
fn annotate(csv: &mut ClusterServiceVersion, samples: &[Value], options: &BundleOptions) -> Result<(), GenerateError> {
    let examples = serde_json::to_string_pretty(samples)
        .map_err(|e| GenerateError::Object { what: "alm-examples".into(), message: e.to_string() })?;
    let annotations = csv.metadata.annotations.get_or_insert_default();
    annotations.insert(ALM_EXAMPLES.into(), examples);
    if !options.created_at.is_empty() {
        annotations.insert("createdAt".into(), options.created_at.clone());
    }
    if !options.builder.is_empty() {
        annotations.insert("operators.operatorframework.io/builder".into(), options.builder.clone());
    }
    if !options.project_layout.is_empty() {
        annotations.insert("operators.operatorframework.io/project_layout".into(), options.project_layout.clone());
    }
    Ok(())
}

/// Names the CSV `<package>.v<version>`: the version given, else the base's version when
/// the base is named with a placeholder version.
fn name_csv(csv: &mut ClusterServiceVersion, options: &BundleOptions) {
    if !options.version.is_empty() {
        csv.spec.version = options.version.clone();
        csv.metadata.name = Some(format!("{}.v{}", options.package, options.version));
    } else if csv.name().ends_with(".vX.Y.Z") || csv.name().ends_with(".v0.0.0") && !csv.spec.version.is_empty() {
        csv.metadata.name = Some(format!("{}.v{}", options.package, csv.spec.version));
    }
}

fn strip_namespace(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("namespace");
    }
    object
}

/// `WATCH_NAMESPACE` of every container that sets it is read from the OperatorGroup's
/// target namespaces, as operator-sdk rewrites it.
fn set_watch_namespace(csv: &mut ClusterServiceVersion) {
    for deployment in &mut csv.spec.install.spec.deployments {
        let Some(pod) = deployment.spec.template.spec.as_mut() else { continue };
        for container in &mut pod.containers {
            for env in container.env.iter_mut().flatten() {
                if env.name == "WATCH_NAMESPACE" {
                    *env = serde_json::from_value(json!({
                        "name": "WATCH_NAMESPACE",
                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}}
                    }))
                    .unwrap_or_else(|_| env.clone());
                }
            }
        }
    }
}

type Permissions = Vec<StrategyDeploymentPermissions>;

/// Splits RBAC objects as operator-sdk's collector does: roles bound to the operator's
/// ServiceAccounts become permissions (RoleBinding) or clusterPermissions
/// (ClusterRoleBinding); bindings whose only subjects are those accounts go; every other
/// role and binding stays a bundle object.
fn split_permissions(rbac: &[Value], accounts: &BTreeSet<String>) -> (Permissions, Permissions, Vec<Value>) {
    let kind = |o: &Value| o.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
    let name = |o: &Value| o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let rules_of = |role_kind: &str, role: &str| -> Option<Vec<PolicyRule>> {
        rbac.iter()
            .find(|o| kind(o) == role_kind && name(o) == role)
            .map(|o| o.get("rules").cloned().and_then(|r| serde_json::from_value(r).ok()).unwrap_or_default())
    };
    let mut namespaced: BTreeMap<String, Vec<PolicyRule>> = BTreeMap::new();
    let mut cluster: BTreeMap<String, Vec<PolicyRule>> = BTreeMap::new();
    let mut used_roles: BTreeSet<(String, String)> = BTreeSet::new();
    let mut out = Vec::new();
    for binding in rbac.iter().filter(|o| kind(o).ends_with("Binding")) {
        let cluster_binding = kind(binding) == "ClusterRoleBinding";
        let ref_kind = binding.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or_default();
        let ref_name = binding.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or_default();
        let rules = if cluster_binding && ref_kind != "ClusterRole" { None } else { rules_of(ref_kind, ref_name) };
        let subjects = binding.get("subjects").and_then(Value::as_array).cloned().unwrap_or_default();
        let (ours, theirs): (Vec<Value>, Vec<Value>) = subjects.into_iter().partition(|s| {
            s.get("kind").and_then(Value::as_str) == Some("ServiceAccount")
                && s.get("name").and_then(Value::as_str).is_some_and(|n| accounts.contains(n))
        });
        let Some(rules) = rules.filter(|_| !ours.is_empty()) else {
            out.push(binding.clone());
            continue;
        };
        used_roles.insert((ref_kind.to_string(), ref_name.to_string()));
        for subject in &ours {
            let account = subject.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
            let target = if cluster_binding { &mut cluster } else { &mut namespaced };
            target.entry(account).or_default().extend(rules.iter().cloned());
        }
        if !theirs.is_empty() {
            let mut kept = binding.clone();
            kept["subjects"] = Value::Array(theirs);
            out.push(kept);
        }
    }
    for role in rbac.iter().filter(|o| !kind(o).ends_with("Binding")) {
        if !used_roles.contains(&(kind(role), name(role))) {
            out.push(role.clone());
        }
    }
    let to_list = |m: BTreeMap<String, Vec<PolicyRule>>| {
        m.into_iter()
            .filter(|(_, rules)| !rules.is_empty())
            .map(|(service_account_name, rules)| StrategyDeploymentPermissions { service_account_name, rules })
            .collect()
    };
    (to_list(namespaced), to_list(cluster), out)
}

/// The Deployment whose pod template labels match a Service's selector.
fn deployment_for(service: &Service, deployments: &[Deployment]) -> Option<String> {
    let selector = service.spec.as_ref()?.selector.as_ref().filter(|s| !s.is_empty())?;
    deployments
        .iter()
        .find(|d| {
            let labels = d.spec.as_ref().and_then(|s| s.template.metadata.as_ref()).and_then(|m| m.labels.as_ref());
            labels.is_some_and(|l| !l.is_empty() && selector.iter().all(|(k, v)| l.get(k) == Some(v)))
        })
        .and_then(|d| d.metadata.name.clone())
}

/// Where a webhook's service reference lands: deployment, container port, target port, path.
fn service_target(
    config: &WebhookClientConfig,
    services: &[Service],
    deployments: &[Deployment],
) -> (String, Option<i32>, Option<IntOrString>, Option<String>) {
    let Some(reference) = &config.service else { return (String::new(), None, None, None) };
    let port = reference.port.unwrap_or(443);
    let service = services.iter().find(|s| s.metadata.name.as_deref() == Some(reference.name.as_str()));
    let mut container_port = None;
    let mut target_port = None;
    if let Some(ports) = service.and_then(|s| s.spec.as_ref()).and_then(|s| s.ports.as_ref())
        && let Some(p) = ports.iter().find(|p| p.port == port)
    {
        container_port = Some(p.port);
        target_port = p.target_port.clone();
    }
    let deployment = service
        .and_then(|s| deployment_for(s, deployments))
        .unwrap_or_else(|| reference.name.trim_end_matches("-service").to_string());
    (deployment, container_port, target_port, reference.path.clone())
}

/// A conversion webhook's service name, port and path.
type ConversionTarget = (String, i32, String);

/// The CSV's webhook definitions: one per validating and mutating webhook, and one per
/// group of CRDs converting through the same service port and path; by name.
fn webhook_definitions(
    validating: &[ValidatingWebhook],
    mutating: &[MutatingWebhook],
    services: &[Service],
    deployments: &[Deployment],
    crds: &[BundleCrd],
) -> Vec<WebhookDescription> {
    let mut out: Vec<WebhookDescription> =
        validating.iter().map(|w| validating_definition(w, services, deployments)).collect();
    out.extend(mutating.iter().map(|w| mutating_definition(w, services, deployments)));
    out.extend(conversion_definitions(crds, services, deployments));
    out.sort_by(|a, b| a.generate_name.cmp(&b.generate_name));
    out
}

/// The admission review versions a webhook accepts (`v1beta1` when it names none).
fn review_versions(versions: &[String]) -> Vec<String> {
    if versions.is_empty() { vec!["v1beta1".to_string()] } else { versions.to_vec() }
}

/// A webhook's side effects (`None` when it names none).
fn side_effects(side_effects: &str) -> Option<String> {
    Some(if side_effects.is_empty() { "None".into() } else { side_effects.to_string() })
}

/// A validating webhook's definition, its service resolved to a Deployment and port.
fn validating_definition(
    w: &ValidatingWebhook,
    services: &[Service],
    deployments: &[Deployment],
) -> WebhookDescription {
    let (deployment_name, container_port, target_port, webhook_path) =
        service_target(&w.client_config, services, deployments);
    WebhookDescription {
        generate_name: w.name.clone(),
        webhook_type: "ValidatingAdmissionWebhook".into(),
        deployment_name,
        container_port,
        target_port,
        rules: w.rules.clone().unwrap_or_default(),
        failure_policy: w.failure_policy.clone(),
        match_policy: w.match_policy.clone(),
        object_selector: w.object_selector.clone(),
        side_effects: side_effects(&w.side_effects),
        timeout_seconds: w.timeout_seconds,
        admission_review_versions: review_versions(&w.admission_review_versions),
        reinvocation_policy: None,
        webhook_path,
        conversion_crds: Vec::new(),
    }
}

/// A mutating webhook's definition, its service resolved to a Deployment and port.
fn mutating_definition(w: &MutatingWebhook, services: &[Service], deployments: &[Deployment]) -> WebhookDescription {
    let (deployment_name, container_port, target_port, webhook_path) =
        service_target(&w.client_config, services, deployments);
    WebhookDescription {
        generate_name: w.name.clone(),
        webhook_type: "MutatingAdmissionWebhook".into(),
        deployment_name,
        container_port,
        target_port,
        rules: w.rules.clone().unwrap_or_default(),
        failure_policy: w.failure_policy.clone(),
        match_policy: w.match_policy.clone(),
        object_selector: w.object_selector.clone(),
        side_effects: side_effects(&w.side_effects),
        timeout_seconds: w.timeout_seconds,
        admission_review_versions: review_versions(&w.admission_review_versions),
        reinvocation_policy: w.reinvocation_policy.clone(),
        webhook_path,
        conversion_crds: Vec::new(),
    }
}

/// Conversion webhooks: CRDs converting through the same service port and path share one.
fn conversion_definitions(
    crds: &[BundleCrd],
    services: &[Service],
    deployments: &[Deployment],
) -> Vec<WebhookDescription> {
    let mut groups: BTreeMap<ConversionTarget, (Vec<String>, Vec<String>)> = BTreeMap::new();
    for crd in crds {
        let v1 = crd.to_v1();
        let Some(webhook) = v1.pointer("/spec/conversion/webhook") else { continue };
        let Some(service) = webhook.pointer("/clientConfig/service") else { continue };
        let name = service.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
        let port = service.get("port").and_then(Value::as_i64).and_then(|p| i32::try_from(p).ok()).unwrap_or(443);
        let path = service.get("path").and_then(Value::as_str).unwrap_or_default().to_string();
        let versions: Vec<String> = webhook
            .get("conversionReviewVersions")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default();
        let entry = groups.entry((name, port, path)).or_insert_with(|| (Vec::new(), versions));
        entry.0.push(crd.name.clone());
    }
    let mut out = Vec::new();
    for ((service_name, port, path), (mut names, versions)) in groups {
        names.sort();
        let service = services.iter().find(|s| s.metadata.name.as_deref() == Some(service_name.as_str()));
        let (container_port, target_port) = service
            .and_then(|s| s.spec.as_ref())
            .and_then(|s| s.ports.as_ref())
            .and_then(|ports| ports.iter().find(|p| p.port == port))
            .map(|p| (Some(p.port), p.target_port.clone()))
            .unwrap_or((None, None));
        let deployment_name = service
            .and_then(|s| deployment_for(s, deployments))
            .unwrap_or_else(|| service_name.trim_end_matches("-service").to_string());
        let joined: String = names.iter().map(|n| n.split('.').next().unwrap_or_default()).collect();
        out.push(WebhookDescription {
            generate_name: format!("c{joined}.kb.io"),
            webhook_type: "ConversionWebhook".into(),
            deployment_name,
            container_port,
            target_port,
            side_effects: Some("None".into()),
            admission_review_versions: versions,
            webhook_path: Some(path),
            conversion_crds: names,
            ..WebhookDescription::default()
        });
    }
    out
}
