//! `opkit kudo ...` as a user runs it, against an in-process control plane with the KUDO
//! engine running: install with `--wait`, plan status (KUDO's tree and `-o json`), update,
//! trigger, history, uninstall; the same binary linked as `kubectl-kudo` answering
//! `kubectl kudo ...`; the offline `package` commands; and `init` on a local cluster
//! started as a user starts it, whose manager pod runs this binary and runs plans.

use crate::support::workflow as support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use opkit::{Manager, ManagerOptions};
use opkit_testenv::{TestEnv, wait_for};
use serde_json::Value;
use support::OPKIT;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(60);

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../opkit-kudo/tests/fixtures").join(name)
}

/// Stops the engine when the test ends, also when it fails.
struct Engine(CancellationToken);

impl Drop for Engine {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

async fn start(env: &TestEnv) -> Engine {
    opkit_kudo::install_crds(&env.client()).await.expect("CRDs");
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    opkit_kudo::setup(&mgr).await.expect("engine");
    let stop = CancellationToken::new();
    tokio::spawn(mgr.run_until(stop.clone()));
    Engine(stop)
}

/// Runs `program args` (blocking, off the runtime's threads) with KUBECONFIG set.
async fn run(program: PathBuf, kubeconfig: &Path, args: &[&str], path: Option<&Path>) -> std::process::Output {
    let kubeconfig = kubeconfig.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let path = path.map(|p| {
        let inherited = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![p.to_path_buf()];
        paths.extend(std::env::split_paths(&inherited));
        std::env::join_paths(paths).expect("PATH")
    });
    tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(&program);
        cmd.args(&args).env("KUBECONFIG", &kubeconfig).env_remove("OPKIT_LOG");
        if let Some(p) = path {
            cmd.env("PATH", p);
        }
        cmd.output().expect("run")
    })
    .await
    .expect("join")
}

fn ok(out: &std::process::Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{what} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_update_trigger_status_history_and_uninstall() {
    let env = TestEnv::start().await.expect("testenv");
    let _engine = start(&env).await;
    let kc = env.kubeconfig_path();
    let opkit = PathBuf::from(OPKIT);
    let pkg = fixture("web-0.1.0");
    let pkg = pkg.to_str().expect("utf-8");

    let out =
        run(opkit.clone(), kc, &["kudo", "install", pkg, "--instance", "web", "-p", "REPLICAS=1", "--wait"], None)
            .await;
    let text = ok(&out, "install");
    assert!(text.contains("operatorversion.kudo.dev/web-1.0.0-0.1.0 installed"), "{text}");
    assert!(text.contains("instance.kudo.dev/web created"), "{text}");

    let out = run(opkit.clone(), kc, &["kudo", "plan", "status", "--instance", "web"], None).await;
    let tree = ok(&out, "plan status");
    assert!(tree.starts_with("Plan(s) for \"web\" in namespace \"default\":\n.\n└── web (Operator-Version: \"web-1.0.0-0.1.0\" Active-Plan: <none>)\n"), "{tree}");
    assert!(tree.contains("Plan deploy (serial strategy) [COMPLETE], last updated "), "{tree}");
    assert!(tree.contains("Plan update (serial strategy) [NOT ACTIVE]"), "{tree}");

    let out =
        run(opkit.clone(), kc, &["kudo", "update", "--instance", "web", "-p", "REPLICAS=2", "--wait"], None).await;
    ok(&out, "update");
    let sets: Api<StatefulSet> = Api::namespaced(env.client(), "default");
    wait_for(
        &sets,
        "web-web",
        "to have 2 replicas",
        |s: Option<&StatefulSet>| s.and_then(|s| s.spec.as_ref()).and_then(|s| s.replicas) == Some(2),
        WAIT,
    )
    .await
    .expect("update applied");

    let out =
        run(opkit.clone(), kc, &["kudo", "plan", "trigger", "--instance", "web", "--name", "deploy", "--wait"], None)
            .await;
    ok(&out, "plan trigger");

    let out = run(opkit.clone(), kc, &["kudo", "plan", "history", "--instance", "web", "-o", "json"], None).await;
    let history: Value = serde_json::from_str(&ok(&out, "plan history")).expect("json");
    let runs: Vec<(&str, &str)> = history["history"]
        .as_array()
        .expect("list")
        .iter()
        .map(|h| (h["plan"].as_str().unwrap_or_default(), h["reason"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(
        runs,
        [("deploy", "instance created"), ("update", "parameter(s) REPLICAS changed"), ("deploy", "triggered manually")]
    );

    let out = run(opkit.clone(), kc, &["kudo", "plan", "status", "--instance", "web", "-o", "json"], None).await;
    let status: Value = serde_json::from_str(&ok(&out, "plan status -o json")).expect("json");
    assert_eq!(status["planStatus"]["update"]["status"], "COMPLETE");

    let out = run(opkit.clone(), kc, &["kudo", "update", "--instance", "web", "-p", "NOPE=1"], None).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("parameter \"NOPE\" is not defined by web-1.0.0-0.1.0"));

    let out = run(opkit.clone(), kc, &["kudo", "uninstall", "--instance", "web", "--wait"], None).await;
    ok(&out, "uninstall");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_kudo_runs_the_same_commands_through_the_plugin_link() {
    let env = TestEnv::start().await.expect("testenv");
    let _engine = start(&env).await;
    let bin = tempfile::tempdir().expect("tempdir");
    #[cfg(unix)]
    std::os::unix::fs::symlink(OPKIT, bin.path().join("kubectl-kudo")).expect("link");
    let kc = env.kubeconfig_path();
    let pkg = fixture("piped");
    let out = run(
        PathBuf::from("kubectl"),
        kc,
        &["kudo", "install", pkg.to_str().expect("utf-8"), "--instance", "p", "--namespace", "default", "--wait"],
        Some(bin.path()),
    )
    .await;
    let text = ok(&out, "kubectl kudo install");
    assert!(text.contains("instance.kudo.dev/p created"), "{text}");
    let out = run(PathBuf::from("kubectl"), kc, &["kudo", "plan", "status", "--instance", "p"], Some(bin.path())).await;
    assert!(ok(&out, "kubectl kudo plan status").contains("Plan deploy (serial strategy) [COMPLETE]"));
}

#[tokio::test]
async fn package_commands_work_offline() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let opkit = PathBuf::from(OPKIT);
    let pkg = fixture("web-0.2.0");
    let pkg = pkg.to_str().expect("utf-8");
    let dest = tmp.path().to_str().expect("utf-8");
    let kc = tmp.path().join("no-kubeconfig");
    let out = run(opkit.clone(), &kc, &["kudo", "package", "create", pkg, "--destination", dest], None).await;
    assert!(ok(&out, "package create").contains("web-1.0.0_0.2.0.tgz"));
    let archive = tmp.path().join("web-1.0.0_0.2.0.tgz");
    let out = run(opkit.clone(), &kc, &["kudo", "package", "verify", archive.to_str().expect("utf-8")], None).await;
    assert!(ok(&out, "verify the archive").contains("package is valid"));
    let out = run(opkit.clone(), &kc, &["kudo", "package", "create", pkg, "--destination", dest], None).await;
    assert!(!out.status.success(), "an existing archive is not replaced without --overwrite");
    let out =
        run(opkit.clone(), &kc, &["kudo", "package", "list", "params", archive.to_str().expect("utf-8")], None).await;
    let table = ok(&out, "list params");
    assert!(table.starts_with("Name    \tDefault\tRequired\tImmutable\nMESSAGE \thello  \ttrue    \tfalse"), "{table}");

    // A broken package: each finding names its file, and the command fails.
    let broken = tmp.path().join("broken");
    std::fs::create_dir_all(broken.join("templates")).expect("dir");
    std::fs::write(broken.join("operator.yaml"), "name: b\noperatorVersion: 0.1.0\ntasks:\n- name: t\n  kind: Apply\n  spec:\n    resources: [cm.yaml]\nplans:\n  deploy:\n    phases:\n    - name: p\n      steps:\n      - name: s\n        tasks: [t, missing]\n").expect("write");
    std::fs::write(broken.join("templates/cm.yaml"), "x: {{ .Params.UNDECLARED }}\n").expect("write");
    let out = run(opkit.clone(), &kc, &["kudo", "package", "verify", broken.to_str().expect("utf-8")], None).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("operator.yaml: task \"missing\" in plan \"deploy\" is not defined"), "{stderr}");
    assert!(
        stderr.contains("templates/cm.yaml: parameter \"UNDECLARED\" in template cm.yaml is not defined"),
        "{stderr}"
    );
    let out =
        run(opkit, &kc, &["kudo", "package", "verify", broken.to_str().expect("utf-8"), "-o", "json"], None).await;
    let stdout: Value = serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).expect("json findings");
    assert_eq!(stdout["valid"], false);
    let err: Value = serde_json::from_str(String::from_utf8_lossy(&out.stderr).trim()).expect("json error");
    assert_eq!(err["error"]["kind"], "usage");
}

/// `opkit kudo init --wait` on a cluster from `opkit cluster start`, as `kubectl kudo init`
/// on a real one: the opkit binary is loaded as the manager's image, the StatefulSet's
/// pod `kudo-controller-manager-0` runs it for real (a process container ID), and that pod
/// alone runs an Instance's plan to COMPLETE; a second `init` changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_runs_the_manager_in_a_real_pod_that_runs_plans() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("cluster");
    let kc = tmp.path().join("kubeconfig");
    let kc_flag = kc.to_str().expect("utf-8");
    let (_cluster, _) = crate::cluster_lifecycle::start_detached(tmp.path(), Some(&data), &["--kubeconfig", kc_flag]);
    let opkit = PathBuf::from(OPKIT);

    let out = run(opkit.clone(), &kc, &["kudo", "init", "--wait", "--wait-timeout", "2m"], None).await;
    let text = ok(&out, "kudo init --wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("loaded opkit.dev/kudo-manager:v"), "{stderr}");
    assert!(stderr.contains("pod kudo-system/kudo-controller-manager-0 is ready"), "{stderr}");
    assert!(text.contains("KUDO is installed"), "{text}");

    let client = crate::cluster_lifecycle::client_of(&kc).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kudo-system");
    let pod = pods.get("kudo-controller-manager-0").await.expect("the manager's pod");
    assert!(crate::cluster_lifecycle::runs_for_real(&pod), "the manager's pod is simulated: {:?}", pod.status);

    // No engine runs but the pod's: the plan completes all the same.
    let pkg = fixture("web-0.1.0");
    let args = ["kudo", "install", pkg.to_str().expect("utf-8"), "--instance", "web", "-p", "REPLICAS=1", "--wait"];
    let text = ok(&run(opkit.clone(), &kc, &args, None).await, "kudo install --wait");
    assert!(text.contains("instance.kudo.dev/web created"), "{text}");
    let sts: Api<StatefulSet> = Api::namespaced(client, "kudo-system");
    let before = sts.get("kudo-controller-manager").await.expect("the StatefulSet").metadata.generation;
    ok(&run(opkit, &kc, &["kudo", "init"], None).await, "a second kudo init");
    let after = sts.get("kudo-controller-manager").await.expect("the StatefulSet").metadata.generation;
    assert_eq!(before, after, "a second init changed the manager");
}
