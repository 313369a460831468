//! `opkit init --plugins ansible`, `opkit create api` (its plugin read from PROJECT) and `make run`
//! (`opkit ansible-operator`) as a user runs them: the scaffold has operator-sdk's
//! layout, config/default renders, and with the role of operator-sdk's Ansible tutorial
//! in `roles/memcached`, `make install run` against an in-process control plane deploys
//! the sample's Deployment. Needs ansible (crates/opkit-ansible-operator/install-ansible.sh,
//! which .ci/run runs).

use crate::support::workflow as support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use opkit_testenv::{TestEnv, wait_for, wait_for_with};
use serde_json::Value;
use support::{Background, OPKIT, command, make, opkit};

const WAIT: Duration = Duration::from_secs(120);

fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn tutorial_role() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../opkit-ansible-operator/tests/fixtures/memcached-operator/roles/memcached")
}

/// `opkit create api` of the tutorial's Memcached kind, as operator-sdk's Ansible tutorial
/// writes it: the plugin comes from PROJECT's layout.
const CREATE_API: &[&str] = &["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached"];

/// `opkit init --plugins ansible` and `opkit create api` of the tutorial's Memcached kind
/// (with `flags`, e.g. `--generate-role`) in `tmp/memcached-operator`.
fn scaffold(tmp: &Path, flags: &[&str]) -> PathBuf {
    let project = tmp.join("memcached-operator");
    std::fs::create_dir(&project).expect("project dir");
    opkit(&project, None, &["init", "--plugins", "ansible", "--domain", "example.com"]);
    let mut create_api = CREATE_API.to_vec();
    create_api.extend_from_slice(flags);
    opkit(&project, None, &create_api);
    project
}

/// `make install` (waiting for the CRD) and `make run` in the background against `env`;
/// the operator stops when the returned guard is dropped.
async fn install_and_run(env: &TestEnv, project: &Path) -> Background {
    make(project, Some(env.kubeconfig_path()), &["install"]);
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let established = |c: Option<&CustomResourceDefinition>| {
        c.and_then(|c| c.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
    };
    wait_for(&crds, "memcacheds.cache.example.com", "to be established", established, WAIT)
        .await
        .expect("make install installs the CRD");
    let mut run = command("make", project, Some(env.kubeconfig_path()));
    run.arg("run")
        .arg(format!("OPKIT={OPKIT}"))
        .arg("ARGS=--proxy-port 0 --metrics-bind-address 0 --health-probe-bind-address 0 --ansible-verbosity 0")
        .stdout(Stdio::null());
    Background::spawn(run)
}

#[test]
fn init_and_create_api_write_operator_sdks_ansible_layout() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = scaffold(tmp.path(), &["--generate-role", "--generate-playbook"]);
    for file in [
        "watches.yaml",
        "requirements.yml",
        "Dockerfile",
        "kuttl-test.yaml",
        "roles/memcached/tasks/main.yml",
        "roles/memcached/defaults/main.yml",
        "roles/memcached/handlers/main.yml",
        "roles/memcached/meta/main.yml",
        "roles/memcached/vars/main.yml",
        "roles/memcached/README.md",
        "playbooks/memcached.yml",
        "molecule/default/molecule.yml",
        "molecule/default/converge.yml",
        "molecule/default/verify.yml",
        "molecule/default/tasks/memcached_test.yml",
        "molecule/kind/molecule.yml",
        "tests/kuttl/memcached/00-install.yaml",
        "tests/kuttl/memcached/00-assert.yaml",
        "config/crd/bases/cache.example.com_memcacheds.yaml",
        "config/samples/cache.example.com_v1alpha1_memcached.yaml",
    ] {
        assert!(project.join(file).is_file(), "{file} is scaffolded");
    }
    assert!(
        read(&project, "watches.yaml").contains(
            "- version: v1alpha1\n  group: cache.example.com\n  kind: Memcached\n  playbook: playbooks/memcached.yml\n"
        ),
        "the watch runs the playbook"
    );
    assert!(read(&project, "playbooks/memcached.yml").contains("name: \"memcached\""), "the playbook runs the role");
    assert!(read(&project, "PROJECT").contains("- ansible.sdk.operatorframework.io/v1\n"));
    assert!(read(&project, "Makefile").contains("$(OPKIT) ansible-operator --watches-file watches.yaml $(ARGS)\n"));
    assert!(
        read(&project, "molecule/default/tasks/memcached_test.yml")
            .contains("cache.example.com_v1alpha1_memcached.yaml")
    );

    // config/default renders: the CRD (unknown fields kept), RBAC for the kind, the manager.
    let objects = opkit_cli::kustomize::build(&project.join("config/default")).expect("config/default renders");
    let find = |kind: &str, name: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
            .clone()
    };
    let crd = find("CustomResourceDefinition", "memcacheds.cache.example.com");
    assert_eq!(
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
    let role = find("ClusterRole", "memcached-operator-manager-role");
    assert!(role["rules"].as_array().is_some_and(|rules| {
        rules
            .iter()
            .any(|r| r["resources"].as_array().is_some_and(|rs| rs.iter().any(|x| x == "memcacheds/finalizers")))
    }));
    let manager = find("Deployment", "memcached-operator-controller-manager");
    assert_eq!(manager["spec"]["template"]["spec"]["containers"][0]["args"][0], "ansible-operator");

    // A second create api of the same kind is refused, naming it; operator-sdk's plugin name
    // is taken too.
    let mut again = command(OPKIT, &project, None);
    again.args(CREATE_API).args(["--plugins", "ansible.sdk.operatorframework.io/v1"]);
    let out = again.output().expect("opkit runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Kind=Memcached already exists in watches.yaml"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn make_run_reconciles_the_scaffolded_memcached_role() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = scaffold(tmp.path(), &["--generate-role"]);
    // The tutorial's tasks and defaults in the scaffolded role.
    for file in ["tasks/main.yml", "defaults/main.yml"] {
        std::fs::copy(tutorial_role().join(file), project.join("roles/memcached").join(file))
            .expect("copy the tutorial role");
    }

    let env = TestEnv::start().await.expect("testenv");
    let _operator = install_and_run(&env, &project).await;

    let sample = read(&project, "config/samples/cache.example.com_v1alpha1_memcached.yaml")
        .replace("spec:\n  # TODO(user): Add fields here\n", "spec:\n  size: 2\n");
    env.apply_yaml(&sample).await.expect("apply the sample");
    let deployments: Api<Deployment> = Api::namespaced(env.client(), "default");
    wait_for(
        &deployments,
        "memcached-sample-memcached",
        "to have 2 replicas",
        |d: Option<&Deployment>| d.and_then(|d| d.spec.as_ref()).and_then(|s| s.replicas) == Some(2),
        WAIT,
    )
    .await
    .expect("make run reconciles the sample with the role");
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Memcached"),
        "memcacheds",
    );
    let memcacheds: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &resource);
    let successful = |o: Option<&DynamicObject>| {
        o.and_then(|o| o.data.pointer("/status/conditions"))
            .and_then(Value::as_array)
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Successful" && c["status"] == "True"))
    };
    wait_for_with(&memcacheds, &resource, "memcached-sample", "to be Successful", successful, WAIT)
        .await
        .expect("the sample's run succeeds");
    // The run's artifacts are in this project's own runner directory, not in the one
    // /tmp/ansible-operator/runner every project on the machine would share.
    let runner_dir = opkit_ansible_operator::OperatorOptions::for_project(&project).expect("runner dir").runner_dir;
    assert_ne!(runner_dir, opkit_ansible_operator::OperatorOptions::default().runner_dir);
    let latest = runner_dir.join("cache.example.com/v1alpha1/Memcached/default/memcached-sample/artifacts/latest");
    assert!(latest.join("job_events").is_dir(), "no artifacts at {}", latest.display());
    let _ = std::fs::remove_dir_all(runner_dir.parent().expect("the project's directory"));
}

/// The kuttl test the scaffold writes next to molecule (`tests/kuttl/memcached`: the
/// sample, then operator-sdk's Running/Successful/Failure conditions) passes with
/// `make test-kuttl` (`opkit test`) against the scaffolded operator run by `make run`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn make_test_kuttl_passes_against_the_scaffolded_operator() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = scaffold(tmp.path(), &["--generate-role"]);
    let env = TestEnv::start().await.expect("testenv");
    let _operator = install_and_run(&env, &project).await;
    let out = make(&project, Some(env.kubeconfig_path()), &["test-kuttl"]);
    assert!(out.contains("--- PASS: kuttl/harness/memcached"), "the scaffolded case ran and passed:\n{out}");
}

/// `--ansible-log-events` takes Tasks, Everything or Nothing (in any case) and names them
/// when given something else, before reaching a cluster.
#[test]
fn ansible_log_events_names_its_values() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut cmd = command(OPKIT, tmp.path(), None);
    cmd.args(["ansible-operator", "--ansible-log-events", "some"]);
    let out = cmd.output().expect("opkit runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--ansible-log-events: \"some\" is not one of Tasks, Everything, Nothing"), "{stderr}");
}

/// `make bundle` in an Ansible project, as in the Rust layout: a bundle that `opkit bundle
/// validate` passes (make fails otherwise), owning the kind and running the image.
#[test]
fn make_bundle_makes_a_valid_bundle_of_the_kind() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = scaffold(tmp.path(), &["--generate-role"]);
    make(&project, None, &["bundle", "IMG=example.com/memcached-operator:v0.0.1", "VERSION=0.0.1"]);
    let csv = read(&project, "bundle/manifests/memcached-operator.clusterserviceversion.yaml");
    let csv: Value = serde_saphyr::from_str(&csv).expect("the CSV");
    assert_eq!(csv["spec"]["customresourcedefinitions"]["owned"][0]["name"], "memcacheds.cache.example.com");
    let container = &csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "example.com/memcached-operator:v0.0.1");
}
