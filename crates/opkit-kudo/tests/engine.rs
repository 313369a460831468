//! The KUDO engine against an in-process control plane (`opkit-testenv`, with the
//! cluster's controllers and simulated kubelets), with the fixture packages of
//! `tests/fixtures/`: deploy on install, a parameter change running `update` (and a
//! parameter's own `trigger` plan), an upgrade between two OperatorVersions, cleanup on
//! delete, drift repair of a deleted StatefulSet, cancel and retry of a plan stuck on a
//! health check, a Pipe task (copied out of a real pod, and a simulated pod's fallback)
//! and a KudoOperator dependency.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use opkit::{Manager, ManagerOptions};
use opkit_kudo::client::{self, InstallOptions};
use opkit_kudo::plan::{PlanStatus, state};
use opkit_kudo::resources::api_resource;
use opkit_testenv::{TestEnv, wait_for, wait_for_with};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "default";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// Stops the engine when the test ends, also when it fails.
struct RunningEngine {
    stop: CancellationToken,
}

impl Drop for RunningEngine {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Installs KUDO's CRDs and runs the engine in this process.
async fn start_engine(env: &TestEnv) -> RunningEngine {
    opkit_kudo::install_crds(&env.client()).await.expect("install KUDO's CRDs");
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    opkit_kudo::setup(&mgr).await.expect("set up the engine");
    let stop = CancellationToken::new();
    tokio::spawn(mgr.run_until(stop.clone()));
    RunningEngine { stop }
}

async fn install(env: &TestEnv, package: &str, instance: &str, params: &[(&str, &str)]) {
    let pkg = opkit_kudo::load(&fixture(package)).expect("the fixture loads");
    let options = InstallOptions {
        namespace: NS.into(),
        instance: Some(instance.into()),
        parameters: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        skip_instance: false,
    };
    client::install(&env.client(), &pkg, &options).await.expect("install");
}

fn plan_of(o: &DynamicObject, plan: &str) -> Option<PlanStatus> {
    client::plan_statuses(o).get(plan).cloned()
}

fn instances(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &api_resource("Instance"))
}

/// Waits until the Instance `name` in `namespace` (`None`: gone) satisfies `done`.
async fn wait_instance(
    client: &Client,
    namespace: &str,
    name: &str,
    what: &str,
    done: impl Fn(Option<&DynamicObject>) -> bool + Send + 'static,
) -> Option<DynamicObject> {
    wait_for_with(&instances(client, namespace), &api_resource("Instance"), name, what, done, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Waits until `plan` of `instance` is in `want` with an execution UID other than `not_uid`.
async fn wait_plan(client: &Client, instance: &str, plan: &str, want: &'static str, not_uid: &str) -> PlanStatus {
    let not_uid = not_uid.to_string();
    let plan_name = plan.to_string();
    let found = wait_instance(client, NS, instance, &format!("to have plan {plan} {want}"), move |o| {
        o.and_then(|o| plan_of(o, &plan_name)).is_some_and(|p| p.status == want && p.uid != not_uid)
    })
    .await
    .expect("the instance exists");
    plan_of(&found, plan).expect("plan status")
}

/// Waits until the Instance `shop`'s deploy plan runs, and `also` holds of it.
async fn wait_deploy_running(client: &Client, what: &str, also: fn(&PlanStatus) -> bool) {
    wait_instance(client, NS, "shop", what, move |o| {
        o.and_then(|o| plan_of(o, "deploy")).is_some_and(|p| p.status == state::IN_PROGRESS && also(&p))
    })
    .await;
}

/// Labels a node `zone=blue`, the zone the `ZONE=blue` StatefulSet's pods wait for.
async fn make_zone_blue(client: &Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.list(&ListParams::default()).await.expect("nodes").items.into_iter().next().expect("a node");
    let labels = serde_json::json!({"metadata": {"labels": {"zone": "blue"}}});
    nodes.patch(&node.name_any(), &PatchParams::default(), &Patch::Merge(&labels)).await.expect("label the node");
}

async fn update(client: &Client, instance: &str, params: &[(&str, &str)]) {
    let params: BTreeMap<String, String> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    client::update(client, NS, instance, &params).await.expect("update");
}

#[tokio::test]
async fn deploy_then_a_parameter_change_runs_update_and_a_trigger_plan() {
    let env = TestEnv::start().await.expect("testenv");
    let _engine = start_engine(&env).await;
    let client = env.client();
    install(&env, "web-0.1.0", "shop", &[]).await;
    let deploy = wait_plan(&client, "shop", "deploy", state::COMPLETE, "").await;
    assert!(deploy.phases.iter().all(|p| p.status == state::COMPLETE), "{deploy:?}");

    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    let set = sets.get("shop-web").await.expect("the StatefulSet");
    assert_eq!(set.labels().get("kudo.dev/instance").map(String::as_str), Some("shop"));
    assert_eq!(set.annotations().get("kudo.dev/plan").map(String::as_str), Some("deploy"));
    let owner = set.owner_references().first().cloned().expect("owned by the Instance");
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Instance", "shop"));
    let template_annotations = set
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    let first_hash = template_annotations
        .get("kudo.dev/dependencies-hash")
        .cloned()
        .expect("the ConfigMap's hash on the pod template");

    update(&client, "shop", &[("REPLICAS", "2")]).await;
    let updated = wait_plan(&client, "shop", "update", state::COMPLETE, "").await;
    assert_ne!(updated.uid, deploy.uid);
    let set = sets.get("shop-web").await.expect("the StatefulSet");
    assert_eq!(set.spec.and_then(|s| s.replicas), Some(2));

    // MESSAGE's trigger is `reconfigure`: the ConfigMap changes and the pods roll (new hash).
    update(&client, "shop", &[("MESSAGE", "bonjour")]).await;
    wait_plan(&client, "shop", "reconfigure", state::COMPLETE, "").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm = cms.get("shop-config").await.expect("the ConfigMap");
    assert_eq!(cm.data.unwrap_or_default().get("message").map(String::as_str), Some("bonjour"));
    let set = sets.get("shop-web").await.expect("the StatefulSet");
    let hash = set
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.annotations)
        .and_then(|a| a.get("kudo.dev/dependencies-hash").cloned());
    assert_ne!(hash.as_deref(), Some(first_hash.as_str()), "a config change rolls the pods");

    let instance = client::instance(&client, NS, "shop").await.expect("read").expect("exists");
    let history = opkit_kudo::plan::history_of(instance.annotations());
    let plans: Vec<(&str, &str)> = history.iter().map(|h| (h.plan.as_str(), h.status.as_str())).collect();
    assert_eq!(plans, [("deploy", "COMPLETE"), ("update", "COMPLETE"), ("reconfigure", "COMPLETE")]);
}

#[tokio::test]
async fn upgrade_between_operator_versions_runs_the_upgrade_plan() {
    let env = TestEnv::start().await.expect("testenv");
    let _engine = start_engine(&env).await;
    let client = env.client();
    install(&env, "web-0.1.0", "shop", &[("REPLICAS", "1")]).await;
    wait_plan(&client, "shop", "deploy", state::COMPLETE, "").await;
    let pkg = opkit_kudo::load(&fixture("web-0.2.0")).expect("loads");
    let ov = client::upgrade(&client, &pkg, NS, "shop", &BTreeMap::new()).await.expect("upgrade");
    assert_eq!(ov, "web-1.0.0-0.2.0");
    wait_plan(&client, "shop", "upgrade", state::COMPLETE, "").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let marker = cms.get("shop-upgraded").await.expect("the upgrade plan's ConfigMap");
    assert_eq!(marker.data.unwrap_or_default().get("from").map(String::as_str), Some("0.2.0"));
    let config = cms.get("shop-config").await.expect("config");
    assert_eq!(
        config.data.unwrap_or_default().get("operator").map(String::as_str),
        Some("web-0.1.0-1.0.0"),
        "upgrade did not re-run config"
    );
}

#[tokio::test]
async fn cleanup_runs_on_delete_before_the_instance_goes() {
    let env = TestEnv::start().await.expect("testenv");
    let _engine = start_engine(&env).await;
    let client = env.client();
    install(&env, "web-0.1.0", "shop", &[]).await;
    wait_plan(&client, "shop", "deploy", state::COMPLETE, "").await;
    let roles: Api<ClusterRole> = Api::all(client.clone());
    roles.get("default-shop-reader").await.expect("the deploy plan's cluster-scoped object");
    let instance = instances(&client, NS).get("shop").await.expect("instance");
    assert!(instance.finalizers().iter().any(|f| f == opkit_kudo::CLEANUP_FINALIZER));

    client::uninstall(&client, NS, "shop").await.expect("uninstall");
    wait_instance(&client, NS, "shop", "to be gone once cleanup ran", |o| o.is_none()).await;
    // The cleanup plan deleted what the owner reference could not (cluster-scoped).
    wait_for(&roles, "default-shop-reader", "to be deleted by cleanup", |o: Option<&ClusterRole>| o.is_none(), WAIT)
        .await
        .expect("cleanup deleted the ClusterRole");
}

#[tokio::test]
async fn a_deleted_statefulset_is_restored_with_an_event() {
    let env = TestEnv::start().await.expect("testenv");
    let _engine = start_engine(&env).await;
    let client = env.client();
    install(&env, "web-0.1.0", "shop", &[]).await;
    wait_plan(&client, "shop", "deploy", state::COMPLETE, "").await;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    let old_uid = sets.get("shop-web").await.expect("StatefulSet").uid();
    sets.delete("shop-web", &DeleteParams::background()).await.expect("delete");
    wait_for(
        &sets,
        "shop-web",
        "to be restored",
        move |s: Option<&StatefulSet>| s.is_some_and(|s| s.uid() != old_uid),
        WAIT,
    )
    .await
    .expect("the StatefulSet comes back");
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    wait_event(&events, |e| {
        e.reason.as_deref() == Some("DriftRepaired")
            && e.note.as_deref().is_some_and(|n| n.contains("StatefulSet/shop-web was deleted"))
    })
    .await;
}

/// Waits (a watch, with a timeout) until an Event matching `pred` exists.
async fn wait_event(events: &Api<Event>, pred: impl Fn(&Event) -> bool) {
    use futures::StreamExt;
    use kube::runtime::WatchStreamExt;
    let stream = kube::runtime::watcher(events.clone(), kube::runtime::watcher::Config::default()).applied_objects();
    let found = tokio::time::timeout(WAIT, async {
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(event)) = stream.next().await {
            if pred(&event) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "no matching event within {WAIT:?}");
}

#[tokio::test]
async fn a_plan_stuck_on_health_is_cancelled_then_retried() {
    let env = TestEnv::start().await.expect("testenv");
    let _engine = start_engine(&env).await;
    let client = env.client();
    // No node is in zone "blue": the StatefulSet's pod cannot be scheduled.
    install(&env, "web-0.1.0", "shop", &[("ZONE", "blue")]).await;
    wait_deploy_running(&client, "to wait on the StatefulSet", |p| {
        p.phases.iter().flat_map(|ph| &ph.steps).any(|s| s.message.contains("pods to be ready"))
    })
    .await;

    let cancelled = client::cancel(&client, NS, "shop", None).await.expect("cancel");
    assert_eq!(cancelled, "deploy");
    let status = wait_plan(&client, "shop", "deploy", state::FATAL_ERROR, "").await;
    assert_eq!(status.message, opkit_kudo::CANCELLED);

    // Fix the cause outside the package: label a node, then retry the same execution.
    make_zone_blue(&client).await;
    client::retry(&client, NS, "shop", "deploy").await.expect("retry");
    let done = wait_plan(&client, "shop", "deploy", state::COMPLETE, "").await;
    assert_eq!(done.uid, status.uid, "a retry resumes the same execution");
    let instance = instances(&client, NS).get("shop").await.expect("instance");
    let history = opkit_kudo::plan::history_of(instance.annotations());
    assert_eq!(
        history.last().map(|h| (h.plan.as_str(), h.status.as_str(), h.reason.as_str())),
        Some(("deploy", "COMPLETE", "retried"))
    );
}

#[tokio::test]
async fn a_pipe_task_copies_files_out_of_its_real_pod_into_a_configmap_and_a_secret() {
    // The pipe pod runs for real (built-in busybox image): the files hold what its shell
    // computed, which only a copy out of the running pod can see.
    let env = TestEnv::builder().real_pods().start().await.expect("testenv");
    let _engine = start_engine(&env).await;
    let client = env.client();
    install(&env, "piped", "p", &[("WHO", "kudo")]).await;
    wait_plan(&client, "p", "deploy", state::COMPLETE, "").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let artifact = cms.get("p.deploy.generate.generate.generate.greeting").await.expect("the pipe ConfigMap");
    let data = artifact.binary_data.unwrap_or_default();
    assert_eq!(data.get("greeting.txt").map(|b| b.0.as_slice()), Some(b"hello kudo, 42\n".as_slice()));
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret = secrets.get("p.deploy.generate.generate.generate.settings").await.expect("the pipe Secret");
    let data = secret.data.unwrap_or_default();
    assert_eq!(data.get("USER").map(|b| b.0.as_slice()), Some(b"kudo".as_slice()));
    assert_eq!(data.get("LEVEL").map(|b| b.0.as_slice()), Some(b"3".as_slice()));
    let consumer = cms.get("p-consumer").await.expect("the consumer");
    assert_eq!(
        consumer.data.unwrap_or_default().get("greetingFrom").map(String::as_str),
        Some("p.deploy.generate.generate.generate.greeting")
    );
}

#[tokio::test]
async fn a_simulated_pipe_pod_falls_back_to_its_init_script() {
    // Simulated pods cannot be exec'd into: the file is read from the script, unexpanded.
    let env = TestEnv::start().await.expect("testenv");
    let _engine = start_engine(&env).await;
    let client = env.client();
    install(&env, "piped", "s", &[("WHO", "kudo")]).await;
    wait_plan(&client, "s", "deploy", state::COMPLETE, "").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let artifact = cms.get("s.deploy.generate.generate.generate.greeting").await.expect("the pipe ConfigMap");
    let data = artifact.binary_data.unwrap_or_default();
    assert_eq!(data.get("greeting.txt").map(|b| b.0.as_slice()), Some(b"hello $who, $((6*7))\n".as_slice()));
}

#[tokio::test]
async fn a_kudo_operator_task_installs_the_dependency() {
    let env = TestEnv::start().await.expect("testenv");
    let _engine = start_engine(&env).await;
    let client = env.client();
    install(&env, "parent", "top", &[("GREETING", "hey")]).await;
    wait_plan(&client, "top", "deploy", state::COMPLETE, "").await;
    let child = client::instance(&client, NS, "kid").await.expect("read").expect("the dependency's Instance");
    assert_eq!(child.data.pointer("/spec/operatorVersion/name").and_then(|v| v.as_str()), Some("child-0.3.0"));
    assert_eq!(plan_of(&child, "deploy").map(|p| p.status), Some(state::COMPLETE.to_string()));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm = cms.get("kid-child").await.expect("the dependency's object");
    assert_eq!(cm.data.unwrap_or_default().get("greeting").map(String::as_str), Some("hey from top"));
    assert_eq!(child.owner_references().first().map(|o| o.name.as_str()), Some("top"));
}

#[tokio::test]
async fn the_flightticket_example_books_and_refuses_a_round_trip() {
    let env = TestEnv::start().await.expect("testenv");
    let _engine = start_engine(&env).await;
    let client = env.client();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/flightticket-kudo/operator");
    let pkg = opkit_kudo::load(&dir).expect("the example loads");
    assert!(opkit_kudo::verify(&pkg).is_empty(), "{:?}", opkit_kudo::verify(&pkg));
    let install = |instance: &str, to: &str| InstallOptions {
        namespace: NS.into(),
        instance: Some(instance.into()),
        parameters: [("FROM", "Mumbai"), ("TO", to), ("NUMBER", "2")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        skip_instance: false,
    };
    // A required parameter left out is refused before anything is created.
    let mut missing = install("nowhere", "London");
    missing.parameters.remove("TO");
    let err = client::install(&client, &pkg, &missing).await.unwrap_err().to_string();
    assert_eq!(err, "parameter \"TO\" is required but has no value");

    client::install(&client, &pkg, &install("ft", "London")).await.expect("install");
    wait_plan(&client, "ft", "deploy", state::COMPLETE, "").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let ticket = cms.get("ft-ticket").await.expect("the ticket").data.unwrap_or_default();
    assert_eq!(
        (ticket["seats"].as_str(), ticket["class"].as_str(), ticket["phase"].as_str()),
        ("2", "economy", "Booked")
    );

    client::install(&client, &pkg, &install("round", "Mumbai")).await.expect("install");
    let failed = wait_plan(&client, "round", "deploy", state::FATAL_ERROR, "").await;
    assert!(
        failed.message.contains("spec.to: Invalid value: \"Mumbai\": must differ from spec.from"),
        "{}",
        failed.message
    );
}

#[tokio::test]
async fn a_plan_triggered_while_another_runs_waits_for_it() {
    let env = TestEnv::start().await.expect("testenv");
    let _engine = start_engine(&env).await;
    let client = env.client();
    install(&env, "web-0.1.0", "shop", &[("ZONE", "blue")]).await;
    wait_deploy_running(&client, "to run deploy", |_| true).await;
    // A parameter changes while deploy still waits on its unschedulable pod: `update` waits.
    update(&client, "shop", &[("REPLICAS", "2")]).await;
    let instances = instances(&client, NS);
    let instance = instances.get("shop").await.expect("instance");
    assert_eq!(plan_of(&instance, "update").map(|p| p.status), Some(state::NEVER_RUN.to_string()));
    client::cancel(&client, NS, "shop", Some("deploy")).await.expect("cancel");
    // Then the zone exists (a labelled node) and `update` runs to the end.
    make_zone_blue(&client).await;
    wait_plan(&client, "shop", "update", state::COMPLETE, "").await;
    let instance = instances.get("shop").await.expect("instance");
    let history = opkit_kudo::plan::history_of(instance.annotations());
    let runs: Vec<(&str, &str)> = history.iter().map(|h| (h.plan.as_str(), h.status.as_str())).collect();
    assert_eq!(runs, [("deploy", state::FATAL_ERROR), ("update", state::COMPLETE)]);
    assert!(history[1].started >= history[0].finished, "update started only after deploy ended: {history:?}");
}

/// KUDO's suites install packages once in `default` (`--skip-instance`) and create
/// Instances in each test's namespace that name that OperatorVersion with
/// `spec.operatorVersion.namespace: default`: the engine looks there, as KUDO does.
#[tokio::test]
async fn an_instance_uses_the_operator_version_of_the_namespace_it_names() {
    use k8s_openapi::api::core::v1::Namespace;
    let env = TestEnv::start().await.expect("testenv");
    let _engine = start_engine(&env).await;
    let client = env.client();
    let pkg = opkit_kudo::load(&fixture("web-0.1.0")).expect("the fixture loads");
    let skip = InstallOptions { namespace: NS.into(), skip_instance: true, ..InstallOptions::default() };
    let installed = client::install(&client, &pkg, &skip).await.expect("install --skip-instance");
    let team = "team";
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": team}})).expect("namespace");
    Api::<Namespace>::all(client.clone()).create(&Default::default(), &ns).await.expect("create the namespace");
    let mut body = opkit_kudo::resources::instance(
        &pkg.operator.name,
        &installed.operator_version,
        "shop",
        team,
        &BTreeMap::from([("REPLICAS".to_string(), "1".to_string())]),
    );
    body["spec"]["operatorVersion"]["namespace"] = NS.into();
    let object: DynamicObject = serde_json::from_value(body).expect("an Instance");
    instances(&client, team).create(&Default::default(), &object).await.expect("create the Instance");
    wait_instance(&client, team, "shop", "to have plan deploy COMPLETE", |o| {
        o.and_then(|o| plan_of(o, "deploy")).is_some_and(|p| p.status == state::COMPLETE)
    })
    .await;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), team);
    sets.get("shop-web").await.expect("the StatefulSet in the Instance's namespace");
}
