//! `pods/ephemeralcontainers`: writes change only `spec.ephemeralContainers`, under
//! kube's rules (existing ones can be neither changed nor removed, names unique across
//! all containers, no ports/probes/resources/lifecycle); the subresource is discovered.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{env, expect_status, raw};

fn pod() -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "app", "labels": {"app": "a"}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]}}))
    .expect("pod")
}

fn debugger(name: &str) -> serde_json::Value {
    json!({"name": name, "image": "busybox", "targetContainerName": "app", "stdin": true, "tty": true})
}

#[tokio::test]
async fn added_through_the_subresource_and_never_removed() {
    let env = env().await;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(&PostParams::default(), &pod()).await.expect("create pod");

    let patch = json!({"metadata": {"labels": {"app": "changed"}},
        "spec": {"ephemeralContainers": [debugger("debugger")], "containers": [{"name": "app", "image": "evil"}]}});
    let patched = pods
        .patch_ephemeral_containers("app", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("add an ephemeral container");
    let spec = patched.spec.as_ref().expect("spec");
    let added = &spec.ephemeral_containers.as_ref().expect("ephemeral containers")[0];
    assert_eq!((added.name.as_str(), added.target_container_name.as_deref()), ("debugger", Some("app")));
    assert_eq!(added.termination_message_path.as_deref(), Some("/dev/termination-log"), "defaulted as containers are");
    assert_eq!(spec.containers[0].image.as_deref(), Some("nginx"), "only ephemeral containers change");
    assert_eq!(patched.metadata.labels.as_ref().and_then(|l| l.get("app")).map(String::as_str), Some("a"));

    // Removing it is refused with kube's message.
    let mut without = pods.get_ephemeral_containers("app").await.expect("get subresource");
    without.spec.as_mut().expect("spec").ephemeral_containers = Some(Vec::new());
    let status =
        expect_status(pods.replace_ephemeral_containers("app", &PostParams::default(), &without).await, 422, "Invalid");
    assert!(
        status.message.contains(
            "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be removed"
        ),
        "{}",
        status.message
    );
    // So is changing it.
    let changed = json!({"spec": {"ephemeralContainers": [{"name": "debugger", "image": "alpine"}]}});
    let status = expect_status(
        pods.patch_ephemeral_containers("app", &PatchParams::default(), &Patch::Strategic(&changed)).await,
        422,
        "Invalid",
    );
    assert!(status.message.contains("may not be changed"), "{}", status.message);
    assert_eq!(pods.get("app").await.expect("get").spec.expect("spec").ephemeral_containers.map(|e| e.len()), Some(1));

    // The pod itself neither drops nor changes them.
    let mut main = pods.get("app").await.expect("get");
    main.spec.as_mut().expect("spec").ephemeral_containers = None;
    let updated = pods.replace("app", &PostParams::default(), &main).await.expect("replace the pod");
    assert_eq!(updated.spec.expect("spec").ephemeral_containers.map(|e| e[0].name.clone()), Some("debugger".into()));
}

#[tokio::test]
async fn a_new_pod_cannot_have_ephemeral_containers() {
    let env = env().await;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let mut with = pod();
    with.spec.as_mut().expect("spec").ephemeral_containers =
        Some(vec![serde_json::from_value(debugger("debugger")).expect("ephemeral container")]);
    let status = expect_status(pods.create(&PostParams::default(), &with).await, 422, "Invalid");
    assert_eq!(status.message, "Pod \"app\" is invalid: spec.ephemeralContainers: Forbidden: cannot be set on create");
}

#[tokio::test]
async fn forbidden_fields_and_duplicate_names_are_refused() {
    let env = env().await;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(&PostParams::default(), &pod()).await.expect("create pod");
    let patch = json!({"spec": {"ephemeralContainers": [
        {"name": "app", "image": "busybox", "ports": [{"containerPort": 80}], "readinessProbe": {"exec": {"command": ["true"]}}},
        {"name": "d2", "image": "busybox", "targetContainerName": "missing"}]}});
    let status = expect_status(
        pods.patch_ephemeral_containers("app", &PatchParams::default(), &Patch::Strategic(&patch)).await,
        422,
        "Invalid",
    );
    let causes: Vec<(String, String)> =
        status.details.expect("details").causes.into_iter().map(|c| (c.field, c.reason)).collect();
    let expected = [
        ("spec.ephemeralContainers[0].name", "FieldValueDuplicate"),
        ("spec.ephemeralContainers[0].ports", "FieldValueForbidden"),
        ("spec.ephemeralContainers[0].readinessProbe", "FieldValueForbidden"),
        ("spec.ephemeralContainers[1].targetContainerName", "FieldValueNotFound"),
    ];
    assert_eq!(causes, expected.map(|(f, r)| (f.to_string(), r.to_string())));
    assert!(status.message.contains("cannot be set for an Ephemeral Container"), "{}", status.message);
}

#[tokio::test]
async fn discovery_lists_the_subresource() {
    let env = env().await;
    let core = raw(&env.client(), "GET", "/api/v1", None, Vec::new()).await;
    let entry = core.json["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "pods/ephemeralcontainers")
        .cloned()
        .unwrap_or_else(|| panic!("no pods/ephemeralcontainers in {}", core.text));
    assert_eq!(entry["kind"], "Pod");
    assert_eq!(entry["verbs"], json!(["get", "patch", "update"]));
    // Other kinds have no such subresource.
    let cm = raw(&env.client(), "GET", "/api/v1/namespaces/default/configmaps/x/ephemeralcontainers", None, Vec::new())
        .await;
    assert_eq!(cm.code, 404);
}

#[tokio::test]
async fn resources_lifecycle_and_every_probe_are_refused_and_names_include_init_containers() {
    let env = env().await;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let with_init: Pod = serde_json::from_value(json!({"metadata": {"name": "app"},
        "spec": {"initContainers": [{"name": "setup", "image": "busybox"}],
                 "containers": [{"name": "app", "image": "nginx"}]}}))
    .expect("pod");
    pods.create(&PostParams::default(), &with_init).await.expect("create pod");
    let probe = json!({"exec": {"command": ["true"]}});
    let patch = json!({"spec": {"ephemeralContainers": [
        {"name": "setup", "image": "busybox", "resources": {"limits": {"cpu": "1"}},
         "lifecycle": {"preStop": {"exec": {"command": ["true"]}}}},
        {"name": "d1", "image": "busybox", "livenessProbe": probe, "startupProbe": probe},
        {"name": "d2", "image": "busybox", "targetContainerName": "setup"}]}});
    let status = expect_status(
        pods.patch_ephemeral_containers("app", &PatchParams::default(), &Patch::Strategic(&patch)).await,
        422,
        "Invalid",
    );
    let causes: Vec<(String, String)> =
        status.details.expect("details").causes.into_iter().map(|c| (c.field, c.reason)).collect();
    let expected = [
        ("spec.ephemeralContainers[0].name", "FieldValueDuplicate"),
        ("spec.ephemeralContainers[0].resources", "FieldValueForbidden"),
        ("spec.ephemeralContainers[0].lifecycle", "FieldValueForbidden"),
        ("spec.ephemeralContainers[1].livenessProbe", "FieldValueForbidden"),
        ("spec.ephemeralContainers[1].startupProbe", "FieldValueForbidden"),
    ];
    assert_eq!(causes, expected.map(|(f, r)| (f.to_string(), r.to_string())), "{}", status.message);
    // An init container is a valid target; two new ones with one name are not.
    let twice = json!({"spec": {"ephemeralContainers": [
        {"name": "d2", "image": "busybox", "targetContainerName": "setup"},
        {"name": "d2", "image": "busybox"}]}});
    let status = expect_status(
        pods.patch_ephemeral_containers("app", &PatchParams::default(), &Patch::Merge(&twice)).await,
        422,
        "Invalid",
    );
    let causes: Vec<String> = status.details.expect("details").causes.into_iter().map(|c| c.field).collect();
    assert_eq!(causes, ["spec.ephemeralContainers[1].name"]);
    let ok =
        json!({"spec": {"ephemeralContainers": [{"name": "d2", "image": "busybox", "targetContainerName": "setup"}]}});
    pods.patch_ephemeral_containers("app", &PatchParams::default(), &Patch::Strategic(&ok)).await.expect("valid");
}
