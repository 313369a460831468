//! The Memcached example through OLM end to end, as its users would run it: `make bundle
//! VERSION=0.0.1`, then 0.0.2 replacing it, both passing `bundle validate` and
//! `scorecard`; on an in-process control plane with `opkit olm install`, `opkit run
//! bundle` of 0.0.1 (CSV Succeeded, the manager Deployment available), `opkit run
//! bundle-upgrade` to 0.0.2 (Succeeded, 0.0.1 gone), `opkit cleanup` (nothing left); and a
//! Manual-approval Subscription from a catalog of both bundles, whose InstallPlans wait
//! until `kubectl` approves them.

use crate::olm_support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use olm_support::{OlmRunner, assert_validates_and_scores, json_of, make_memcached_bundles, opkit};
use opkit_olm::types::{CatalogSource, ClusterServiceVersion, InstallPlan, OperatorGroup, Subscription};
use opkit_testenv::{TestEnv, wait_for};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);
const DEPLOYMENT: &str = "memcached-operator-controller-manager";
const CRD: &str = "memcacheds.cache.example.com";
const V1: &str = "memcached-operator.v0.0.1";
const V2: &str = "memcached-operator.v0.0.2";

/// `opkit ARGS` in `dir`, which must succeed; its `-o json` document.
fn opkit_json(dir: &Path, args: &[&str]) -> Value {
    let out = opkit(dir, args);
    assert!(out.status.success(), "opkit {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    json_of(&out)
}

/// `kubectl ARGS` against `kubeconfig`, with `stdin` fed to it.
fn kubectl(kubeconfig: &str, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), stdin.as_bytes()).expect("write stdin");
    let out = child.wait_with_output().expect("kubectl");
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn phase(csv: Option<&ClusterServiceVersion>) -> Option<String> {
    csv.and_then(|c| c.status.as_ref()).and_then(|s| s.phase.clone())
}

fn succeeded(csv: Option<&ClusterServiceVersion>) -> bool {
    phase(csv).as_deref() == Some("Succeeded")
}

fn available(deployment: Option<&Deployment>) -> bool {
    deployment.and_then(|d| d.status.as_ref()).and_then(|s| s.available_replicas).unwrap_or(0) >= 1
}

/// Names of the cluster-scoped RBAC objects OLM made for CSVs of namespace `ns`.
async fn cluster_rbac_of(client: &Client, ns: &str) -> Vec<String> {
    let params = ListParams::default().labels(&format!("olm.owner.namespace={ns}"));
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let mut names: Vec<String> = roles
        .list(&params)
        .await
        .expect("cluster roles")
        .iter()
        .map(|r| format!("clusterrole {}", r.name_any()))
        .collect();
    names.extend(
        bindings.list(&params).await.expect("bindings").iter().map(|b| format!("clusterrolebinding {}", b.name_any())),
    );
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_bundles_run_upgrade_and_clean_up_through_olm() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let bundles = make_memcached_bundles(dir);
    assert_validates_and_scores(&bundles.v1);
    assert_validates_and_scores(&bundles.v2);
    let (v1_dir, v2_dir) = (bundles.v1.display().to_string(), bundles.v2.display().to_string());

    let env = TestEnv::start().await.expect("control plane");
    let client = env.client();
    let kubeconfig = env.kubeconfig_path().display().to_string();
    let _olm = OlmRunner::install(dir, &kubeconfig);

    // run bundle 0.0.1: CSV Succeeded and the manager Deployment available.
    let start = Instant::now();
    let run = opkit_json(dir, &["run", "bundle", &v1_dir, "--kubeconfig", &kubeconfig, "-o", "json"]);
    let seconds = start.elapsed().as_secs_f64();
    eprintln!("opkit run bundle → CSV Succeeded: {seconds:.2}s (the command's own measure: {}s)", run["seconds"]);
    assert_eq!(run["csv"], V1, "{run}");
    assert_eq!(run["namespace"], "default", "{run}");
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), "default");
    let installed = csvs.get(V1).await.expect("the 0.0.1 CSV");
    assert!(succeeded(Some(&installed)), "{:?}", installed.status);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    wait_for(&deployments, DEPLOYMENT, "to be available", available, WAIT).await.expect("the manager is available");
    let rbac = cluster_rbac_of(&client, "default").await;
    assert!(
        rbac.iter().any(|r| r == "clusterrole memcached-operator-memcached-editor-role"),
        "the bundle's other objects are installed: {rbac:?}"
    );

    // run bundle-upgrade to 0.0.2: 0.0.2 Succeeded, 0.0.1 gone.
    let upgraded = opkit_json(dir, &["run", "bundle-upgrade", &v2_dir, "--kubeconfig", &kubeconfig, "-o", "json"]);
    assert_eq!(upgraded["csv"], V2, "{upgraded}");
    let current = csvs.get(V2).await.expect("the 0.0.2 CSV");
    assert!(succeeded(Some(&current)), "{:?}", current.status);
    assert_eq!(current.spec.replaces, V1);
    assert!(csvs.get_opt(V1).await.expect("get").is_none(), "0.0.1 is removed once 0.0.2 succeeded");
    let owned_by_v2 = |d: Option<&Deployment>| {
        available(d) && d.is_some_and(|d| d.labels().get("olm.owner").map(String::as_str) == Some(V2))
    };
    wait_for(&deployments, DEPLOYMENT, "to be available and 0.0.2's", owned_by_v2, WAIT).await.expect("upgraded");

    // cleanup removes everything.
    let cleaned = opkit_json(dir, &["cleanup", "memcached-operator", "--kubeconfig", &kubeconfig, "-o", "json"]);
    let deleted: Vec<&str> = cleaned["deleted"].as_array().expect("deleted").iter().filter_map(Value::as_str).collect();
    assert!(deleted.contains(&"subscription \"memcached-operator-v0-0-1-sub\" deleted"), "{cleaned}");
    assert!(deleted.contains(&"catalogsource \"memcached-operator-catalog\" deleted"), "{cleaned}");
    let subs: Api<Subscription> = Api::namespaced(client.clone(), "default");
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), "default");
    let sources: Api<CatalogSource> = Api::namespaced(client.clone(), "default");
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), "default");
    let all = ListParams::default();
    assert!(subs.list(&all).await.expect("subscriptions").items.is_empty());
    assert!(csvs.list(&all).await.expect("csvs").items.is_empty());
    assert!(plans.list(&all).await.expect("install plans").items.is_empty());
    assert!(sources.list(&all).await.expect("catalog sources").items.is_empty());
    assert!(groups.list(&all).await.expect("operator groups").items.is_empty(), "operator-sdk-og is removed");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    assert!(config_maps.get_opt("memcached-operator-catalog").await.expect("get").is_none());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(crds.get_opt(CRD).await.expect("get").is_none());
    assert_eq!(cluster_rbac_of(&client, "default").await, Vec::<String>::new());
    // What the CSV owned in its namespace goes with it.
    let gone = |what: &str| format!("{what} to be removed with its CSV");
    wait_for(&deployments, DEPLOYMENT, &gone("the manager"), |d: Option<&Deployment>| d.is_none(), WAIT)
        .await
        .expect("the Deployment is gone");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    wait_for(&accounts, DEPLOYMENT, &gone("the account"), |a: Option<&ServiceAccount>| a.is_none(), WAIT)
        .await
        .expect("the ServiceAccount is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_subscription_waits_for_each_install_plan_to_be_approved() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let bundles = make_memcached_bundles(dir);
    let (v1_dir, v2_dir) = (bundles.v1.display().to_string(), bundles.v2.display().to_string());
    let rendered = opkit(dir, &["catalog", "render", &v1_dir, &v2_dir]);
    assert!(rendered.status.success(), "{}", String::from_utf8_lossy(&rendered.stderr));
    std::fs::write(dir.join("index.json"), &rendered.stdout).expect("write catalog");

    let env = TestEnv::start().await.expect("control plane");
    let client = env.client();
    let kubeconfig = env.kubeconfig_path().display().to_string();
    let _olm = OlmRunner::install(dir, &kubeconfig);

    // In `operators` (global-operators), from a catalog in a ConfigMap, as a user would.
    let ns = "operators";
    let index = dir.join("index.json").display().to_string();
    kubectl(&kubeconfig, &["create", "configmap", "memcached-catalog", "-n", ns, "--from-file", &index], "");
    let manifests = format!(
        "apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {{name: memcached-catalog, namespace: {ns}}}
spec: {{sourceType: configmap, configMap: memcached-catalog, displayName: Memcached}}
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata: {{name: memcached, namespace: {ns}}}
spec:
  name: memcached-operator
  channel: alpha
  source: memcached-catalog
  sourceNamespace: {ns}
  startingCSV: {V1}
  installPlanApproval: Manual
"
    );
    kubectl(&kubeconfig, &["apply", "-f", "-"], &manifests);

    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let awaiting = |csv: &'static str| {
        move |s: Option<&Subscription>| {
            s.and_then(|s| s.status.as_ref()).is_some_and(|st| {
                st.current_csv.as_deref() == Some(csv)
                    && st.state.as_deref() == Some("UpgradePending")
                    && st.install_plan_ref.is_some()
                    && st
                        .conditions
                        .iter()
                        .any(|c| c.type_ == "InstallPlanPending" && c.reason.as_deref() == Some("RequiresApproval"))
            })
        }
    };
    let plan_of = |sub: &Subscription| -> String {
        let status = sub.status.as_ref().expect("status");
        status.install_plan_ref.as_ref().and_then(|r| r["name"].as_str()).expect("installPlanRef").to_string()
    };

    for (csv, replaced) in [(V1, None), (V2, Some(V1))] {
        let waiting = wait_for(&subs, "memcached", &format!("to wait for approval of {csv}"), awaiting(csv), WAIT)
            .await
            .expect("an InstallPlan waiting for approval")
            .expect("subscription");
        let plan_name = plan_of(&waiting);
        let plan = plans.get(&plan_name).await.expect("the InstallPlan");
        assert_eq!(plan.spec.approval, "Manual");
        assert!(!plan.spec.approved);
        assert_eq!(plan.spec.cluster_service_version_names, [csv]);
        assert_eq!(plan.status.as_ref().map(|s| s.phase.as_str()), Some("RequiresApproval"));
        assert!(csvs.get_opt(csv).await.expect("get").is_none(), "{csv} is not installed before approval");
        if let Some(previous) = replaced {
            assert!(succeeded(csvs.get_opt(previous).await.expect("get").as_ref()), "{previous} still runs");
        }

        kubectl(
            &kubeconfig,
            &["patch", "installplan", &plan_name, "-n", ns, "--type", "merge", "-p", r#"{"spec":{"approved":true}}"#],
            "",
        );
        wait_for(&csvs, csv, "to succeed once approved", succeeded, WAIT).await.expect("installed after approval");
        wait_for(&deployments, DEPLOYMENT, "to be available", available, WAIT).await.expect("the manager runs");
        if let Some(previous) = replaced {
            wait_for(&csvs, previous, "to be replaced", |c: Option<&ClusterServiceVersion>| c.is_none(), WAIT)
                .await
                .expect("the replaced CSV is removed");
        }
    }
    let at_latest = |s: Option<&Subscription>| {
        s.and_then(|s| s.status.as_ref()).is_some_and(|st| st.state.as_deref() == Some("AtLatestKnown"))
    };
    wait_for(&subs, "memcached", "to be at the latest version", at_latest, WAIT).await.expect("at latest");
}
