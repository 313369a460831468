//! OLM's kinds in `operators.coreos.com` as typed objects: the fields the controllers read
//! and write are named, everything else is kept as it came (`extra`), so an object read and
//! written back loses nothing. Their schemas are OLM's own CRDs ([`crate::crds`]).

use std::collections::BTreeMap;

use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The API group of every OLM kind.
pub const GROUP: &str = "operators.coreos.com";

/// `ClusterServiceVersion.spec`: what an operator version installs.
#[derive(CustomResource, Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "ClusterServiceVersion",
    plural = "clusterserviceversions",
    namespaced,
    status = "CsvStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct CsvSpec {
    /// The operator's version (semver).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The CSV this one upgrades.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// CSVs this one may replace directly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skips: Vec<String>,
    /// The install strategy (`strategy: deployment`, `spec.deployments`, permissions).
    #[serde(default)]
    pub install: Value,
    /// The install modes (OwnNamespace, SingleNamespace, MultiNamespace, AllNamespaces).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install_modes: Vec<InstallMode>,
    /// The CRDs the operator owns and requires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customresourcedefinitions: Option<CrdDescriptions>,
    /// Every other field, kept as it is.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One install mode and whether the operator supports it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct InstallMode {
    /// `OwnNamespace`, `SingleNamespace`, `MultiNamespace` or `AllNamespaces`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether it is supported.
    pub supported: bool,
}

/// `spec.customresourcedefinitions`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CrdDescriptions {
    /// CRDs the bundle ships and the operator manages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<CrdDescription>,
    /// CRDs that must be on the cluster already (another operator's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<CrdDescription>,
}

/// One CRD a CSV names.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CrdDescription {
    /// `<plural>.<group>`.
    pub name: String,
    /// The version.
    #[serde(default)]
    pub version: String,
    /// The kind.
    #[serde(default)]
    pub kind: String,
    /// Every other field.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `ClusterServiceVersion.status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
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
    /// Every other field (conditions, requirementStatus, times).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `Subscription.spec`: keep package P of catalog C installed, from channel X.
#[derive(CustomResource, Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "Subscription",
    plural = "subscriptions",
    namespaced,
    status = "SubscriptionStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionSpec {
    /// The CatalogSource's name.
    pub source: String,
    /// The CatalogSource's namespace.
    pub source_namespace: String,
    /// The package.
    pub name: String,
    /// The channel (default: the package's default channel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The CSV to install first, instead of the channel's head.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "startingCSV")]
    pub starting_csv: Option<String>,
    /// `Automatic` (default) or `Manual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_approval: Option<String>,
    /// Every other field.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `Subscription.status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionStatus {
    /// UpgradeAvailable, UpgradePending, AtLatestKnown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The CSV the subscription is installing or installed.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "currentCSV")]
    pub current_csv: Option<String>,
    /// The CSV installed and succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "installedCSV")]
    pub installed_csv: Option<String>,
    /// The InstallPlan of the current step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_ref: Option<Value>,
    /// Conditions (CatalogSourcesUnhealthy, ResolutionFailed, InstallPlanPending, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Value>,
    /// Every other field.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `InstallPlan.spec`: the CSVs one resolution step installs.
#[derive(CustomResource, Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "InstallPlan",
    plural = "installplans",
    namespaced,
    status = "InstallPlanStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanSpec {
    /// The CSVs installed.
    #[serde(rename = "clusterServiceVersionNames")]
    pub cluster_service_version_names: Vec<String>,
    /// `Automatic` or `Manual`.
    pub approval: String,
    /// Whether the plan may run.
    pub approved: bool,
    /// The subscription generation this plan belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
}

/// `InstallPlan.status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanStatus {
    /// Planning, RequiresApproval, Installing, Complete, Failed.
    #[serde(default)]
    pub phase: String,
    /// The catalog sources the plan came from.
    #[serde(default)]
    pub catalog_sources: Vec<String>,
    /// The steps: one resource each, in the order they are created.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<Step>,
    /// Conditions (Installed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Value>,
    /// Every other field.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One step of an InstallPlan.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Step {
    /// The CSV the step resolves.
    pub resolving: String,
    /// The resource.
    pub resource: StepResource,
    /// Unknown, NotPresent, Present, Created, WaitingForAPI.
    pub status: String,
}

/// The resource of a step, with its manifest as JSON text.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StepResource {
    /// The API group ("" for core).
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind.
    pub kind: String,
    /// The name.
    pub name: String,
    /// The catalog source.
    pub source_name: String,
    /// The catalog source's namespace.
    pub source_namespace: String,
    /// The object, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
}

/// `CatalogSource.spec`: where a catalog comes from.
#[derive(CustomResource, Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "CatalogSource",
    plural = "catalogsources",
    namespaced,
    status = "CatalogSourceStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceSpec {
    /// `configmap` (a file-based catalog in a ConfigMap) or `grpc`.
    pub source_type: String,
    /// The ConfigMap holding the catalog, for `configmap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,
    /// The display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Every other field.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `CatalogSource.status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceStatus {
    /// `lastObservedState` (READY, CONNECTING, TRANSIENT_FAILURE) and `lastConnect`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_state: Option<Value>,
    /// Why the catalog cannot be served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The reason for the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Every other field.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `OperatorGroup.spec`: the namespaces the operators of a namespace watch.
#[derive(CustomResource, Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "OperatorGroup",
    plural = "operatorgroups",
    namespaced,
    status = "OperatorGroupStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupSpec {
    /// The target namespaces (none: all namespaces).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_namespaces: Vec<String>,
    /// Every other field (selector, serviceAccountName, upgradeStrategy).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `OperatorGroup.status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupStatus {
    /// The resolved target namespaces (`[""]` for all).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// When they were last resolved.
    pub last_updated: Option<String>,
}

/// `OperatorCondition.spec`: conditions an operator reports to OLM (e.g. Upgradeable).
#[derive(CustomResource, Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[kube(
    group = "operators.coreos.com",
    version = "v2",
    kind = "OperatorCondition",
    plural = "operatorconditions",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorConditionSpec {
    /// The Deployments the conditions are about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deployments: Vec<String>,
    /// The ServiceAccounts allowed to write the conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<String>,
    /// The conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Value>,
}

/// A string → string map, as labels and annotations are.
pub type StringMap = BTreeMap<String, String>;
