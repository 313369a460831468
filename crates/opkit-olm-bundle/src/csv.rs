//! The ClusterServiceVersion (`operators.coreos.com/v1alpha1`) as typed serde structs, with
//! the JSON names and omission rules of operator-framework/api's Go types, so a CSV read
//! and written again keeps its shape. The one CSV type of the workspace: bundles are read
//! into it, and OLM's controllers (`opkit-olm`) watch and write it on the cluster, through
//! its [`kube_core::Resource`] implementation and its [`CsvStatus`].

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_core::{NamespaceResourceScope, Resource};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The API version of a ClusterServiceVersion.
pub const CSV_API_VERSION: &str = "operators.coreos.com/v1alpha1";
/// The kind of a ClusterServiceVersion.
pub const CSV_KIND: &str = "ClusterServiceVersion";
/// The annotation holding the JSON list of example custom resources.
pub const ALM_EXAMPLES: &str = "alm-examples";
/// The one install strategy OLM knows.
pub const DEPLOYMENT_STRATEGY: &str = "deployment";

/// A ClusterServiceVersion: what an operator is, what it owns and needs, and how OLM
/// installs it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersion {
    /// `operators.coreos.com/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// `ClusterServiceVersion`.
    #[serde(default)]
    pub kind: String,
    /// Name (`<package>.v<version>`), annotations (`alm-examples`, `capabilities`, ...).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The operator's description and install strategy.
    #[serde(default)]
    pub spec: CsvSpec,
    /// What OLM reports; never part of a bundle, kept when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<CsvStatus>,
}

/// `status` of a ClusterServiceVersion, as OLM's controllers write it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsvStatus {
    /// Pending, InstallReady, Installing, Succeeded, Failed, Replacing, Deleting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Why it is in its phase (OLM's `ConditionReason`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Every other field (conditions, requirementStatus, times), kept as it is.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

// `kube::Resource` by hand rather than `#[derive(CustomResource)]` on [`CsvSpec`]: the
// derive would generate a second top-level struct that writes `apiVersion`/`kind` itself,
// while bundles need the ones the file has (validation reports a wrong one), and every
// reader of a bundle already uses this struct. The kind is fixed, so `DynamicType` is `()`.
impl Resource for ClusterServiceVersion {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        CSV_KIND.into()
    }

    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "operators.coreos.com".into()
    }

    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1alpha1".into()
    }

    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "clusterserviceversions".into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// `spec` of a ClusterServiceVersion.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsvSpec {
    /// How OLM installs the operator (`install`).
    #[serde(default, rename = "install")]
    pub install: NamedInstallStrategy,
    /// The operator's semantic version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// An optional release label next to the version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<Value>,
    /// `alpha`, `beta`, `stable`, ...
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub maturity: String,
    /// Custom resource definitions owned and required.
    #[serde(
        default,
        rename = "customresourcedefinitions",
        skip_serializing_if = "CustomResourceDefinitions::is_empty"
    )]
    pub customresourcedefinitions: CustomResourceDefinitions,
    /// Aggregated API services owned and required.
    #[serde(default, rename = "apiservicedefinitions", skip_serializing_if = "ApiServiceDefinitions::is_empty")]
    pub apiservicedefinitions: ApiServiceDefinitions,
    /// Admission and conversion webhooks OLM configures for the operator.
    #[serde(default, rename = "webhookdefinitions", skip_serializing_if = "Vec::is_empty")]
    pub webhookdefinitions: Vec<WebhookDescription>,
    /// Built-in kinds the operator needs.
    #[serde(default, rename = "nativeAPIs", skip_serializing_if = "Vec::is_empty")]
    pub native_apis: Vec<GroupVersionKind>,
    /// The oldest Kubernetes version the operator runs on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub min_kube_version: String,
    /// Human-readable name.
    #[serde(default)]
    pub display_name: String,
    /// Long description (markdown).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Search keywords.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    /// People to contact.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintainers: Vec<Maintainer>,
    /// Who publishes the operator.
    #[serde(default, skip_serializing_if = "AppLink::is_empty")]
    pub provider: AppLink,
    /// Links to documentation and sources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<AppLink>,
    /// Icons, base64-encoded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icon: Vec<Icon>,
    /// Which OperatorGroup shapes the operator supports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install_modes: Vec<InstallMode>,
    /// The CSV this one upgrades.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub replaces: String,
    /// Labels OLM copies to the operator's resources.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations OLM copies to the operator's resources.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Selects the operator's resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Whether OLM cleans up the operator's custom resources on deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupSpec>,
    /// CSVs this one also replaces, skipped over on upgrade.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skips: Vec<String>,
    /// Images the operator uses, for disconnected mirroring.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_images: Vec<RelatedImage>,
}

/// `spec.install`: the strategy's name (always `deployment`) and its details.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamedInstallStrategy {
    /// `deployment`.
    #[serde(default)]
    pub strategy: String,
    /// Deployments and the RBAC they run with.
    #[serde(default)]
    pub spec: StrategyDetailsDeployment,
}

/// The `deployment` install strategy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDetailsDeployment {
    /// The operator's Deployments.
    #[serde(default)]
    pub deployments: Vec<StrategyDeploymentSpec>,
    /// Namespaced rules, one entry per ServiceAccount.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<StrategyDeploymentPermissions>,
    /// Cluster-wide rules, one entry per ServiceAccount.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_permissions: Vec<StrategyDeploymentPermissions>,
}

/// One Deployment of the install strategy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StrategyDeploymentSpec {
    /// The Deployment's name.
    #[serde(default)]
    pub name: String,
    /// The Deployment's spec, as written in the Deployment.
    #[serde(default)]
    pub spec: DeploymentSpec,
    /// Labels for the Deployment object.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub label: BTreeMap<String, String>,
}

/// RBAC rules granted to one ServiceAccount.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDeploymentPermissions {
    /// The ServiceAccount OLM creates and binds.
    #[serde(default)]
    pub service_account_name: String,
    /// The rules.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
}

/// `spec.customresourcedefinitions`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CustomResourceDefinitions {
    /// CRDs the bundle ships and the operator reconciles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<CrdDescription>,
    /// CRDs another operator must provide.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<CrdDescription>,
}

impl CustomResourceDefinitions {
    /// Neither owned nor required CRDs.
    pub fn is_empty(&self) -> bool {
        self.owned.is_empty() && self.required.is_empty()
    }
}

/// One owned or required CRD, with the UI's descriptors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CrdDescription {
    /// `<plural>.<group>`.
    #[serde(default)]
    pub name: String,
    /// The version described.
    #[serde(default)]
    pub version: String,
    /// The kind.
    #[serde(default)]
    pub kind: String,
    /// Human-readable name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// What the resource is for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Kinds the operator creates for each resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ApiResourceReference>,
    /// Status fields the UI shows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status_descriptors: Vec<Descriptor>,
    /// Spec fields the UI shows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spec_descriptors: Vec<Descriptor>,
    /// Actions the UI offers.
    #[serde(default, rename = "actionDescriptors", skip_serializing_if = "Vec::is_empty")]
    pub action_descriptors: Vec<Descriptor>,
}

/// `spec.apiservicedefinitions`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApiServiceDefinitions {
    /// API services the operator serves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<ApiServiceDescription>,
    /// API services another operator must serve.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<ApiServiceDescription>,
}

impl ApiServiceDefinitions {
    /// Neither owned nor required API services.
    pub fn is_empty(&self) -> bool {
        self.owned.is_empty() && self.required.is_empty()
    }
}

/// One owned or required aggregated API service.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceDescription {
    /// `<version>.<group>`.
    #[serde(default)]
    pub name: String,
    /// API group.
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
    /// The Deployment serving it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub deployment_name: String,
    /// The port it is served on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_port: Option<i32>,
    /// Human-readable name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// What it is for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Kinds the operator creates for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ApiResourceReference>,
    /// Status descriptors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status_descriptors: Vec<Descriptor>,
    /// Spec descriptors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spec_descriptors: Vec<Descriptor>,
    /// Action descriptors.
    #[serde(default, rename = "actionDescriptors", skip_serializing_if = "Vec::is_empty")]
    pub action_descriptors: Vec<Descriptor>,
}

/// A kind the operator creates for a resource (`resources` of a CRD description).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiResourceReference {
    /// Plural name, or empty.
    #[serde(default)]
    pub name: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
    /// Version.
    #[serde(default)]
    pub version: String,
}

/// A spec, status or action descriptor: a field path and how the UI shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Descriptor {
    /// Dotted path below `spec` or `status`.
    #[serde(default)]
    pub path: String,
    /// Label.
    #[serde(default, rename = "displayName", skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// Help text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// UI hints (`urn:alm:descriptor:...`).
    #[serde(default, rename = "x-descriptors", skip_serializing_if = "Vec::is_empty")]
    pub x_descriptors: Vec<String>,
    /// A default value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

/// One webhook OLM configures (`spec.webhookdefinitions[]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDescription {
    /// The webhook's name (also the configuration's generateName).
    #[serde(default)]
    pub generate_name: String,
    /// `ValidatingAdmissionWebhook`, `MutatingAdmissionWebhook` or `ConversionWebhook`.
    #[serde(default, rename = "type")]
    pub webhook_type: String,
    /// The Deployment serving it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub deployment_name: String,
    /// The Service port (default 443).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_port: Option<i32>,
    /// The container port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<IntOrString>,
    /// Admission rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleWithOperations>,
    /// `Fail` or `Ignore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<String>,
    /// `Exact` or `Equivalent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_policy: Option<String>,
    /// Selects objects by label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    /// `None` or `NoneOnDryRun` (admission/v1); required by OLM.
    #[serde(default)]
    pub side_effects: Option<String>,
    /// Call timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// AdmissionReview versions the webhook accepts.
    #[serde(default)]
    pub admission_review_versions: Vec<String>,
    /// `Never` or `IfNeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reinvocation_policy: Option<String>,
    /// The HTTP path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_path: Option<String>,
    /// CRDs a conversion webhook converts.
    #[serde(default, rename = "conversionCRDs", skip_serializing_if = "Vec::is_empty")]
    pub conversion_crds: Vec<String>,
}

/// A group, version and kind (`nativeAPIs`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersionKind {
    /// Group.
    #[serde(default)]
    pub group: String,
    /// Version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
}

/// A maintainer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Maintainer {
    /// Name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// E-mail address.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub email: String,
}

/// A named link (`provider`, `links[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppLink {
    /// Name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// URL.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
}

impl AppLink {
    /// Neither name nor URL.
    pub fn is_empty(&self) -> bool {
        self.name.is_empty() && self.url.is_empty()
    }
}

/// An icon.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Icon {
    /// The image, base64-encoded.
    #[serde(default, rename = "base64data")]
    pub base64data: String,
    /// Its media type (`image/svg+xml`, `image/png`, ...).
    #[serde(default, rename = "mediatype")]
    pub mediatype: String,
}

/// Whether one install mode is supported.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallMode {
    /// `OwnNamespace`, `SingleNamespace`, `MultiNamespace` or `AllNamespaces`.
    #[serde(default, rename = "type")]
    pub mode_type: String,
    /// Supported or not.
    #[serde(default)]
    pub supported: bool,
}

/// The four install modes OLM knows, in operator-sdk's order.
pub const INSTALL_MODE_TYPES: [&str; 4] = ["OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces"];

/// `spec.cleanup`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CleanupSpec {
    /// Whether cleanup is on.
    #[serde(default)]
    pub enabled: bool,
}

/// An image the operator uses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelatedImage {
    /// A name for it.
    #[serde(default)]
    pub name: String,
    /// The image reference.
    #[serde(default)]
    pub image: String,
}

impl ClusterServiceVersion {
    /// Whether the install mode `mode` is declared supported.
    pub fn supports_install_mode(&self, mode: &str) -> bool {
        self.spec.install_modes.iter().any(|m| m.mode_type == mode && m.supported)
    }

    /// The `alm-examples` annotation parsed as a JSON list of objects (empty when absent).
    pub fn alm_examples(&self) -> Result<Vec<Value>, serde_json::Error> {
        match self.metadata.annotations.as_ref().and_then(|a| a.get(ALM_EXAMPLES)) {
            Some(text) if !text.trim().is_empty() => serde_json::from_str(text),
            _ => Ok(Vec::new()),
        }
    }

    /// The CSV's name (`metadata.name`), empty when unset.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
}
