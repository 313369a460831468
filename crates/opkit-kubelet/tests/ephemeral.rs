//! Ephemeral containers (`kubectl debug`) the whole way: kubectl adds one through
//! `pods/ephemeralcontainers`, the kubelet runs it once in the real pod — in the pod's
//! network and, with `--target`, in the target container's PID namespace — kubectl
//! attaches to it, and `status.ephemeralContainerStatuses` ends terminated with its exit
//! code. A simulated pod reports its ephemeral container running.
//! These tests need root (namespaces, mounts), as the real-pod suites do.

use crate::common;

use common::real_pods::{kubectl_with, load_script, real_env, real_env_with};
use common::{Error, wait};
use k8s_openapi::api::core::v1::{ContainerState, Pod};
use kube::api::{Api, LogParams, Patch, PatchParams, PostParams};
use opkit_kubelet::PodIsolation;
use opkit_testenv::TestEnv;
use serde_json::json;

/// Creates pod `name` running `image` as container `app` and waits until it has logged
/// a line `ready`.
async fn ready_pod(env: &TestEnv, name: &str, image: &str) -> Result<(), Error> {
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let spec = json!({"terminationGracePeriodSeconds": 1, "containers": [{"name": "app", "image": image}]});
    pods.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec}))?)
        .await?;
    common::real_pods::logged(&pods, name, "ready").await
}

/// The state of the first ephemeral container of `p`.
fn ephemeral_state(p: Option<&Pod>) -> Option<ContainerState> {
    p?.status.as_ref()?.ephemeral_container_statuses.as_ref()?.first()?.state.clone()
}

/// Waits until the first ephemeral container of pod `name` terminated; its exit code.
async fn ephemeral_exit(pods: &Api<Pod>, name: &str) -> Result<i32, Error> {
    let pod = wait(pods, name, |p: Option<&Pod>| ephemeral_state(p).is_some_and(|s| s.terminated.is_some())).await?;
    let state = ephemeral_state(Some(&pod)).ok_or("no ephemeral container state")?;
    Ok(state.terminated.ok_or("not terminated")?.exit_code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33_debug_with_a_target_sees_its_processes() -> Result<(), Error> {
    let env = real_env_with(PodIsolation::Contained).await?;
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "example.com/sleeper:v1", "echo ready\nexec sleep 3617")?;
    ready_pod(&env, "target", "example.com/sleeper:v1").await?;
    // The command waits for its input (sent once kubectl attached), prints what runs in
    // the target's PID namespace and exits 3.
    let args = [
        "debug",
        "-i",
        "target",
        "--image=busybox",
        "--target=app",
        "--container=debugger",
        "--",
        "sh",
        "-c",
        "read line; echo \"got $line\"; ps -o args; exit 3",
    ];
    let (out, err, _) = kubectl_with("1.33", &env, &args, b"go\n").await?;
    assert!(out.contains("got go"), "kubectl debug: {out} {err}");
    assert!(out.contains("sleep 3617"), "the target's process is seen: {out} {err}");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    assert_eq!(ephemeral_exit(&pods, "target").await?, 3);
    let pod = pods.get("target").await?;
    let status = &pod.status.as_ref().ok_or("no status")?.ephemeral_container_statuses.as_ref().ok_or("none")?[0];
    assert_eq!((status.name.as_str(), status.restart_count), ("debugger", 0));
    // Its log is there too, and the pod still runs.
    let log = pods.logs("target", &LogParams { container: Some("debugger".into()), ..Default::default() }).await?;
    assert!(log.contains("sleep 3617"), "{log}");
    assert_eq!(pod.status.and_then(|s| s.phase).as_deref(), Some("Running"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_27_debug_without_a_target_shares_the_pods_network() -> Result<(), Error> {
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "example.com/sleeper:v1", "echo ready\nexec sleep 3600")?;
    ready_pod(&env, "plain", "example.com/sleeper:v1").await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let running =
        wait(&pods, "plain", |p: Option<&Pod>| p.and_then(|p| p.status.as_ref()?.pod_ip.clone()).is_some()).await?;
    let ip = running.status.and_then(|s| s.pod_ip).ok_or("no pod IP")?;
    let args = [
        "debug",
        "-i",
        "plain",
        "--image=busybox",
        "--",
        "sh",
        "-c",
        "read line; echo \"got $line\"; ip -4 addr; exit 3",
    ];
    let (out, err, _) = kubectl_with("1.27", &env, &args, b"go\n").await?;
    assert!(out.contains("got go"), "kubectl 1.27 debug: {out} {err}");
    assert!(out.contains(&ip), "the pod's IP {ip} is the debugger's: {out} {err}");
    assert_eq!(ephemeral_exit(&pods, "plain").await?, 3);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_pod_reports_its_ephemeral_container_running() -> Result<(), Error> {
    let env = real_env().await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let pod = json!({"metadata": {"name": "sim"}, "spec": {"containers": [{"name": "app", "image": "example.com/not-loaded:v1"}]}});
    pods.create(&PostParams::default(), &serde_json::from_value(pod)?).await?;
    wait(&pods, "sim", |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.phase.clone()).as_deref() == Some("Running")
    })
    .await?;
    let patch =
        json!({"spec": {"ephemeralContainers": [{"name": "dbg", "image": "busybox", "targetContainerName": "app"}]}});
    pods.patch_ephemeral_containers("sim", &PatchParams::default(), &Patch::Strategic(&patch)).await?;
    let pod = wait(&pods, "sim", |p: Option<&Pod>| ephemeral_state(p).is_some_and(|s| s.running.is_some())).await?;
    let status = &pod.status.ok_or("no status")?.ephemeral_container_statuses.ok_or("none")?[0];
    assert_eq!(status.name, "dbg");
    assert!(status.container_id.as_deref().is_some_and(|id| id.starts_with("containerd://")), "{status:?}");
    Ok(())
}
