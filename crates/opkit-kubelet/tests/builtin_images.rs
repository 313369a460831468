//! The built-in images run for real without `opkit cluster load`: `busybox` runs `sh`
//! with BusyBox's applets (`wget`, `httpd`, `sleep`) on its `PATH`, its exit code
//! reported truly (Succeeded, or Failed with the code); `alpine` without a command runs
//! `sh`; `curlimages/curl` runs `curl` with the container's args; `bash` runs bash;
//! `kubectl exec` runs `sh` inside a busybox pod; a KUDO pipe pod's init container
//! writes a file its waiter container serves to `kubectl exec cat`; an image loaded
//! under a built-in reference wins. Contained and host-mode pods both. These tests need
//! root (namespaces, mounts), as the real-pod suites do.

use crate::common;

use std::time::Instant;

use common::real_pods::{load_script, real_env_with};
use common::{Error, WAIT, kubectl, wait};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams, PostParams};
use opkit_kubelet::PodIsolation;
use serde_json::json;

/// Creates pod `name` with `spec`.
async fn create(pods: &Api<Pod>, name: &str, spec: serde_json::Value) -> Result<(), Error> {
    let pod = json!({"metadata": {"name": name}, "spec": spec});
    pods.create(&PostParams::default(), &serde_json::from_value(pod)?).await?;
    Ok(())
}

/// Waits until pod `name` reaches phase `Succeeded` or `Failed`; returns it.
async fn finished(pods: &Api<Pod>, name: &str) -> Result<Pod, Error> {
    wait(pods, name, |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.phase.as_deref()).is_some_and(|ph| ph == "Succeeded" || ph == "Failed")
    })
    .await
}

/// The phase and the first container's exit code of a finished pod.
fn outcome(pod: &Pod) -> (String, Option<i32>) {
    let status = pod.status.clone().unwrap_or_default();
    let code = status
        .container_statuses
        .iter()
        .flatten()
        .next()
        .and_then(|s| s.state.as_ref()?.terminated.as_ref())
        .map(|t| t.exit_code);
    (status.phase.unwrap_or_default(), code)
}

/// Waits until pod `name` has logged a line `line`; returns its IP.
async fn logged(pods: &Api<Pod>, name: &str, line: &str) -> Result<String, Error> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(log) = pods.logs(name, &LogParams::default()).await
            && log.lines().any(|l| l == line)
        {
            let pod = pods.get(name).await?;
            return Ok(pod.status.and_then(|s| s.pod_ip).ok_or("no pod IP")?);
        }
        if Instant::now() > deadline {
            return Err(format!("pod {name} never logged {line:?}").into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A busybox pod serving `body` over HTTP on `port` with BusyBox's `httpd` (from its
/// working directory, writable in both modes).
fn httpd(port: u16, body: &str) -> serde_json::Value {
    json!({
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "c", "image": "busybox:1.36", "workingDir": "/www", "command": ["sh", "-c",
            format!("echo {body} > index.html && echo ready && exec httpd -f -p {port} -h .")]}],
    })
}

/// A one-shot pod of `image` with `container` fields.
fn once(image: &str, container: serde_json::Value) -> serde_json::Value {
    let mut c = json!({"name": "c", "image": image});
    if let (Some(c), Some(extra)) = (c.as_object_mut(), container.as_object()) {
        c.extend(extra.clone());
    }
    json!({"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [c]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busybox_pod_runs_sh_with_its_applets_and_reports_its_exit_code() -> Result<(), Error> {
    let env = real_env_with(PodIsolation::Contained).await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    create(&pods, "server", httpd(8080, "hello-from-httpd")).await?;
    let ip = logged(&pods, "server", "ready").await?;

    let script = format!("echo hi; wget -q -O- http://{ip}:8080/ || exit 3");
    create(&pods, "client", once("docker.io/library/busybox:1.36", json!({"command": ["sh", "-c", script]}))).await?;
    let client = finished(&pods, "client").await?;
    let log = pods.logs("client", &LogParams::default()).await?;
    assert_eq!(outcome(&client), ("Succeeded".into(), Some(0)), "{log}");
    assert_eq!(log, "hi\nhello-from-httpd\n");
    let status = client.status.unwrap_or_default();
    let image_id = status.container_statuses.unwrap_or_default().first().map(|s| s.image_id.clone());
    assert!(image_id.unwrap_or_default().starts_with("docker.io/library/busybox@sha256:"));

    // A failing command fails the pod with its exit code; nothing listens on 8081.
    let failing = format!("echo before; wget -q -T 5 -O- http://{ip}:8081/ || exit 7");
    create(&pods, "failing", once("busybox", json!({"command": ["sh", "-c", failing]}))).await?;
    let failed = finished(&pods, "failing").await?;
    assert_eq!(outcome(&failed), ("Failed".into(), Some(7)));
    assert!(pods.logs("failing", &LogParams::default()).await?.starts_with("before\n"));

    // kubectl exec runs the image's sh inside the running container.
    let out = kubectl(&env, &["exec", "server", "--", "sh", "-c", "echo ok; ls /www"]).await?;
    assert_eq!(out, "ok\nindex.html\n");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alpine_runs_sh_curl_takes_its_args_and_bash_runs_bash_on_the_host() -> Result<(), Error> {
    let env = real_env_with(PodIsolation::Host).await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    create(&pods, "server", httpd(8082, "hello-curl")).await?;
    let ip = logged(&pods, "server", "ready").await?;

    // No command: the image's `sh`, whose stdin is empty, exits 0.
    create(&pods, "alpine", once("alpine:3.19", json!({}))).await?;
    assert_eq!(outcome(&finished(&pods, "alpine").await?), ("Succeeded".into(), Some(0)));

    // curl's entrypoint takes the args (a URL first is not a command: curl is prefixed).
    let url = format!("http://{ip}:8082/");
    create(&pods, "curl", once("curlimages/curl:8.5.0", json!({"args": ["-sS", &url]}))).await?;
    let curl = finished(&pods, "curl").await?;
    let log = pods.logs("curl", &LogParams::default()).await?;
    assert_eq!(outcome(&curl), ("Succeeded".into(), Some(0)), "{log}");
    assert_eq!(log, "hello-curl\n");
    create(&pods, "curl-url", once("curlimages/curl", json!({"args": [&url]}))).await?;
    assert_eq!(outcome(&finished(&pods, "curl-url").await?).1, Some(0));

    // bash's entrypoint prefixes bash to flags.
    create(&pods, "bash", once("bash:5", json!({"args": ["-c", "echo \"bash ${BASH_VERSINFO[0]}\""]}))).await?;
    let bash = finished(&pods, "bash").await?;
    let log = pods.logs("bash", &LogParams::default()).await?;
    assert_eq!(outcome(&bash), ("Succeeded".into(), Some(0)), "{log}");
    assert!(log.starts_with("bash ") && log.trim() != "bash", "{log}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kudo_pipe_pods_file_is_read_from_its_waiter_and_a_loaded_image_wins() -> Result<(), Error> {
    let env = real_env_with(PodIsolation::Contained).await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    // The shape KUDO's Pipe task gives its pod (see opkit-kudo's engine/pipe.rs).
    let pipe = json!({
        "restartPolicy": "OnFailure",
        "terminationGracePeriodSeconds": 1,
        "volumes": [{"name": "shared", "emptyDir": {}}],
        "initContainers": [{"name": "init", "image": "busybox", "command": ["/bin/sh", "-c"],
            "args": ["mkdir -p /tmp/out && echo \"hello pipe\" > /tmp/out/greeting.txt"],
            "volumeMounts": [{"name": "shared", "mountPath": "/tmp/out"}]}],
        "containers": [{"name": "waiter", "image": "busybox", "command": ["/bin/sh", "-c"],
            "args": ["echo ready; sleep infinity"],
            "volumeMounts": [{"name": "shared", "mountPath": "/tmp/out"}]}],
    });
    create(&pods, "pipe", pipe).await?;
    logged(&pods, "pipe", "ready").await?;
    let read = kubectl(&env, &["exec", "pipe", "-c", "waiter", "--", "cat", "/tmp/out/greeting.txt"]).await?;
    assert_eq!(read, "hello pipe\n");

    // A loaded busybox:1.36 replaces the built-in one for that reference only.
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "busybox:1.36", "echo loaded")?;
    let shell = json!({"command": ["sh", "-c", "echo built-in"]});
    create(&pods, "loaded", once("docker.io/library/busybox:1.36", shell.clone())).await?;
    create(&pods, "other-tag", once("busybox:1.35", shell)).await?;
    for (name, said) in [("loaded", "loaded\n"), ("other-tag", "built-in\n")] {
        assert_eq!(outcome(&finished(&pods, name).await?), ("Succeeded".into(), Some(0)), "{name}");
        assert_eq!(pods.logs(name, &LogParams::default()).await?, said, "{name}");
    }
    Ok(())
}
