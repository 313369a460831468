//! The operator-sdk workflow end to end, as the seeds walk it, with the `opkit` binary:
//! `opkit init` and `create api` in a temporary directory, the tutorial's edits (the
//! Memcached types and controller from examples/memcached-operator), `make manifests`,
//! the project's own tests (`make test`), then against a running `opkit cluster start`:
//! `make install`, `make run` reconciling the sample, `make uninstall`, and
//! `opkit deploy` / `opkit undeploy`. The cargo target directory is the workspace's, so
//! the opkit crates are not built twice.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::wait::await_condition;

use crate::support::workflow as support;

use support::*;

const CRD: &str = "memcacheds.cache.example.com";

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("copy {} -> {}: {e}", from.display(), to.display()));
}

/// A cluster-scoped kind that uses every CRD marker opkit maps to Rust attributes.
const FRIGATE_V1: &str = r#"//! Frigate: a fixture using every CRD marker (validation, default, enum, pattern, CEL,
//! printer columns, scale subresource, scope, short names, categories).

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The desired state of a Frigate.
#[derive(CustomResource, KubeSchema, Clone, Debug, Deserialize, Serialize)]
#[kube(
    group = "ship.example.com",
    version = "v1",
    kind = "Frigate",
    plural = "frigates",
    status = "FrigateStatus",
    shortname = "fg",
    category = "fleet",
    printcolumn(name = "Crew", type_ = "integer", json_path = ".spec.crew"),
    scale(spec_replicas_path = ".spec.crew", status_replicas_path = ".status.crew")
)]
#[x_kube(validation = "self.crew >= self.minCrew")]
#[serde(rename_all = "camelCase")]
pub struct FrigateSpec {
    /// Crew size.
    #[schemars(range(min = 1, max = 300))]
    pub crew: i32,
    /// The smallest crew allowed.
    #[serde(default = "default_min_crew")]
    pub min_crew: i32,
    /// The captain's name.
    #[schemars(pattern(r"^[A-Z][a-z]+$"))]
    pub captain: String,
    /// The class.
    pub class: FrigateClass,
}

fn default_min_crew() -> i32 {
    1
}

/// Frigate classes.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub enum FrigateClass {
    /// Light.
    Light,
    /// Heavy.
    Heavy,
}

/// The observed state of a Frigate.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct FrigateStatus {
    /// Crew aboard.
    pub crew: i32,
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_create_api_manifests_test_install_run_deploy_uninstall() {
    let tmp = tempfile::tempdir().expect("tmp");
    let project = tmp.path().join("memcached-operator");
    std::fs::create_dir(&project).expect("mkdir");
    let example = workspace().join("examples/memcached-operator");

    // 1-2. Scaffold.
    opkit(&project, None, &["init", "--domain", "example.com", "--repo", "github.com/example/memcached-operator"]);
    opkit(&project, None, &["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached"]);

    // 3. The tutorial's edits: the Memcached types, controller, sample and the example's
    // tests (next to the scaffolded test, which runs the controller as its ServiceAccount).
    for rel in [
        "src/api/cache_v1alpha1/memcached.rs",
        "src/controller/memcached.rs",
        "config/samples/cache_v1alpha1_memcached.yaml",
    ] {
        copy(&example.join(rel), &project.join(rel));
    }
    copy(&example.join("tests/memcached_controller.rs"), &project.join("tests/memcached_example.rs"));

    // A second group with two versions of a cluster-scoped kind using every CRD marker;
    // v1beta1 is served but not stored, so `opkit generate` merges the versions.
    opkit(
        &project,
        None,
        &[
            "create",
            "api",
            "--group",
            "ship",
            "--version",
            "v1",
            "--kind",
            "Frigate",
            "--namespaced=false",
            "--controller=false",
        ],
    );
    opkit(
        &project,
        None,
        &[
            "create",
            "api",
            "--group",
            "ship",
            "--version",
            "v1beta1",
            "--kind",
            "Frigate",
            "--namespaced=false",
            "--controller=false",
        ],
    );
    std::fs::write(project.join("src/api/ship_v1/frigate.rs"), FRIGATE_V1).expect("write");
    let beta = FRIGATE_V1.replace("version = \"v1\",", "version = \"v1beta1\",\n    storage = false,");
    std::fs::write(project.join("src/api/ship_v1beta1/frigate.rs"), beta).expect("write");

    // 4. make manifests: the CRD and the role, the same as the example's.
    make(&project, None, &["manifests"]);
    let frigates =
        std::fs::read_to_string(project.join("config/crd/bases/ship.example.com_frigates.yaml")).expect("frigate CRD");
    let crd: serde_json::Value = serde_saphyr::from_str(frigates.trim_start_matches("---\n")).expect("CRD yaml");
    assert_eq!(crd["spec"]["scope"], "Cluster");
    assert_eq!(crd["spec"]["names"]["shortNames"][0], "fg");
    assert_eq!(crd["spec"]["names"]["categories"][0], "fleet");
    let versions = crd["spec"]["versions"].as_array().expect("versions");
    let stored: Vec<(&str, bool)> =
        versions.iter().map(|v| (v["name"].as_str().unwrap_or(""), v["storage"] == true)).collect();
    assert_eq!(stored, [("v1", true), ("v1beta1", false)]);
    let v1 = &versions[0];
    assert_eq!(v1["additionalPrinterColumns"][0]["jsonPath"], ".spec.crew");
    assert_eq!(v1["subresources"]["scale"]["specReplicasPath"], ".spec.crew");
    let spec = &v1["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["properties"]["crew"]["minimum"].as_f64(), Some(1.0));
    assert_eq!(spec["properties"]["crew"]["maximum"].as_f64(), Some(300.0));
    assert_eq!(spec["properties"]["minCrew"]["default"], 1);
    assert_eq!(spec["properties"]["captain"]["pattern"], "^[A-Z][a-z]+$");
    assert_eq!(spec["properties"]["class"]["enum"], serde_json::json!(["Light", "Heavy"]));
    assert_eq!(spec["x-kubernetes-validations"][0]["rule"], "self.crew >= self.minCrew");
    assert_eq!(spec["required"], serde_json::json!(["captain", "class", "crew"]));
    let crd_file = "config/crd/bases/cache.example.com_memcacheds.yaml";
    for rel in [crd_file, "config/rbac/role.yaml"] {
        let got = std::fs::read_to_string(project.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let want = std::fs::read_to_string(example.join(rel)).expect("example file");
        assert_eq!(got, want, "{rel} differs from the example's");
    }
    // Deterministic: a second run changes nothing.
    opkit(&project, None, &["generate", "--check"]);

    // 5. The project's own tests, with one more kind whose module name is a Rust keyword
    // (`type`): it must build too (without a controller, whose RBAC would change the
    // role the Memcached test checks; tests/scaffold.rs checks the controller's module).
    opkit(
        &project,
        None,
        &["create", "api", "--group", "ship", "--version", "v1", "--kind", "Type", "--controller=false"],
    );
    assert!(project.join("src/api/ship_v1/type_.rs").exists());
    let test = make(&project, None, &["test"]);
    assert!(
        test.contains("ignored, runs against the cluster of the current kubeconfig: make test-e2e"),
        "make test says the e2e test was not run, and why:\n{test}"
    );

    // 5b. A missing RBAC marker fails `make test`, naming the permission: the scaffolded
    // test runs the controller as the ServiceAccount with the regenerated role.
    let controller = project.join("src/controller/memcached.rs");
    let source = std::fs::read_to_string(&controller).expect("controller");
    let full = "resources=deployments,verbs=get;list;watch;create;update;patch;delete";
    assert!(source.contains(full), "the deployments marker changed");
    std::fs::write(&controller, source.replace(full, "resources=deployments,verbs=get;list;watch;update;patch;delete"))
        .expect("write");
    let mut test = command("make", &project, None);
    test.args(["test", &format!("OPKIT={OPKIT}")]);
    let out = test.output().expect("make test");
    let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "make test passed without the deployments create permission");
    assert!(
        output.contains(r#"cannot create resource \"deployments\" in API group \"apps\""#)
            || output.contains(r#"cannot create resource "deployments" in API group "apps""#),
        "the failure does not name the missing permission:\n{output}"
    );
    std::fs::write(&controller, source).expect("restore");

    // 6. A local cluster.
    let cluster_dir = tmp.path().join("cluster");
    let (mut cluster, kubeconfig, client) = start_cluster(tmp.path(), &cluster_dir, &["--in-memory"]).await;
    let kc = Some(kubeconfig.as_path());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());

    // 7. make install establishes the CRD.
    make(&project, kc, &["install"]);
    let crd = crds.get(CRD).await.expect("CRD installed");
    let established = crd.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(established.iter().any(|c| c.type_ == "Established" && c.status == "True"));

    // The server enforces the generated schema: CEL and the range.
    let mut bad = command("kubectl", &project, kc);
    bad.args(["apply", "-f", "-"]).stdin(Stdio::piped()).stderr(Stdio::piped());
    let mut child = bad.spawn().expect("kubectl");
    std::io::Write::write_all(
        &mut child.stdin.take().expect("stdin"),
        b"apiVersion: ship.example.com/v1\nkind: Frigate\nmetadata:\n  name: small\nspec:\n  crew: 2\n  minCrew: 3\n  captain: Nemo\n  class: Light\n",
    )
    .expect("write");
    let out = child.wait_with_output().expect("kubectl");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("self.crew >= self.minCrew"), "{stderr}");

    // 8. make run reconciles the sample from config/samples.
    let mut run_cmd = command("make", &project, kc);
    run_cmd.args(["run", &format!("OPKIT={OPKIT}"), "RUN_ARGS=--metrics-bind-address 0 --health-probe-bind-address 0"]);
    let mut operator = Background::spawn(run_cmd);
    let mut apply = command("kubectl", &project, kc);
    apply.args(["apply", "-f", "config/samples/cache_v1alpha1_memcached.yaml"]);
    run_ok(apply, "kubectl apply the sample");
    let gvk = GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Memcached");
    let memcacheds: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ApiResource::from_gvk(&gvk));
    let three_nodes = |o: Option<&DynamicObject>| {
        o.and_then(|o| o.data.pointer("/status/nodes")).and_then(|n| n.as_array()).is_some_and(|n| n.len() == 3)
    };
    timeout("the sample to list 3 nodes", await_condition(memcacheds, "memcached-sample", three_nodes))
        .await
        .expect("watch");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    assert_eq!(deployments.get("memcached-sample").await.expect("deployment").spec.and_then(|s| s.replicas), Some(3));
    // ...as the manager's ServiceAccount, whose RBAC make run applied from config/default.
    let manager = "system:serviceaccount:memcached-operator-system:memcached-operator-controller-manager";
    let run_kubeconfig =
        kube::config::Kubeconfig::read_from(project.join("target/opkit/run-kubeconfig")).expect("run kubeconfig");
    let impersonated: Vec<_> =
        run_kubeconfig.auth_infos.iter().filter_map(|a| a.auth_info.as_ref()?.impersonate.clone()).collect();
    assert_eq!(impersonated, [manager]);
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "memcached-operator-system");
    assert!(accounts.get_opt("memcached-operator-controller-manager").await.expect("get").is_some());
    // SIGTERM to the process group (make, opkit run, the operator), like Ctrl-C in a shell.
    operator.stop();

    // 9. make uninstall removes the CRD.
    make(&project, kc, &["uninstall"]);
    assert!(crds.get_opt(CRD).await.expect("get").is_none(), "CRD still there after make uninstall");

    // 10. deploy / undeploy: config/default with the image set.
    let out = opkit(&project, kc, &["deploy", "--image", "example.com/memcached-operator:v0.0.1", "-o", "json"]);
    let deployed: serde_json::Value = serde_json::from_str(&out).expect("deploy json");
    assert_eq!(deployed["image"], "example.com/memcached-operator:v0.0.1");
    // The image is not loaded (`make cluster-load`): deploy says the manager does not run.
    assert_eq!(deployed["imageLoaded"], false);
    let system: Api<Deployment> = Api::namespaced(client.clone(), "memcached-operator-system");
    let manager = system.get("memcached-operator-controller-manager").await.expect("manager deployment");
    let pod = manager.spec.and_then(|s| s.template.spec).expect("pod spec");
    assert_eq!(pod.containers[0].image.as_deref(), Some("example.com/memcached-operator:v0.0.1"));
    assert_eq!(pod.service_account_name.as_deref(), Some("memcached-operator-controller-manager"));
    assert!(crds.get_opt(CRD).await.expect("get").is_some(), "deploy installs the CRDs");
    opkit(&project, kc, &["undeploy"]);
    assert!(system.get_opt("memcached-operator-controller-manager").await.expect("get").is_none());
    assert!(crds.get_opt(CRD).await.expect("get").is_none());
    assert!(cluster.stop().success(), "the cluster stops cleanly");
}

/// The pids of processes whose environment has `HOSTNAME=<prefix>...` (a real pod's
/// processes: the kubelet sets HOSTNAME to the pod's name).
fn pod_processes(hostname_prefix: &str) -> Vec<(u32, String)> {
    let mut found = vec![];
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else { continue };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        for var in environ.split(|b| *b == 0) {
            if let Some(host) = var.strip_prefix(b"HOSTNAME=")
                && host.starts_with(hostname_prefix.as_bytes())
            {
                found.push((pid, String::from_utf8_lossy(host).into_owned()));
            }
        }
    }
    found
}

/// Waits until `check` holds, polling every 100 ms, for at most `limit`.
async fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `make cluster-load deploy` on the local cluster runs the Memcached operator for real:
/// its logs, the sample reconciled, leader election across two replicas with a takeover
/// when the leader's process is killed, and no process left after `make undeploy`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn make_cluster_load_deploy_runs_the_memcached_operator_for_real() {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Pod;
    let tmp = tempfile::tempdir().expect("tmp");
    let example = workspace().join("examples/memcached-operator");
    let cluster_dir = tmp.path().join("cluster");
    let (mut cluster, kubeconfig, client) = start_cluster(tmp.path(), &cluster_dir, &[]).await;
    let kc = Some(kubeconfig.as_path());

    // The local docker-build + docker-push + deploy (a dev build: the test shares the
    // workspace's debug artifacts).
    let image = "example.com/memcached-operator:v0.0.1";
    let mut cmd = command("make", &example, kc);
    cmd.env("OPKIT_DATA_DIR", &cluster_dir).args([
        "cluster-load",
        "deploy",
        &format!("IMG={image}"),
        "CARGO_PROFILE=dev",
        &format!("OPKIT={OPKIT}"),
    ]);
    run_ok(cmd, "make cluster-load deploy");
    let ns = "memcached-operator-system";
    let manager = "memcached-operator-controller-manager";

    // The manager runs and reconciles: its logs say so, and the sample gets its status.
    let mut apply = command("kubectl", &example, kc);
    apply.args(["apply", "-k", "config/samples/"]);
    run_ok(apply, "kubectl apply -k config/samples/");
    let gvk = GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Memcached");
    let memcacheds: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ApiResource::from_gvk(&gvk));
    let three_nodes = |o: Option<&DynamicObject>| {
        o.and_then(|o| o.data.pointer("/status/nodes")).and_then(|n| n.as_array()).is_some_and(|n| n.len() == 3)
    };
    timeout("the sample to list 3 nodes", await_condition(memcacheds, "memcached-sample", three_nodes))
        .await
        .expect("watch");
    let mut logs = command("kubectl", &example, kc);
    logs.args(["logs", "-n", ns, &format!("deploy/{manager}")]);
    let logs = run_ok(logs, "kubectl logs deploy/manager");
    assert!(logs.contains("memcached-sample"), "the manager's logs show no reconcile:\n{logs}");

    // Two replicas: one leader; killing its process hands the lease to the other.
    let mut scale = command("kubectl", &example, kc);
    scale.args(["scale", "-n", ns, &format!("deploy/{manager}"), "--replicas=2"]);
    run_ok(scale, "kubectl scale");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let ready = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let names = loop {
        let list = pods.list(&Default::default()).await.expect("pods");
        let live: Vec<String> =
            list.items.iter().filter(|p| ready(p)).filter_map(|p| p.metadata.name.clone()).collect();
        if live.len() == 2 && pod_processes(manager).len() >= 2 {
            break live;
        }
        assert!(tokio::time::Instant::now() < deadline, "two manager replicas never became ready: {live:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let holder = || async {
        let all = leases.list(&Default::default()).await.expect("leases");
        all.items.iter().find_map(|l| l.spec.as_ref()?.holder_identity.clone()).unwrap_or_default()
    };
    let leader = holder().await;
    let leader_pod =
        names.iter().find(|n| leader.starts_with(&format!("{n}_"))).cloned().expect("a pod holds the lease");
    let (pid, _) = pod_processes(&leader_pod).into_iter().next().expect("the leader's process");
    let status = Command::new("kill").args(["-KILL", &pid.to_string()]).status().expect("kill");
    assert!(status.success());
    // The lease (15 s) expires and another process takes it: usually the other replica,
    // sometimes the killed pod's restarted container, which is a new identity too.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while holder().await == leader {
        assert!(tokio::time::Instant::now() < deadline, "nobody took the lease over from {leader}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // make undeploy leaves no process behind.
    let mut undeploy = command("make", &example, kc);
    undeploy.args(["undeploy", &format!("OPKIT={OPKIT}")]);
    run_ok(undeploy, "make undeploy");
    wait_until("the manager's processes to end", Duration::from_secs(60), || pod_processes(manager).is_empty()).await;
    assert!(cluster.stop().success(), "the cluster stops cleanly");
}
