//! The API proxy with a real client, no Ansible run: a client configured with the
//! kubeconfig a run gets (the owner as its basic-auth user) creates objects through the
//! proxy, which adds the owner reference in the owner's namespace and the owner
//! annotations elsewhere, and reads watched kinds from the operator's cache (`X-Cache: HIT`).

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::discovery::Scope;
use kube::{Client, ResourceExt};
use opkit::cache::InformerEvent;
use opkit::{Manager, ManagerOptions};
use opkit_ansible_operator::OperatorOptions;
use opkit_ansible_operator::ProxyGuard;
use opkit_ansible_operator::parse_watches;
use opkit_ansible_operator::{NamespacedOwner, kubeconfig_for};
use opkit_testenv::TestEnv;
use serde_json::json;
use tokio_util::sync::{CancellationToken, DropGuard};

/// Only labelled Memcacheds are reconciled, so this test runs no Ansible.
const WATCHES: &str = "- version: v1alpha1\n  group: cache.example.com\n  kind: Memcached\n  role: memcached\n  selector:\n    matchLabels:\n      reconcile: \"yes\"\n";

fn project() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memcached-operator")
}

/// The operator for [`WATCHES`] in this process (stopped when dropped), its proxy adding
/// owners or not.
struct ProxyOperator {
    proxy: ProxyGuard,
    cache: opkit::Cache,
    metrics: opkit::metrics::Metrics,
    _stop: DropGuard,
    _runner_dir: tempfile::TempDir,
}

async fn start_operator(env: &TestEnv, inject_owner_ref: bool) -> ProxyOperator {
    let crd: CustomResourceDefinition = serde_saphyr::from_str(
        &std::fs::read_to_string(project().join("config/crd/bases/cache.example.com_memcacheds.yaml")).expect("CRD"),
    )
    .expect("CRD");
    env.install_crds([crd]).await.expect("install the CRD");
    let watches = parse_watches(WATCHES, &project(), &|_| None, 1).expect("watches");
    let runner_dir = tempfile::tempdir().expect("runner dir");
    let options = OperatorOptions {
        proxy_address: "127.0.0.1:0".parse().expect("address"),
        runner_dir: runner_dir.path().to_path_buf(),
        inject_owner_ref,
        metrics_api_address: None,
        ..OperatorOptions::default()
    };
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let proxy = opkit_ansible_operator::setup(&mgr, watches, options).await.expect("set up the operator");
    let (cache, metrics) = (mgr.cache().clone(), mgr.metrics().clone());
    let stop = CancellationToken::new();
    tokio::spawn(mgr.run_until(stop.clone()));
    ProxyOperator { proxy, cache, metrics, _stop: stop.drop_guard(), _runner_dir: runner_dir }
}

/// The Memcached `default/owner` with `uid`, as a run's kubeconfig names it.
fn memcached_owner(uid: &str) -> NamespacedOwner {
    NamespacedOwner {
        api_version: "cache.example.com/v1alpha1".into(),
        kind: "Memcached".into(),
        name: "owner".into(),
        uid: uid.into(),
        namespace: "default".into(),
    }
}

/// A client as a run of `owner` has it: the proxy's kubeconfig, the owner as the user.
async fn run_client(owner: &NamespacedOwner, proxy: &ProxyGuard) -> Client {
    let kubeconfig: kube::config::Kubeconfig =
        serde_saphyr::from_str(&kubeconfig_for(owner, proxy.address)).expect("the run's kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .expect("config");
    Client::try_from(config).expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_inject_owner_ref_creates_are_forwarded_as_they_are() {
    let env = TestEnv::start().await.expect("testenv");
    let operator = start_operator(&env, false).await;
    let owner = memcached_owner("0b1c5e1e-0000-4000-8000-000000000001");
    let configmaps: Api<ConfigMap> = Api::namespaced(run_client(&owner, &operator.proxy).await, "default");
    let created = configmaps
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "plain"}})).expect("cm"))
        .await
        .expect("create through the proxy");
    assert!(created.metadata.owner_references.unwrap_or_default().is_empty());
    assert!(created.metadata.annotations.unwrap_or_default().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_injects_owners_and_serves_cached_reads() {
    let env = TestEnv::start().await.expect("testenv");
    let operator = start_operator(&env, true).await;
    let (proxy, cache) = (&operator.proxy, &operator.cache);

    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Memcached"),
        "memcacheds",
    );
    let memcacheds: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &resource);
    let owner: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "owner", "namespace": "default"}, "spec": {"size": 1},
    }))
    .expect("memcached");
    let owner = memcacheds.create(&PostParams::default(), &owner).await.expect("create the owner");

    // A client as a run has it: the proxy's kubeconfig, the owner as the user.
    let run_owner = memcached_owner(&owner.uid().expect("uid"));
    let run_client = run_client(&run_owner, proxy).await;

    // Created in the owner's namespace: owned by it.
    let configmaps: Api<ConfigMap> = Api::namespaced(run_client.clone(), "default");
    let created = configmaps
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "child"}})).expect("cm"))
        .await
        .expect("create through the proxy");
    let refs = created.metadata.owner_references.unwrap_or_default();
    assert_eq!(refs.len(), 1, "{refs:?}");
    assert_eq!((refs[0].kind.as_str(), refs[0].name.as_str()), ("Memcached", "owner"));
    assert_eq!(Some(&refs[0].uid), owner.metadata.uid.as_ref());

    // In another namespace: the owner annotations instead.
    let namespaces: Api<Namespace> = Api::all(env.client());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "elsewhere"}})).expect("ns"),
        )
        .await
        .expect("namespace");
    let elsewhere: Api<ConfigMap> = Api::namespaced(run_client.clone(), "elsewhere");
    let created = elsewhere
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "child"}})).expect("cm"))
        .await
        .expect("create through the proxy");
    assert!(created.metadata.owner_references.unwrap_or_default().is_empty());
    let annotations = created.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get("operator-sdk/primary-resource").map(String::as_str), Some("default/owner"));
    assert_eq!(
        annotations.get("operator-sdk/primary-resource-type").map(String::as_str),
        Some("Memcached.cache.example.com")
    );

    // Reads of a watched kind come from the cache once it holds the object.
    let informer = cache.dynamic_informer(&resource, Scope::Namespaced);
    let mut cached = informer.subscribe();
    if !cached.initial.iter().any(|o| o.name_any() == "owner") {
        let seen = async {
            loop {
                match cached.events.recv().await {
                    Ok(InformerEvent::Apply { new, .. }) if new.name_any() == "owner" => return,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => panic!("the cache stopped"),
                    _ => {}
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(30), seen).await.expect("the cache holds the owner");
    }
    let get = |path: &str| http::Request::get(path).body(kube::client::Body::empty()).expect("request");
    let response = run_client
        .send(get("/apis/cache.example.com/v1alpha1/namespaces/default/memcacheds/owner"))
        .await
        .expect("GET through the proxy");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers().get("x-cache").and_then(|v| v.to_str().ok()), Some("HIT"));
    // Lists of a kind a run created (now watched) come from the cache, label selector applied.
    let configmaps_resource = ApiResource::erase::<ConfigMap>(&());
    let cm_informer = cache.dynamic_informer(&configmaps_resource, Scope::Namespaced);
    let mut cms = cm_informer.subscribe();
    let child_cached = |o: &DynamicObject| o.name_any() == "child" && o.namespace().as_deref() == Some("default");
    if !cms.initial.iter().any(|o| child_cached(o)) {
        let seen = async {
            loop {
                match cms.events.recv().await {
                    Ok(InformerEvent::Apply { new, .. }) if child_cached(&new) => return,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => panic!("the cache stopped"),
                    _ => {}
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(30), seen).await.expect("the dependent's kind is watched");
    }
    let listed = |selector: &str| {
        let client = run_client.clone();
        let uri = format!("/api/v1/namespaces/default/configmaps?labelSelector={selector}");
        async move {
            let response = client.send(get(&uri)).await.expect("LIST through the proxy");
            assert_eq!(response.headers().get("x-cache").and_then(|v| v.to_str().ok()), Some("HIT"));
            let body = response.into_body().collect_bytes().await.expect("body");
            let list: serde_json::Value = serde_json::from_slice(&body).expect("list");
            assert_eq!(list["kind"], "ConfigMapList");
            list["items"]
                .as_array()
                .map(|items| items.iter().map(|i| i["metadata"]["name"].clone()).collect::<Vec<_>>())
        }
    };
    assert!(listed("").await.is_some_and(|names| names.contains(&json!("child"))));
    assert_eq!(listed("app%3Dnone").await, Some(vec![]));
    // A kind no run created and no watch has goes to the API server.
    let response = run_client.send(get("/api/v1/namespaces/default")).await.expect("GET");
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("x-cache").is_none());
}

/// ansible-operator's metrics API on the proxy: what `osdk_metric` sends creates the
/// metric in the operator's registry; a refused change answers 400 with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_takes_user_metrics() {
    let env = TestEnv::start().await.expect("testenv");
    let operator = start_operator(&env, true).await;
    let owner = memcached_owner("0b1c5e1e-0000-4000-8000-000000000002");
    let client = run_client(&owner, &operator.proxy).await;
    let post = |body: serde_json::Value| {
        http::Request::post("/metrics")
            .header("content-type", "application/json")
            .body(kube::client::Body::from(body.to_string().into_bytes()))
            .expect("request")
    };
    let gauge = json!({"name": "my_gauge", "description": "Mine", "gauge": {"set": 4.5, "increment": null}});
    let response = client.send(post(gauge)).await.expect("POST /metrics");
    assert_eq!(response.status(), 200);
    assert!(operator.metrics.encode().contains("# HELP my_gauge Mine\n# TYPE my_gauge gauge\nmy_gauge 4.5\n"));
    let as_counter = json!({"name": "my_gauge", "description": "Mine", "counter": {"increment": true}});
    let response = client.send(post(as_counter)).await.expect("POST /metrics");
    assert_eq!(response.status(), 400);
    let body = http_body_util::BodyExt::collect(response.into_body()).await.expect("body").to_bytes();
    assert_eq!(String::from_utf8_lossy(&body), "cannot change metric type of my_gauge, which is a gauge\n");
}
