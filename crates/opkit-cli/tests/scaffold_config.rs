//! The scaffold's Makefile and config/ as operator-sdk (kubebuilder go/v4) has them: the
//! metrics Service with its authn/authz RBAC, config/prometheus, config/network-policy,
//! `make build-installer` (dist/install.yaml applied to an in-process cluster), `make
//! undeploy uninstall`, undeploy deleting the CRs while the controller runs, no ✓ before an
//! error, and scaffolded Rust that is rustfmt-clean.
//! config/ is rendered by opkit's kustomize and by `kubectl kustomize`, which must agree.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use futures::TryStreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Service};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use opkit_testenv::TestEnv;
use serde_json::Value;

use crate::support::scaffold as support;

use support::*;

const IMAGE: &str = "registry.example.com/fleet:v0.1.0";

/// `opkit init` of project `fleet` in `dir`, with the kinds `kinds` (group ship, v1).
fn project(dir: &Path, kinds: &[&str]) {
    ok(dir, &["init", "--domain", "example.com", "--repo", "github.com/example/fleet", "--project-name", "fleet"]);
    for kind in kinds {
        ok(dir, &["create", "api", "--group", "ship", "--version", "v1", "--kind", kind]);
    }
}

/// Writes the CRD `make manifests` would generate for `kind` (group ship, v1) into
/// config/crd/bases, as a stand-in: generating it builds the project (minutes).
fn write_crd_base(dir: &Path, kind: &str) {
    let plural = format!("{}s", kind.to_lowercase());
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {plural}.ship.example.com\n\
         spec:\n  group: ship.example.com\n  names:\n    kind: {kind}\n    listKind: {kind}List\n    plural: {plural}\n    \
         singular: {singular}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    \
         schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n",
        singular = kind.to_lowercase()
    );
    let bases = dir.join("config/crd/bases");
    std::fs::create_dir_all(&bases).expect("config/crd/bases");
    std::fs::write(bases.join(format!("ship.example.com_{plural}.yaml")), crd).expect("write the CRD");
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

fn succeeded(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed:\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `kubectl kustomize <dir>/<rel>`: kustomize's own rendering.
fn kubectl_kustomize(dir: &Path, rel: &str) -> String {
    succeeded(&run(Command::new("kubectl").arg("kustomize").arg(dir.join(rel))), &format!("kubectl kustomize {rel}"))
}

fn docs(yaml: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("YAML stream");
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// `kind namespace/name` of each object.
fn ids(objs: &[Value]) -> BTreeSet<String> {
    let s = |o: &Value, p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned();
    objs.iter()
        .map(|o| format!("{} {}/{}", s(o, "/kind"), s(o, "/metadata/namespace"), s(o, "/metadata/name")))
        .collect()
}

fn find<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objs.iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {:?}", ids(objs)))
}

/// opkit's rendering of config/default (with IMAGE) through `opkit build-installer`.
fn build_installer(dir: &Path) -> Vec<Value> {
    ok(dir, &["build-installer", "--image", IMAGE]);
    docs(&read(dir, "dist/install.yaml"))
}

/// Uncomments `- ../<name>` in config/default/kustomization.yaml.
fn enable_in_default(dir: &Path, name: &str) {
    let path = dir.join("config/default/kustomization.yaml");
    let text = std::fs::read_to_string(&path).expect("config/default/kustomization.yaml");
    let commented = format!("#- ../{name}\n");
    assert!(text.contains(&commented), "{commented:?} not in {text}");
    std::fs::write(&path, text.replace(&commented, &format!("- ../{name}\n"))).expect("write the kustomization");
}

#[test]
fn config_has_the_metrics_service_prometheus_and_network_policies() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    project(dir, &["Frigate"]);
    write_crd_base(dir, "Frigate");

    let kustomized = docs(&kubectl_kustomize(dir, "config/default"));
    let installer = build_installer(dir);
    assert_eq!(ids(&installer), ids(&kustomized), "opkit's kustomize and kubectl's disagree");
    let ids = ids(&installer);
    for id in [
        "Service fleet-system/fleet-controller-manager-metrics-service",
        "ClusterRole /fleet-metrics-auth-role",
        "ClusterRoleBinding /fleet-metrics-auth-rolebinding",
        "ClusterRole /fleet-metrics-reader",
    ] {
        assert!(ids.contains(id), "{id} not in {ids:?}");
    }
    // The metrics patch: HTTPS with authn/authz on :8443, where the Service points.
    for objs in [&installer, &kustomized] {
        let deployment = find(objs, "Deployment", "fleet-controller-manager");
        let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
        assert_eq!(
            args,
            &serde_json::json!([
                "--metrics-secure",
                "--metrics-bind-address=:8443",
                "--leader-elect",
                "--health-probe-bind-address=:8081"
            ])
        );
    }
    let service = find(&installer, "Service", "fleet-controller-manager-metrics-service");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], 8443);
    let binding = find(&installer, "ClusterRoleBinding", "fleet-metrics-auth-rolebinding");
    assert_eq!(binding["subjects"][0]["name"], "fleet-controller-manager");
    assert_eq!(binding["subjects"][0]["namespace"], "fleet-system");
    let reader = find(&installer, "ClusterRole", "fleet-metrics-reader");
    assert_eq!(reader["rules"][0], serde_json::json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}));
    let image =
        &find(&installer, "Deployment", "fleet-controller-manager")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(image["image"], IMAGE);

    // config/prometheus and config/network-policy render on their own, and once enabled
    // in config/default both renderers still agree.
    let monitor = docs(&kubectl_kustomize(dir, "config/prometheus"));
    assert_eq!(monitor[0]["kind"], "ServiceMonitor");
    assert_eq!(monitor[0]["spec"]["endpoints"][0]["port"], "https");
    let policies = docs(&kubectl_kustomize(dir, "config/network-policy"));
    assert_eq!(policies.len(), 1, "no webhooks yet: {policies:?}");
    assert_eq!(policies[0]["metadata"]["name"], "allow-metrics-traffic");
    assert_eq!(policies[0]["spec"]["ingress"][0]["ports"][0]["port"], 8443);
    enable_in_default(dir, "prometheus");
    enable_in_default(dir, "network-policy");
    let kustomized = docs(&kubectl_kustomize(dir, "config/default"));
    let installer = build_installer(dir);
    assert_eq!(self::ids(&installer), self::ids(&kustomized));
    find(&installer, "ServiceMonitor", "fleet-controller-manager-metrics-monitor");
    find(&installer, "NetworkPolicy", "fleet-allow-metrics-traffic");

    // The first webhook admits webhook traffic too.
    ok(dir, &["create", "webhook", "--group", "ship", "--version", "v1", "--kind", "Frigate", "--defaulting"]);
    let policies = docs(&kubectl_kustomize(dir, "config/network-policy"));
    let names: Vec<&str> = policies.iter().filter_map(|p| p["metadata"]["name"].as_str()).collect();
    assert_eq!(names, ["allow-metrics-traffic", "allow-webhook-traffic"]);
    assert_eq!(policies[1]["spec"]["ingress"][0]["ports"][0]["port"], 9443, "the webhook server's port");
}

#[test]
fn makefile_has_operator_sdks_targets() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    project(dir, &[]);
    let dry_run = |args: &[&str]| {
        // Without cargo's CARGO (the Makefile's `CARGO ?= cargo` would take it).
        let out =
            run(Command::new("make").arg("-n").args(args).arg("OPKIT=opkit").env_remove("CARGO").current_dir(dir));
        succeeded(&out, &format!("make -n {args:?}"))
    };
    let installer = dry_run(&["build-installer", "IMG=example.com/fleet:v1"]);
    assert!(installer.contains("opkit build-installer --image example.com/fleet:v1 --file dist/install.yaml"));
    let lint = dry_run(&["lint"]);
    assert!(lint.contains("cargo fmt --check") && lint.contains("cargo clippy --all-targets -- -D warnings"), "{lint}");
    // Without git too: `init` does not make a repository.
    assert!(dry_run(&["lint-fix"]).contains("cargo clippy --fix --allow-dirty --allow-staged --allow-no-vcs"));
    assert!(dry_run(&["test-e2e"]).contains("cargo test --test e2e -- --ignored"));
    // `make undeploy uninstall`: undeploy removes the CRDs, so uninstall takes them as gone.
    let both = dry_run(&["undeploy", "uninstall"]);
    assert!(both.contains("opkit undeploy --ignore-not-found=true"), "{both}");
    assert!(both.contains("opkit uninstall --ignore-not-found=true"), "{both}");
    assert!(dry_run(&["uninstall"]).contains("opkit uninstall --ignore-not-found=false"));
    assert!(dry_run(&["undeploy", "ignore-not-found=true"]).contains("opkit undeploy --ignore-not-found=true"));
    // The e2e test is scaffolded, and ignored (with its reason) unless asked for.
    let e2e = read(dir, "tests/e2e.rs");
    assert!(e2e.contains("#[ignore = \"runs against the cluster") && e2e.contains("fleet-controller-manager"), "{e2e}");
    let readme = read(dir, "README.md");
    assert!(readme.contains("kubectl apply -k config/samples/"), "{readme}");
    assert!(!readme.contains("kubectl apply -f config/samples"), "{readme}");
}

#[test]
fn scaffolded_rust_is_rustfmt_clean_without_leftovers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let fmt_check = |when: &str| {
        let out = run(Command::new("cargo").args(["fmt", "--check"]).current_dir(dir));
        succeeded(&out, &format!("cargo fmt --check {when}"));
    };
    project(dir, &[]);
    fmt_check("after init");
    // Kinds added out of order, in two groups, with every kind of webhook.
    for (group, version, kind, controller) in [
        ("ship", "v1", "Frigate", true),
        ("ship", "v2", "Frigate", false),
        ("ship", "v1", "Sloop", true),
        ("ship", "v1", "Raft", true),
        ("ship", "v2", "Raft", false),
        ("crew", "v1", "Captain", true),
        ("ship", "v1", "Barge", true),
    ] {
        let controller = format!("--controller={controller}");
        ok(dir, &["create", "api", "--group", group, "--version", version, "--kind", kind, &controller]);
    }
    let webhook = |kind: &str, flags: &[&str]| {
        let mut args = vec!["create", "webhook", "--group", "ship", "--version", "v1", "--kind", kind];
        args.extend(flags);
        ok(dir, &args);
    };
    webhook("Frigate", &["--defaulting", "--programmatic-validation", "--conversion", "--spoke", "v2"]);
    webhook("Sloop", &["--defaulting"]);
    webhook("Raft", &["--conversion", "--spoke", "v2"]);
    webhook("Barge", &["--programmatic-validation"]);
    fmt_check("after create api and create webhook");
    assert!(dir.join("rustfmt.toml").is_file());
    for (path, text) in snapshot(dir) {
        if path.ends_with(".rs") {
            assert!(!text.contains("let _ = mgr"), "{path} has `let _ = mgr`:\n{text}");
            assert!(!text.contains("allow(unused"), "{path} allows unused code:\n{text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_yaml_applies_and_removal_reports_no_check_before_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    project(dir, &["Frigate"]);
    write_crd_base(dir, "Frigate");
    let env = TestEnv::start().await.expect("test env");
    let kubeconfig = env.kubeconfig_path().to_path_buf();

    // dist/install.yaml is what users `kubectl apply -f`.
    ok(dir, &["build-installer", "--image", IMAGE]);
    let apply = run(Command::new("kubectl")
        .args(["apply", "-f"])
        .arg(dir.join("dist/install.yaml"))
        .env("KUBECONFIG", &kubeconfig));
    let applied = succeeded(&apply, "kubectl apply -f dist/install.yaml");
    assert!(applied.contains("service/fleet-controller-manager-metrics-service created"), "{applied}");
    let client = env.client();
    let deployment =
        Api::<Deployment>::namespaced(client.clone(), "fleet-system").get("fleet-controller-manager").await.unwrap();
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    assert_eq!(container.image.as_deref(), Some(IMAGE));
    assert!(container.args.as_ref().unwrap().contains(&"--metrics-secure".to_owned()));
    Api::<Service>::namespaced(client.clone(), "fleet-system")
        .get("fleet-controller-manager-metrics-service")
        .await
        .unwrap();
    Api::<ClusterRole>::all(client.clone()).get("fleet-metrics-reader").await.unwrap();

    let opkit = |args: &[&str]| {
        let out =
            run(Command::new(env!("CARGO_BIN_EXE_opkit")).args(args).current_dir(dir).env("KUBECONFIG", &kubeconfig));
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    // Undeploy removes everything config/default applied, the CRD too.
    let (done, stderr) = opkit(&["undeploy"]);
    assert!(done, "{stderr}");
    assert!(stderr.contains("✓ deployment.apps/fleet-controller-manager deleted"), "{stderr}");
    // So uninstall alone finds the CRD gone: an error, and no ✓ before it.
    let (done, stderr) = opkit(&["uninstall"]);
    assert!(!done, "{stderr}");
    assert!(stderr.contains("not found: customresourcedefinition/frigates.ship.example.com"), "{stderr}");
    assert!(!stderr.contains('✓'), "a ✓ before the error:\n{stderr}");
    let (done, stderr) = opkit(&["uninstall", "--ignore-not-found"]);
    assert!(done, "{stderr}");

    // An apply failing half-way prints no ✓ either, but says what it changed first.
    write_crd_base(dir, "Frigate");
    std::fs::write(
        dir.join("config/crd/bases/ship.example.com_zz-broken.yaml"),
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: zbroken.ship.example.com\n\
         spec:\n  group: ship.example.com\n  names:\n    kind: Broken\n  scope: Namespaced\n  versions: []\n",
    )
    .unwrap();
    let crd_kustomization = dir.join("config/crd/kustomization.yaml");
    let text = std::fs::read_to_string(&crd_kustomization).unwrap();
    let text = text.replace(
        "- bases/ship.example.com_frigates.yaml",
        "- bases/ship.example.com_frigates.yaml\n- bases/ship.example.com_zz-broken.yaml",
    );
    std::fs::write(&crd_kustomization, text).unwrap();
    let (done, stderr) = opkit(&["install"]);
    assert!(!done, "{stderr}");
    assert!(!stderr.contains('✓'), "a ✓ before the error:\n{stderr}");
    assert!(
        stderr.contains("warning: before the error: customresourcedefinition.apiextensions.k8s.io/frigates.ship.example.com serverside-applied"),
        "{stderr}"
    );
    assert!(stderr.contains("zbroken.ship.example.com"), "{stderr}");
}

/// A stand-in for the deployed controller: while its Deployment exists (the manager runs),
/// it removes the finalizer `ship.example.com/finalizer` of every Frigate being deleted.
async fn frigate_finalizer_controller(client: kube::Client, frigates: ApiResource) {
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &frigates);
    let deployments = Api::<Deployment>::namespaced(client.clone(), "fleet-system");
    let mut events = std::pin::pin!(watcher::watcher(all, watcher::Config::default()).default_backoff());
    while let Ok(Some(event)) = events.try_next().await {
        let (watcher::Event::Apply(frigate) | watcher::Event::InitApply(frigate)) = event else { continue };
        let finalizers = frigate.metadata.finalizers.clone().unwrap_or_default();
        if frigate.metadata.deletion_timestamp.is_none()
            || !finalizers.iter().any(|f| f == "ship.example.com/finalizer")
        {
            continue;
        }
        let running = deployments.get_opt("fleet-controller-manager").await.ok().flatten();
        if running.is_none_or(|d| d.metadata.deletion_timestamp.is_some()) {
            continue; // the manager is gone: nobody removes the finalizer
        }
        let kept: Vec<&String> = finalizers.iter().filter(|f| *f != "ship.example.com/finalizer").collect();
        let ns = frigate.metadata.namespace.clone().unwrap_or_default();
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &frigates);
        let patch = serde_json::json!({"metadata": {"finalizers": kept}});
        let name = frigate.metadata.name.clone().unwrap_or_default();
        let _ = api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeploy_deletes_the_custom_resources_while_the_controller_runs_and_names_what_holds_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    project(&dir, &["Frigate"]);
    write_crd_base(&dir, "Frigate");
    let env = TestEnv::start().await.expect("test env");
    let kubeconfig = env.kubeconfig_path().to_path_buf();
    let opkit = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_opkit"));
        cmd.args(args).current_dir(&dir).env("KUBECONFIG", &kubeconfig);
        async move {
            let out = tokio::task::spawn_blocking(move || run(&mut cmd)).await.expect("opkit");
            (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
        }
    };
    let (done, stderr) = opkit(&["deploy", "--image", IMAGE, "--no-wait"]).await;
    assert!(done, "{stderr}");
    let client = env.client();
    let frigates =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("ship.example.com", "v1", "Frigate"), "frigates");
    let controller = tokio::spawn(frigate_finalizer_controller(client.clone(), frigates.clone()));
    let create = |name: &str, finalizer: &str| {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &frigates);
        let frigate: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "ship.example.com/v1", "kind": "Frigate",
            "metadata": {"name": name, "finalizers": [finalizer]}, "spec": {}
        }))
        .expect("frigate");
        async move { api.create(&PostParams::default(), &frigate).await.expect("create the frigate") }
    };
    create("sample", "ship.example.com/finalizer").await;
    // A finalizer nobody removes: undeploy times out, names it, and keeps the controller.
    create("stuck", "example.com/kept").await;

    let (done, stderr) = opkit(&["undeploy", "--timeout", "3s"]).await;
    assert!(!done, "{stderr}");
    assert!(stderr.contains("timed out after 3s"), "{stderr}");
    assert!(
        stderr.contains("still held: frigate.ship.example.com/stuck in default (finalizers: example.com/kept)"),
        "{stderr}"
    );
    assert!(!stderr.contains('✓'), "a ✓ before the error:\n{stderr}");
    let deployments = Api::<Deployment>::namespaced(client.clone(), "fleet-system");
    assert!(deployments.get_opt("fleet-controller-manager").await.unwrap().is_some(), "the controller went first");
    let defaults: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &frigates);
    assert!(defaults.get_opt("sample").await.unwrap().is_none(), "the controller did not finalize the sample");

    // Once the stuck one is released, undeploy removes the rest, the CRD included.
    let release = serde_json::json!({"metadata": {"finalizers": null}});
    defaults.patch("stuck", &PatchParams::default(), &Patch::Merge(&release)).await.expect("release");
    create("sample", "ship.example.com/finalizer").await;
    let (done, stderr) = opkit(&["undeploy", "--timeout", "30s"]).await;
    assert!(done, "{stderr}");
    assert!(stderr.contains("✓ frigate.ship.example.com/sample deleted"), "{stderr}");
    assert!(
        stderr.contains("✓ customresourcedefinition.apiextensions.k8s.io/frigates.ship.example.com deleted"),
        "{stderr}"
    );
    assert!(deployments.get_opt("fleet-controller-manager").await.unwrap().is_none());
    controller.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_that_times_out_names_the_pods_last_warning_event() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    project(&dir, &["Frigate"]);
    write_crd_base(&dir, "Frigate");
    // The manager's container crashes at once on every start (a simulated pod's failure).
    let manager = dir.join("config/manager/manager.yaml");
    let text = std::fs::read_to_string(&manager).unwrap();
    let text = text.replace(
        "        kubectl.kubernetes.io/default-container: manager\n",
        "        kubectl.kubernetes.io/default-container: manager\n        opkit.dev/crash-loop: \"true\"\n",
    );
    std::fs::write(&manager, text).unwrap();
    let env = TestEnv::start().await.expect("test env");
    let kubeconfig = env.kubeconfig_path().to_path_buf();
    let opkit = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_opkit"));
        cmd.args(args).current_dir(&dir).env("KUBECONFIG", &kubeconfig);
        async move {
            let out = tokio::task::spawn_blocking(move || run(&mut cmd)).await.expect("opkit");
            (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
        }
    };
    let (done, stderr) = opkit(&["deploy", "--image", IMAGE, "--no-wait"]).await;
    assert!(done, "{stderr}");
    // Once the kubelet has warned about the pod, a deploy that waits times out naming it.
    let events: Api<Event> = Api::namespaced(env.client(), "fleet-system");
    let warned = events.clone();
    let stream = watcher::watcher(warned, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let backoff = async {
        while let Some(event) = stream.try_next().await.expect("watch events") {
            if let watcher::Event::Apply(e) | watcher::Event::InitApply(e) = event
                && e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some("BackOff")
            {
                return;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(120), backoff).await.expect("a BackOff warning");
    let (done, stderr) = opkit(&["deploy", "--image", IMAGE, "--timeout", "2s"]).await;
    assert!(!done, "{stderr}");
    assert!(
        stderr.contains("timed out after 2s waiting for deployment fleet-system/fleet-controller-manager"),
        "{stderr}"
    );
    assert!(stderr.contains("the pods' last Warning event: pod fleet-controller-manager-"), "{stderr}");
    assert!(stderr.contains(": BackOff: "), "{stderr}");
}

#[test]
fn repository_readme_workflow_uses_the_working_commands() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = read(&root, "README.md");
    assert!(readme.contains("cargo install --locked --path crates/opkit-cli"), "cargo install without --locked");
    assert!(readme.contains("kubectl apply -k config/samples/"));
    assert!(!readme.contains("kubectl apply -f config/samples"), "config/samples holds a kustomization: -k");
    assert!(readme.contains("make build-installer"));
    // Every code block is closed: no heading is inside one.
    let mut in_block = false;
    for line in readme.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
        } else if line.starts_with("## ") {
            assert!(!in_block, "{line:?} is inside an unclosed code block");
        }
    }
    assert!(!in_block, "the README ends inside a code block");
    // `opkit cluster start` in the checkout writes .opkit/, which git must not offer to track.
    let gitignore = read(&root, ".gitignore");
    assert!(gitignore.lines().any(|l| l.trim() == ".opkit/" || l.trim() == "/.opkit/"), "{gitignore}");
}
