//! OLM on the in-process control plane: `run bundle` to Succeeded, `run bundle-upgrade`
//! along `replaces`, `cleanup`, Manual approval, and a CSV whose required CRD is missing.
//! Each test has its own server and OLM controllers.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use opkit::{Manager, ManagerOptions};
use opkit_olm::run_bundle::{self, RunOptions};
use opkit_olm::types::{
    ClusterServiceVersion, InstallPlan, OperatorCondition, OperatorGroup, OperatorGroupSpec, Subscription,
};
use opkit_olm_bundle::Bundle;
use opkit_testenv::{TestEnv, wait_for};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(60);

/// A control plane with OLM's CRDs and controllers; stops both when dropped.
struct Olm {
    env: TestEnv,
    stop: CancellationToken,
}

impl Drop for Olm {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn start() -> Olm {
    let env = TestEnv::start().await.expect("control plane");
    opkit_olm::crds::install(&env.client(), WAIT).await.expect("OLM CRDs");
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    opkit_olm::setup(&mgr).expect("OLM controllers");
    let stop = CancellationToken::new();
    tokio::spawn(mgr.run_until(stop.clone()));
    Olm { env, stop }
}

fn bundle(version: &str) -> Bundle {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memcached-operator").join(version);
    Bundle::load(&dir).expect("fixture bundle")
}

fn options(namespace: &str) -> RunOptions {
    RunOptions { namespace: namespace.into(), install_mode: None, timeout: WAIT }
}

async fn namespace(olm: &Olm, name: &str) {
    let api: Api<Namespace> = Api::all(olm.env.client());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace");
    api.create(&PostParams::default(), &ns).await.expect("create namespace");
}

/// An OperatorGroup `global` for all namespaces in `ns`.
async fn global_operator_group(olm: &Olm, ns: &str) {
    let groups: Api<OperatorGroup> = Api::namespaced(olm.env.client(), ns);
    let mut group = OperatorGroup::new("global", OperatorGroupSpec::default());
    group.metadata.namespace = Some(ns.into());
    groups.create(&PostParams::default(), &group).await.expect("operator group");
}

/// Installs the CRD `widgets.example.com` (v1, any fields).
async fn install_widgets_crd(olm: &Olm) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    }))
    .expect("crd");
    olm.env.install_crds([crd]).await.expect("install crd");
}

fn phase(csv: Option<&ClusterServiceVersion>) -> Option<String> {
    csv.and_then(|c| c.status.as_ref()).and_then(|s| s.phase.clone())
}

#[tokio::test]
async fn run_bundle_upgrade_and_cleanup() {
    let olm = start().await;
    namespace(&olm, "memcached").await;
    let client = olm.env.client();
    let lines = Mutex::new(Vec::new());
    let say = |line: &str| lines.lock().expect("lines").push(line.to_string());

    let installed =
        run_bundle::run_bundle(&client, &bundle("0.0.1"), &options("memcached"), &say).await.expect("run bundle 0.0.1");
    assert_eq!(installed.csv, "memcached-operator.v0.0.1");
    assert_eq!(installed.subscription, "memcached-operator-v0-0-1-sub");
    let printed = lines.lock().expect("lines").clone();
    assert!(printed.contains(&"Created CatalogSource: memcached-operator-catalog".to_string()), "{printed:?}");
    assert!(printed.iter().any(|l| l.contains("phase: Succeeded")), "{printed:?}");
    assert_eq!(
        printed.last().map(String::as_str),
        Some("OLM has successfully installed \"memcached-operator.v0.0.1\"")
    );

    // The install strategy's objects, with the OperatorGroup's targets in the pods.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "memcached");
    let available =
        |d: Option<&Deployment>| d.and_then(|d| d.status.as_ref()).and_then(|s| s.available_replicas).unwrap_or(0) >= 1;
    let deployment =
        wait_for(&deployments, "memcached-operator-controller-manager", "to be available", available, WAIT)
            .await
            .expect("deployment available")
            .expect("deployment");
    let pod_annotations =
        deployment.spec.and_then(|s| s.template.metadata).and_then(|m| m.annotations).unwrap_or_default();
    assert_eq!(pod_annotations.get("olm.targetNamespaces").map(String::as_str), Some(""));
    assert_eq!(pod_annotations.get("olm.operatorGroup").map(String::as_str), Some("operator-sdk-og"));
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "memcached");
    assert!(accounts.get_opt("memcached-operator-controller-manager").await.expect("get sa").is_some());
    let conditions: Api<OperatorCondition> = Api::namespaced(client.clone(), "memcached");
    let condition = conditions.get("memcached-operator.v0.0.1").await.expect("the CSV's OperatorCondition");
    assert_eq!(condition.spec.deployments, ["memcached-operator-controller-manager"]);
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    let owned_roles = ListParams::default().labels("olm.owner=memcached-operator.v0.0.1");
    assert_eq!(cluster_roles.list(&owned_roles).await.expect("list").items.len(), 1);

    // Upgrade along `replaces`: 0.0.2 succeeds and 0.0.1 is removed.
    let upgraded = run_bundle::run_bundle_upgrade(&client, &bundle("0.0.2"), &options("memcached"), &say)
        .await
        .expect("bundle-upgrade 0.0.2");
    assert_eq!(upgraded.csv, "memcached-operator.v0.0.2");
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), "memcached");
    assert!(csvs.get_opt("memcached-operator.v0.0.1").await.expect("get").is_none());
    assert_eq!(
        phase(csvs.get_opt("memcached-operator.v0.0.2").await.expect("get").as_ref()).as_deref(),
        Some("Succeeded")
    );
    let image = |d: Option<&Deployment>| {
        d.and_then(|d| d.spec.as_ref())
            .and_then(|s| s.template.spec.as_ref())
            .is_some_and(|s| s.containers[0].image.as_deref() == Some("example.com/memcached-operator:v0.0.2"))
    };
    wait_for(&deployments, "memcached-operator-controller-manager", "to run 0.0.2", image, WAIT)
        .await
        .expect("upgraded");
    let subs: Api<Subscription> = Api::namespaced(client.clone(), "memcached");
    let sub = subs.get("memcached-operator-v0-0-1-sub").await.expect("subscription");
    let status = sub.status.expect("status");
    assert_eq!(status.installed_csv.as_deref(), Some("memcached-operator.v0.0.2"));
    assert!(cluster_roles.list(&owned_roles).await.expect("list").items.is_empty(), "0.0.1's ClusterRole removed");

    // cleanup removes everything.
    let removed = run_bundle::cleanup(&client, "memcached-operator", "memcached", WAIT, &say).await.expect("cleanup");
    assert!(
        removed.deleted.contains(&"subscription \"memcached-operator-v0-0-1-sub\" deleted".to_string()),
        "{removed:?}"
    );
    assert!(subs.get_opt("memcached-operator-v0-0-1-sub").await.expect("get").is_none());
    assert!(csvs.list(&ListParams::default()).await.expect("list").items.is_empty());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(crds.get_opt("memcacheds.cache.example.com").await.expect("get").is_none());
    let gone = |d: Option<&Deployment>| d.is_none();
    wait_for(&deployments, "memcached-operator-controller-manager", "to be deleted", gone, WAIT)
        .await
        .expect("deployment gone");
    let all_owned = ListParams::default().labels("olm.owner.namespace=memcached");
    assert!(cluster_roles.list(&all_owned).await.expect("list").items.is_empty());
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), "memcached");
    assert!(groups.list(&ListParams::default()).await.expect("list").items.is_empty());
}

/// operator-sdk's `cleanup --delete-all=false --delete-crds=false
/// --delete-operator-groups=false`: the operator goes, its CRDs and OperatorGroup stay.
#[tokio::test]
async fn cleanup_keeps_the_crds_and_operator_group_when_asked() {
    let olm = start().await;
    namespace(&olm, "kept").await;
    let client = olm.env.client();
    let say = |_: &str| {};
    run_bundle::run_bundle(&client, &bundle("0.0.1"), &options("kept"), &say).await.expect("run bundle 0.0.1");
    let keep = run_bundle::CleanupOptions { delete_crds: false, delete_operator_groups: false };
    let removed =
        run_bundle::cleanup_with(&client, "memcached-operator", "kept", WAIT, &keep, &say).await.expect("cleanup");
    assert!(
        removed.deleted.iter().all(|d| !d.starts_with("customresourcedefinition") && !d.starts_with("operatorgroup")),
        "{removed:?}"
    );
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), "kept");
    assert!(csvs.list(&ListParams::default()).await.expect("list").items.is_empty(), "the operator stays");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(crds.get_opt("memcacheds.cache.example.com").await.expect("get").is_some(), "the CRD went");
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), "kept");
    assert!(groups.get_opt(run_bundle::OPERATOR_GROUP).await.expect("get").is_some(), "the OperatorGroup went");
}

/// The status code of a kube error (0 when it is not an API error).
fn status_code(e: &kube::Error) -> u16 {
    match e {
        kube::Error::Api(status) => status.code,
        _ => 0,
    }
}

#[tokio::test]
async fn the_operator_may_patch_its_own_operator_condition_only() {
    let olm = start().await;
    namespace(&olm, "memcached").await;
    let client = olm.env.client();
    let csv = "memcached-operator.v0.0.1";
    run_bundle::run_bundle(&client, &bundle("0.0.1"), &options("memcached"), &|_| {}).await.expect("run bundle");

    // Every container of the operator's Deployment is told its OperatorCondition's name.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "memcached");
    let deployment = deployments.get("memcached-operator-controller-manager").await.expect("deployment");
    let containers = deployment.spec.and_then(|s| s.template.spec).map(|s| s.containers).unwrap_or_default();
    assert!(!containers.is_empty());
    for container in containers {
        let env = container.env.unwrap_or_default();
        let named = env.iter().find(|e| e.name == "OPERATOR_CONDITION_NAME").and_then(|e| e.value.as_deref());
        assert_eq!(named, Some(csv), "container {}", container.name);
    }

    // The Role and RoleBinding OLM makes for the OperatorCondition.
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), "memcached");
    let bound = |b: Option<&RoleBinding>| b.is_some();
    let binding = wait_for(&bindings, csv, "to exist", bound, WAIT).await.expect("role binding").expect("binding");
    let subjects = binding.subjects.unwrap_or_default();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0].name, "memcached-operator-controller-manager");
    assert_eq!(binding.metadata.labels.unwrap_or_default().get("olm.managed").map(String::as_str), Some("true"));

    // Another operator's OperatorCondition in the same namespace.
    let conditions: Api<OperatorCondition> = Api::namespaced(client.clone(), "memcached");
    let mut other = OperatorCondition::new("other-operator.v1", Default::default());
    other.metadata.namespace = Some("memcached".into());
    conditions.create(&PostParams::default(), &other).await.expect("other OperatorCondition");

    let operator =
        olm.env.service_account_client("memcached", "memcached-operator-controller-manager").await.expect("SA");
    let as_operator: Api<OperatorCondition> = Api::namespaced(operator, "memcached");
    let report = json!({"spec": {"conditions": [{
        "type": "Upgradeable", "status": "False", "reason": "Migrating", "message": "migrating",
        "lastTransitionTime": "2024-01-01T00:00:00Z",
    }]}});
    as_operator.get(csv).await.expect("the operator reads its OperatorCondition");
    let patched =
        as_operator.patch(csv, &PatchParams::default(), &Patch::Merge(&report)).await.expect("patch own condition");
    assert_eq!(patched.spec.conditions[0].type_, "Upgradeable");
    let denied = as_operator.patch("other-operator.v1", &PatchParams::default(), &Patch::Merge(&report)).await;
    assert_eq!(denied.as_ref().err().map(status_code), Some(403), "{denied:?}");
    assert_eq!(as_operator.get("other-operator.v1").await.err().as_ref().map(status_code), Some(403));
}

/// Sets `key=value` on the namespace `name`.
async fn label_namespace(olm: &Olm, name: &str, key: &str, value: &str) {
    let api: Api<Namespace> = Api::all(olm.env.client());
    let patch = json!({"metadata": {"labels": {key: value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("label namespace");
}

#[tokio::test]
async fn an_operator_group_selector_picks_the_labelled_namespaces() {
    let olm = start().await;
    let client = olm.env.client();
    for ns in ["ops", "team-a", "team-b"] {
        namespace(&olm, ns).await;
    }
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), "ops");
    let spec = serde_json::from_value(json!({"selector": {"matchLabels": {"team": "x"}}})).expect("spec");
    let mut group = OperatorGroup::new("selecting", spec);
    group.metadata.namespace = Some("ops".into());
    groups.create(&PostParams::default(), &group).await.expect("operator group");
    let resolved_to = |want: &'static [&'static str]| {
        move |g: Option<&OperatorGroup>| {
            g.and_then(|g| g.status.as_ref()).is_some_and(|s| s.last_updated.is_some() && s.namespaces == want)
        }
    };
    wait_for(&groups, "selecting", "to select no namespace", resolved_to(&[]), WAIT).await.expect("resolved");

    // A CSV (that may watch several namespaces) fails while nothing is selected.
    let mut csv = bundle("0.0.1").csv_object;
    csv["metadata"]["namespace"] = json!("ops");
    csv["spec"]["customresourcedefinitions"] = json!({});
    csv["spec"]["installModes"] = json!([
        {"type": "OwnNamespace", "supported": true}, {"type": "SingleNamespace", "supported": true},
        {"type": "MultiNamespace", "supported": true}, {"type": "AllNamespaces", "supported": false},
    ]);
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), "ops");
    let csv: ClusterServiceVersion = serde_json::from_value(csv).expect("csv");
    csvs.create(&PostParams::default(), &csv).await.expect("create csv");
    let name = "memcached-operator.v0.0.1";
    let no_targets = |c: Option<&ClusterServiceVersion>| {
        c.and_then(|c| c.status.as_ref()).is_some_and(|s| s.reason.as_deref() == Some("NoTargetNamespaces"))
    };
    let failed =
        wait_for(&csvs, name, "to have no target namespaces", no_targets, WAIT).await.expect("csv").expect("csv");
    assert_eq!(phase(Some(&failed)).as_deref(), Some("Failed"));

    // Namespaces labelled later are picked up, by the group and by its operator.
    label_namespace(&olm, "team-a", "team", "x").await;
    wait_for(&groups, "selecting", "to select team-a", resolved_to(&["team-a"]), WAIT).await.expect("team-a");
    let succeeded_for = |targets: &'static str| {
        move |c: Option<&ClusterServiceVersion>| {
            phase(c).as_deref() == Some("Succeeded")
                && c.and_then(|c| c.metadata.annotations.as_ref())
                    .and_then(|a| a.get("olm.targetNamespaces"))
                    .is_some_and(|t| t == targets)
        }
    };
    wait_for(&csvs, name, "to succeed for team-a", succeeded_for("team-a"), WAIT).await.expect("team-a csv");
    label_namespace(&olm, "team-b", "team", "x").await;
    wait_for(&groups, "selecting", "to select both", resolved_to(&["team-a", "team-b"]), WAIT).await.expect("both");
    wait_for(&csvs, name, "to watch both", succeeded_for("team-a,team-b"), WAIT).await.expect("both csv");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "ops");
    let targets_in_pods = |d: Option<&Deployment>| {
        d.and_then(|d| d.spec.as_ref())
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .is_some_and(|a| a.get("olm.targetNamespaces").map(String::as_str) == Some("team-a,team-b"))
    };
    wait_for(&deployments, "memcached-operator-controller-manager", "to target both", targets_in_pods, WAIT)
        .await
        .expect("pods target both");
}

#[tokio::test]
async fn manual_subscription_waits_for_approval() {
    let olm = start().await;
    namespace(&olm, "manual").await;
    let client = olm.env.client();
    let catalog = opkit_olm::fbc::Catalog::from_bundles(&[bundle("0.0.1"), bundle("0.0.2")]).expect("catalog");
    assert!(catalog.validate().is_empty(), "{:?}", catalog.validate());
    run_bundle::write_catalog(&client, "manual", "memcached-catalog", &catalog).await.expect("catalog source");
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), "manual");
    let mut group = OperatorGroup::new(
        "og",
        OperatorGroupSpec { target_namespaces: vec!["manual".into()], extra: Default::default() },
    );
    group.metadata.namespace = Some("manual".into());
    groups.create(&PostParams::default(), &group).await.expect("operator group");
    let subs: Api<Subscription> = Api::namespaced(client.clone(), "manual");
    let sub: Subscription = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "memcached", "namespace": "manual"},
        "spec": {"source": "memcached-catalog", "sourceNamespace": "manual", "name": "memcached-operator",
                 "channel": "alpha", "startingCSV": "memcached-operator.v0.0.1", "installPlanApproval": "Manual"},
    }))
    .expect("subscription");
    subs.create(&PostParams::default(), &sub).await.expect("create subscription");

    let pending = |s: Option<&Subscription>| {
        s.and_then(|s| s.status.as_ref()).is_some_and(|st| {
            st.state.as_deref() == Some("UpgradePending")
                && st
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "InstallPlanPending" && c.reason.as_deref() == Some("RequiresApproval"))
        })
    };
    let sub = wait_for(&subs, "memcached", "to wait for approval", pending, WAIT).await.expect("pending").expect("sub");
    let plan_name = sub
        .status
        .as_ref()
        .and_then(|s| s.install_plan_ref.as_ref())
        .and_then(|r| r.get("name"))
        .and_then(Value::as_str)
        .expect("plan ref")
        .to_string();
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), "manual");
    let plan = plans.get(&plan_name).await.expect("plan");
    assert_eq!(plan.status.as_ref().map(|s| s.phase.as_str()), Some("RequiresApproval"));
    assert_eq!(plan.spec.cluster_service_version_names, vec!["memcached-operator.v0.0.1".to_string()]);
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), "manual");
    assert!(
        csvs.list(&ListParams::default()).await.expect("list").items.is_empty(),
        "nothing installed before approval"
    );

    plans
        .patch(&plan_name, &PatchParams::default(), &Patch::Merge(&json!({"spec": {"approved": true}})))
        .await
        .expect("approve");
    let succeeded = |c: Option<&ClusterServiceVersion>| phase(c).as_deref() == Some("Succeeded");
    let csv =
        wait_for(&csvs, "memcached-operator.v0.0.1", "to succeed", succeeded, WAIT).await.expect("csv").expect("csv");
    assert_eq!(
        csv.metadata.annotations.unwrap_or_default().get("olm.targetNamespaces").map(String::as_str),
        Some("manual")
    );

    // The next step along `replaces` is planned, and waits for approval again.
    let next_pending = |s: Option<&Subscription>| {
        s.and_then(|s| s.status.as_ref()).is_some_and(|st| {
            st.current_csv.as_deref() == Some("memcached-operator.v0.0.2")
                && st.installed_csv.as_deref() == Some("memcached-operator.v0.0.1")
        }) && pending(s)
    };
    wait_for(&subs, "memcached", "to plan the upgrade to 0.0.2", next_pending, WAIT).await.expect("upgrade planned");
    assert!(csvs.get_opt("memcached-operator.v0.0.2").await.expect("get").is_none(), "the upgrade waits for approval");
}

#[tokio::test]
async fn csv_with_missing_required_crd_stays_pending() {
    let olm = start().await;
    let client = olm.env.client();
    global_operator_group(&olm, "default").await;
    let mut csv = bundle("0.0.1").csv_object;
    csv["metadata"]["namespace"] = json!("default");
    csv["spec"]["customresourcedefinitions"]["required"] =
        json!([{"name": "widgets.example.com", "version": "v1", "kind": "Widget"}]);
    csv["spec"]["customresourcedefinitions"]["owned"] = json!([]);
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), "default");
    let csv: ClusterServiceVersion = serde_json::from_value(csv).expect("csv");
    csvs.create(&PostParams::default(), &csv).await.expect("create csv");
    let not_met = |c: Option<&ClusterServiceVersion>| {
        c.and_then(|c| c.status.as_ref())
            .is_some_and(|s| s.phase.as_deref() == Some("Pending") && s.reason.as_deref() == Some("RequirementsNotMet"))
    };
    let pending = wait_for(&csvs, "memcached-operator.v0.0.1", "to miss its requirement", not_met, WAIT)
        .await
        .expect("pending")
        .expect("csv");
    let status = pending.status.expect("status");
    assert_eq!(status.message.as_deref(), Some("one or more requirements couldn't be found"));
    let requirement = status.extra["requirementStatus"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "widgets.example.com"))
        .cloned()
        .expect("requirement listed");
    assert_eq!(requirement["status"], "NotPresent");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    assert!(deployments.get_opt("memcached-operator-controller-manager").await.expect("get").is_none());

    // Once the CRD is there, the CSV installs.
    install_widgets_crd(&olm).await;
    let succeeded = |c: Option<&ClusterServiceVersion>| phase(c).as_deref() == Some("Succeeded");
    wait_for(&csvs, "memcached-operator.v0.0.1", "to succeed", succeeded, WAIT).await.expect("succeeded");
}

/// OLM's OperatorCondition: the operator's `spec.conditions` are copied to
/// `status.conditions`; `Upgradeable=False` on the installed CSV holds the CSV that
/// replaces it Pending (`OperatorConditionNotUpgradeable`) until an override sets it True.
#[tokio::test]
async fn upgrade_waits_while_the_operator_is_not_upgradeable() {
    let olm = start().await;
    namespace(&olm, "held").await;
    let client = olm.env.client();
    let say = |_: &str| {};
    run_bundle::run_bundle(&client, &bundle("0.0.1"), &options("held"), &say).await.expect("run bundle 0.0.1");

    // The operator reports that it is not upgradeable; OLM copies that to the status.
    let conditions: Api<OperatorCondition> = Api::namespaced(client.clone(), "held");
    let not_upgradeable = json!({"spec": {"conditions": [{
        "type": "Upgradeable", "status": "False", "reason": "Migrating",
        "message": "a data migration is running", "lastTransitionTime": "2024-01-01T00:00:00Z",
    }]}});
    conditions
        .patch("memcached-operator.v0.0.1", &PatchParams::default(), &Patch::Merge(&not_upgradeable))
        .await
        .expect("report Upgradeable=False");
    let copied = |c: Option<&OperatorCondition>| {
        c.is_some_and(|c| {
            c.status.iter().flat_map(|s| &s.conditions).any(|s| {
                s.type_ == "Upgradeable" && s.status == "False" && s.observed_generation == c.metadata.generation
            })
        })
    };
    wait_for(&conditions, "memcached-operator.v0.0.1", "to copy its conditions", copied, WAIT)
        .await
        .expect("status.conditions copied");

    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), "held");
    let subs: Api<Subscription> = Api::namespaced(client.clone(), "held");
    let (next, held_options) = (bundle("0.0.2"), options("held"));
    let upgrade = run_bundle::run_bundle_upgrade(&client, &next, &held_options, &say);
    let admin = async {
        let held = |c: Option<&ClusterServiceVersion>| {
            c.and_then(|c| c.status.as_ref()).is_some_and(|s| {
                s.phase.as_deref() == Some("Pending") && s.reason.as_deref() == Some("OperatorConditionNotUpgradeable")
            })
        };
        let csv = wait_for(&csvs, "memcached-operator.v0.0.2", "to be held", held, WAIT)
            .await
            .expect("0.0.2 held Pending")
            .expect("csv");
        assert_eq!(
            csv.status.and_then(|s| s.message).as_deref(),
            Some("operator is not upgradeable: the operator is not upgradeable: a data migration is running")
        );
        let sub = subs.get("memcached-operator-v0-0-1-sub").await.expect("subscription");
        let status = sub.status.expect("subscription status");
        assert_eq!(status.state.as_deref(), Some("UpgradePending"));
        assert_eq!(status.current_csv.as_deref(), Some("memcached-operator.v0.0.2"));
        assert!(csvs.get_opt("memcached-operator.v0.0.1").await.expect("get").is_some(), "0.0.1 stays");

        // The cluster admin overrides the operator: the upgrade proceeds.
        let allow = json!({"spec": {"overrides": [{
            "type": "Upgradeable", "status": "True", "reason": "upgradeIsSafe",
            "message": "the admin allows the upgrade", "lastTransitionTime": "2024-01-01T00:00:00Z",
        }]}});
        conditions
            .patch("memcached-operator.v0.0.1", &PatchParams::default(), &Patch::Merge(&allow))
            .await
            .expect("override Upgradeable=True");
    };
    let (upgraded, ()) = tokio::join!(upgrade, admin);
    assert_eq!(upgraded.expect("bundle-upgrade 0.0.2 after the override").csv, "memcached-operator.v0.0.2");
    let gone = |c: Option<&ClusterServiceVersion>| c.is_none();
    wait_for(&csvs, "memcached-operator.v0.0.1", "to be replaced", gone, WAIT).await.expect("0.0.1 removed");
}

/// An upgrade whose new pod never becomes Ready does not succeed: the old pod keeps the
/// Deployment available, but OLM (as `kubectl rollout status`) waits until no old replica
/// is left, so `run bundle-upgrade` times out saying so, and the old CSV stays.
#[tokio::test]
async fn upgrade_waits_until_the_new_pod_is_ready() {
    let olm = start().await;
    namespace(&olm, "rolling").await;
    let client = olm.env.client();
    let say = |_: &str| {};
    run_bundle::run_bundle(&client, &bundle("0.0.1"), &options("rolling"), &say).await.expect("run bundle 0.0.1");

    let mut next = bundle("0.0.2");
    let template = next
        .csv_object
        .pointer_mut("/spec/install/spec/deployments/0/spec/template")
        .and_then(Value::as_object_mut)
        .expect("the CSV's pod template");
    let metadata = template.entry("metadata").or_insert_with(|| json!({}));
    metadata["annotations"] = json!({"opkit.dev/never-ready": "true"});
    let short = RunOptions { timeout: Duration::from_secs(5), ..options("rolling") };
    let err = run_bundle::run_bundle_upgrade(&client, &next, &short, &say)
        .await
        .expect_err("the upgrade succeeded before its new pod was Ready");
    assert!(err.to_string().contains("old replicas are pending termination"), "{err}");
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), "rolling");
    assert_ne!(
        phase(csvs.get_opt("memcached-operator.v0.0.2").await.expect("get").as_ref()).as_deref(),
        Some("Succeeded")
    );
    assert!(csvs.get_opt("memcached-operator.v0.0.1").await.expect("get").is_some(), "0.0.1 was replaced");
}

/// A CSV's webhook definitions, registered as OLM does: a Service for the Deployment's
/// port, a serving certificate in a Secret mounted into the Deployment, a
/// ValidatingWebhookConfiguration and a CRD conversion pointing at that Service with the
/// CA as caBundle; all removed with the CSV.
#[tokio::test]
async fn webhook_definitions_are_registered_and_removed_with_the_csv() {
    let olm = start().await;
    let client = olm.env.client();
    global_operator_group(&olm, "default").await;
    install_widgets_crd(&olm).await;

    let manager = "memcached-operator-controller-manager";
    let mut csv = bundle("0.0.1").csv_object;
    csv["metadata"]["namespace"] = json!("default");
    csv["spec"]["customresourcedefinitions"] = json!({});
    let definitions = json!([
        {"type": "ValidatingAdmissionWebhook", "generateName": "vwidget.kb.io", "deploymentName": manager,
         "containerPort": 443, "targetPort": 9443, "webhookPath": "/validate-example-com-v1-widget",
         "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Ignore",
         "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["widgets"]}]},
        {"type": "ConversionWebhook", "generateName": "cwidget.kb.io", "deploymentName": manager,
         "containerPort": 443, "targetPort": 9443, "webhookPath": "/convert", "sideEffects": "None",
         "admissionReviewVersions": ["v1"], "conversionCRDs": ["widgets.example.com"]},
    ]);
    csv["spec"]["webhookdefinitions"] = definitions.clone();
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), "default");
    let csv: ClusterServiceVersion = serde_json::from_value(csv).expect("csv");
    csvs.create(&PostParams::default(), &csv).await.expect("create csv");
    let succeeded = |c: Option<&ClusterServiceVersion>| phase(c).as_deref() == Some("Succeeded");
    wait_for(&csvs, "memcached-operator.v0.0.1", "to succeed", succeeded, WAIT).await.expect("succeeded");

    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service = services.get("memcached-operator-controller-manager-service").await.expect("webhook service");
    let port = &service.spec.as_ref().and_then(|s| s.ports.clone()).unwrap_or_default()[0];
    assert_eq!((port.port, port.target_port.clone()), (443, Some(IntOrString::Int(9443))));
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret = secrets.get("memcached-operator-controller-manager-service-cert").await.expect("serving cert");
    let data = secret.data.unwrap_or_default();
    assert!(data.contains_key("tls.crt") && data.contains_key("tls.key"), "{:?}", data.keys());
    let ca = data.get("olmCAKey").expect("the CA").0.clone();
    assert!(String::from_utf8_lossy(&ca).starts_with("-----BEGIN CERTIFICATE-----"));

    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let owned = ListParams::default().labels("olm.owner=memcached-operator.v0.0.1");
    let listed = configurations.list(&owned).await.expect("list").items;
    assert_eq!(listed.len(), 1);
    let configuration_name = listed[0].metadata.name.clone().expect("name");
    assert!(
        configuration_name.starts_with("vwidget.kb.io-") && configuration_name.len() > "vwidget.kb.io-".len(),
        "the API server completes generateName: {configuration_name}"
    );
    let hook = &listed.first().and_then(|c| c.webhooks.clone()).expect("a validating configuration")[0];
    assert_eq!(hook.name, "vwidget.kb.io");
    let reference = hook.client_config.service.clone().expect("service reference");
    assert_eq!(
        (reference.namespace.as_str(), reference.name.as_str(), reference.path.as_deref(), reference.port),
        (
            "default",
            "memcached-operator-controller-manager-service",
            Some("/validate-example-com-v1-widget"),
            Some(443)
        )
    );
    assert_eq!(hook.client_config.ca_bundle.as_ref().map(|b| &b.0), Some(&ca));

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let conversion = crds.get("widgets.example.com").await.expect("crd").spec.conversion.expect("conversion");
    assert_eq!(conversion.strategy, "Webhook");
    let webhook = conversion.webhook.expect("conversion webhook");
    let config = webhook.client_config.expect("client config");
    assert_eq!(config.service.as_ref().map(|s| s.name.as_str()), Some("memcached-operator-controller-manager-service"));
    assert_eq!(config.ca_bundle.map(|b| b.0), Some(ca));

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment = deployments.get(manager).await.expect("deployment");
    let pod = deployment.spec.and_then(|s| s.template.spec).expect("pod spec");
    assert!(
        pod.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == "webhook-cert" && m.mount_path == "/tmp/k8s-webhook-server/serving-certs")
    );

    // A changed definition updates the configuration found by its labels, not a new one.
    let mut definitions = definitions;
    definitions[0]["failurePolicy"] = json!("Fail");
    let patch = json!({"spec": {"webhookdefinitions": definitions}});
    csvs.patch("memcached-operator.v0.0.1", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("patch csv");
    let failing = |c: Option<&ValidatingWebhookConfiguration>| {
        c.and_then(|c| c.webhooks.as_ref())
            .and_then(|w| w.first())
            .is_some_and(|w| w.failure_policy.as_deref() == Some("Fail"))
    };
    wait_for(&configurations, &configuration_name, "to fail closed", failing, WAIT).await.expect("updated");
    assert_eq!(configurations.list(&owned).await.expect("list").items.len(), 1);

    // Deleting the CSV removes the configuration, the Service and the Secret.
    csvs.delete("memcached-operator.v0.0.1", &Default::default()).await.expect("delete csv");
    let gone = |c: Option<&ClusterServiceVersion>| c.is_none();
    wait_for(&csvs, "memcached-operator.v0.0.1", "to be deleted", gone, WAIT).await.expect("csv deleted");
    assert!(configurations.list(&owned).await.expect("list").items.is_empty());
    wait_for(
        &services,
        "memcached-operator-controller-manager-service",
        "to be collected",
        |s: Option<&Service>| s.is_none(),
        WAIT,
    )
    .await
    .expect("service removed");
    let no_secret = |s: Option<&Secret>| s.is_none();
    wait_for(&secrets, "memcached-operator-controller-manager-service-cert", "to be collected", no_secret, WAIT)
        .await
        .expect("secret removed");
}
