//! OLM's kinds in `operators.coreos.com` as typed objects: the fields the controllers read
//! and write are named, everything else is kept as it came (`extra`), so an object read and
//! written back loses nothing. Their schemas are OLM's own CRDs ([`crate::crds`]).

use std::collections::BTreeMap;

use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The API group of every OLM kind.
pub const GROUP: &str = "operators.coreos.com";

/// The ClusterServiceVersion is the bundle crate's type (operator-framework's Go types),
/// so the CSV of a bundle and the CSV on the cluster are one type.
pub use opkit_olm_bundle::csv::{ClusterServiceVersion, CsvStatus};

/// One status condition of an OLM object, in the shape the Subscription, InstallPlan and
/// OperatorCondition share (`metav1.Condition` and OLM's own condition types): every field
/// but `type` and `status` is optional and left out when unset, so the JSON is as written.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type (`Upgradeable`, `InstallPlanPending`, `Installed`, ...).
    #[serde(default, rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    /// A CamelCase reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// The generation of the object the condition was set from (`metav1.Condition`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Every other field (`lastUpdateTime`, `lastHeartbeatTime`, ...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Condition {
    /// Whether the condition has status `True`.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// The condition of type `type_` in `conditions`, if any (`meta.FindStatusCondition`).
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
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
    pub conditions: Vec<Condition>,
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
    pub conditions: Vec<Condition>,
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
    status = "OperatorConditionStatus",
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
    /// The conditions the operator reports; OLM copies them to `status.conditions`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Conditions a cluster admin sets, which win over the operator's (e.g. to allow an
    /// upgrade the operator reports as not upgradeable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<Condition>,
}

/// `OperatorCondition.status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OperatorConditionStatus {
    /// `spec.conditions` as OLM last copied them, each with the generation copied from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A string → string map, as labels and annotations are.
pub type StringMap = BTreeMap<String, String>;
