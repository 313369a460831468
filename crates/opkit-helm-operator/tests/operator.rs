//! The Helm operator against an in-process control plane (`opkit-testenv`), with the
//! fixture chart `tests/charts/nginx`: a custom resource installs its release (objects
//! and Helm's release Secret), a spec change upgrades it to revision 2, deleted or
//! modified children are restored, a failing `required` is ReleaseFailed with Helm's
//! message, and deleting the resource uninstalls the release. Also: a CRD from a values
//! schema, the rollout of a new chart version (also across a restart), hooks (post-delete,
//! rollback after a failed upgrade, `helm test` of the stored test hooks).

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use opkit::{Manager, ManagerOptions};
use opkit_helm_operator::Release;
use opkit_helm_operator::parse_watches;
use opkit_testenv::{TestEnv, wait_for, wait_for_with};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "default";

fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charts/nginx")
}

fn nginx_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("demo.example.com", "v1alpha1", "Nginx"), "nginxes")
}

/// Stops the operator when the test ends, also when it fails.
struct RunningOperator {
    stop: CancellationToken,
    metrics: opkit::metrics::Metrics,
    task: Option<tokio::task::JoinHandle<Result<(), opkit::ManagerError>>>,
}

impl RunningOperator {
    /// Stops the operator and waits until it has stopped.
    async fn shut_down(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            task.await.expect("the operator task").expect("the operator stops cleanly");
        }
    }
}

impl Drop for RunningOperator {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Installs the CRD and runs the operator for `watches_yaml` (charts relative to the
/// fixture directory) in this process.
async fn start_operator(env: &TestEnv, watches_yaml: &str, vars: &[(&str, &str)]) -> RunningOperator {
    let base = chart_dir().parent().map(Path::to_path_buf).expect("charts dir");
    start_operator_in(env, watches_yaml, &base, vars).await
}

/// [`start_operator`] with charts relative to `base`.
async fn start_operator_in(env: &TestEnv, watches_yaml: &str, base: &Path, vars: &[(&str, &str)]) -> RunningOperator {
    start_operator_with(env, watches_yaml, base, vars, ManagerOptions::default()).await
}

/// [`start_operator_in`] with manager `options`.
async fn start_operator_with(
    env: &TestEnv,
    watches_yaml: &str,
    base: &Path,
    vars: &[(&str, &str)],
    options: ManagerOptions,
) -> RunningOperator {
    let crd = opkit_helm_operator::crd_for("demo.example.com", "v1alpha1", "Nginx", "nginxes", None).expect("CRD");
    env.install_crds([crd]).await.expect("install the CRD");
    let lookup = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
    let watches = parse_watches(watches_yaml, base, &lookup).expect("watches");
    let mgr = Manager::new(env.client(), options);
    opkit_helm_operator::setup(&mgr, watches).await.expect("set up the operator");
    let metrics = mgr.metrics().clone();
    let stop = CancellationToken::new();
    let task = tokio::spawn(mgr.run_until(stop.clone()));
    RunningOperator { stop, metrics, task: Some(task) }
}

const WATCHES: &str = "- group: demo.example.com\n  version: v1alpha1\n  kind: Nginx\n  chart: nginx\n";

fn nginxes(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NS, &nginx_resource())
}

async fn create_nginx(client: &Client, name: &str, spec: Value) {
    let cr: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "demo.example.com/v1alpha1",
        "kind": "Nginx",
        "metadata": { "name": name, "namespace": NS },
        "spec": spec,
    }))
    .expect("a CR");
    nginxes(client).create(&PostParams::default(), &cr).await.expect("create the CR");
}

/// Creates a resource and waits until its release is installed (revision 1).
async fn install_nginx(client: &Client, name: &str, spec: Value) {
    create_nginx(client, name, spec).await;
    wait_for_cr(client, name, "installed", |cr| revision(cr) == Some(1)).await;
}

fn condition<'a>(cr: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    cr.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

fn condition_is(cr: &DynamicObject, type_: &str, status: &str, reason: &str) -> bool {
    condition(cr, type_).is_some_and(|c| c["status"] == status && c["reason"] == reason)
}

async fn wait_for_cr(
    client: &Client,
    name: &str,
    what: &str,
    done: impl Fn(&DynamicObject) -> bool + Send + 'static,
) -> DynamicObject {
    let found = wait_for_with(
        &nginxes(client),
        &nginx_resource(),
        name,
        what,
        move |o: Option<&DynamicObject>| o.is_some_and(&done),
        WAIT,
    )
    .await
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    found.expect("the CR exists")
}

fn revision(cr: &DynamicObject) -> Option<i64> {
    cr.data.pointer("/status/deployedRelease/revision").and_then(Value::as_i64)
}

async fn releases(client: &Client, name: &str) -> Vec<(String, Release)> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let list = secrets.list(&ListParams::default().labels(&format!("owner=helm,name={name}"))).await.expect("list");
    let mut out: Vec<(String, Release)> =
        list.items.iter().map(|s| (s.name_any(), Release::from_secret(s).expect("Helm's release format"))).collect();
    out.sort_by_key(|(_, r)| r.version);
    out
}

/// The message of the resource's condition `type_` (empty without one).
fn condition_message<'a>(cr: &'a DynamicObject, type_: &str) -> &'a str {
    condition(cr, type_).and_then(|c| c["message"].as_str()).unwrap_or_default()
}

/// Merges `spec` into the resource's spec.
async fn patch_spec(client: &Client, name: &str, spec: Value) {
    nginxes(client)
        .patch(name, &PatchParams::default(), &Patch::Merge(json!({ "spec": spec })))
        .await
        .expect("change the spec");
}

/// Sets the resource's annotations.
async fn annotate(client: &Client, name: &str, annotations: Value) {
    let patch = json!({ "metadata": { "annotations": annotations } });
    nginxes(client).patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("annotate the CR");
}

/// Waits until the resource is gone (its finalizer removed).
async fn wait_cr_gone(client: &Client, name: &str) {
    wait_for_with(
        &nginxes(client),
        &nginx_resource(),
        name,
        "the CR to go",
        |o: Option<&DynamicObject>| o.is_none(),
        WAIT,
    )
    .await
    .expect("the finalizer is removed");
}

/// Deletes the resource and waits until it is gone.
async fn delete_cr_and_wait(client: &Client, name: &str) {
    nginxes(client).delete(name, &DeleteParams::default()).await.expect("delete the CR");
    wait_cr_gone(client, name).await;
}

/// Holds a ConfigMap with a test finalizer (`hold`), or lets it go.
async fn hold_configmap(client: &Client, name: &str, hold: bool) -> ConfigMap {
    let finalizers = if hold { json!(["opkit.dev/hold"]) } else { Value::Null };
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let patch = json!({ "metadata": { "finalizers": finalizers } });
    configmaps.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("(un)hold the ConfigMap")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cr_installs_upgrades_and_uninstalls_its_release() {
    let env = TestEnv::start().await.expect("testenv");
    let operator = start_operator(&env, WATCHES, &[]).await;
    let client = env.client();
    create_nginx(&client, "web", json!({ "replicaCount": 1 })).await;

    let cr = wait_for_cr(&client, "web", "installed", |cr| {
        condition_is(cr, "Deployed", "True", "InstallSuccessful") && revision(cr) == Some(1)
    })
    .await;
    assert_eq!(condition(&cr, "Initialized").map(|c| c["status"].clone()), Some(json!("True")));
    assert_eq!(cr.finalizers(), ["helm.sdk.operatorframework.io/uninstall-release"]);
    let manifest = cr.data.pointer("/status/deployedRelease/manifest").and_then(Value::as_str).unwrap_or_default();
    assert!(manifest.starts_with("---\n# Source: nginx/templates/configmap.yaml\n"), "{manifest}");
    assert_eq!(cr.data.pointer("/status/deployedRelease/name"), Some(&json!("web")));

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let deployment = deployments.get("web-nginx").await.expect("the release's Deployment");
    assert_eq!(deployment.spec.as_ref().and_then(|s| s.replicas), Some(1));
    let owner = &deployment.owner_references()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.controller), ("Nginx", "web", Some(true)));
    assert_eq!(deployment.annotations().get("meta.helm.sh/release-name").map(String::as_str), Some("web"));

    let stored = releases(&client, "web").await;
    assert_eq!(stored.len(), 1);
    let (secret_name, v1) = &stored[0];
    assert_eq!(secret_name, "sh.helm.release.v1.web.v1");
    assert_eq!((v1.info.status.as_str(), v1.version, v1.namespace.as_str()), ("deployed", 1, NS));
    assert_eq!(v1.chart.pointer("/metadata/name"), Some(&json!("nginx")));
    assert_eq!(v1.config, json!({ "replicaCount": 1 }));
    assert_eq!(v1.manifest, manifest);
    // The release was rendered as Helm's install renders it, and stores its notes.
    assert_eq!(v1.info.notes, "nginx web serves on port 80.\n");
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let data = configmaps.get("web-nginx").await.expect("the ConfigMap").data.unwrap_or_default();
    assert_eq!((data["revision"].as_str(), data["isUpgrade"].as_str()), ("1", "false"));

    // A spec change upgrades the release to revision 2.
    patch_spec(&client, "web", json!({ "replicaCount": 2 })).await;
    wait_for_cr(&client, "web", "upgraded", |cr| {
        condition_is(cr, "Deployed", "True", "UpgradeSuccessful") && revision(cr) == Some(2)
    })
    .await;
    let deployment = deployments.get("web-nginx").await.expect("the Deployment");
    assert_eq!(deployment.spec.as_ref().and_then(|s| s.replicas), Some(2));
    let stored = releases(&client, "web").await;
    let statuses: Vec<(&str, i64)> = stored.iter().map(|(_, r)| (r.info.status.as_str(), r.version)).collect();
    assert_eq!(statuses, [("superseded", 1), ("deployed", 2)]);
    assert_eq!(stored[1].1.info.first_deployed, stored[0].1.info.first_deployed);
    assert_eq!(stored[1].1.info.notes, "nginx web serves on port 80.\n");
    // Rendered as revision 2 of an upgrade; re-applying it later keeps those values.
    let data = configmaps.get("web-nginx").await.expect("the ConfigMap").data.unwrap_or_default();
    assert_eq!((data["revision"].as_str(), data["isUpgrade"].as_str()), ("2", "true"));
    let metrics = operator.metrics.encode();
    assert!(
        metrics.contains("helm_operator_release_revision{kind=\"Nginx\",namespace=\"default\",name=\"web\"} 2\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("helm_operator_release_deployed{kind=\"Nginx\",namespace=\"default\",name=\"web\"} 1\n"),
        "{metrics}"
    );

    // Deleting the CR uninstalls the release: its objects and its Secrets go.
    delete_cr_and_wait(&client, "web").await;
    assert!(deployments.get_opt("web-nginx").await.expect("get").is_none(), "the Deployment is uninstalled");
    assert!(configmaps.get_opt("web-nginx").await.expect("get").is_none(), "the ConfigMap is uninstalled");
    let clusterroles: Api<ClusterRole> = Api::all(client.clone());
    assert!(
        clusterroles.get_opt("default-web-nginx-reader").await.expect("get").is_none(),
        "the ClusterRole is uninstalled"
    );
    assert!(releases(&client, "web").await.is_empty(), "the release Secrets are deleted");
    let metrics = operator.metrics.encode();
    assert!(!metrics.contains("helm_operator_release_revision{"), "the release's series go: {metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_and_modified_children_are_restored() {
    let env = TestEnv::start().await.expect("testenv");
    let watches = format!("{WATCHES}  reconcilePeriod: 10m\n  overrideValues:\n    greeting: ${{GREETING}}-operator\n");
    let _operator = start_operator(&env, &watches, &[("GREETING", "hi")]).await;
    let client = env.client();
    install_nginx(&client, "drift", json!({})).await;

    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let greeting = |cm: &ConfigMap| cm.data.as_ref().and_then(|d| d.get("greeting")).cloned();
    let cm = configmaps.get("drift-nginx").await.expect("the ConfigMap");
    assert_eq!(greeting(&cm).as_deref(), Some("hi-operator"), "overrideValues win, with $VAR expanded");

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let old_uid = deployments.get("drift-nginx").await.expect("the Deployment").uid();
    deployments.delete("drift-nginx", &DeleteParams::default()).await.expect("delete the Deployment");
    wait_for(
        &deployments,
        "drift-nginx",
        "to be restored",
        move |d: Option<&Deployment>| d.is_some_and(|d| d.uid() != old_uid),
        WAIT,
    )
    .await
    .expect("the deleted Deployment comes back");

    configmaps
        .patch("drift-nginx", &PatchParams::default(), &Patch::Merge(json!({ "data": { "greeting": "tampered" } })))
        .await
        .expect("modify the ConfigMap");
    wait_for(
        &configmaps,
        "drift-nginx",
        "to be repaired",
        move |c: Option<&ConfigMap>| c.is_some_and(|c| greeting(c).as_deref() == Some("hi-operator")),
        WAIT,
    )
    .await
    .expect("the modified ConfigMap is repaired");
    // Repairs re-apply the same manifest: no new revision.
    assert_eq!(releases(&client, "drift").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_required_value_is_release_failed_with_helms_message() {
    let env = TestEnv::start().await.expect("testenv");
    let operator = start_operator(&env, WATCHES, &[]).await;
    let client = env.client();
    create_nginx(&client, "broken", json!({ "image": { "repository": "" } })).await;
    let cr =
        wait_for_cr(&client, "broken", "failed", |cr| condition_is(cr, "ReleaseFailed", "True", "InstallError")).await;
    let message = condition_message(&cr, "ReleaseFailed");
    assert_eq!(message, "execution error at (nginx/templates/deployment.yaml:19:21): image.repository is required");
    assert!(condition(&cr, "Deployed").is_none());
    assert!(releases(&client, "broken").await.is_empty(), "no release is stored");
    let metrics = operator.metrics.encode();
    assert!(
        metrics.contains("helm_operator_release_failures_total{kind=\"Nginx\",namespace=\"default\",name=\"broken\",reason=\"InstallError\"} "),
        "{metrics}"
    );

    // Fixing the value installs it.
    patch_spec(&client, "broken", json!({ "image": { "repository": "nginx" } })).await;
    let cr =
        wait_for_cr(&client, "broken", "installed", |cr| condition_is(cr, "Deployed", "True", "InstallSuccessful"))
            .await;
    assert!(condition(&cr, "ReleaseFailed").is_none());
}
/// The real helm run with `args` against the test's cluster, with its own config, cache
/// and data dirs under `home`.
fn helm_output(env: &TestEnv, home: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(opkit_testenv::helm_binary().unwrap_or_else(|missing| panic!("{missing}")))
        .args(args)
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .expect("helm runs")
}

/// The real helm's standard output for `args` ([`helm_output`]); it must succeed.
fn helm_text(env: &TestEnv, home: &Path, args: &[&str]) -> String {
    let out = helm_output(env, home, args);
    assert!(out.status.success(), "helm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The real helm's JSON output (`-o json`) for `args`.
fn helm(env: &TestEnv, home: &Path, args: &[&str]) -> Value {
    let args = [args, &["-o", "json"]].concat();
    serde_json::from_str(&helm_text(env, home, &args)).unwrap_or_else(|e| panic!("helm {args:?} prints JSON: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_helm_lists_the_operators_release_and_its_history() {
    let env = TestEnv::start().await.expect("testenv");
    let home = tempfile::tempdir().expect("helm home");
    let _operator = start_operator(&env, WATCHES, &[]).await;
    let client = env.client();
    install_nginx(&client, "web", json!({ "replicaCount": 1 })).await;
    patch_spec(&client, "web", json!({ "replicaCount": 2 })).await;
    wait_for_cr(&client, "web", "upgraded", |cr| revision(cr) == Some(2)).await;

    let list = helm(&env, home.path(), &["list", "-n", NS]);
    let releases = list.as_array().expect("a list");
    assert_eq!(releases.len(), 1, "{list}");
    let web = &releases[0];
    assert_eq!(
        (&web["name"], &web["namespace"], &web["revision"], &web["status"], &web["chart"], &web["app_version"]),
        (&json!("web"), &json!(NS), &json!("2"), &json!("deployed"), &json!("nginx-0.1.0"), &json!("1.27.0")),
        "{list}"
    );

    let history = helm(&env, home.path(), &["history", "web", "-n", NS]);
    let rows: Vec<(i64, &str, &str)> = history
        .as_array()
        .expect("a list")
        .iter()
        .map(|r| {
            (
                r["revision"].as_i64().unwrap_or_default(),
                r["status"].as_str().unwrap_or_default(),
                r["description"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(rows, [(1, "superseded", "Install complete"), (2, "deployed", "Upgrade complete")], "{history}");

    let values = helm(&env, home.path(), &["get", "values", "web", "-n", NS]);
    assert_eq!(values, json!({ "replicaCount": 2 }));

    // `helm status` prints the notes the operator stored.
    let status = helm(&env, home.path(), &["status", "web", "-n", NS]);
    assert_eq!(status.pointer("/info/notes"), Some(&json!("nginx web serves on port 80.\n")), "{status}");

    // kubectl shows the release's revision and status (the CRD's printer columns).
    let out = std::process::Command::new("kubectl")
        .args(["get", "nginxes", "-n", NS, "--kubeconfig"])
        .arg(env.kubeconfig_path())
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "kubectl get: {}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0], ["NAME", "REVISION", "DEPLOYED", "REASON", "AGE"], "{table}");
    assert_eq!(rows[1][..4], ["web", "2", "True", "UpgradeSuccessful"], "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_the_api_server_refuses_changes_nothing() {
    let env = TestEnv::start().await.expect("testenv");
    let _operator = start_operator(&env, WATCHES, &[]).await;
    let client = env.client();
    install_nginx(&client, "strict", json!({})).await;

    // The ConfigMap would change, but the Deployment is refused: the dry run fails the
    // upgrade before anything is applied.
    patch_spec(&client, "strict", json!({ "greeting": "changed", "replicaCount": "many" })).await;
    let cr =
        wait_for_cr(&client, "strict", "refused", |cr| condition_is(cr, "ReleaseFailed", "True", "UpgradeError")).await;
    let message = condition_message(&cr, "ReleaseFailed");
    assert_eq!(
        message,
        "cannot apply Deployment \"strict-nginx\": Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field Deployment.spec.replicas of type int32"
    );
    assert!(
        condition_is(&cr, "Deployed", "True", "InstallSuccessful"),
        "the deployed release stays: {:#?}",
        cr.data["status"]["conditions"]
    );
    assert_eq!(revision(&cr), Some(1));
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm = configmaps.get("strict-nginx").await.expect("the ConfigMap");
    assert_eq!(cm.data.as_ref().and_then(|d| d.get("greeting")).map(String::as_str), Some("hello"));
    assert_eq!(releases(&client, "strict").await.len(), 1, "no revision is stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_resources_matching_the_selector_are_reconciled() {
    let env = TestEnv::start().await.expect("testenv");
    let watches = format!("{WATCHES}  maxConcurrentReconciles: 1\n  selector:\n    matchLabels:\n      tier: web\n");
    let _operator = start_operator(&env, &watches, &[]).await;
    let client = env.client();
    create_nginx(&client, "ignored", json!({})).await;
    let mut selected: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "demo.example.com/v1alpha1",
        "kind": "Nginx",
        "metadata": { "name": "selected", "namespace": NS, "labels": { "tier": "web" } },
        "spec": {},
    }))
    .expect("a CR");
    selected = nginxes(&client).create(&PostParams::default(), &selected).await.expect("create the CR");
    wait_for_cr(&client, &selected.name_any(), "installed", |cr| revision(cr) == Some(1)).await;
    // One worker, in order: "ignored" was handled before "selected" and left alone.
    let ignored = nginxes(&client).get("ignored").await.expect("the CR");
    assert!(ignored.finalizers().is_empty() && ignored.data.get("status").is_none(), "{ignored:?}");
    assert!(releases(&client, "ignored").await.is_empty());
}

/// operator-sdk's `reconcile-period` annotation replaces the watch's period: with no
/// dependent watches and a 10-minute watch period, a deleted Deployment still comes back,
/// again and again, at the next reconcile the annotation's 1 s brings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconcile_period_annotation_replaces_the_watchs() {
    let env = TestEnv::start().await.expect("testenv");
    let watches = format!("{WATCHES}  reconcilePeriod: 10m\n  watchDependentResources: false\n");
    let _operator = start_operator(&env, &watches, &[]).await;
    let client = env.client();
    let cr: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "demo.example.com/v1alpha1",
        "kind": "Nginx",
        "metadata": {
            "name": "periodic",
            "namespace": NS,
            "annotations": { "helm.sdk.operatorframework.io/reconcile-period": "1s" },
        },
        "spec": {},
    }))
    .expect("a CR");
    nginxes(&client).create(&PostParams::default(), &cr).await.expect("create the CR");
    wait_for_cr(&client, "periodic", "installed", |cr| revision(cr) == Some(1)).await;

    // The reconcile that follows the operator's own status write may restore the first
    // deletion; after that nothing but the period brings a reconcile.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    for deletion in 1..=3 {
        let old_uid = deployments.get("periodic-nginx").await.expect("the Deployment").uid();
        deployments.delete("periodic-nginx", &DeleteParams::default()).await.expect("delete the Deployment");
        wait_for(
            &deployments,
            "periodic-nginx",
            "to be restored by a periodic reconcile",
            move |d: Option<&Deployment>| d.is_some_and(|d| d.uid() != old_uid),
            WAIT,
        )
        .await
        .unwrap_or_else(|e| {
            panic!("deletion {deletion}: the Deployment comes back within the annotation's period: {e}")
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_cluster_scoped_child_is_restored() {
    // A chart of one ClusterRole: no owner reference and no status churn, so only the
    // watch on ClusterRoles (through Helm's release annotations) can bring it back before
    // the 10-minute reconcile period.
    let chart = tempfile::tempdir().expect("chart dir");
    std::fs::create_dir(chart.path().join("templates")).expect("templates");
    std::fs::write(chart.path().join("Chart.yaml"), "apiVersion: v2\nname: roles\nversion: 0.1.0\n")
        .expect("Chart.yaml");
    std::fs::write(
        chart.path().join("templates/role.yaml"),
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {{ .Release.Namespace }}-{{ .Release.Name }}-reader\nrules:\n  - apiGroups: [\"\"]\n    resources: [\"configmaps\"]\n    verbs: [\"get\"]\n",
    )
    .expect("template");
    let env = TestEnv::start().await.expect("testenv");
    let watches = format!(
        "- group: demo.example.com\n  version: v1alpha1\n  kind: Nginx\n  chart: {}\n  reconcilePeriod: 10m\n  maxConcurrentReconciles: 1\n",
        chart.path().display()
    );
    let _operator = start_operator(&env, &watches, &[]).await;
    let client = env.client();
    install_nginx(&client, "roles", json!({})).await;
    // One worker, in order: once a CR created now is installed, the reconciles "roles"'s
    // own writes queued are done, and nothing else would re-apply its objects.
    install_nginx(&client, "marker", json!({})).await;

    let clusterroles: Api<ClusterRole> = Api::all(client.clone());
    let old_uid = clusterroles.get("default-roles-reader").await.expect("the ClusterRole").uid();
    clusterroles.delete("default-roles-reader", &DeleteParams::default()).await.expect("delete the ClusterRole");
    wait_for(
        &clusterroles,
        "default-roles-reader",
        "to be restored",
        move |r: Option<&ClusterRole>| r.is_some_and(|r| r.uid() != old_uid),
        Duration::from_secs(30),
    )
    .await
    .expect("the deleted ClusterRole comes back");
}

/// A chart's `values.schema.json` becomes the CRD's spec schema: the API server refuses a
/// spec the schema refuses, keeps unknown fields where the schema allows additional
/// properties and prunes them where it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crd_from_a_values_schema_validates_and_prunes_the_spec() {
    let env = TestEnv::start().await.expect("testenv");
    let values_schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "replicaCount": { "type": "integer", "minimum": 0 },
            "image": { "type": "object", "properties": { "repository": { "type": "string" } } },
            "service": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "type": { "type": "string", "enum": ["ClusterIP", "NodePort", "LoadBalancer"] },
                    "port": { "type": "integer", "minimum": 1, "maximum": 65535 }
                }
            },
            "auth": {
                "type": "object",
                "properties": { "password": { "type": "string" }, "secretName": { "type": "string" } },
                "oneOf": [{ "required": ["password"] }, { "required": ["secretName"] }]
            }
        }
    });
    let crd = opkit_helm_operator::crd_for("demo.example.com", "v1alpha1", "Nginx", "nginxes", Some(&values_schema))
        .expect("CRD");
    env.install_crds([crd]).await.expect("the API server accepts the converted schema");
    let client = env.client();
    let cr = |name: &str, spec: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "demo.example.com/v1alpha1",
            "kind": "Nginx",
            "metadata": { "name": name, "namespace": NS },
            "spec": spec,
        }))
        .expect("a CR")
    };

    let refused = nginxes(&client)
        .create(&PostParams::default(), &cr("bad", json!({ "replicaCount": -1, "service": { "type": "Ingress" } })))
        .await
        .expect_err("the schema refuses the spec");
    let kube::Error::Api(status) = refused else { panic!("not an API error: {refused}") };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"), "{status:?}");
    assert!(status.message.contains("spec.replicaCount: Invalid value: -1"), "{}", status.message);
    assert!(status.message.contains("spec.service.type: Unsupported value: \"Ingress\""), "{}", status.message);
    // The values schema's oneOf is kept: a password and a secret name are one too many.
    let refused = nginxes(&client)
        .create(&PostParams::default(), &cr("both", json!({ "auth": { "password": "p", "secretName": "s" } })))
        .await
        .expect_err("the oneOf refuses the spec");
    let kube::Error::Api(status) = refused else { panic!("not an API error: {refused}") };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"), "{status:?}");
    assert!(
        status
            .message
            .contains("\"spec.auth\" must validate one and only one schema (oneOf). Found 2 valid alternatives"),
        "{}",
        status.message
    );
    nginxes(&client)
        .create(&PostParams::default(), &cr("one", json!({ "auth": { "secretName": "s" } })))
        .await
        .expect("one of the two is accepted");

    let spec = json!({
        "replicaCount": 2,
        "image": { "repository": "nginx", "tag": "1.27" },
        "service": { "port": 8080, "annotations": { "a": "b" } },
        "greeting": "hi",
    });
    nginxes(&client).create(&PostParams::default(), &cr("good", spec)).await.expect("a valid spec is accepted");
    let stored = nginxes(&client).get("good").await.expect("the CR");
    assert_eq!(
        stored.data["spec"],
        json!({
            "replicaCount": 2,
            "image": { "repository": "nginx", "tag": "1.27" },
            "service": { "port": 8080 },
            "greeting": "hi",
        }),
        "unknown fields are kept where the values schema allows them, pruned where it does not"
    );
}

/// Copies the fixture chart to `dest`, as version `version`, with `extra` appended to its
/// ConfigMap template.
fn copy_fixture_chart(dest: &Path, version: &str, extra: &str) {
    fn copy(src: &Path, dest: &Path) {
        std::fs::create_dir_all(dest).expect("chart dir");
        for entry in std::fs::read_dir(src).expect("read the chart") {
            let entry = entry.expect("entry");
            let target = dest.join(entry.file_name());
            if entry.path().is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target).expect("copy");
            }
        }
    }
    copy(&chart_dir(), dest);
    let chart_yaml = std::fs::read_to_string(dest.join("Chart.yaml")).expect("Chart.yaml");
    std::fs::write(dest.join("Chart.yaml"), chart_yaml.replace("version: 0.1.0", &format!("version: {version}")))
        .expect("Chart.yaml");
    let configmap = dest.join("templates/configmap.yaml");
    let template = std::fs::read_to_string(&configmap).expect("configmap.yaml");
    std::fs::write(&configmap, format!("{template}{extra}")).expect("configmap.yaml");
}

fn deployed_chart_version(stored: &[(String, Release)]) -> Option<String> {
    let deployed = stored.iter().rev().find(|(_, r)| r.info.status == "deployed")?;
    deployed.1.chart.pointer("/metadata/version").and_then(Value::as_str).map(str::to_string)
}

/// A new chart version in the operator rolls every release forward one at a time and
/// stops at the first failure: here every release's upgrade would fail, so exactly one
/// is tried (ReleaseFailed) and the others keep their release, paused, naming it. Once
/// the values are fixed, the rollout resumes and every release is upgraded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_chart_version_rolls_out_one_release_at_a_time_and_stops_at_the_first_failure() {
    let env = TestEnv::start().await.expect("testenv");
    let client = env.client();
    let names = ["alpha", "bravo", "charlie"];
    let v1 = start_operator(&env, WATCHES, &[]).await;
    for name in names {
        create_nginx(&client, name, json!({ "greeting": "old" })).await;
    }
    for name in names {
        wait_for_cr(&client, name, "installed", |cr| revision(cr) == Some(1)).await;
    }
    v1.shut_down().await;

    // Version 0.2.0 of the chart refuses the values every release has.
    let charts = tempfile::tempdir().expect("charts dir");
    copy_fixture_chart(
        &charts.path().join("nginx"),
        "0.2.0",
        "{{- if eq .Values.greeting \"old\" }}{{ fail \"greeting old is gone\" }}{{ end }}\n",
    );
    let watches = format!("{WATCHES}  reconcilePeriod: 1s\n  maxConcurrentReconciles: 3\n");
    let _v2 = start_operator_in(&env, &watches, charts.path(), &[]).await;

    let failed_or_paused = |cr: &DynamicObject| {
        condition_is(cr, "ReleaseFailed", "True", "UpgradeError")
            || condition_is(cr, "RolloutPaused", "True", "ChartUpgradeFailed")
    };
    let mut settled = Vec::new();
    for name in names {
        settled.push(wait_for_cr(&client, name, "failed or paused", failed_or_paused).await);
    }
    let failed: Vec<&DynamicObject> =
        settled.iter().filter(|cr| condition_is(cr, "ReleaseFailed", "True", "UpgradeError")).collect();
    assert_eq!(failed.len(), 1, "the rollout stops at the first failure");
    let failed_name = failed[0].name_any();
    let message = condition_message(failed[0], "ReleaseFailed");
    assert_eq!(message, "execution error at (nginx/templates/configmap.yaml:11:38): greeting old is gone");
    for cr in settled.iter().filter(|cr| cr.name_any() != failed_name) {
        let paused = condition_message(cr, "RolloutPaused");
        assert_eq!(
            paused,
            format!("the rollout of chart version 0.2.0 is paused: upgrading default/{failed_name} failed")
        );
        assert!(condition_is(cr, "Deployed", "True", "InstallSuccessful"), "the paused release stays deployed");
        assert!(condition(cr, "ReleaseFailed").is_none(), "a paused release is not tried");
    }
    for name in names {
        let stored = releases(&client, name).await;
        assert_eq!(stored.len(), 1, "{name} keeps its one revision");
        assert_eq!(deployed_chart_version(&stored).as_deref(), Some("0.1.0"));
    }

    // Fixed values: the rollout resumes and every release is upgraded to 0.2.0.
    for name in names {
        patch_spec(&client, name, json!({ "greeting": "new" })).await;
    }
    for name in names {
        let cr = wait_for_cr(&client, name, "upgraded", |cr| {
            revision(cr) == Some(2)
                && condition(cr, "RolloutPaused").is_none()
                && condition(cr, "ReleaseFailed").is_none()
        })
        .await;
        assert!(condition_is(&cr, "Deployed", "True", "UpgradeSuccessful"));
        assert_eq!(deployed_chart_version(&releases(&client, name).await).as_deref(), Some("0.2.0"));
    }
}

/// A paused rollout survives a restart of the operator: the failed resource's
/// `RolloutPaused` condition names itself, and the restarted operator derives the pause
/// from it, so releases that would upgrade fine are not tried until the failed one is.
/// (The first operator watches only the failing resource, so it is the one that fails.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_rollout_stays_paused_when_the_operator_restarts() {
    let env = TestEnv::start().await.expect("testenv");
    let client = env.client();
    let v1 = start_operator(&env, WATCHES, &[]).await;
    let names = ["alpha", "bravo", "charlie", "zulu"];
    for name in names {
        let greeting = if name == "zulu" { "old" } else { "fine" };
        create_nginx(&client, name, json!({ "greeting": greeting })).await;
    }
    for name in names {
        wait_for_cr(&client, name, "installed", |cr| revision(cr) == Some(1)).await;
    }
    v1.shut_down().await;

    let charts = tempfile::tempdir().expect("charts dir");
    copy_fixture_chart(
        &charts.path().join("nginx"),
        "0.2.0",
        "{{- if eq .Values.greeting \"old\" }}{{ fail \"greeting old is gone\" }}{{ end }}\n",
    );
    let label = json!({ "metadata": { "labels": { "rollout": "first" } } });
    nginxes(&client).patch("zulu", &PatchParams::default(), &Patch::Merge(&label)).await.expect("label zulu");
    let first_only = format!("{WATCHES}  selector:\n    matchLabels:\n      rollout: first\n");
    let first = start_operator_in(&env, &first_only, charts.path(), &[]).await;
    let pause = "the rollout of chart version 0.2.0 is paused: upgrading default/zulu failed";
    let zulu = wait_for_cr(&client, "zulu", "failed", |cr| {
        condition_is(cr, "ReleaseFailed", "True", "UpgradeError")
            && condition_is(cr, "RolloutPaused", "True", "ChartUpgradeFailed")
    })
    .await;
    assert_eq!(condition(&zulu, "RolloutPaused").and_then(|c| c["message"].as_str()), Some(pause));
    first.shut_down().await;

    // Restarted for every resource: the rollout is still paused.
    let watches = format!("{WATCHES}  reconcilePeriod: 1s\n");
    let _restarted = start_operator_in(&env, &watches, charts.path(), &[]).await;
    for name in ["alpha", "bravo", "charlie"] {
        let cr =
            wait_for_cr(&client, name, "paused", |cr| condition_is(cr, "RolloutPaused", "True", "ChartUpgradeFailed"))
                .await;
        assert_eq!(condition(&cr, "RolloutPaused").and_then(|c| c["message"].as_str()), Some(pause));
        let stored = releases(&client, name).await;
        assert_eq!(stored.len(), 1, "{name} was not upgraded");
        assert_eq!(deployed_chart_version(&stored).as_deref(), Some("0.1.0"));
    }

    // Once the failed resource is fixed, the rollout resumes.
    patch_spec(&client, "zulu", json!({ "greeting": "new" })).await;
    for name in names {
        wait_for_cr(&client, name, "upgraded", |cr| {
            revision(cr) == Some(2) && condition(cr, "RolloutPaused").is_none()
        })
        .await;
        assert_eq!(deployed_chart_version(&releases(&client, name).await).as_deref(), Some("0.2.0"));
    }
}

/// A new chart version that renders the same manifest (at the deployed revision) still
/// upgrades the release, so `helm list` shows the chart the operator runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_chart_version_with_the_same_manifest_is_still_an_upgrade() {
    let env = TestEnv::start().await.expect("testenv");
    let client = env.client();
    let v1 = start_operator(&env, WATCHES, &[]).await;
    install_nginx(&client, "same", json!({})).await;
    v1.shut_down().await;

    let charts = tempfile::tempdir().expect("charts dir");
    copy_fixture_chart(&charts.path().join("nginx"), "0.1.1", "");
    let _v2 = start_operator_in(&env, WATCHES, charts.path(), &[]).await;
    let cr = wait_for_cr(&client, "same", "upgraded", |cr| revision(cr) == Some(2)).await;
    assert!(condition_is(&cr, "Deployed", "True", "UpgradeSuccessful"));
    let stored = releases(&client, "same").await;
    let at_revision_1 = stored[1]
        .1
        .manifest
        .replace("revision: \"2\"\n  isUpgrade: \"true\"", "revision: \"1\"\n  isUpgrade: \"false\"");
    assert_eq!(stored[0].1.manifest, at_revision_1, "only the revision the templates print changed");
    assert_eq!(deployed_chart_version(&stored).as_deref(), Some("0.1.1"));
}

/// The fixture chart's hooks for [`hooks_run_as_helm_runs_them`]: a pre-install and
/// pre-upgrade Pod (exit code from the values, kept: before-hook-creation), a post-install
/// and post-upgrade Job (exit code from the values, deleted once it succeeded or failed)
/// and a pre-delete ConfigMap.
const HOOKS: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-check
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-weight: "-1"
    opkit.dev/exit-code: {{ .Values.hookExitCode | default 0 | quote }}
spec:
  restartPolicy: Never
  containers:
    - name: check
      image: busybox
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  annotations:
    helm.sh/hook: post-install,post-upgrade
    helm.sh/hook-delete-policy: hook-succeeded,hook-failed
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations:
        opkit.dev/exit-code: {{ .Values.migrateExitCode | default 0 | quote }}
    spec:
      restartPolicy: Never
      containers:
        - name: migrate
          image: busybox
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-goodbye
  annotations:
    helm.sh/hook: pre-delete
data:
  bye: "true"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-farewell
  annotations:
    helm.sh/hook: post-delete
data:
  bye: "true"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-pre-rollback
  annotations:
    helm.sh/hook: pre-rollback
data:
  revision: {{ .Release.Revision | quote }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-post-rollback
  annotations:
    helm.sh/hook: post-rollback
data:
  revision: {{ .Release.Revision | quote }}
---
apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-test
  annotations:
    helm.sh/hook: test
spec:
  restartPolicy: Never
  containers:
    - name: test
      image: busybox
"#;

/// The `last_run` of hook `name` in a release as `helm status -o json` prints it.
fn last_run<'a>(release: &'a Value, name: &str) -> &'a Value {
    let hooks = release["hooks"].as_array().map(Vec::as_slice).unwrap_or_default();
    let hook = hooks.iter().find(|h| h["name"] == name).unwrap_or_else(|| panic!("no hook {name}: {release}"));
    &hook["last_run"]
}

/// The phase of [`last_run`] (empty when the hook never ran).
fn last_run_phase<'a>(release: &'a Value, name: &str) -> &'a str {
    last_run(release, name)["phase"].as_str().unwrap_or_default()
}

/// A copy of the fixture chart with [`HOOKS`], and the operator running it.
async fn start_hooked_operator(env: &TestEnv) -> (tempfile::TempDir, RunningOperator) {
    let charts = tempfile::tempdir().expect("charts dir");
    copy_fixture_chart(&charts.path().join("nginx"), "0.1.0", "");
    std::fs::write(charts.path().join("nginx/templates/hooks.yaml"), HOOKS).expect("hooks");
    let operator = start_operator_in(env, WATCHES, charts.path(), &[]).await;
    (charts, operator)
}

/// A control plane, its client and the operator running the fixture chart with [`HOOKS`].
async fn hooked_env() -> (TestEnv, Client, tempfile::TempDir, RunningOperator) {
    let env = TestEnv::start().await.expect("testenv");
    let client = env.client();
    let (charts, operator) = start_hooked_operator(&env).await;
    (env, client, charts, operator)
}

/// Hooks run around an install, an upgrade and an uninstall as Helm runs them, and a
/// failing hook fails the release with Helm's message, changing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_run_as_helm_runs_them() {
    let (env, client, _charts, _operator) = hooked_env().await;

    install_nginx(&client, "hooked", json!({})).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let check = pods.get("hooked-check").await.expect("the pre-install hook stays (before-hook-creation)");
    assert_eq!(check.status.and_then(|s| s.phase).as_deref(), Some("Succeeded"), "waited for");
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    assert!(jobs.get_opt("hooked-migrate").await.expect("get").is_none(), "hook-succeeded deletes the Job");
    let stored = releases(&client, "hooked").await;
    let mut hooks: Vec<(&str, &str)> = stored[0]
        .1
        .hooks
        .iter()
        .map(|h| (h["name"].as_str().unwrap_or_default(), h["kind"].as_str().unwrap_or_default()))
        .collect();
    hooks.sort();
    assert_eq!(
        hooks,
        [
            ("hooked-check", "Pod"),
            ("hooked-farewell", "ConfigMap"),
            ("hooked-goodbye", "ConfigMap"),
            ("hooked-migrate", "Job"),
            ("hooked-post-rollback", "ConfigMap"),
            ("hooked-pre-rollback", "ConfigMap"),
            ("hooked-test", "Pod"),
        ]
    );
    assert!(!stored[0].1.manifest.contains("hooked-check"), "hooks stay out of the manifest");
    // The real helm reads the stored hooks.
    let home = tempfile::tempdir().expect("helm home");
    let printed = helm_text(&env, home.path(), &["get", "hooks", "hooked", "-n", NS]);
    assert!(printed.contains("# Source: nginx/templates/hooks.yaml\napiVersion: batch/v1\nkind: Job\n"), "{printed}");
    // Each hook's run is recorded in the release, as Helm records it: `helm status` reads it.
    let status = helm(&env, home.path(), &["status", "hooked", "-n", NS]);
    assert_eq!(last_run_phase(&status, "hooked-check"), "Succeeded", "{status}");
    assert_eq!(last_run_phase(&status, "hooked-migrate"), "Succeeded", "deleted after it succeeded: {status}");
    assert_eq!(last_run_phase(&status, "hooked-goodbye"), "", "a pre-delete hook has not run: {status}");
    let run = last_run(&status, "hooked-check");
    let started = run["started_at"].as_str().unwrap_or_default();
    let completed = run["completed_at"].as_str().unwrap_or_default();
    let parse = |t: &str| t.parse::<jiff::Timestamp>().unwrap_or_else(|e| panic!("{t:?}: {e}"));
    assert!(parse(started) <= parse(completed), "{run}");
    assert_eq!(last_run(&status, "hooked-goodbye")["started_at"], "", "Helm's zero time: {status}");

    // A failing pre-upgrade hook fails the upgrade before anything is applied.
    patch_spec(&client, "hooked", json!({ "hookExitCode": 1, "greeting": "changed" })).await;
    let cr =
        wait_for_cr(&client, "hooked", "failed", |cr| condition_is(cr, "ReleaseFailed", "True", "UpgradeError")).await;
    let message = condition_message(&cr, "ReleaseFailed");
    assert_eq!(message, "pre-upgrade hooks failed: 1 error occurred:\n\t* pod hooked-check failed\n\n");
    // The failed revision records the failed hook.
    let failed = helm(&env, home.path(), &["status", "hooked", "-n", NS, "--revision", "2"]);
    assert_eq!(last_run_phase(&failed, "hooked-check"), "Failed", "{failed}");
    // Stored as a failed revision and rolled back to revision 1 (a retry may add more).
    let stored = releases(&client, "hooked").await;
    let first: Vec<(i64, &str)> = stored.iter().take(3).map(|(_, r)| (r.version, r.info.status.as_str())).collect();
    assert_eq!(first[..2], [(1, "superseded"), (2, "failed")]);
    assert_eq!(stored[1].1.info.description, format!("Upgrade \"hooked\" failed: {message}"));
    assert_eq!(stored[2].1.info.description, "Rollback to 1");
    assert!(revision(&cr).is_some_and(|r| r >= 3), "the rolled-back revision is deployed");
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let data = configmaps.get("hooked-nginx").await.expect("the ConfigMap").data.unwrap_or_default();
    assert_eq!(data["greeting"], "hello", "nothing was applied");

    // Uninstalling runs the stored pre-delete hook.
    delete_cr_and_wait(&client, "hooked").await;
    let goodbye = configmaps.get("hooked-goodbye").await.expect("the pre-delete hook ran");
    assert_eq!(goodbye.data.unwrap_or_default()["bye"], "true");
    assert!(configmaps.get_opt("hooked-nginx").await.expect("get").is_none());
    configmaps.get("hooked-farewell").await.expect("the post-delete hook ran");

    // A failing post-install Job fails the install (retried, so the Job comes and goes).
    create_nginx(&client, "migrating", json!({ "migrateExitCode": 1 })).await;
    let cr =
        wait_for_cr(&client, "migrating", "failed", |cr| condition_is(cr, "ReleaseFailed", "True", "InstallError"))
            .await;
    let message = condition_message(&cr, "ReleaseFailed");
    assert_eq!(
        message,
        "failed post-install: 1 error occurred:\n\t* job migrating-migrate failed: BackoffLimitExceeded\n\n"
    );
    assert!(releases(&client, "migrating").await.is_empty(), "no release is stored");
    // The failed install was uninstalled, as operator-sdk does: its pre-delete hook ran.
    wait_for(
        &configmaps,
        "migrating-goodbye",
        "the failed install's pre-delete hook",
        |c: Option<&ConfigMap>| c.is_some(),
        WAIT,
    )
    .await
    .expect("the failed install is uninstalled");
}

/// As operator-sdk's helm operator, an upgrade that fails once Helm has stored it (here its
/// post-upgrade Job fails, after the objects were applied) is stored as a failed revision
/// and rolled back: a new revision with the deployed one's manifest, its pre- and
/// post-rollback hooks, its objects restored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_upgrade_is_rolled_back_with_its_hooks() {
    let (_env, client, _charts, _operator) = hooked_env().await;
    install_nginx(&client, "rolling", json!({})).await;

    patch_spec(&client, "rolling", json!({ "migrateExitCode": 1, "greeting": "changed" })).await;
    let cr =
        wait_for_cr(&client, "rolling", "failed", |cr| condition_is(cr, "ReleaseFailed", "True", "UpgradeError")).await;
    let message = condition_message(&cr, "ReleaseFailed");
    assert_eq!(
        message,
        "post-upgrade hooks failed: 1 error occurred:\n\t* job rolling-migrate failed: BackoffLimitExceeded\n\n"
    );
    let stored = releases(&client, "rolling").await;
    assert!(stored.len() >= 3, "{} revisions", stored.len());
    let (v1, v2, v3) = (&stored[0].1, &stored[1].1, &stored[2].1);
    assert_eq!((v1.version, v1.info.status.as_str()), (1, "superseded"));
    assert_eq!((v2.version, v2.info.status.as_str()), (2, "failed"));
    assert_eq!(v2.info.description, format!("Upgrade \"rolling\" failed: {message}"));
    assert!(v2.manifest.contains("greeting: \"changed\""), "the failed revision keeps its manifest");
    assert_eq!(v3.version, 3);
    assert!(["deployed", "superseded"].contains(&v3.info.status.as_str()), "{}", v3.info.status);
    assert_eq!(v3.info.description, "Rollback to 1");
    assert_eq!((&v3.manifest, &v3.config, &v3.chart), (&v1.manifest, &v1.config, &v1.chart));
    assert_eq!(v3.info.first_deployed, v1.info.first_deployed);
    assert!(revision(&cr).is_some_and(|r| r >= 3), "the status names the rolled-back revision");

    // The rollback ran revision 1's rollback hooks and restored its objects.
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    for hook in ["rolling-pre-rollback", "rolling-post-rollback"] {
        let data = configmaps.get(hook).await.expect("the rollback hook ran").data.unwrap_or_default();
        assert_eq!(data["revision"], "1", "{hook} is revision 1's hook");
    }
    wait_for(
        &configmaps,
        "rolling-nginx",
        "the rolled-back ConfigMap",
        |c: Option<&ConfigMap>| {
            c.and_then(|c| c.data.as_ref()).is_some_and(|d| d.get("greeting").map(String::as_str) == Some("hello"))
        },
        WAIT,
    )
    .await
    .expect("the rollback restores revision 1's objects");
}

/// `post-delete` hooks run once the release's objects are gone, as `helm uninstall
/// --wait`: here a test finalizer holds the release's ConfigMap, and the hook is created
/// only after the test lets it go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_delete_hooks_run_once_the_release_objects_are_gone() {
    let (_env, client, _charts, _operator) = hooked_env().await;
    install_nginx(&client, "leaving", json!({})).await;

    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    hold_configmap(&client, "leaving-nginx", true).await;
    nginxes(&client).delete("leaving", &DeleteParams::default()).await.expect("delete the CR");
    wait_for(
        &configmaps,
        "leaving-nginx",
        "the operator deletes the ConfigMap",
        |c: Option<&ConfigMap>| c.is_some_and(|c| c.metadata.deletion_timestamp.is_some()),
        WAIT,
    )
    .await
    .expect("deleted");
    configmaps.get("leaving-goodbye").await.expect("the pre-delete hook ran first");
    let released = hold_configmap(&client, "leaving-nginx", false).await;
    let released_at: u64 = released.resource_version().and_then(|v| v.parse().ok()).expect("a resourceVersion");
    wait_cr_gone(&client, "leaving").await;
    let farewell = configmaps.get("leaving-farewell").await.expect("the post-delete hook ran");
    let created_at: u64 = farewell.resource_version().and_then(|v| v.parse().ok()).expect("a resourceVersion");
    assert!(created_at > released_at, "the post-delete hook ({created_at}) waited for the objects ({released_at})");
    assert!(releases(&client, "leaving").await.is_empty(), "the release records are purged");
}

/// A release installed by the operator stores its `test` hooks (the operator does not run
/// them), so the real `helm test` runs them against the cluster; the operator keeps
/// reading the release helm rewrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_helm_test_runs_the_releases_test_hooks() {
    let (env, client, _charts, _operator) = hooked_env().await;
    let home = tempfile::tempdir().expect("helm home");
    install_nginx(&client, "tested", json!({})).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    assert!(pods.get_opt("tested-test").await.expect("get").is_none(), "the operator runs no test hook");

    let printed = helm_text(&env, home.path(), &["test", "tested", "-n", NS]);
    assert!(printed.contains("TEST SUITE:     tested-test\n"), "{printed}");
    assert!(printed.contains("Phase:          Succeeded\n"), "{printed}");
    let test_pod = pods.get("tested-test").await.expect("helm created the test pod");
    assert_eq!(test_pod.status.and_then(|s| s.phase).as_deref(), Some("Succeeded"));
    let stored = releases(&client, "tested").await;
    let test_hook = stored[0].1.hooks.iter().find(|h| h["name"] == "tested-test").expect("the test hook");
    assert_eq!(test_hook["last_run"]["phase"], "Succeeded", "helm recorded its run in the release");

    patch_spec(&client, "tested", json!({ "greeting": "again" })).await;
    wait_for_cr(&client, "tested", "upgraded", |cr| revision(cr) == Some(2)).await;
}

/// `helm.sdk.operatorframework.io/upgrade-force: "true"` upgrades as `helm upgrade --force`:
/// objects are replaced, not patched. Switching the Deployment to `Recreate` leaves the
/// API server's defaulted `rollingUpdate` in a patched object, which it refuses (the dry
/// run fails the upgrade); the replaced object has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_force_replaces_what_a_patch_cannot_change() {
    let env = TestEnv::start().await.expect("testenv");
    let _operator = start_operator(&env, WATCHES, &[]).await;
    let client = env.client();
    install_nginx(&client, "forced", json!({})).await;

    patch_spec(&client, "forced", json!({ "strategy": { "type": "Recreate" } })).await;
    let cr =
        wait_for_cr(&client, "forced", "refused", |cr| condition_is(cr, "ReleaseFailed", "True", "UpgradeError")).await;
    let message = condition_message(&cr, "ReleaseFailed");
    assert!(
        message.ends_with(
            "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"
        ),
        "{message}"
    );
    assert_eq!(releases(&client, "forced").await.len(), 1, "no revision is stored");

    annotate(&client, "forced", json!({ "helm.sdk.operatorframework.io/upgrade-force": "true" })).await;
    wait_for_cr(&client, "forced", "upgraded with --force", |cr| {
        revision(cr) == Some(2) && condition(cr, "ReleaseFailed").is_none()
    })
    .await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let strategy = deployments.get("forced-nginx").await.expect("the Deployment").spec.and_then(|s| s.strategy);
    assert_eq!(strategy.map(|s| (s.type_, s.rolling_update.is_none())), Some((Some("Recreate".into()), true)));
}

/// A failed upgrade is rolled back with `--force` (operator-sdk's default): the objects are
/// replaced by the deployed revision's, so what the failed upgrade wrote is gone; with
/// `helm.sdk.operatorframework.io/rollback-force: "false"` they are patched, and what
/// the patch does not name stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_force_replaces_the_failed_upgrades_objects() {
    let (_env, client, _charts, _operator) = hooked_env().await;
    for name in ["replaced", "patched"] {
        create_nginx(&client, name, json!({})).await;
    }
    for name in ["replaced", "patched"] {
        wait_for_cr(&client, name, "installed", |cr| revision(cr) == Some(1)).await;
    }
    annotate(&client, "replaced", json!({ "helm.sdk.operatorframework.io/upgrade-force": "true" })).await;
    annotate(
        &client,
        "patched",
        json!({
            "helm.sdk.operatorframework.io/upgrade-force": "true",
            "helm.sdk.operatorframework.io/rollback-force": "false",
        }),
    )
    .await;
    // The upgrade replaces the Deployment with a Recreate one, then its post-upgrade Job fails.
    for name in ["replaced", "patched"] {
        patch_spec(&client, name, json!({ "strategy": { "type": "Recreate" }, "migrateExitCode": 1 })).await;
    }
    for name in ["replaced", "patched"] {
        let cr = wait_for_cr(&client, name, "rolled back", |cr| {
            condition_is(cr, "ReleaseFailed", "True", "UpgradeError") && revision(cr).is_some_and(|r| r >= 3)
        })
        .await;
        assert!(condition_message(&cr, "ReleaseFailed").starts_with("post-upgrade hooks failed"), "{cr:?}");
        // Back to the deployed values, upgraded without --force: what the rollback left stays.
        annotate(&client, name, json!({ "helm.sdk.operatorframework.io/upgrade-force": null })).await;
        patch_spec(&client, name, json!({ "strategy": null, "migrateExitCode": null })).await;
        wait_for_cr(&client, name, "settled", |cr| condition(cr, "ReleaseFailed").is_none()).await;
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let strategy = |d: &Deployment| d.spec.as_ref().and_then(|s| s.strategy.as_ref()).and_then(|s| s.type_.clone());
    let replaced = deployments.get("replaced-nginx").await.expect("the Deployment");
    assert_eq!(strategy(&replaced).as_deref(), Some("RollingUpdate"), "replaced by revision 1's");
    let patched = deployments.get("patched-nginx").await.expect("the Deployment");
    assert_eq!(strategy(&patched).as_deref(), Some("Recreate"), "a patch leaves what revision 1 does not name");
    for name in ["replaced", "patched"] {
        let stored = releases(&client, name).await;
        assert_eq!(stored[2].1.info.description, "Rollback to 1", "{name}");
        assert_eq!(stored.last().map(|(_, r)| r.info.status.as_str()), Some("deployed"), "{name}");
    }
}

/// `helm.sdk.operatorframework.io/uninstall-wait: "true"` keeps the uninstall finalizer
/// until every object of the release is gone: the release is uninstalled at once, the
/// resource says it is waiting, and it goes only once a held object is let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_wait_keeps_the_finalizer_until_every_object_is_gone() {
    let env = TestEnv::start().await.expect("testenv");
    let _operator = start_operator(&env, WATCHES, &[]).await;
    let client = env.client();
    create_nginx(&client, "waiting", json!({})).await;
    annotate(&client, "waiting", json!({ "helm.sdk.operatorframework.io/uninstall-wait": "true" })).await;
    wait_for_cr(&client, "waiting", "installed", |cr| revision(cr) == Some(1)).await;

    hold_configmap(&client, "waiting-nginx", true).await;
    nginxes(&client).delete("waiting", &DeleteParams::default()).await.expect("delete the CR");
    let cr = wait_for_cr(&client, "waiting", "waiting for the objects", |cr| {
        condition_is(cr, "Deployed", "False", "UninstallSuccessful")
            && condition_message(cr, "Deployed") == "Waiting until all resources are deleted."
    })
    .await;
    assert_eq!(cr.finalizers(), ["helm.sdk.operatorframework.io/uninstall-release"], "the finalizer stays");
    assert!(releases(&client, "waiting").await.is_empty(), "the release is uninstalled");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    assert!(deployments.get_opt("waiting-nginx").await.expect("get").is_none(), "the other objects are gone");

    hold_configmap(&client, "waiting-nginx", false).await;
    wait_cr_gone(&client, "waiting").await;
}

/// A pre-install and pre-upgrade hook Job whose pod no node can run (its node selector
/// matches none): it runs until the test marks the pod Succeeded
/// ([`let_the_held_hook_succeed`]).
const HELD_HOOK: &str = r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-wait
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector:
        opkit.dev/no-such-node: "true"
      containers:
        - name: wait
          image: busybox
"#;

/// `helm history` as (revision, status, description) rows.
fn history_rows(history: &Value) -> Vec<(i64, String, String)> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    history
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|r| (r["revision"].as_i64().unwrap_or_default(), text(&r["status"]), text(&r["description"])))
        .collect()
}

/// Waits until [`HELD_HOOK`]'s Job for release `name` has a running pod.
async fn wait_for_the_held_hook(client: &Client, name: &str) {
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    let running = |j: Option<&Job>| j.and_then(|j| j.status.as_ref()).and_then(|s| s.active).is_some_and(|a| a > 0);
    wait_for(&jobs, &format!("{name}-wait"), "the held hook's pod", running, WAIT).await.expect("the hook Job runs");
}

/// Marks the running pod of [`HELD_HOOK`]'s Job for release `name` Succeeded, as a
/// kubelet would once its container exited 0.
async fn let_the_held_hook_succeed(client: &Client, name: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let selector = format!("batch.kubernetes.io/job-name={name}-wait");
    let listed = pods.list(&ListParams::default().labels(&selector)).await.expect("list the hook's pods");
    let phase = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    let held: Vec<&Pod> = listed.items.iter().filter(|p| phase(p) != "Succeeded").collect();
    assert_eq!(held.len(), 1, "one running pod of the hook Job: {:?}", listed.items);
    let succeeded = json!({ "status": { "phase": "Succeeded" } });
    pods.patch_status(&held[0].name_any(), &PatchParams::default(), &Patch::Merge(&succeeded))
        .await
        .expect("mark the pod succeeded");
}

/// As Helm stores it, an install is `pending-install` while its hooks run (the running
/// hook's `last_run` `Running`), before any object is created, and the same revision
/// becomes `deployed` once they are done; an upgrade is `pending-upgrade` the same way,
/// the deployed revision staying deployed meanwhile. The real `helm history` and
/// `helm status` show each state, and the real `helm upgrade` refuses to run meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_is_pending_while_its_hooks_run() {
    let env = TestEnv::start().await.expect("testenv");
    let client = env.client();
    let home = tempfile::tempdir().expect("helm home");
    let charts = tempfile::tempdir().expect("charts dir");
    copy_fixture_chart(&charts.path().join("nginx"), "0.1.0", "");
    std::fs::write(charts.path().join("nginx/templates/hooks.yaml"), HELD_HOOK).expect("hooks");
    let _operator = start_operator_in(&env, WATCHES, charts.path(), &[]).await;
    let row = |revision: i64, status: &str, description: &str| (revision, status.to_string(), description.to_string());

    create_nginx(&client, "slow", json!({})).await;
    wait_for_the_held_hook(&client, "slow").await;
    let history = helm(&env, home.path(), &["history", "slow", "-n", NS]);
    assert_eq!(history_rows(&history), [row(1, "pending-install", "Initial install underway")], "{history}");
    let status = helm(&env, home.path(), &["status", "slow", "-n", NS]);
    assert_eq!(status.pointer("/info/status"), Some(&json!("pending-install")), "{status}");
    assert_eq!(last_run_phase(&status, "slow-wait"), "Running", "{status}");
    assert!(!last_run(&status, "slow-wait")["started_at"].as_str().unwrap_or_default().is_empty(), "{status}");
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    assert!(configmaps.get_opt("slow-nginx").await.expect("get").is_none(), "no object before the pre-install hook");
    let cr = nginxes(&client).get("slow").await.expect("the CR");
    assert_eq!(revision(&cr), None, "nothing is deployed yet");
    // The real helm refuses another operation on the pending release.
    let chart = charts.path().join("nginx");
    let upgrade = helm_output(&env, home.path(), &["upgrade", "slow", &chart.to_string_lossy(), "-n", NS]);
    let stderr = String::from_utf8_lossy(&upgrade.stderr);
    assert!(!upgrade.status.success(), "helm upgrade of a pending release: {stderr}");
    assert!(stderr.contains("another operation (install/upgrade/rollback) is in progress"), "{stderr}");

    let_the_held_hook_succeed(&client, "slow").await;
    wait_for_cr(&client, "slow", "installed", |cr| revision(cr) == Some(1)).await;
    let history = helm(&env, home.path(), &["history", "slow", "-n", NS]);
    assert_eq!(history_rows(&history), [row(1, "deployed", "Install complete")], "{history}");
    let status = helm(&env, home.path(), &["status", "slow", "-n", NS]);
    assert_eq!(last_run_phase(&status, "slow-wait"), "Succeeded", "{status}");
    configmaps.get("slow-nginx").await.expect("the release's objects are created after the hook");

    // An upgrade: pending-upgrade while its pre-upgrade hook runs.
    patch_spec(&client, "slow", json!({ "greeting": "later" })).await;
    wait_for_the_held_hook(&client, "slow").await;
    let history = helm(&env, home.path(), &["history", "slow", "-n", NS]);
    assert_eq!(
        history_rows(&history),
        [row(1, "deployed", "Install complete"), row(2, "pending-upgrade", "Preparing upgrade")],
        "{history}"
    );
    let status = helm(&env, home.path(), &["status", "slow", "-n", NS, "--revision", "2"]);
    assert_eq!(last_run_phase(&status, "slow-wait"), "Running", "{status}");
    let_the_held_hook_succeed(&client, "slow").await;
    wait_for_cr(&client, "slow", "upgraded", |cr| revision(cr) == Some(2)).await;
    let history = helm(&env, home.path(), &["history", "slow", "-n", NS]);
    assert_eq!(
        history_rows(&history),
        [row(1, "superseded", "Install complete"), row(2, "deployed", "Upgrade complete")],
        "{history}"
    );
}

/// A release left pending by an operator stopped in the middle of an install or upgrade
/// (here written as that operator left it) is handled as operator-sdk handles it: the
/// pending revision is deleted and the install or upgrade made again as that revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_release_left_by_a_stopped_operator_is_made_again() {
    let env = TestEnv::start().await.expect("testenv");
    let client = env.client();
    let home = tempfile::tempdir().expect("helm home");
    let operator = start_operator(&env, WATCHES, &[]).await;
    install_nginx(&client, "web", json!({ "replicaCount": 1 })).await;
    operator.shut_down().await;

    // What a stopped operator leaves: `web` upgrading to revision 2, `fresh` installing.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let stored = releases(&client, "web").await;
    let mut upgrading = stored[0].1.clone();
    upgrading.version = 2;
    upgrading.info.status = "pending-upgrade".into();
    upgrading.info.description = "Preparing upgrade".into();
    secrets.create(&PostParams::default(), &upgrading.to_secret().expect("encodes")).await.expect("store");
    patch_spec(&client, "web", json!({ "replicaCount": 2 })).await;
    let mut installing = stored[0].1.clone();
    installing.name = "fresh".into();
    installing.info.status = "pending-install".into();
    installing.info.description = "Initial install underway".into();
    secrets.create(&PostParams::default(), &installing.to_secret().expect("encodes")).await.expect("store");
    create_nginx(&client, "fresh", json!({})).await;
    let history = helm(&env, home.path(), &["history", "web", "-n", NS]);
    assert_eq!(
        history_rows(&history),
        [(1, "deployed".into(), "Install complete".into()), (2, "pending-upgrade".into(), "Preparing upgrade".into())],
        "{history}"
    );

    let _operator = start_operator(&env, WATCHES, &[]).await;
    wait_for_cr(&client, "web", "upgraded", |cr| revision(cr) == Some(2)).await;
    let history = helm(&env, home.path(), &["history", "web", "-n", NS]);
    assert_eq!(
        history_rows(&history),
        [(1, "superseded".into(), "Install complete".into()), (2, "deployed".into(), "Upgrade complete".into())],
        "{history}"
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let replicas = deployments.get("web-nginx").await.expect("the Deployment").spec.and_then(|s| s.replicas);
    assert_eq!(replicas, Some(2));

    wait_for_cr(&client, "fresh", "installed", |cr| revision(cr) == Some(1)).await;
    let history = helm(&env, home.path(), &["history", "fresh", "-n", NS]);
    assert_eq!(history_rows(&history), [(1, "deployed".into(), "Install complete".into())], "{history}");
    deployments.get("fresh-nginx").await.expect("the release's objects are created");
}

/// Two replicas of the operator as shards of one ring (what `--shard-ring nginx` starts):
/// each installs, and reports in its metrics, only the releases of the resources
/// labelled with its shard; their children carry the same label, so a deleted child is
/// restored by its owner's shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_each_install_only_their_own_releases() {
    let env = TestEnv::start().await.expect("testenv");
    let watches = format!("{WATCHES}  reconcilePeriod: 10m\n");
    let base = chart_dir().parent().map(Path::to_path_buf).expect("charts dir");
    let shard = |id: &str| {
        let mut sharding = opkit::sharding::ShardingConfig::new("nginx", NS).shard_id(id).every_controller();
        sharding.lease_duration = Duration::from_secs(3);
        sharding.renew_deadline = Duration::from_secs(2);
        sharding.retry_period = Duration::from_millis(300);
        ManagerOptions { sharding: Some(sharding), ..ManagerOptions::default() }
    };
    let a = start_operator_with(&env, &watches, &base, &[], shard("a")).await;
    let b = start_operator_with(&env, &watches, &base, &[], shard("b")).await;
    let client = env.client();
    // Both shards live before the resources exist, so that none moves between them.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(client.clone(), NS);
    for lease in ["nginx-shard-a", "nginx-shard-b"] {
        wait_for(&leases, lease, "held", |l: Option<&k8s_openapi::api::coordination::v1::Lease>| l.is_some(), WAIT)
            .await
            .expect("the shard holds its lease");
    }
    let names: Vec<String> = (0..8).map(|i| format!("web-{i}")).collect();
    for name in &names {
        create_nginx(&client, name, json!({})).await;
    }
    let label = "shard.opkit.dev/nginx";
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let mut per_shard = std::collections::BTreeMap::<String, usize>::new();
    for name in &names {
        let cr = wait_for_cr(&client, name, "installed", |cr| revision(cr) == Some(1)).await;
        let shard = cr.labels().get(label).cloned().expect("the resource is labelled with its shard");
        *per_shard.entry(shard.clone()).or_default() += 1;
        let (mine, other) = if shard == "a" { (&a, &b) } else { (&b, &a) };
        let series =
            format!("helm_operator_release_revision{{kind=\"Nginx\",namespace=\"default\",name=\"{name}\"}} 1\n");
        assert!(mine.metrics.encode().contains(&series), "{name} is installed by shard {shard}");
        assert!(!other.metrics.encode().contains(&series), "{name} is installed by shard {shard} only");
        let child = format!("{name}-nginx");
        let expected = shard.clone();
        wait_for(
            &deployments,
            &child,
            "labelled with its owner's shard",
            move |d: Option<&Deployment>| d.is_some_and(|d| d.labels().get(label) == Some(&expected)),
            WAIT,
        )
        .await
        .expect("the child follows its owner");
    }
    assert_eq!(per_shard.len(), 2, "both shards hold some: {per_shard:?}");
    assert_eq!(releases(&client, "web-0").await.len(), 1, "one release, installed once");

    // A deleted child comes back at once (the watch period is 10 minutes): the owner's
    // shard sees the delete in its share of the Deployments.
    let old_uid = deployments.get("web-0-nginx").await.expect("the Deployment").uid();
    deployments.delete("web-0-nginx", &DeleteParams::default()).await.expect("delete the Deployment");
    wait_for(
        &deployments,
        "web-0-nginx",
        "to be restored",
        move |d: Option<&Deployment>| d.is_some_and(|d| d.uid() != old_uid),
        WAIT,
    )
    .await
    .expect("the deleted Deployment comes back");
    a.shut_down().await;
    b.shut_down().await;
}
