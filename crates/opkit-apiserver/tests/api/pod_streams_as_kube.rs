//! Pod streams as kube-apiserver serves them, beyond the plain proxying of
//! `pod_streaming.rs`: a port-forward's `ports` (what the Python and JavaScript clients
//! send, both run here: the JavaScript one as `tools/js-client/install.sh` installs it)
//! reaches the kubelet as its `port`, as kube's `streamParams` writes it; and an
//! exec or port-forward to a simulated pod (shown as Running, its containers' IDs those
//! of no real runtime) says that the pod runs no process and which image `opkit cluster
//! load` would have to load, instead of the kubelet's `pod "X" does not exist`.

use std::process::Command;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use rustls_pki_types::ServerName;
use serde_json::json;

use crate::common::{env, within};
use crate::pod_streaming::{TestKubelet, node, run_kubectl, send_upgrade, tls_to_server};

/// A WebSocket port-forward request for `query` as `user`: the response head.
async fn websocket_port_forward(env: &opkit_testenv::TestEnv, pod: &str, query: &str) -> String {
    let mut stream = tls_to_server(env.server(), ServerName::try_from("127.0.0.1").expect("ip")).await;
    let token = format!("Bearer {}", env.server().token());
    send_upgrade(
        &mut stream,
        "GET",
        &format!("/api/v1/namespaces/default/pods/{pod}/portforward?{query}"),
        &[
            ("Authorization", &token),
            ("Connection", "Upgrade"),
            ("Upgrade", "websocket"),
            ("Sec-WebSocket-Version", "13"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Protocol", "v4.channel.k8s.io"),
        ],
    )
    .await
}

/// A pod on `node` whose one container `app` (image `image`) is reported running with
/// the container ID `container_id`.
async fn running_pod(client: &Client, name: &str, node: &str, image: &str, container_id: Option<&str>) {
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": image}]}}))
    .expect("pod");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    within("create pod", pods.create(&PostParams::default(), &pod)).await.expect("create pod");
    let mut status = json!({"name": "app", "image": image, "imageID": "", "ready": true, "restartCount": 0,
        "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}});
    if let Some(id) = container_id {
        status["containerID"] = json!(id);
    }
    let patch = json!({"status": {"phase": "Running", "containerStatuses": [status]}});
    within("pod status", pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)))
        .await
        .expect("pod status");
}

#[tokio::test]
async fn the_clients_ports_reach_the_kubelet_as_its_port() {
    let env = env().await;
    let kubelet = TestKubelet::start(env.server()).await;
    node(&env.client(), "n1", &kubelet.address).await;
    running_pod(&env.client(), "web", "n1", "busybox", None).await;

    let head = websocket_port_forward(&env, "web", "ports=8080").await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let head = websocket_port_forward(&env, "web", "ports=80,443&ports=9000").await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let head = websocket_port_forward(&env, "web", "ports=http").await;
    assert!(head.starts_with("HTTP/1.1 400"), "a port that is not a number is kube's 400: {head}");
    let requests = kubelet.seen.lock().requests.clone();
    assert_eq!(
        requests,
        ["GET /portForward/default/web?port=8080", "GET /portForward/default/web?port=80%2C443%2C9000"],
        "the kubelet is asked for `port`, never `ports`"
    );
}

/// Opens a port-forward with the Python client (`kubernetes.stream.portforward`, which
/// sends `ports=`) and prints what became of it.
const PYTHON_PORT_FORWARD: &str = r#"
import os
from kubernetes import client, config
from kubernetes.stream import portforward

api = client.CoreV1Api(config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))
try:
    portforward(api.connect_get_namespaced_pod_portforward, "web", "default", ports="8080")
    print("forwarding")
except Exception as e:
    print("failed:", e)
"#;

#[tokio::test]
async fn a_python_client_port_forward_reaches_the_kubelet_with_port() {
    let env = env().await;
    let kubelet = TestKubelet::start(env.server()).await;
    node(&env.client(), "n1", &kubelet.address).await;
    running_pod(&env.client(), "web", "n1", "busybox", None).await;

    let mut python = Command::new("python3");
    python.arg("-c").arg(PYTHON_PORT_FORWARD).env("KUBECONFIG", env.kubeconfig_path());
    let out = within("the Python client", tokio::task::spawn_blocking(move || python.output()))
        .await
        .expect("python task")
        .expect("python3 with the kubernetes package (pip install kubernetes)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    // The test kubelet only echoes bytes, so the Python client may give up after the
    // upgrade; what matters here is what it asked the kubelet for.
    let requests = kubelet.seen.lock().requests.clone();
    assert_eq!(requests, ["GET /portForward/default/web?port=8080"], "{stdout}");
}

/// Lists the pods with the JavaScript client (`@kubernetes/client-node`), then opens a
/// port-forward with its `PortForward` (which sends `ports=`); prints what became of each.
const JAVASCRIPT_PORT_FORWARD: &str = r#"
import * as k8s from '@kubernetes/client-node';
import { PassThrough } from 'node:stream';

const kc = new k8s.KubeConfig();
kc.loadFromDefault();
const pods = await kc.makeApiClient(k8s.CoreV1Api).listNamespacedPod({ namespace: 'default' });
console.log('pods:', pods.items.map((p) => p.metadata.name).join(','));
try {
  const ws = await new k8s.PortForward(kc).portForward('default', 'web', [8080], new PassThrough(), null, new PassThrough());
  console.log('forwarding');
  ws.close();
} catch (e) {
  console.log('failed:', e.message ?? e);
}
"#;

/// Where `tools/js-client/install.sh` put the JavaScript client: `OPKIT_JS_CLIENT`
/// (`.ci/run` sets it), else its default, `target/tools/js-client`.
fn javascript_client_dir() -> std::path::PathBuf {
    match std::env::var_os("OPKIT_JS_CLIENT") {
        Some(dir) => dir.into(),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/js-client"),
    }
}

#[tokio::test]
async fn a_javascript_client_port_forward_reaches_the_kubelet_with_port() {
    let dir = javascript_client_dir();
    assert!(
        dir.join("node_modules/@kubernetes/client-node").is_dir(),
        "the JavaScript client is not installed in {}: run tools/js-client/install.sh",
        dir.display()
    );
    let env = env().await;
    let kubelet = TestKubelet::start(env.server()).await;
    node(&env.client(), "n1", &kubelet.address).await;
    running_pod(&env.client(), "web", "n1", "busybox", None).await;

    // Run from the client's directory, so that the script's import finds its node_modules.
    let mut node = Command::new("node");
    node.args(["--input-type=module", "-e", JAVASCRIPT_PORT_FORWARD])
        .current_dir(&dir)
        .env("KUBECONFIG", env.kubeconfig_path());
    let out = within("the JavaScript client", tokio::task::spawn_blocking(move || node.output()))
        .await
        .expect("node task")
        .expect("node (Node.js) on PATH");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("pods: web"), "the client lists through the kubeconfig: {stdout}");
    let requests = kubelet.seen.lock().requests.clone();
    assert_eq!(requests, ["GET /portForward/default/web?port=8080"], "{stdout}");
}

#[tokio::test]
async fn exec_and_port_forward_to_a_simulated_pod_say_it_runs_no_process() {
    let env = env().await;
    let kubelet = TestKubelet::start(env.server()).await;
    node(&env.client(), "n1", &kubelet.address).await;
    running_pod(&env.client(), "web", "n1", "nginx:1.25", Some("containerd://0f3c")).await;

    let (ok, _, stderr) = run_kubectl("1.33", &env, &["exec", "web", "--", "ls"]).await;
    assert!(!ok);
    assert!(
        stderr.contains(
            "container \"app\" of pod \"web\" is simulated: it runs no process to exec to; to run it for real, load its image with `opkit cluster load nginx:1.25 --binary PATH` and recreate the pod"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("does not exist"), "{stderr}");
    let (ok, _, stderr) = run_kubectl("1.27", &env, &["exec", "web", "--", "ls"]).await;
    assert!(!ok && stderr.contains("is simulated: it runs no process to exec to"), "{stderr}");

    let head = websocket_port_forward(&env, "web", "ports=80").await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    assert!(kubelet.seen.lock().requests.is_empty(), "nothing is asked of the kubelet for a simulated pod");
}
