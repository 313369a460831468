//! Pod Security admission: namespace labels choose the level per mode; `enforce` rejects
//! pods with kube's message, `warn` answers with warnings (also for workloads with a pod
//! template), versions select the checks, labelling a namespace warns about the pods
//! already there, and the seed's Memcached Deployment passes `restricted`.

use http_body_util::BodyExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::common::{env, expect_status, within};
use crate::pod_streaming::run_kubectl;

/// The answer to a request: status code, body and `Warning` header texts.
pub(crate) struct Answer {
    /// HTTP status code.
    pub code: u16,
    /// The body as JSON (Null if not JSON).
    pub json: Value,
    /// The texts of the `Warning` headers (`299 - "text"`).
    pub warnings: Vec<String>,
}

/// Sends `body` as JSON and collects the warnings.
pub(crate) async fn send(client: &Client, method: &str, path: &str, body: &Value) -> Answer {
    let content_type = if method == "PATCH" { "application/merge-patch+json" } else { "application/json" };
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(kube::client::Body::from(body.to_string().into_bytes()))
        .expect("request builds");
    let res = within(&format!("{method} {path}"), client.send(req)).await.expect("request is answered");
    let code = res.status().as_u16();
    let warnings = res
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.strip_prefix("299 - \"").and_then(|v| v.strip_suffix('"')))
        .map(|v| v.replace("\\\"", "\""))
        .collect();
    let bytes = within("response body", res.into_body().collect()).await.expect("body").to_bytes();
    Answer { code, json: serde_json::from_slice(&bytes).unwrap_or(Value::Null), warnings }
}

/// Creates namespace `name` with `labels`.
pub(crate) async fn namespace(client: &Client, name: &str, labels: Value) {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}});
    let res = send(client, "POST", "/api/v1/namespaces", &ns).await;
    assert_eq!(res.code, 201, "{}", res.json);
}

fn pod(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

/// The pod spec of the seed's Memcached Deployment (examples/memcached-operator).
fn memcached_pod_spec() -> Value {
    json!({
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "memcached",
            "image": "memcached:1.6.26-alpine3.19",
            "imagePullPolicy": "IfNotPresent",
            "securityContext": {
                "runAsNonRoot": true,
                "runAsUser": 1001,
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"]},
            },
            "command": ["memcached", "-m=64", "-o", "modern", "-v"],
            "ports": [{"containerPort": 11211, "name": "memcached"}],
        }],
    })
}

fn deployment(name: &str, pod_spec: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
        },
    })
}

const RESTRICTED_BUSYBOX: &str = "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")";

#[tokio::test]
async fn a_privileged_pod_is_rejected_in_a_restricted_namespace_with_kubes_message() {
    let env = env().await;
    let client = env.client();
    namespace(&client, "secure", json!({"pod-security.kubernetes.io/enforce": "restricted"})).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "secure");
    let privileged: Pod = serde_json::from_value(pod(
        "root",
        json!({"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": true}}]}),
    ))
    .expect("pod");
    let status = expect_status(pods.create(&PostParams::default(), &privileged).await, 403, "Forbidden");
    assert_eq!(
        status.message,
        format!(
            "pods \"root\" is forbidden: violates PodSecurity \"restricted:latest\": privileged (container \"c\" must not set securityContext.privileged=true), {RESTRICTED_BUSYBOX}"
        )
    );
    let details = status.details.expect("details");
    assert_eq!((details.name.as_str(), details.kind.as_str()), ("root", "pods"));
    assert!(pods.list(&Default::default()).await.expect("list").items.is_empty(), "nothing stored");

    // kubectl prints the same message.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("pod.json");
    let mut manifest = pod(
        "root",
        json!({"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": true}}]}),
    );
    manifest["metadata"]["namespace"] = json!("secure");
    std::fs::write(&file, manifest.to_string()).expect("write manifest");
    let (ok, _, stderr) = run_kubectl("1.33", &env, &["create", "-f", file.to_str().expect("utf-8 path")]).await;
    assert!(!ok);
    assert!(
        stderr.contains("Error from server (Forbidden): error when creating")
            && stderr.contains(
                "pods \"root\" is forbidden: violates PodSecurity \"restricted:latest\": privileged (container \"c\" must not set securityContext.privileged=true), allowPrivilegeEscalation != false"
            ),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_memcached_deployments_pod_template_passes_restricted() {
    let env = env().await;
    let client = env.client();
    let labels = json!({
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    });
    namespace(&client, "memcached", labels).await;
    let res = send(
        &client,
        "POST",
        "/apis/apps/v1/namespaces/memcached/deployments",
        &deployment("memcached-sample", memcached_pod_spec()),
    )
    .await;
    assert_eq!(res.code, 201, "{}", res.json);
    assert!(res.warnings.is_empty(), "{:?}", res.warnings);
    let res =
        send(&client, "POST", "/api/v1/namespaces/memcached/pods", &pod("memcached-0", memcached_pod_spec())).await;
    assert_eq!(res.code, 201, "{}", res.json);
    assert!(res.warnings.is_empty(), "{:?}", res.warnings);

    // Without the container's runAsUser and capabilities it no longer passes.
    let mut spec = memcached_pod_spec();
    spec["containers"][0]["securityContext"] = json!({"allowPrivilegeEscalation": false});
    let res = send(&client, "POST", "/api/v1/namespaces/memcached/pods", &pod("memcached-1", spec)).await;
    assert_eq!(res.code, 403, "{}", res.json);
    assert_eq!(
        res.json["message"],
        "pods \"memcached-1\" is forbidden: violates PodSecurity \"restricted:latest\": unrestricted capabilities (container \"memcached\" must set securityContext.capabilities.drop=[\"ALL\"])"
    );
}

#[tokio::test]
async fn workloads_in_a_warn_namespace_get_warnings_and_are_stored() {
    let env = env().await;
    let client = env.client();
    namespace(&client, "warned", json!({"pod-security.kubernetes.io/warn": "baseline"})).await;
    let spec = json!({
        "hostNetwork": true,
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
        "containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 8080, "hostPort": 8080}],
            "securityContext": {"capabilities": {"add": ["NET_ADMIN", "CHOWN"]}}}],
    });
    let expected = "would violate PodSecurity \"baseline:latest\": host namespaces (hostNetwork), hostPort (container \"web\" uses hostPort 8080), non-default capabilities (container \"web\" must not include \"NET_ADMIN\" in securityContext.capabilities.add), hostPath volumes (volume \"root\")";
    let res =
        send(&client, "POST", "/apis/apps/v1/namespaces/warned/deployments", &deployment("web", spec.clone())).await;
    assert_eq!(res.code, 201, "{}", res.json);
    assert_eq!(res.warnings, [expected]);
    let res = send(&client, "POST", "/api/v1/namespaces/warned/pods", &pod("web", spec.clone())).await;
    assert_eq!(res.code, 201, "{}", res.json);
    assert_eq!(res.warnings, [expected]);

    // A CronJob's template is under spec.jobTemplate; kubectl prints the warning.
    let cron = json!({
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly", "namespace": "warned"},
        "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "OnFailure", "hostPID": true,
            "containers": [{"name": "job", "image": "busybox"}]}}}}},
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("cron.json");
    std::fs::write(&file, cron.to_string()).expect("write manifest");
    let (ok, _, stderr) = run_kubectl("1.33", &env, &["create", "-f", file.to_str().expect("utf-8 path")]).await;
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("Warning: would violate PodSecurity \"baseline:latest\": host namespaces (hostPID)"),
        "{stderr}"
    );
}

#[tokio::test]
async fn baseline_admits_what_restricted_refuses() {
    let env = env().await;
    let client = env.client();
    namespace(&client, "base", json!({"pod-security.kubernetes.io/enforce": "baseline"})).await;
    namespace(&client, "strict", json!({"pod-security.kubernetes.io/enforce": "restricted"})).await;
    let busybox = json!({"containers": [{"name": "c", "image": "busybox"}]});
    let res = send(&client, "POST", "/api/v1/namespaces/base/pods", &pod("p", busybox.clone())).await;
    assert_eq!(res.code, 201, "{}", res.json);
    let res = send(&client, "POST", "/api/v1/namespaces/strict/pods", &pod("p", busybox)).await;
    assert_eq!(res.code, 403, "{}", res.json);
    assert_eq!(
        res.json["message"],
        format!("pods \"p\" is forbidden: violates PodSecurity \"restricted:latest\": {RESTRICTED_BUSYBOX}")
    );

    // Baseline still refuses host namespaces, unsafe sysctls, procMount and SELinux users.
    let spec = json!({
        "hostIPC": true,
        "securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}],
            "seLinuxOptions": {"user": "root", "type": "spc_t"}},
        "containers": [{"name": "c", "image": "busybox", "securityContext": {"procMount": "Unmasked"}}],
    });
    let res = send(&client, "POST", "/api/v1/namespaces/base/pods", &pod("q", spec)).await;
    assert_eq!(res.code, 403, "{}", res.json);
    assert_eq!(
        res.json["message"],
        "pods \"q\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostIPC), procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\"), seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type \"spc_t\"; user may not be set), forbidden sysctls (kernel.msgmax)"
    );
}

#[tokio::test]
async fn the_version_label_selects_the_checks() {
    let env = env().await;
    let client = env.client();
    let labels = json!({
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "v1.21",
    });
    namespace(&client, "old", labels).await;
    // capabilities (1.22+) and runAsUser=0 (1.23+) are not restricted at v1.21.
    let spec = json!({
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": "busybox",
            "securityContext": {"allowPrivilegeEscalation": false, "runAsUser": 0}}],
    });
    let res = send(&client, "POST", "/api/v1/namespaces/old/pods", &pod("p", spec.clone())).await;
    assert_eq!(res.code, 201, "{}", res.json);

    let res = send(
        &client,
        "PATCH",
        "/api/v1/namespaces/old",
        &json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce-version": "latest"}}}),
    )
    .await;
    assert_eq!(res.code, 200, "{}", res.json);
    let res = send(&client, "POST", "/api/v1/namespaces/old/pods", &pod("q", spec)).await;
    assert_eq!(res.code, 403, "{}", res.json);
    assert_eq!(
        res.json["message"],
        "pods \"q\" is forbidden: violates PodSecurity \"restricted:latest\": unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsUser=0 (container \"c\" must not set runAsUser=0)"
    );

    // An invalid label is refused as kube refuses it.
    let res = send(
        &client,
        "PATCH",
        "/api/v1/namespaces/old",
        &json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce-version": "1.30"}}}),
    )
    .await;
    assert_eq!(res.code, 422, "{}", res.json);
    assert_eq!(
        res.json["message"],
        "Namespace \"old\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: \"1.30\": must be \"latest\" or \"v1.x\""
    );
}

#[tokio::test]
async fn labelling_a_namespace_warns_about_its_violating_pods_and_keeps_them() {
    let env = env().await;
    let client = env.client();
    namespace(&client, "apps", json!({})).await;
    let privileged =
        json!({"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": true}}]});
    for name in ["b-priv", "a-priv", "c-priv"] {
        let res = send(&client, "POST", "/api/v1/namespaces/apps/pods", &pod(name, privileged.clone())).await;
        assert_eq!(res.code, 201, "{}", res.json);
    }
    let host = json!({"hostNetwork": true, "containers": [{"name": "c", "image": "busybox"}]});
    let res = send(&client, "POST", "/api/v1/namespaces/apps/pods", &pod("host", host)).await;
    assert_eq!(res.code, 201, "{}", res.json);
    let plain = json!({"containers": [{"name": "c", "image": "busybox"}]});
    let res = send(&client, "POST", "/api/v1/namespaces/apps/pods", &pod("plain", plain)).await;
    assert_eq!(res.code, 201, "{}", res.json);

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let label = json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}});
    let res = send(&client, "PATCH", "/api/v1/namespaces/apps", &label).await;
    assert_eq!(res.code, 200, "{}", res.json);
    assert_eq!(
        res.warnings,
        [
            "existing pods in namespace \"apps\" violate the new PodSecurity enforce level \"baseline:latest\"",
            "a-priv (and 2 other pods): privileged",
            "host: host namespaces",
        ]
    );
    let ns = namespaces.get("apps").await.expect("namespace");
    assert_eq!(ns.labels().get("pod-security.kubernetes.io/enforce").map(String::as_str), Some("baseline"));

    // The same level again, or a looser one, is not checked.
    let res = send(&client, "PATCH", "/api/v1/namespaces/apps", &label).await;
    assert_eq!(res.code, 200, "{}", res.json);
    assert!(res.warnings.is_empty(), "{:?}", res.warnings);

    // The existing pods stay, and an update that does not touch their spec is admitted.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "apps");
    let patch = json!({"metadata": {"labels": {"tier": "web"}}});
    pods.patch("a-priv", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("label a violating pod");
    // Changing its image is an update kube evaluates, and refuses.
    let patch = json!({"spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}});
    let status =
        expect_status(pods.patch("a-priv", &PatchParams::default(), &Patch::Strategic(&patch)).await, 403, "Forbidden");
    assert_eq!(
        status.message,
        "pods \"a-priv\" is forbidden: violates PodSecurity \"baseline:latest\": privileged (container \"c\" must not set securityContext.privileged=true)"
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "apps");
    assert!(deployments.list(&Default::default()).await.expect("list").items.is_empty());
}

#[tokio::test]
async fn an_ephemeral_container_must_pass_the_enforced_level_too() {
    let env = env().await;
    let client = env.client();
    namespace(&client, "debugged", json!({"pod-security.kubernetes.io/enforce": "baseline"})).await;
    let res = send(
        &client,
        "POST",
        "/api/v1/namespaces/debugged/pods",
        &pod("app", json!({"containers": [{"name": "app", "image": "nginx"}]})),
    )
    .await;
    assert_eq!(res.code, 201, "{}", res.json);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "debugged");
    let debugger = |name: &str, privileged: bool| {
        json!({"spec": {"ephemeralContainers": [{"name": name, "image": "busybox", "targetContainerName": "app",
            "securityContext": {"privileged": privileged}}]}})
    };
    let status = expect_status(
        pods.patch_ephemeral_containers("app", &PatchParams::default(), &Patch::Strategic(&debugger("root", true)))
            .await,
        403,
        "Forbidden",
    );
    assert_eq!(
        status.message,
        "pods \"app\" is forbidden: violates PodSecurity \"baseline:latest\": privileged (container \"root\" must not set securityContext.privileged=true)"
    );
    pods.patch_ephemeral_containers("app", &PatchParams::default(), &Patch::Strategic(&debugger("plain", false)))
        .await
        .expect("an unprivileged debugger is admitted");
}
