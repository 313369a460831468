//! `opkit init --plugins helm` and `opkit helm-operator` as a user runs them: the project
//! scaffolded from the Helm operator's fixture nginx chart renders with kustomize-like
//! rendering (CRD, RBAC derived from the chart, the manager running `helm-operator`), and
//! the operator started from the project's `watches.yaml` against an in-process control
//! plane deploys the scaffolded sample; then the issue's end-to-end list: the real `helm
//! list` shows the release, a spec change upgrades it to revision 2, a deleted Deployment
//! is restored, a bad value is ReleaseFailed with helm's message and deleting the
//! resource uninstalls the release.

use crate::support::workflow as support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use opkit_testenv::{TestEnv, wait_for, wait_for_with};
use serde_json::{Value, json};
use support::{Background, OPKIT, command, opkit};

const WAIT: Duration = Duration::from_secs(60);

fn fixture_chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../opkit-helm-operator/tests/charts/nginx")
}

fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {objects:#?}"))
}

/// `opkit init --plugins helm` of the fixture nginx chart in `dir/nginx-operator`.
fn init_nginx_project(dir: &Path) -> PathBuf {
    let project = dir.join("nginx-operator");
    std::fs::create_dir(&project).expect("project dir");
    let chart = fixture_chart().display().to_string();
    let args = ["init", "--plugins", "helm", "--helm-chart", &chart, "--domain", "example.com", "--group", "demo"];
    opkit(&project, None, &[&args[..], &["--kind", "Nginx"]].concat());
    project
}

/// Whether an Nginx has `Deployed=True` with reason InstallSuccessful.
fn deployed(o: Option<&DynamicObject>) -> bool {
    o.and_then(|o| o.data.pointer("/status/conditions")).and_then(Value::as_array).is_some_and(|cs| {
        cs.iter().any(|c| c["type"] == "Deployed" && c["status"] == "True" && c["reason"] == "InstallSuccessful")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaffolded_helm_project_renders_and_its_operator_deploys_the_sample() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = init_nginx_project(tmp.path());

    // The chart is copied, watches.yaml points at it, and `make run` runs the operator.
    assert_eq!(read(&project, "helm-charts/nginx/values.yaml"), read(&fixture_chart(), "values.yaml"));
    let watches = read(&project, "watches.yaml");
    assert!(
        watches.contains("- group: demo.example.com\n  version: v1alpha1\n  kind: Nginx\n  chart: helm-charts/nginx\n"),
        "{watches}"
    );
    assert!(read(&project, "Makefile").contains("\t$(OPKIT) helm-operator --watches-file watches.yaml $(ARGS)\n"));
    assert!(read(&project, "PROJECT").contains("- helm.sdk.operatorframework.io/v1\n"));

    // config/default renders: the CRD, RBAC for what the chart renders, the manager.
    let objects = opkit_cli::kustomize::build(&project.join("config/default")).expect("config/default renders");
    let crd = find(&objects, "CustomResourceDefinition", "nginxes.demo.example.com");
    assert_eq!(
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
    let role = find(&objects, "ClusterRole", "nginx-operator-manager-role");
    let rules = role["rules"].as_array().expect("rules");
    let grants = |group: &str, resource: &str| {
        rules.iter().any(|r| {
            r["apiGroups"].as_array().is_some_and(|g| g.iter().any(|g| g == group))
                && r["resources"].as_array().is_some_and(|rs| rs.iter().any(|x| x == resource))
        })
    };
    for (group, resource) in [
        ("apps", "deployments"),
        ("", "services"),
        ("", "configmaps"),
        ("", "secrets"),
        ("", "events"),
        ("demo.example.com", "nginxes/finalizers"),
        ("demo.example.com", "nginxes/status"),
    ] {
        assert!(grants(group, resource), "the role grants {group}/{resource}: {rules:#?}");
    }
    let manager = find(&objects, "Deployment", "nginx-operator-controller-manager");
    assert_eq!(manager["metadata"]["namespace"], "nginx-operator-system");
    assert_eq!(manager["spec"]["template"]["spec"]["containers"][0]["args"][0], "helm-operator");

    // `make install` (kubectl's built-in kustomize; no other tool), then the operator from
    // the project's watches.yaml.
    let env = TestEnv::start().await.expect("testenv");
    let mut install = command("make", &project, Some(env.kubeconfig_path()));
    install.arg("install").arg(format!("OPKIT={OPKIT}"));
    let out = install.output().expect("make runs");
    assert!(
        out.status.success(),
        "make install failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let established = |c: Option<&CustomResourceDefinition>| {
        c.and_then(|c| c.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
    };
    wait_for(&crds, "nginxes.demo.example.com", "to be established", established, WAIT)
        .await
        .expect("make install installs the CRD");
    let mut run = command(OPKIT, &project, None);
    run.args(["helm-operator", "--kubeconfig"])
        .arg(env.kubeconfig_path())
        .args(["--metrics-bind-address", "0", "--health-probe-bind-address", "0"])
        .stdout(Stdio::null());
    let _operator = Background::spawn(run);

    let sample = read(&project, "config/samples/demo.example.com_v1alpha1_nginx.yaml");
    env.apply_yaml(&sample).await.expect("apply the sample");
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("demo.example.com", "v1alpha1", "Nginx"), "nginxes");
    let nginxes: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &resource);
    wait_for_with(&nginxes, &resource, "nginx-sample", "to be deployed", deployed, WAIT)
        .await
        .expect("the operator installs the sample's release");
    let deployments: Api<Deployment> = Api::namespaced(env.client(), "default");
    let deployment =
        wait_for(&deployments, "nginx-sample-nginx", "to exist", |d: Option<&Deployment>| d.is_some(), WAIT)
            .await
            .expect("the release's Deployment")
            .expect("exists");
    assert_eq!(deployment.spec.and_then(|s| s.replicas), Some(1), "the sample's spec is the chart's values");

    // The issue's "Done when" on the scaffolded project: the real helm lists the release,
    let home = tempfile::tempdir().expect("helm home");
    let helm = |args: &[&str]| helm_json(&env, home.path(), args);
    let list = helm(&["list", "-n", "default"]);
    assert_eq!(list.pointer("/0/name"), Some(&json!("nginx-sample")), "{list}");
    assert_eq!(list.pointer("/0/revision"), Some(&json!("1")), "{list}");
    assert_eq!(list.pointer("/0/status"), Some(&json!("deployed")), "{list}");

    // a spec change upgrades it to revision 2,
    let patch = |spec: Value| {
        let nginxes = nginxes.clone();
        async move {
            nginxes
                .patch("nginx-sample", &PatchParams::default(), &Patch::Merge(json!({ "spec": spec })))
                .await
                .expect("patch the spec")
        }
    };
    patch(json!({ "replicaCount": 2 })).await;
    let revision_2 = |o: Option<&DynamicObject>| {
        o.and_then(|o| o.data.pointer("/status/deployedRelease/revision")) == Some(&json!(2))
    };
    wait_for_with(&nginxes, &resource, "nginx-sample", "at revision 2", revision_2, WAIT)
        .await
        .expect("the spec change upgrades the release");
    assert_eq!(helm(&["list", "-n", "default"]).pointer("/0/revision"), Some(&json!("2")));
    let replicas = deployments.get("nginx-sample-nginx").await.expect("the Deployment").spec.and_then(|s| s.replicas);
    assert_eq!(replicas, Some(2));

    // a deleted child Deployment is restored,
    let old_uid = deployments.get("nginx-sample-nginx").await.expect("the Deployment").uid();
    deployments.delete("nginx-sample-nginx", &DeleteParams::default()).await.expect("delete the Deployment");
    let restored = move |d: Option<&Deployment>| d.is_some_and(|d| d.uid() != old_uid);
    wait_for(&deployments, "nginx-sample-nginx", "to be restored", restored, WAIT)
        .await
        .expect("the deleted Deployment comes back");

    // a bad value is ReleaseFailed with helm's message,
    patch(json!({ "image": { "repository": "" } })).await;
    let failed = |o: Option<&DynamicObject>| {
        o.and_then(|o| o.data.pointer("/status/conditions")).and_then(Value::as_array).is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "ReleaseFailed"
                    && c["status"] == "True"
                    && c["reason"] == "UpgradeError"
                    && c["message"].as_str().is_some_and(|m| {
                        m.starts_with("execution error at (nginx/templates/deployment.yaml:")
                            && m.ends_with("): image.repository is required")
                    })
            })
        })
    };
    wait_for_with(&nginxes, &resource, "nginx-sample", "to fail with helm's message", failed, WAIT)
        .await
        .expect("a bad value fails the release");

    // and deleting the CR uninstalls the release.
    nginxes.delete("nginx-sample", &DeleteParams::default()).await.expect("delete the CR");
    wait_for_with(&nginxes, &resource, "nginx-sample", "to go", |o: Option<&DynamicObject>| o.is_none(), WAIT)
        .await
        .expect("the CR goes once its release is uninstalled");
    assert_eq!(helm(&["list", "-n", "default"]), json!([]));
    assert!(deployments.get_opt("nginx-sample-nginx").await.expect("get").is_none(), "the release's objects go");
}
/// Runs the real helm with `-o json` against the test's cluster, with its own home dirs.
/// `make cluster-load deploy` on a cluster from `opkit cluster start`, as the Go layout's
/// tutorial does it: the opkit binary is loaded with watches.yaml and helm-charts/ at
/// /opt/helm, the manager's pod runs it for real (a process container ID), and that pod
/// installs the sample's release; `make undeploy` takes it all away. No kubectl is used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn make_cluster_load_deploy_runs_the_helm_operator_in_a_real_pod() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = init_nginx_project(tmp.path());
    let kubeconfig = tmp.path().join("kubeconfig");
    let kc_flag = kubeconfig.to_str().expect("utf-8");
    let data = tmp.path().join("cluster");
    let (_cluster, _) = crate::cluster_lifecycle::start_detached(tmp.path(), Some(&data), &["--kubeconfig", kc_flag]);
    let make = |targets: &[&str]| {
        let mut make = command("make", &project, Some(&kubeconfig));
        make.args(targets).arg(format!("OPKIT={OPKIT}")).arg("IMG=example.com/nginx-operator:v0.0.1");
        // No kubectl on PATH: the Makefile must not need it.
        make.env("PATH", "/usr/bin/nokubectl:/bin").env("KUBECTL", "false");
        make.output().expect("make runs")
    };
    let out = make(&["install", "cluster-load", "deploy"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "make install cluster-load deploy:\n{}{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!stderr.contains("simulated"), "the manager's pod is simulated:\n{stderr}");

    let client = crate::cluster_lifecycle::client_of(&kubeconfig).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "nginx-operator-system");
    let manager = pods.list(&Default::default()).await.expect("pods").items;
    assert!(manager.iter().any(crate::cluster_lifecycle::runs_for_real), "the manager's pod is simulated");

    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("demo.example.com", "v1alpha1", "Nginx"), "nginxes");
    let sample: DynamicObject =
        serde_saphyr::from_str(&read(&project, "config/samples/demo.example.com_v1alpha1_nginx.yaml")).expect("sample");
    let nginxes: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    nginxes.create(&Default::default(), &sample).await.expect("create the sample");
    wait_for_with(&nginxes, &resource, "nginx-sample", "to be deployed", deployed, WAIT)
        .await
        .expect("the operator in the pod installs the sample's release");
    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    wait_for(&deployments, "nginx-sample-nginx", "to exist", |d: Option<&Deployment>| d.is_some(), WAIT)
        .await
        .expect("the release's Deployment");

    let out = make(&["undeploy"]);
    assert!(out.status.success(), "make undeploy:\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(!matches!(nginxes.get_opt("nginx-sample").await, Ok(Some(_))), "the sample is gone with its CRD");
}

/// The kuttl test the scaffold writes (`tests/kuttl/nginx`: the sample, then the
/// conditions of its installed release) passes with `make test-kuttl` (`opkit test`)
/// against the scaffolded operator run by `make run`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn make_test_kuttl_passes_against_the_scaffolded_operator() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = init_nginx_project(tmp.path());
    let env = TestEnv::start().await.expect("testenv");
    let make = |args: &[&str]| {
        let mut make = command("make", &project, Some(env.kubeconfig_path()));
        make.args(args).arg(format!("OPKIT={OPKIT}"));
        make
    };
    let out = make(&["install"]).output().expect("make install");
    assert!(out.status.success(), "make install:\n{}", String::from_utf8_lossy(&out.stderr));
    let mut run = make(&["run", "ARGS=--metrics-bind-address 0 --health-probe-bind-address 0"]);
    run.stdout(Stdio::null());
    let _operator = Background::spawn(run);
    let out = make(&["test-kuttl"]).output().expect("make test-kuttl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "make test-kuttl:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("--- PASS: kuttl/harness/nginx"), "the scaffolded case ran and passed:\n{stdout}");
}

/// `make bundle` in a Helm project, as in the Rust layout: the CSV base, then a bundle
/// that `opkit bundle validate` passes, owning the chart's kind and running the image.
#[test]
fn make_bundle_makes_a_valid_bundle_of_the_charts_kind() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = init_nginx_project(tmp.path());
    let mut make = command("make", &project, None);
    make.args(["bundle", "IMG=example.com/nginx-operator:v0.0.1", "VERSION=0.0.1"]).arg(format!("OPKIT={OPKIT}"));
    let out = make.output().expect("make bundle");
    assert!(
        out.status.success(),
        "make bundle:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = read(&project, "bundle/manifests/nginx-operator.clusterserviceversion.yaml");
    let csv: Value = serde_saphyr::from_str(&csv).expect("the CSV");
    assert_eq!(csv["metadata"]["name"], "nginx-operator.v0.0.1");
    assert_eq!(csv["spec"]["customresourcedefinitions"]["owned"][0]["name"], "nginxes.demo.example.com");
    let deployment = &csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(deployment["image"], "example.com/nginx-operator:v0.0.1");
    assert_eq!(deployment["args"][0], "helm-operator");
    assert!(project.join("bundle/tests/scorecard/config.yaml").is_file(), "the scorecard configuration");
}

fn helm_json(env: &TestEnv, home: &Path, args: &[&str]) -> Value {
    let out = std::process::Command::new(opkit_testenv::helm_binary().unwrap_or_else(|missing| panic!("{missing}")))
        .args(args)
        .args(["-o", "json", "--kubeconfig"])
        .arg(env.kubeconfig_path())
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .expect("helm runs");
    assert!(out.status.success(), "helm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("helm {args:?} prints JSON: {e}"))
}

#[test]
fn init_with_the_helm_plugin_needs_a_chart() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = tmp.path().join("web-operator");
    std::fs::create_dir(&project).expect("project dir");
    let out = command(OPKIT, &project, None)
        .args(["init", "--plugins", "helm", "--domain", "example.com"])
        .output()
        .expect("opkit runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--plugins helm needs --helm-chart DIR"), "{stderr}");
    assert_eq!(std::fs::read_dir(&project).expect("dir").count(), 0, "nothing is written");
}

#[test]
fn create_api_adds_a_second_chart_and_kind() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = tmp.path().join("charts-operator");
    std::fs::create_dir(&project).expect("project dir");
    let nginx = fixture_chart().display().to_string();
    opkit(
        &project,
        None,
        &[
            "init",
            "--plugins",
            "helm.sdk.operatorframework.io/v1",
            "--helm-chart",
            &nginx,
            "--domain",
            "example.com",
            "--group",
            "demo",
        ],
    );

    // A second chart of its own: a ConfigMap.
    let greeter = tmp.path().join("greeter");
    std::fs::create_dir_all(greeter.join("templates")).expect("chart dir");
    std::fs::write(greeter.join("Chart.yaml"), "apiVersion: v2\nname: greeter\nversion: 0.1.0\n").expect("Chart.yaml");
    std::fs::write(greeter.join("values.yaml"), "greeting: hello\n").expect("values.yaml");
    std::fs::write(
        greeter.join("values.schema.json"),
        r#"{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "properties": {"greeting": {"type": "string", "minLength": 1, "default": "hello"}}}"#,
    )
    .expect("values.schema.json");
    std::fs::write(
        greeter.join("templates/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  greeting: {{ .Values.greeting }}\n",
    )
    .expect("template");
    let greeter = greeter.display().to_string();
    // The plugin comes from PROJECT's layout, as in operator-sdk.
    let args = ["create", "api", "--helm-chart", &greeter, "--group", "demo", "--version", "v1", "--kind", "Greeter"];
    opkit(&project, None, &args);

    let watches = opkit_helm_operator::parse_watches(&read(&project, "watches.yaml"), &project, &|_| None)
        .expect("watches.yaml stays valid");
    let kinds: Vec<(&str, &str, &str)> =
        watches.iter().map(|w| (w.group.as_str(), w.version.as_str(), w.kind.as_str())).collect();
    assert_eq!(kinds, [("demo.example.com", "v1alpha1", "Nginx"), ("demo.example.com", "v1", "Greeter")]);
    assert_eq!(watches[1].chart, project.join("helm-charts/greeter"));
    assert!(project.join("helm-charts/greeter/templates/cm.yaml").is_file());
    assert!(read(&project, "PROJECT").contains("  kind: Greeter\n  version: v1\n"));
    assert!(read(&project, "config/samples/demo.example.com_v1_greeter.yaml").contains("spec:\n"));

    let objects = opkit_cli::kustomize::build(&project.join("config/default")).expect("config/default renders");
    let spec_schema = |crd: &Value| crd.pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec").cloned();
    let nginx_crd = find(&objects, "CustomResourceDefinition", "nginxes.demo.example.com");
    assert_eq!(
        spec_schema(nginx_crd),
        Some(json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })),
        "a chart without values.schema.json keeps unknown fields"
    );
    // The greeter chart's values.schema.json is its CRD's spec schema.
    let greeter_crd = find(&objects, "CustomResourceDefinition", "greeters.demo.example.com");
    assert_eq!(
        spec_schema(greeter_crd),
        Some(json!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": { "greeting": { "type": "string", "minLength": 1 } },
        }))
    );
    let role = find(&objects, "ClusterRole", "charts-operator-manager-role");
    let text = serde_json::to_string(role).expect("json");
    assert!(text.contains("\"greeters/finalizers\"") && text.contains("\"configmaps\""), "{text}");

    // The same kind twice is refused, and nothing is written.
    let again = command(OPKIT, &project, None).args(args).output().expect("opkit runs");
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("already exists"), "{stderr}");
}
