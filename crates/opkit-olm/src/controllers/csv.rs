//! The ClusterServiceVersion controller (OLM's olm-operator): a CSV goes Pending →
//! InstallReady → Installing → Succeeded, or Failed, with OLM's reasons and messages.
//!
//! - Its namespace's OperatorGroup decides the target namespaces (annotations
//!   `olm.operatorGroup`, `olm.operatorNamespace`, `olm.targetNamespaces` on the CSV and
//!   its Deployments' pods) and must match a supported install mode; a group whose
//!   selector matches no namespace fails the CSV (`NoTargetNamespaces`).
//! - Requirements: every owned and required CRD present, established and serving the
//!   version (`status.requirementStatus`, OLM's `RequirementsNotMet`).
//! - The install strategy creates the ServiceAccounts, Roles and RoleBindings
//!   (`permissions`), ClusterRoles and ClusterRoleBindings (`clusterPermissions`) and the
//!   Deployments; namespaced ones are owned by the CSV, cluster-scoped ones labelled
//!   `olm.owner` and removed by the CSV's finalizer, so deleting a CSV removes them all;
//!   an OperatorCondition named after the CSV lists its Deployments and ServiceAccounts,
//!   and every container of the Deployments gets `OPERATOR_CONDITION_NAME` (the CSV's name).
//! - `spec.webhookdefinitions` become a Service, a serving certificate and webhook
//!   configurations or CRD conversions ([`webhooks`]).
//! - A CSV that replaces another stays Pending (`OperatorConditionNotUpgradeable`) while
//!   the replaced CSV's OperatorCondition has `Upgradeable=False`
//!   ([`operator_condition::not_upgradeable`]).
//! - A CSV replaced by a newer one goes Replacing, then Deleting once the newer one has
//!   succeeded, and is deleted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use opkit::events::EventType;
use opkit::{Action, Context, ReconcileError, ReconcileResult};
use opkit_olm_bundle::csv::StrategyDeploymentSpec;
use serde_json::{Value, json};

use super::{Olm, now, operator_condition, operator_group, webhooks};
use crate::types::{ClusterServiceVersion, OperatorCondition, OperatorGroup};

/// The CSV waits for its requirements.
pub(crate) const PHASE_PENDING: &str = "Pending";
/// Requirements are met; the install strategy runs next.
pub(crate) const PHASE_INSTALL_READY: &str = "InstallReady";
/// The install strategy ran; its Deployments are not all available yet.
pub(crate) const PHASE_INSTALLING: &str = "Installing";
/// Installed and healthy.
pub(crate) const PHASE_SUCCEEDED: &str = "Succeeded";
/// Installing failed, or the CSV cannot be installed here.
pub(crate) const PHASE_FAILED: &str = "Failed";
/// A newer CSV replaces this one.
pub(crate) const PHASE_REPLACING: &str = "Replacing";
/// Replaced: about to be deleted.
pub(crate) const PHASE_DELETING: &str = "Deleting";

/// The finalizer that removes what a CSV installed outside its namespace.
pub(crate) const FINALIZER: &str = "operators.coreos.com/csv-cleanup";
/// Label on objects a CSV installed: the CSV's name.
pub(crate) const OWNER_LABEL: &str = "olm.owner";
/// Label on objects a CSV installed: the CSV's namespace.
pub(crate) const OWNER_NAMESPACE_LABEL: &str = "olm.owner.namespace";
/// Label on objects a CSV installed: `ClusterServiceVersion`.
pub(crate) const OWNER_KIND_LABEL: &str = "olm.owner.kind";
/// Annotation: the CSV's OperatorGroup.
pub(crate) const OPERATOR_GROUP_ANNOTATION: &str = "olm.operatorGroup";
/// Annotation: the CSV's namespace.
pub(crate) const OPERATOR_NAMESPACE_ANNOTATION: &str = "olm.operatorNamespace";
/// Annotation: the namespaces the operator watches (comma-separated; empty for all).
pub(crate) const TARGET_NAMESPACES_ANNOTATION: &str = "olm.targetNamespaces";

/// The environment variable that names the operator's OperatorCondition (the CSV's name).
pub(crate) const OPERATOR_CONDITION_ENV: &str = "OPERATOR_CONDITION_NAME";

/// Reconciles one CSV: handles its finalizer, reads its surroundings from the cache, plans
/// the next step as data and takes it.
pub(crate) async fn reconcile(ctx: Context<ClusterServiceVersion, Olm>) -> ReconcileResult {
    let Some(csv) = ctx.object.clone() else { return Ok(Action::done()) };
    if let Some(action) = handle_finalizer(&ctx, &csv).await? {
        return Ok(action);
    }
    let surroundings = Surroundings::read(&ctx, &csv);
    match plan(&csv, &surroundings) {
        Plan::Wait => Ok(Action::done()),
        Plan::Record(change) => {
            set_phase(&ctx, &csv, change).await?;
            Ok(Action::done())
        }
        Plan::Delete(change) => {
            set_phase(&ctx, &csv, change).await?;
            let api: Api<ClusterServiceVersion> = ctx.api();
            match api.delete(&csv.name_any(), &DeleteParams::background()).await {
                Ok(_) => Ok(Action::done()),
                Err(e) if opkit::status::is_not_found(&e) => Ok(Action::done()),
                Err(e) => Err(e.into()),
            }
        }
        Plan::Annotate(annotations) => {
            let api: Api<ClusterServiceVersion> = ctx.api();
            let patch = json!({"metadata": {"annotations": annotations}});
            api.patch(&csv.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
            Ok(Action::done())
        }
        Plan::Install(annotations) => check_and_install(&ctx, &csv, &annotations).await,
    }
}

/// Runs the CSV's finalizer: on deletion removes what it installed outside its namespace
/// and releases it; otherwise adds it. `Some` when that is all this reconcile does.
async fn handle_finalizer(
    ctx: &Context<ClusterServiceVersion, Olm>,
    csv: &Arc<ClusterServiceVersion>,
) -> Result<Option<Action>, ReconcileError> {
    let api: Api<ClusterServiceVersion> = ctx.api();
    if opkit::finalizer::is_being_deleted(csv.as_ref()) {
        if opkit::finalizer::contains_finalizer(csv.as_ref(), FINALIZER) {
            remove_cluster_objects(ctx, &csv.namespace().unwrap_or_default(), &csv.name_any()).await?;
            opkit::finalizer::remove_finalizer(&api, csv.as_ref(), FINALIZER).await?;
        }
        return Ok(Some(Action::done()));
    }
    if opkit::finalizer::ensure_finalizer(&api, csv.as_ref(), FINALIZER).await? {
        return Ok(Some(Action::done()));
    }
    Ok(None)
}

/// What the cache says around a CSV, read once per reconcile.
struct Surroundings {
    /// The CSV's phase; empty before the first.
    phase: String,
    /// A live CSV that replaces this one: its name and phase.
    newer: Option<(String, String)>,
    /// The OperatorGroups of the CSV's namespace.
    groups: Vec<Arc<OperatorGroup>>,
    /// Why the CSV this one replaces is not upgradeable, when its OperatorCondition says so.
    not_upgradeable: Option<String>,
}

impl Surroundings {
    /// Reads the CSV's surroundings from the cache.
    fn read(ctx: &Context<ClusterServiceVersion, Olm>, csv: &ClusterServiceVersion) -> Surroundings {
        let ns = csv.namespace().unwrap_or_default();
        let name = csv.name_any();
        let newer = ctx
            .cache
            .list_in::<ClusterServiceVersion>(&ns)
            .into_iter()
            .find(|c| c.spec.replaces == name && c.metadata.deletion_timestamp.is_none())
            .map(|newer| {
                let phase = newer.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
                (newer.name_any(), phase)
            });
        let replaces = csv.spec.replaces.as_str();
        let not_upgradeable = (!replaces.is_empty())
            .then(|| ctx.cache.get::<ClusterServiceVersion>(replaces, Some(&ns)))
            .flatten()
            .and_then(|replaced| {
                let condition = ctx.cache.get::<OperatorCondition>(replaces, Some(&ns));
                operator_condition::not_upgradeable(&replaced, condition.as_deref())
            });
        Surroundings {
            phase: csv.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default(),
            newer,
            groups: ctx.cache.list_in::<OperatorGroup>(&ns),
            not_upgradeable,
        }
    }
}

/// A phase to record on the CSV, with OLM's reason and message.
struct PhaseChange {
    phase: &'static str,
    reason: &'static str,
    message: String,
    /// OLM's `requirementStatus`, when the step checked the requirements.
    requirements: Option<Vec<Value>>,
}

impl PhaseChange {
    fn new(phase: &'static str, reason: &'static str, message: impl Into<String>) -> PhaseChange {
        PhaseChange { phase, reason, message: message.into(), requirements: None }
    }

    fn failed(reason: &'static str, message: impl Into<String>) -> PhaseChange {
        PhaseChange::new(PHASE_FAILED, reason, message)
    }
}

/// The CSV reconciler's next step, planned from its [`Surroundings`].
enum Plan {
    /// Nothing to do until something changes (a selecting OperatorGroup not resolved yet,
    /// or the CSV being replaced).
    Wait,
    /// Record a phase and stop.
    Record(PhaseChange),
    /// Replaced by a CSV that succeeded: record Deleting, then delete the CSV.
    Delete(PhaseChange),
    /// Write the OperatorGroup annotations onto the CSV.
    Annotate(BTreeMap<String, String>),
    /// Check the requirements and install, the pods annotated so.
    Install(BTreeMap<String, String>),
}

/// Plans the next step: replacement first, then the OperatorGroup and its install mode,
/// the group annotations, a first phase, and an upgrade the replaced operator blocks.
fn plan(csv: &ClusterServiceVersion, around: &Surroundings) -> Plan {
    let ns = csv.namespace().unwrap_or_default();
    if let Some((newer, newer_phase)) = &around.newer {
        if newer_phase == PHASE_SUCCEEDED {
            return Plan::Delete(PhaseChange::new(
                PHASE_DELETING,
                "Replaced",
                "has been replaced by a newer ClusterServiceVersion that has successfully installed.",
            ));
        }
        let message = format!("being replaced by csv: {ns}/{newer}");
        return Plan::Record(PhaseChange::new(PHASE_REPLACING, "BeingReplaced", message));
    }
    if around.phase == PHASE_REPLACING || around.phase == PHASE_DELETING {
        return Plan::Wait;
    }
    let group = match around.groups.as_slice() {
        [] => return Plan::Record(PhaseChange::failed("NoOperatorGroup", "csv in namespace with no operatorgroups")),
        [group] => group,
        _ => {
            return Plan::Record(PhaseChange::failed(
                "TooManyOperatorGroups",
                "csv created in namespace with multiple operatorgroups, can't pick one automatically",
            ));
        }
    };
    // A group with a selector is resolved by the OperatorGroup controller first; its
    // status update brings the CSV back.
    let Some(targets) = target_namespaces(group) else { return Plan::Wait };
    if targets.is_empty() {
        let message = "no targetNamespaces are matched operatorgroups namespace selection";
        return Plan::Record(PhaseChange::failed("NoTargetNamespaces", message));
    }
    let mode = install_mode(&ns, &targets);
    if !csv.supports_install_mode(mode) {
        let message =
            format!("{mode} InstallModeType not supported, cannot configure to watch {}", targets_text(&targets));
        return Plan::Record(PhaseChange::failed("UnsupportedOperatorGroup", message));
    }
    let annotations = BTreeMap::from([
        (OPERATOR_GROUP_ANNOTATION.to_string(), group.name_any()),
        (OPERATOR_NAMESPACE_ANNOTATION.to_string(), ns),
        (TARGET_NAMESPACES_ANNOTATION.to_string(), targets.join(",")),
    ]);
    if annotations.iter().any(|(k, v)| csv.annotations().get(k) != Some(v)) {
        return Plan::Annotate(annotations);
    }
    if around.phase.is_empty() {
        return Plan::Record(PhaseChange::new(PHASE_PENDING, "RequirementsUnknown", "requirements not yet checked"));
    }
    // An upgrade waits while the replaced operator says it is not upgradeable.
    if around.phase == PHASE_PENDING
        && let Some(why) = &around.not_upgradeable
    {
        let message = format!("operator is not upgradeable: {why}");
        return Plan::Record(PhaseChange::new(PHASE_PENDING, operator_condition::REASON_NOT_UPGRADEABLE, message));
    }
    Plan::Install(annotations)
}

/// The phase the requirement check leads to before installing: Pending while one is not
/// met, InstallReady once all are (from Pending or Failed); `None` to go on installing.
fn requirements_phase(phase: &str, met: bool, requirements: Vec<Value>) -> Option<PhaseChange> {
    let change = if !met {
        PhaseChange::new(PHASE_PENDING, "RequirementsNotMet", "one or more requirements couldn't be found")
    } else if phase == PHASE_PENDING || phase == PHASE_FAILED {
        PhaseChange::new(PHASE_INSTALL_READY, "AllRequirementsMet", "all requirements found, attempting install")
    } else {
        return None;
    };
    Some(PhaseChange { requirements: Some(requirements), ..change })
}

/// The phase a rollout is in: Succeeded, or Installing while a Deployment is not ready.
fn rollout_phase(waiting: Option<String>) -> PhaseChange {
    match waiting {
        None => PhaseChange::new(PHASE_SUCCEEDED, "InstallSucceeded", "install strategy completed with no errors"),
        Some(message) => PhaseChange::new(PHASE_INSTALLING, "InstallWaiting", format!("installing: {message}")),
    }
}

/// Checks the requirements; once they are met and the CSV is InstallReady or later, runs
/// the install strategy and records how far its Deployments have rolled out.
async fn check_and_install(
    ctx: &Context<ClusterServiceVersion, Olm>,
    csv: &Arc<ClusterServiceVersion>,
    annotations: &BTreeMap<String, String>,
) -> ReconcileResult {
    let phase = csv.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default();
    let (met, requirements) = check_requirements(ctx, csv).await?;
    if let Some(change) = requirements_phase(phase, met, requirements) {
        set_phase(ctx, csv, change).await?;
        return Ok(Action::done());
    }
    if let Err(message) = install(ctx, csv, annotations).await {
        set_phase(ctx, csv, PhaseChange::failed("InstallComponentFailed", message.clone())).await?;
        return Err(ReconcileError::retry(crate::OlmError::Install(message)));
    }
    let change = rollout_phase(waiting_deployment(ctx, csv));
    let installing = change.phase == PHASE_INSTALLING;
    set_phase(ctx, csv, change).await?;
    Ok(if installing { Action::requeue_after(Duration::from_secs(30)) } else { Action::done() })
}

/// The OperatorGroup's target namespaces (`[""]` for all namespaces): its
/// `status.namespaces` once resolved (empty when its selector matches no namespace), else
/// its `spec.targetNamespaces`, else all namespaces unless it has a selector; `None` while
/// a selecting group is not resolved yet (or its selector is not valid).
pub(crate) fn target_namespaces(group: &OperatorGroup) -> Option<Vec<String>> {
    if let Some(status) = group.status.as_ref().filter(|s| s.last_updated.is_some() || !s.namespaces.is_empty()) {
        return Some(status.namespaces.clone());
    }
    if !group.spec.target_namespaces.is_empty() {
        return Some(group.spec.target_namespaces.clone());
    }
    match operator_group::namespace_selector(group) {
        Ok(None) => Some(vec![String::new()]),
        _ => None,
    }
}

/// The install mode a set of target namespaces asks of an operator in `ns`.
fn install_mode(ns: &str, targets: &[String]) -> &'static str {
    match targets {
        [all] if all.is_empty() => "AllNamespaces",
        [one] if one == ns => "OwnNamespace",
        [_] => "SingleNamespace",
        _ => "MultiNamespace",
    }
}

fn targets_text(targets: &[String]) -> String {
    if targets.iter().all(String::is_empty) { "all namespaces".into() } else { targets.join(",") }
}

/// Sets the CSV's phase, reason and message (and requirement status), appending to its
/// condition history and recording an event, unless they are already so.
async fn set_phase(
    ctx: &Context<ClusterServiceVersion, Olm>,
    csv: &Arc<ClusterServiceVersion>,
    change: PhaseChange,
) -> Result<(), ReconcileError> {
    let PhaseChange { phase, reason, message, requirements } = change;
    let message = message.as_str();
    let status = csv.status.clone().unwrap_or_default();
    let same = status.phase.as_deref() == Some(phase)
        && status.reason.as_deref() == Some(reason)
        && status.message.as_deref() == Some(message)
        && requirements.as_ref().is_none_or(|r| status.extra.get("requirementStatus") == Some(&json!(r)));
    if same {
        return Ok(());
    }
    let now = now();
    let transition = status.phase.as_deref() != Some(phase);
    let mut conditions: Vec<Value> =
        status.extra.get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    conditions.push(json!({
        "phase": phase, "reason": reason, "message": message,
        "lastUpdateTime": now, "lastTransitionTime": now,
    }));
    if conditions.len() > 20 {
        conditions.drain(..conditions.len() - 20);
    }
    let api: Api<ClusterServiceVersion> = ctx.api();
    let mut body = json!({
        "status": {
            "phase": phase, "reason": reason, "message": message,
            "lastUpdateTime": now, "conditions": conditions,
        }
    });
    if transition {
        body["status"]["lastTransitionTime"] = json!(now);
    }
    if let Some(requirements) = requirements {
        body["status"]["requirementStatus"] = json!(requirements);
    }
    api.patch_status(&csv.name_any(), &PatchParams::default(), &Patch::Merge(&body)).await?;
    let type_ = if phase == PHASE_FAILED { EventType::Warning } else { EventType::Normal };
    ctx.recorder.publish_for(csv.as_ref(), type_, reason, phase, message).await;
    Ok(())
}

/// Checks the owned and required CRDs; returns whether all are present, established and
/// serve their version, and OLM's `requirementStatus` entries.
async fn check_requirements(
    ctx: &Context<ClusterServiceVersion, Olm>,
    csv: &ClusterServiceVersion,
) -> Result<(bool, Vec<Value>), ReconcileError> {
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let mut met = true;
    let mut statuses = Vec::new();
    let descriptions = &csv.spec.customresourcedefinitions;
    for description in descriptions.owned.iter().chain(&descriptions.required) {
        let crd = crds.get_opt(&description.name).await?;
        let (status, message) = match &crd {
            None => ("NotPresent", "CRD is not present"),
            Some(crd) if !crate::objects::crd_established(Some(crd)) => {
                ("NotPresent", "CRD is present but the Established condition is not true")
            }
            Some(crd)
                if !description.version.is_empty()
                    && !crd.spec.versions.iter().any(|v| v.name == description.version && v.served) =>
            {
                ("PresentNotSatisfied", "CRD version not served")
            }
            Some(_) => ("Present", "CRD is present and Established condition is true"),
        };
        met &= status == "Present";
        statuses.push(json!({
            "group": "apiextensions.k8s.io", "version": "v1", "kind": "CustomResourceDefinition",
            "name": description.name, "status": status, "message": message,
            "uuid": crd.and_then(|c| c.metadata.uid).unwrap_or_default(),
        }));
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &csv.namespace().unwrap_or_default());
    for account in service_accounts(csv) {
        let present = accounts.get_opt(&account).await?;
        statuses.push(json!({
            "group": "", "version": "v1", "kind": "ServiceAccount", "name": account,
            "status": if present.is_some() { "Present" } else { "NotPresent" },
            "message": if present.is_some() { "Service account present" } else { "Service account will be created by the install strategy" },
            "uuid": present.and_then(|s| s.metadata.uid).unwrap_or_default(),
        }));
    }
    Ok((met, statuses))
}

/// The service accounts the strategy names (permissions and deployments).
fn service_accounts(csv: &ClusterServiceVersion) -> Vec<String> {
    let strategy = &csv.spec.install.spec;
    let mut names: Vec<String> = strategy
        .permissions
        .iter()
        .chain(&strategy.cluster_permissions)
        .map(|p| p.service_account_name.clone())
        .filter(|sa| !sa.is_empty())
        .collect();
    for d in &strategy.deployments {
        if let Some(sa) = d.spec.template.spec.as_ref().and_then(|s| s.service_account_name.clone()) {
            names.push(sa);
        }
    }
    names.sort();
    names.dedup();
    names
}

/// How the objects a CSV installs are marked as its: the `olm.owner` labels on all, and
/// the CSV as owner of the namespaced ones.
struct Ownership {
    namespace: String,
    labels: Value,
    owner: OwnerReference,
}

impl Ownership {
    fn of(csv: &ClusterServiceVersion) -> Result<Ownership, String> {
        let namespace = csv.namespace().unwrap_or_default();
        let owner = opkit::owner::controller_reference(csv).ok_or("the CSV has no uid yet")?;
        let labels = json!({
            OWNER_LABEL: csv.name_any(), OWNER_NAMESPACE_LABEL: namespace, OWNER_KIND_LABEL: "ClusterServiceVersion",
        });
        Ok(Ownership { namespace, labels, owner })
    }

    /// Metadata of a namespaced object the CSV owns.
    fn namespaced(&self, name: &str) -> Value {
        json!({"name": name, "namespace": self.namespace, "labels": self.labels, "ownerReferences": [self.owner]})
    }

    /// Metadata of a cluster-scoped object labelled with the CSV.
    fn cluster(&self, name: &str) -> Value {
        json!({"name": name, "labels": self.labels})
    }
}

/// Runs the install strategy: applies its ServiceAccounts, RBAC, Deployments and
/// OperatorCondition, and registers its webhooks.
async fn install(
    ctx: &Context<ClusterServiceVersion, Olm>,
    csv: &ClusterServiceVersion,
    annotations: &BTreeMap<String, String>,
) -> Result<(), String> {
    let ownership = Ownership::of(csv)?;
    let ns = ownership.namespace.as_str();
    let mut webhooks = webhooks::registration(&ctx.client, csv, ns).await?;
    let mut objects: Vec<Value> = service_accounts(csv)
        .iter()
        .map(|account| json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": ownership.namespaced(account)}))
        .collect();
    objects.extend(rbac_objects(csv, &ownership));
    for d in &csv.spec.install.spec.deployments {
        objects.push(deployment_object(csv, d, &ownership, annotations, &webhooks.mounts)?);
    }
    objects.push(operator_condition_object(csv, &ownership));
    // The webhooks' Services and Secrets are owned by the CSV, their configurations
    // labelled with it.
    let mut configurations = webhooks.configurations;
    for object in webhooks.objects.iter_mut().chain(configurations.iter_mut()) {
        mark_owned(object, &ownership);
    }
    objects.extend(webhooks.objects);
    for object in &objects {
        ctx.state.resources.apply(&ctx.client, object, ns).await.map_err(|e| e.to_string())?;
    }
    for configuration in &configurations {
        webhooks::register(&ctx.client, configuration).await?;
    }
    webhooks::set_conversions(&ctx.client, &webhooks.conversions).await?;
    Ok(())
}

/// The Roles and RoleBindings of `permissions`, and the ClusterRoles and
/// ClusterRoleBindings of `clusterPermissions`.
fn rbac_objects(csv: &ClusterServiceVersion, ownership: &Ownership) -> Vec<Value> {
    let name = csv.name_any();
    let ns = ownership.namespace.as_str();
    let strategy = &csv.spec.install.spec;
    let mut objects = Vec::new();
    for p in &strategy.permissions {
        let sa = p.service_account_name.as_str();
        let role = generated_name(&name, sa, "");
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": ownership.namespaced(&role), "rules": p.rules,
        }));
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": ownership.namespaced(&role),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
        }));
    }
    for p in &strategy.cluster_permissions {
        let sa = p.service_account_name.as_str();
        let role = generated_name(&name, sa, ns);
        let meta = ownership.cluster(&role);
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": meta, "rules": p.rules,
        }));
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
        }));
    }
    objects
}

/// A Deployment of the strategy as OLM installs it: its pods annotated with the
/// OperatorGroup, every container given `OPERATOR_CONDITION_NAME`, and the webhook serving
/// certificate mounted when a webhook targets it.
fn deployment_object(
    csv: &ClusterServiceVersion,
    d: &StrategyDeploymentSpec,
    ownership: &Ownership,
    annotations: &BTreeMap<String, String>,
    webhook_mounts: &BTreeMap<String, String>,
) -> Result<Value, String> {
    if d.name.is_empty() {
        return Err("a deployment of the install strategy has no name".into());
    }
    let deployment_name = d.name.as_str();
    let mut spec = serde_json::to_value(&d.spec).map_err(|e| format!("deployment {deployment_name}: {e}"))?;
    if let Some(template) = spec.get_mut("template").and_then(Value::as_object_mut) {
        let meta = template.entry("metadata").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            let pod_annotations = meta.entry("annotations").or_insert_with(|| json!({}));
            if let Some(pod_annotations) = pod_annotations.as_object_mut() {
                for (k, v) in annotations {
                    pod_annotations.insert(k.clone(), json!(v));
                }
            }
        }
    }
    set_operator_condition_env(&mut spec, &csv.name_any());
    if let Some(secret) = webhook_mounts.get(deployment_name) {
        webhooks::mount(&mut spec, secret);
    }
    let mut meta = ownership.namespaced(deployment_name);
    if let Some(l) = meta.get_mut("labels").and_then(Value::as_object_mut) {
        l.extend(d.label.iter().map(|(k, v)| (k.clone(), json!(v))));
    }
    Ok(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}))
}

/// OLM's OperatorCondition of the CSV, through which the operator reports e.g.
/// Upgradeable; owned by the CSV.
fn operator_condition_object(csv: &ClusterServiceVersion, ownership: &Ownership) -> Value {
    let deployment_names: Vec<&str> = csv.spec.install.spec.deployments.iter().map(|d| d.name.as_str()).collect();
    json!({
        "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
        "metadata": ownership.namespaced(&csv.name_any()),
        "spec": {"deployments": deployment_names, "serviceAccounts": service_accounts(csv)},
    })
}

/// Adds the CSV's labels (and, for Services and Secrets, its owner reference and
/// namespace) to a webhook object's metadata, keeping its name and labels.
fn mark_owned(object: &mut Value, ownership: &Ownership) {
    let namespaced = matches!(object["kind"].as_str(), Some("Service" | "Secret"));
    let meta = if namespaced { ownership.namespaced("") } else { json!({"labels": ownership.labels}) };
    if let (Some(target), Some(meta)) = (object["metadata"].as_object_mut(), meta.as_object()) {
        for (key, value) in meta.iter().filter(|(k, _)| k.as_str() != "name") {
            match (target.get_mut(key).and_then(Value::as_object_mut), value.as_object()) {
                (Some(existing), Some(extra)) => existing.extend(extra.clone()),
                _ => {
                    target.insert(key.clone(), value.clone());
                }
            }
        }
    }
}

/// Sets `OPERATOR_CONDITION_NAME` to the CSV's name in every container of a Deployment
/// spec, replacing a value the bundle gave (OLM's `InjectEnvIntoDeployment`): the
/// operator finds its OperatorCondition by it.
fn set_operator_condition_env(deployment_spec: &mut Value, csv_name: &str) {
    let Some(containers) = deployment_spec.pointer_mut("/template/spec/containers").and_then(Value::as_array_mut)
    else {
        return;
    };
    for container in containers.iter_mut().filter_map(Value::as_object_mut) {
        let env = container.entry("env").or_insert_with(|| json!([]));
        let Some(env) = env.as_array_mut() else { continue };
        let value = json!(csv_name);
        match env.iter_mut().find(|e| e["name"] == OPERATOR_CONDITION_ENV) {
            Some(existing) => {
                existing["value"] = value;
                if let Some(existing) = existing.as_object_mut() {
                    existing.remove("valueFrom");
                }
            }
            None => env.push(json!({"name": OPERATOR_CONDITION_ENV, "value": value})),
        }
    }
}

/// A name for a role OLM generates: `<csv>-<account>[-<namespace>]`, at most 63 characters.
fn generated_name(csv: &str, account: &str, namespace: &str) -> String {
    let mut name = format!("{csv}-{account}");
    if !namespace.is_empty() {
        name.push('-');
        name.push_str(namespace);
    }
    let mut name: String = name.chars().take(63).collect();
    while name.ends_with(['-', '.']) {
        name.pop();
    }
    name
}

/// The first Deployment of the strategy that is not rolled out yet, as OLM words it.
fn waiting_deployment(ctx: &Context<ClusterServiceVersion, Olm>, csv: &ClusterServiceVersion) -> Option<String> {
    let ns = csv.namespace().unwrap_or_default();
    for d in &csv.spec.install.spec.deployments {
        let name = d.name.as_str();
        let Some(deployment) = ctx.cache.get::<Deployment>(name, Some(&ns)) else {
            return Some(format!("waiting for deployment {name} to become ready: deployment \"{name}\" not found"));
        };
        if let Some(reason) = rollout_pending(&deployment) {
            return Some(format!("waiting for deployment {name} to become ready: {reason}"));
        }
    }
    None
}

/// Why a Deployment has not rolled out its current generation yet, as OLM's
/// `DeploymentStatus` (kubectl's `rollout status`) says it; `None` once it has: the
/// generation observed, every replica updated, no old replica left (an upgrade's old pod
/// still counts as available until it goes), `Available=True`, and every updated replica
/// available.
fn rollout_pending(d: &Deployment) -> Option<String> {
    let name = d.metadata.name.as_deref().unwrap_or_default();
    let Some(status) = &d.status else { return Some("Waiting for deployment spec update to be observed...".into()) };
    if status.observed_generation < d.metadata.generation {
        return Some("Waiting for deployment spec update to be observed...".into());
    }
    let wanted = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let replicas = status.replicas.unwrap_or(0);
    let updated = status.updated_replicas.unwrap_or(0);
    let available = status.available_replicas.unwrap_or(0);
    if updated < wanted {
        return Some(format!(
            "Waiting for rollout to finish: {updated} out of {wanted} new replicas have been updated..."
        ));
    }
    if replicas > updated {
        return Some(format!(
            "Waiting for rollout to finish: {} old replicas are pending termination...",
            replicas - updated
        ));
    }
    let condition = status.conditions.iter().flatten().find(|c| c.type_ == "Available");
    if condition.is_none_or(|c| c.status != "True") {
        let message = condition.and_then(|c| c.message.as_deref()).map(|m| format!(": {m}")).unwrap_or_default();
        return Some(format!("deployment \"{name}\" not available{message}"));
    }
    if available < updated {
        return Some(format!(
            "Waiting for rollout to finish: {available} of {updated} updated replicas are available..."
        ));
    }
    None
}

/// Deletes the cluster-scoped objects a CSV installed (labelled with its name and
/// namespace: roles, bindings, webhook configurations) and its Deployments; the garbage
/// collector removes the rest it owns.
async fn remove_cluster_objects(
    ctx: &Context<ClusterServiceVersion, Olm>,
    ns: &str,
    name: &str,
) -> Result<(), ReconcileError> {
    let selector = format!("{OWNER_LABEL}={name},{OWNER_NAMESPACE_LABEL}={ns}");
    let params = ListParams::default().labels(&selector);
    // The Deployments go at once, not only when the garbage collector gets to them.
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), ns);
    deployments.delete_collection(&DeleteParams::background(), &params).await?;
    let bindings: Api<ClusterRoleBinding> = Api::all(ctx.client.clone());
    bindings.delete_collection(&DeleteParams::default(), &params).await?;
    let roles: Api<ClusterRole> = Api::all(ctx.client.clone());
    roles.delete_collection(&DeleteParams::default(), &params).await?;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(ctx.client.clone());
    validating.delete_collection(&DeleteParams::default(), &params).await?;
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(ctx.client.clone());
    mutating.delete_collection(&DeleteParams::default(), &params).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rollout_is_pending_while_an_old_pod_is_left() {
        let deployment = |status: Value| -> Deployment {
            serde_json::from_value(json!({
                "metadata": {"name": "op", "generation": 2},
                "spec": {"replicas": 1, "selector": {}, "template": {}},
                "status": status,
            }))
            .expect("deployment")
        };
        let available = json!([{"type": "Available", "status": "True"}]);
        // An upgrade's new pod is not Ready: the old one keeps the Deployment available.
        let upgrading = deployment(json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1,
            "availableReplicas": 1, "conditions": available}));
        assert_eq!(
            rollout_pending(&upgrading).as_deref(),
            Some("Waiting for rollout to finish: 1 old replicas are pending termination...")
        );
        let rolled_out = deployment(json!({"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1,
            "availableReplicas": 1, "conditions": available}));
        assert_eq!(rollout_pending(&rolled_out), None);
        let unobserved = deployment(json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
            "availableReplicas": 1, "conditions": available}));
        assert!(rollout_pending(&unobserved).is_some_and(|r| r.contains("spec update to be observed")));
        let unavailable = deployment(json!({"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1,
            "availableReplicas": 0, "conditions": [{"type": "Available", "status": "False",
            "message": "Deployment does not have minimum availability."}]}));
        assert_eq!(
            rollout_pending(&unavailable).as_deref(),
            Some("deployment \"op\" not available: Deployment does not have minimum availability.")
        );
    }

    #[test]
    fn every_container_is_told_its_operator_condition() {
        let mut spec = json!({"template": {"spec": {"containers": [
            {"name": "manager", "env": [{"name": "A", "value": "1"},
                                        {"name": OPERATOR_CONDITION_ENV, "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]},
            {"name": "proxy"},
        ]}}});
        set_operator_condition_env(&mut spec, "op.v1");
        let containers = &spec["template"]["spec"]["containers"];
        assert_eq!(
            containers[0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": OPERATOR_CONDITION_ENV, "value": "op.v1"}])
        );
        assert_eq!(containers[1]["env"], json!([{"name": OPERATOR_CONDITION_ENV, "value": "op.v1"}]));
    }
}
