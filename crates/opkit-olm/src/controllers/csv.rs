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
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use opkit::events::EventType;
use opkit::{Action, Context, ReconcileError, ReconcileResult};
use serde_json::{Value, json};

use super::{Olm, now, operator_condition, operator_group, webhooks};
use crate::types::{ClusterServiceVersion, OperatorCondition, OperatorGroup};

/// The CSV waits for its requirements.
pub const PHASE_PENDING: &str = "Pending";
/// Requirements are met; the install strategy runs next.
pub const PHASE_INSTALL_READY: &str = "InstallReady";
/// The install strategy ran; its Deployments are not all available yet.
pub const PHASE_INSTALLING: &str = "Installing";
/// Installed and healthy.
pub const PHASE_SUCCEEDED: &str = "Succeeded";
/// Installing failed, or the CSV cannot be installed here.
pub const PHASE_FAILED: &str = "Failed";
/// A newer CSV replaces this one.
pub const PHASE_REPLACING: &str = "Replacing";
/// Replaced: about to be deleted.
pub const PHASE_DELETING: &str = "Deleting";

/// The finalizer that removes what a CSV installed outside its namespace.
pub const FINALIZER: &str = "operators.coreos.com/csv-cleanup";
/// Label on objects a CSV installed: the CSV's name.
pub const OWNER_LABEL: &str = "olm.owner";
/// Label on objects a CSV installed: the CSV's namespace.
pub const OWNER_NAMESPACE_LABEL: &str = "olm.owner.namespace";
/// Label on objects a CSV installed: `ClusterServiceVersion`.
pub const OWNER_KIND_LABEL: &str = "olm.owner.kind";
/// Annotation: the CSV's OperatorGroup.
pub const OPERATOR_GROUP_ANNOTATION: &str = "olm.operatorGroup";
/// Annotation: the CSV's namespace.
pub const OPERATOR_NAMESPACE_ANNOTATION: &str = "olm.operatorNamespace";
/// Annotation: the namespaces the operator watches (comma-separated; empty for all).
pub const TARGET_NAMESPACES_ANNOTATION: &str = "olm.targetNamespaces";

/// The environment variable that names the operator's OperatorCondition (the CSV's name).
pub const OPERATOR_CONDITION_ENV: &str = "OPERATOR_CONDITION_NAME";

/// Reconciles one CSV.
pub async fn reconcile(ctx: Context<ClusterServiceVersion, Olm>) -> ReconcileResult {
    let Some(csv) = ctx.object.clone() else { return Ok(Action::done()) };
    let api: Api<ClusterServiceVersion> = ctx.api();
    let ns = csv.namespace().unwrap_or_default();
    let name = csv.name_any();
    if opkit::finalizer::is_being_deleted(csv.as_ref()) {
        if opkit::finalizer::contains_finalizer(csv.as_ref(), FINALIZER) {
            remove_cluster_objects(&ctx, &ns, &name).await?;
            opkit::finalizer::remove_finalizer(&api, csv.as_ref(), FINALIZER).await?;
        }
        return Ok(Action::done());
    }
    if opkit::finalizer::ensure_finalizer(&api, csv.as_ref(), FINALIZER).await? {
        return Ok(Action::done());
    }
    let phase = csv.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();

    // A newer CSV replaces this one: Replacing until it succeeds, then Deleting.
    let newer = ctx
        .cache
        .list_in::<ClusterServiceVersion>(&ns)
        .into_iter()
        .find(|c| c.spec.replaces == name && c.metadata.deletion_timestamp.is_none());
    if let Some(newer) = newer {
        let newer_phase = newer.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default();
        if newer_phase == PHASE_SUCCEEDED {
            set_phase(
                &ctx,
                &csv,
                PHASE_DELETING,
                "Replaced",
                "has been replaced by a newer ClusterServiceVersion that has successfully installed.",
                None,
            )
            .await?;
            match api.delete(&name, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(e) if opkit::status::is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
            return Ok(Action::done());
        }
        let message = format!("being replaced by csv: {ns}/{}", newer.name_any());
        set_phase(&ctx, &csv, PHASE_REPLACING, "BeingReplaced", &message, None).await?;
        return Ok(Action::done());
    }
    if phase == PHASE_REPLACING || phase == PHASE_DELETING {
        return Ok(Action::done());
    }

    // The OperatorGroup decides where the operator watches.
    let groups = ctx.cache.list_in::<OperatorGroup>(&ns);
    let group = match groups.as_slice() {
        [] => {
            set_phase(&ctx, &csv, PHASE_FAILED, "NoOperatorGroup", "csv in namespace with no operatorgroups", None)
                .await?;
            return Ok(Action::done());
        }
        [group] => group.clone(),
        _ => {
            set_phase(
                &ctx,
                &csv,
                PHASE_FAILED,
                "TooManyOperatorGroups",
                "csv created in namespace with multiple operatorgroups, can't pick one automatically",
                None,
            )
            .await?;
            return Ok(Action::done());
        }
    };
    // A group with a selector is resolved by the OperatorGroup controller first; its
    // status update brings the CSV back.
    let Some(targets) = target_namespaces(&group) else { return Ok(Action::done()) };
    if targets.is_empty() {
        set_phase(
            &ctx,
            &csv,
            PHASE_FAILED,
            "NoTargetNamespaces",
            "no targetNamespaces are matched operatorgroups namespace selection",
            None,
        )
        .await?;
        return Ok(Action::done());
    }
    let mode = install_mode(&ns, &targets);
    if !csv.supports_install_mode(mode) {
        let message =
            format!("{mode} InstallModeType not supported, cannot configure to watch {}", targets_text(&targets));
        set_phase(&ctx, &csv, PHASE_FAILED, "UnsupportedOperatorGroup", &message, None).await?;
        return Ok(Action::done());
    }
    let annotations = BTreeMap::from([
        (OPERATOR_GROUP_ANNOTATION.to_string(), group.name_any()),
        (OPERATOR_NAMESPACE_ANNOTATION.to_string(), ns.clone()),
        (TARGET_NAMESPACES_ANNOTATION.to_string(), targets.join(",")),
    ]);
    if annotations.iter().any(|(k, v)| csv.annotations().get(k) != Some(v)) {
        let patch = json!({"metadata": {"annotations": annotations}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        return Ok(Action::done());
    }

    if phase.is_empty() {
        set_phase(&ctx, &csv, PHASE_PENDING, "RequirementsUnknown", "requirements not yet checked", None).await?;
        return Ok(Action::done());
    }
    // An upgrade waits while the replaced operator says it is not upgradeable.
    if phase == PHASE_PENDING
        && !csv.spec.replaces.is_empty()
        && let Some(replaced) = ctx.cache.get::<ClusterServiceVersion>(&csv.spec.replaces, Some(&ns))
    {
        let condition = ctx.cache.get::<OperatorCondition>(&csv.spec.replaces, Some(&ns));
        if let Some(why) = operator_condition::not_upgradeable(&replaced, condition.as_deref()) {
            let message = format!("operator is not upgradeable: {why}");
            set_phase(&ctx, &csv, PHASE_PENDING, operator_condition::REASON_NOT_UPGRADEABLE, &message, None).await?;
            return Ok(Action::done());
        }
    }
    let (met, requirements) = check_requirements(&ctx, &csv).await?;
    if !met {
        set_phase(
            &ctx,
            &csv,
            PHASE_PENDING,
            "RequirementsNotMet",
            "one or more requirements couldn't be found",
            Some(requirements),
        )
        .await?;
        return Ok(Action::done());
    }
    if phase == PHASE_PENDING || phase == PHASE_FAILED {
        set_phase(
            &ctx,
            &csv,
            PHASE_INSTALL_READY,
            "AllRequirementsMet",
            "all requirements found, attempting install",
            Some(requirements),
        )
        .await?;
        return Ok(Action::done());
    }
    if let Err(message) = install(&ctx, &csv, &annotations).await {
        set_phase(&ctx, &csv, PHASE_FAILED, "InstallComponentFailed", &message, None).await?;
        return Err(ReconcileError::retry(crate::OlmError::Install(message)));
    }
    match waiting_deployment(&ctx, &csv) {
        None => {
            set_phase(
                &ctx,
                &csv,
                PHASE_SUCCEEDED,
                "InstallSucceeded",
                "install strategy completed with no errors",
                None,
            )
            .await?;
            Ok(Action::done())
        }
        Some(message) => {
            let message = format!("installing: {message}");
            set_phase(&ctx, &csv, PHASE_INSTALLING, "InstallWaiting", &message, None).await?;
            Ok(Action::requeue_after(Duration::from_secs(30)))
        }
    }
}

/// The OperatorGroup's target namespaces (`[""]` for all namespaces): its
/// `status.namespaces` once resolved (empty when its selector matches no namespace), else
/// its `spec.targetNamespaces`, else all namespaces unless it has a selector; `None` while
/// a selecting group is not resolved yet (or its selector is not valid).
pub fn target_namespaces(group: &OperatorGroup) -> Option<Vec<String>> {
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
    phase: &str,
    reason: &str,
    message: &str,
    requirements: Option<Vec<Value>>,
) -> Result<(), ReconcileError> {
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

/// Runs the install strategy: applies its ServiceAccounts, RBAC and Deployments.
async fn install(
    ctx: &Context<ClusterServiceVersion, Olm>,
    csv: &ClusterServiceVersion,
    annotations: &BTreeMap<String, String>,
) -> Result<(), String> {
    let ns = csv.namespace().unwrap_or_default();
    let name = csv.name_any();
    let owner = opkit::owner::controller_reference(csv).ok_or("the CSV has no uid yet")?;
    let labels = json!({OWNER_LABEL: name, OWNER_NAMESPACE_LABEL: ns, OWNER_KIND_LABEL: "ClusterServiceVersion"});
    let namespaced_meta =
        |object_name: &str| json!({"name": object_name, "namespace": ns, "labels": labels, "ownerReferences": [owner]});
    let strategy = &csv.spec.install.spec;
    let mut webhooks = webhooks::registration(&ctx.client, csv, &ns).await?;
    let mut objects = Vec::new();
    for account in service_accounts(csv) {
        objects.push(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": namespaced_meta(&account)}));
    }
    for p in &strategy.permissions {
        let sa = p.service_account_name.as_str();
        let role = generated_name(&name, sa, "");
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": namespaced_meta(&role), "rules": p.rules,
        }));
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": namespaced_meta(&role),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
        }));
    }
    for p in &strategy.cluster_permissions {
        let sa = p.service_account_name.as_str();
        let role = generated_name(&name, sa, &ns);
        let meta = json!({"name": role, "labels": labels});
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
    for d in &strategy.deployments {
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
        set_operator_condition_env(&mut spec, &name);
        if let Some(secret) = webhooks.mounts.get(deployment_name) {
            webhooks::mount(&mut spec, secret);
        }
        let mut meta = namespaced_meta(deployment_name);
        if let Some(l) = meta.get_mut("labels").and_then(Value::as_object_mut) {
            l.extend(d.label.iter().map(|(k, v)| (k.clone(), json!(v))));
        }
        objects.push(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}));
    }
    // OLM's OperatorCondition of the CSV, through which the operator reports e.g.
    // Upgradeable; owned by the CSV.
    let deployment_names: Vec<&str> = strategy.deployments.iter().map(|d| d.name.as_str()).collect();
    objects.push(json!({
        "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": [owner]},
        "spec": {"deployments": deployment_names, "serviceAccounts": service_accounts(csv)},
    }));
    // The webhooks' Services and Secrets are owned by the CSV, their configurations
    // labelled with it.
    let mut configurations = webhooks.configurations;
    for object in webhooks.objects.iter_mut().chain(configurations.iter_mut()) {
        let namespaced = matches!(object["kind"].as_str(), Some("Service" | "Secret"));
        let meta = if namespaced { namespaced_meta("") } else { json!({"labels": labels}) };
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
    objects.extend(webhooks.objects);
    for object in &objects {
        ctx.state.resources.apply(&ctx.client, object, &ns).await.map_err(|e| e.to_string())?;
    }
    for configuration in &configurations {
        webhooks::register(&ctx.client, configuration).await?;
    }
    webhooks::set_conversions(&ctx.client, &webhooks.conversions).await?;
    Ok(())
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

/// The CSV's API version, kind and name, for references.
pub fn reference(csv: &ClusterServiceVersion) -> Value {
    json!({
        "apiVersion": ClusterServiceVersion::api_version(&()),
        "kind": ClusterServiceVersion::kind(&()),
        "name": csv.name_any(),
        "namespace": csv.namespace(),
        "uid": csv.uid(),
    })
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
