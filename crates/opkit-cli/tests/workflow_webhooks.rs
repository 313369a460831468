//! The webhook workflow end to end with the `opkit` binary, as operator-sdk's tutorial walks
//! it: `opkit init`, `create api` (two versions of a kind), `create webhook` with all three
//! kinds (defaulting, validation, conversion with v2 as a spoke), `make manifests` (the webhook
//! configurations from the markers), the scaffolded webhook tests, then against `opkit
//! cluster start`: `make run` serving the webhooks locally, an invalid object denied with the
//! webhook's message, a defaulted field set, the object read at both versions, and the
//! configurations removed when `make run` stops; then `make cluster-load deploy`: the
//! manager as a real pod serving the webhooks behind their Service, with the certificate
//! the cluster's cert-manager stand-in issues and the CA it injects.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use kube::api::Api;
use kube::runtime::wait::await_condition;

use crate::support::workflow as support;

use support::*;

/// `kubectl apply -f -` of `yaml`; its output and whether it succeeded.
fn kubectl_apply(project: &Path, kubeconfig: &Path, yaml: &str) -> (bool, String) {
    let mut cmd = command("kubectl", project, Some(kubeconfig));
    cmd.args(["apply", "-f", "-"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), yaml.as_bytes()).expect("write");
    let out = child.wait_with_output().expect("kubectl");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// `kubectl get <resource> <name> -o json` in `default`.
fn kubectl_get(project: &Path, kubeconfig: &Path, resource: &str, name: &str) -> serde_json::Value {
    let mut cmd = command("kubectl", project, Some(kubeconfig));
    cmd.args(["get", resource, name, "--namespace", "default", "-o", "json"]);
    serde_json::from_str(&run_ok(cmd, &format!("kubectl get {resource} {name}"))).expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_create_api_create_webhook_manifests_run_denies_defaults_converts() {
    let tmp = tempfile::tempdir().expect("tmp");
    let project = tmp.path().join("fleet");
    std::fs::create_dir(&project).expect("mkdir");

    // 1. Scaffold: a kind at v1 (the hub, stored) and v2 (served, a spoke), and its webhooks.
    opkit(&project, None, &["init", "--domain", "example.com", "--repo", "github.com/example/fleet"]);
    for version in ["v1", "v2"] {
        opkit(
            &project,
            None,
            &["create", "api", "--group", "ship", "--version", version, "--kind", "Frigate", "--controller=false"],
        );
    }
    let v2 = project.join("src/api/ship_v2/frigate.rs");
    let source = std::fs::read_to_string(&v2).expect("v2 type");
    std::fs::write(&v2, source.replace("version = \"v2\",", "version = \"v2\",\n    storage = false,")).expect("write");
    opkit(
        &project,
        None,
        &[
            "create",
            "webhook",
            "--group",
            "ship",
            "--version",
            "v1",
            "--kind",
            "Frigate",
            "--defaulting",
            "--programmatic-validation",
            "--conversion",
            "--spoke",
            "v2",
        ],
    );

    // 2. make manifests: the webhook configurations from the markers.
    make(&project, None, &["manifests"]);
    let manifests = std::fs::read_to_string(project.join("config/webhook/manifests.yaml")).expect("manifests");
    for want in [
        "kind: MutatingWebhookConfiguration",
        "name: mfrigate-v1.kb.io",
        "path: /mutate-ship-example-com-v1-frigate",
        "kind: ValidatingWebhookConfiguration",
        "name: vfrigate-v1.kb.io",
        "path: /validate-ship-example-com-v1-frigate",
    ] {
        assert!(manifests.contains(want), "manifests.yaml lacks {want}:\n{manifests}");
    }
    opkit(&project, None, &["generate", "--check"]);
    // The scaffolded webhook tests pass.
    let mut unit = command("cargo", &project, None);
    unit.args(["test", "--lib"]);
    let out = run_ok(unit, "cargo test --lib");
    assert!(
        out.contains("defaults_are_set ... ok") && out.contains("ship_v2_round_trips_through_the_hub ... ok"),
        "{out}"
    );

    // 3. make run against a local cluster serves the webhooks on 127.0.0.1.
    let cluster_dir = tmp.path().join("cluster");
    let (mut cluster, kubeconfig, client) = start_cluster(tmp.path(), &cluster_dir, &["--in-memory"]).await;
    let mut run_cmd = command("make", &project, Some(&kubeconfig));
    run_cmd.args(["run", &format!("OPKIT={OPKIT}"), "RUN_ARGS=--metrics-bind-address 0 --health-probe-bind-address 0"]);
    let mut operator = Background::spawn(run_cmd);
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let pointed_at_localhost = |c: Option<&ValidatingWebhookConfiguration>| {
        c.and_then(|c| c.webhooks.as_ref()?.first()?.client_config.url.clone()).is_some_and(|u| {
            u.starts_with("https://127.0.0.1:") && u.ends_with("/validate-ship-example-com-v1-frigate")
        })
    };
    timeout(
        "make run to install the validating webhook",
        await_condition(validating.clone(), "fleet-validating-webhook-configuration", pointed_at_localhost),
    )
    .await
    .expect("watch");
    assert!(mutating.get_opt("fleet-mutating-webhook-configuration").await.expect("get").is_some());

    // 4. An invalid object is denied with the webhook's message.
    let bad = "apiVersion: ship.example.com/v1\nkind: Frigate\nmetadata:\n  name: bad\n  namespace: default\nspec:\n  foo: \"\"\n";
    let (applied, output) = kubectl_apply(&project, &kubeconfig, bad);
    assert!(!applied, "an invalid Frigate was admitted: {output}");
    // The webhook answers 422 Invalid with field causes, so kubectl prints it as it prints
    // every Invalid error: from the Status's details.
    assert!(
        output.contains(r#"The Frigate "bad" is invalid: spec.foo: Invalid value: "": must not be empty"#),
        "{output}"
    );
    // The Status's message names the webhook, as kube-apiserver words a denial.
    let frigates: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("ship.example.com", "v1", "Frigate")),
    );
    let bad_object: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "ship.example.com/v1", "kind": "Frigate",
        "metadata": {"name": "bad", "namespace": "default"}, "spec": {"foo": ""},
    }))
    .expect("a Frigate");
    match frigates.create(&Default::default(), &bad_object).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(
                status.message.starts_with(r#"admission webhook "vfrigate-v1.kb.io" denied the request: "#),
                "{status:?}"
            );
        }
        other => panic!("an invalid Frigate was admitted: {other:?}"),
    }

    // 5. A valid one is defaulted...
    let good =
        "apiVersion: ship.example.com/v1\nkind: Frigate\nmetadata:\n  name: good\n  namespace: default\nspec: {}\n";
    let (applied, output) = kubectl_apply(&project, &kubeconfig, good);
    assert!(applied, "{output}");
    let v1 = kubectl_get(&project, &kubeconfig, "frigates.v1.ship.example.com", "good");
    assert_eq!(v1["spec"]["foo"], "default", "{v1}");
    // ...and read at both versions through the conversion webhook.
    let v2 = kubectl_get(&project, &kubeconfig, "frigates.v2.ship.example.com", "good");
    assert_eq!(v2["apiVersion"], "ship.example.com/v2", "{v2}");
    assert_eq!(v2["spec"]["foo"], "default", "{v2}");
    // Written at v2, stored at v1.
    let at_v2 = "apiVersion: ship.example.com/v2\nkind: Frigate\nmetadata:\n  name: second\n  namespace: default\nspec:\n  foo: bar\n";
    let (applied, output) = kubectl_apply(&project, &kubeconfig, at_v2);
    assert!(applied, "{output}");
    assert_eq!(kubectl_get(&project, &kubeconfig, "frigates.v1.ship.example.com", "second")["spec"]["foo"], "bar");

    // 6. Stopping make run removes the configurations.
    // (make exits at once; `opkit run` cleans up after the operator stopped.)
    operator.stop();
    let gone = |c: Option<&ValidatingWebhookConfiguration>| c.is_none();
    timeout(
        "the validating webhook removed",
        await_condition(validating, "fleet-validating-webhook-configuration", gone),
    )
    .await
    .expect("watch");
    let gone = |c: Option<&MutatingWebhookConfiguration>| c.is_none();
    timeout("the mutating webhook removed", await_condition(mutating, "fleet-mutating-webhook-configuration", gone))
        .await
        .expect("watch");

    // 7. make cluster-load deploy: the manager runs as a real pod and serves the webhooks
    // behind the webhook Service, with the certificate the cluster's cert-manager issues
    // from config/certmanager and the CA it injects into the configurations and the CRD.
    let image = "example.com/fleet:v0.0.1";
    let mut deploy = command("make", &project, Some(&kubeconfig));
    deploy.env("OPKIT_DATA_DIR", &cluster_dir).args([
        "cluster-load",
        "deploy",
        &format!("IMG={image}"),
        "CARGO_PROFILE=dev",
        &format!("OPKIT={OPKIT}"),
    ]);
    run_ok(deploy, "make cluster-load deploy");
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let served_by_the_service = |c: Option<&ValidatingWebhookConfiguration>| {
        c.and_then(|c| c.webhooks.as_ref()?.first().cloned()).is_some_and(|w| {
            w.client_config.service.is_some() && w.client_config.ca_bundle.as_ref().is_some_and(|b| !b.0.is_empty())
        })
    };
    timeout(
        "the deployed validating webhook with its injected CA",
        await_condition(validating, "fleet-validating-webhook-configuration", served_by_the_service),
    )
    .await
    .expect("watch");
    // The pod serves once it is ready and in the Service's endpoints; until then the
    // API server cannot reach it (failurePolicy Fail), so the denial is waited for.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let denial = loop {
        match frigates.create(&Default::default(), &bad_object).await {
            Err(kube::Error::Api(status)) if status.code == 422 => break status,
            Err(kube::Error::Api(status)) if tokio::time::Instant::now() < deadline => {
                // Not served yet (no endpoints, connection refused): try again.
                assert_eq!(status.code, 500, "{status:?}");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            other => panic!("the deployed webhook never denied the invalid Frigate: {other:?}"),
        }
    };
    assert!(denial.message.starts_with(r#"admission webhook "vfrigate-v1.kb.io" denied the request: "#), "{denial:?}");
    let (applied, output) = kubectl_apply(&project, &kubeconfig, &good.replace("name: good", "name: deployed"));
    assert!(applied, "{output}");
    let v2 = kubectl_get(&project, &kubeconfig, "frigates.v2.ship.example.com", "deployed");
    assert_eq!(v2["spec"]["foo"], "default", "defaulted and converted by the pod: {v2}");
    make(&project, Some(&kubeconfig), &["undeploy", &format!("OPKIT={OPKIT}")]);
    assert!(cluster.stop().success(), "the cluster stops cleanly");
}
