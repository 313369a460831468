//! The API proxy a run talks to requires the per-run token (issue 30): through the real
//! proxy against a test cluster, a kube client with the run's kubeconfig (the owner as
//! the basic-auth user, the token as the password) is served; the same client without a
//! password, with a wrong one, or with no credentials at all is answered 401, and nothing
//! reaches the cluster.

use std::path::Path;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, ResourceExt};
use opkit::{Manager, ManagerOptions};
use opkit_ansible_operator::OperatorOptions;
use opkit_ansible_operator::ProxyGuard;
use opkit_ansible_operator::parse_watches;
use opkit_ansible_operator::{NamespacedOwner, kubeconfig_for, proxy_token};
use opkit_testenv::TestEnv;
use serde_json::json;
use tokio_util::sync::{CancellationToken, DropGuard};

/// Only labelled Memcacheds are reconciled, so this test runs no Ansible.
const WATCHES: &str = "- version: v1alpha1\n  group: cache.example.com\n  kind: Memcached\n  role: memcached\n  selector:\n    matchLabels:\n      reconcile: \"yes\"\n";

fn project() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memcached-operator")
}

/// Runs the operator for [`WATCHES`] in this process (stopped when the guards drop).
async fn start_proxy(env: &TestEnv) -> (ProxyGuard, DropGuard, tempfile::TempDir) {
    let crd_file = project().join("config/crd/bases/cache.example.com_memcacheds.yaml");
    let crd: CustomResourceDefinition =
        serde_saphyr::from_str(&std::fs::read_to_string(crd_file).expect("CRD")).expect("CRD");
    env.install_crds([crd]).await.expect("install the CRD");
    let watches = parse_watches(WATCHES, &project(), &|_| None, 1).expect("watches");
    let runner_dir = tempfile::tempdir().expect("runner dir");
    let options = OperatorOptions {
        proxy_address: "127.0.0.1:0".parse().expect("address"),
        runner_dir: runner_dir.path().to_path_buf(),
        metrics_api_address: None,
        ..OperatorOptions::default()
    };
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let proxy = opkit_ansible_operator::setup(&mgr, watches, options).await.expect("set up the operator");
    let stop = CancellationToken::new();
    tokio::spawn(mgr.run_until(stop.clone()));
    (proxy, stop.drop_guard(), runner_dir)
}

/// A client of the run's kubeconfig after `change` to its user's credentials.
async fn client_with(kubeconfig: &str, change: impl Fn(&mut kube::config::AuthInfo)) -> Client {
    let mut kubeconfig: Kubeconfig = serde_saphyr::from_str(kubeconfig).expect("the run's kubeconfig");
    for user in &mut kubeconfig.auth_infos {
        if let Some(auth) = user.auth_info.as_mut() {
            change(auth);
        }
    }
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.expect("config");
    Client::try_from(config).expect("client")
}

/// The HTTP status of a failed call, or 200.
fn code<T>(result: Result<T, kube::Error>) -> u16 {
    match result {
        Ok(_) => 200,
        Err(kube::Error::Api(status)) => status.code,
        Err(e) => panic!("not an API answer: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_serves_only_requests_with_the_runs_token() {
    let env = TestEnv::start().await.expect("testenv");
    let (proxy, _stop, _runner_dir) = start_proxy(&env).await;
    // The owner exists (unlabelled, so not reconciled): what the run creates is owned by
    // it, and the garbage collector would delete a dependent of an owner that does not.
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Memcached"),
        "memcacheds",
    );
    let memcacheds: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &resource);
    let memcached: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "owner", "namespace": "default"}, "spec": {"size": 1},
    }))
    .expect("memcached");
    let memcached = memcacheds.create(&PostParams::default(), &memcached).await.expect("create the owner");
    let owner = NamespacedOwner {
        api_version: "cache.example.com/v1alpha1".into(),
        kind: "Memcached".into(),
        name: "owner".into(),
        uid: memcached.uid().expect("uid"),
        namespace: "default".into(),
    };
    let kubeconfig = kubeconfig_for(&owner, proxy.address);
    assert!(kubeconfig.contains(proxy_token()), "the run's kubeconfig carries the token");
    let configmap =
        |name: &str| -> ConfigMap { serde_json::from_value(json!({"metadata": {"name": name}})).expect("a ConfigMap") };

    // Without the token: no password, a wrong one, no credentials at all.
    let no_password = client_with(&kubeconfig, |a| a.password = None).await;
    let wrong = client_with(&kubeconfig, |a| a.password = Some("not-the-token".to_string().into())).await;
    let anonymous = client_with(&kubeconfig, |a| {
        a.username = None;
        a.password = None;
    })
    .await;
    for (what, client) in [("no password", no_password), ("a wrong password", wrong), ("no credentials", anonymous)] {
        let configmaps: Api<ConfigMap> = Api::namespaced(client, "default");
        assert_eq!(code(configmaps.list(&ListParams::default()).await), 401, "a list with {what}");
        assert_eq!(code(configmaps.create(&PostParams::default(), &configmap("refused")).await), 401, "{what}");
    }
    let direct: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    assert!(direct.get_opt("refused").await.expect("get").is_none(), "nothing refused reached the cluster");

    // With it: served, acting for the run.
    let configmaps: Api<ConfigMap> = Api::namespaced(client_with(&kubeconfig, |_| {}).await, "default");
    assert_eq!(code(configmaps.list(&ListParams::default()).await), 200);
    configmaps.create(&PostParams::default(), &configmap("allowed")).await.expect("create with the token");
    assert!(direct.get_opt("allowed").await.expect("get").is_some());
}
