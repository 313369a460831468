//! kubectl's `attach` and `port-forward` against contained real pods, the whole way
//! (client → API server → kubelet server → the container): attach joins the container's
//! own process — its output from then on and, for a `stdin: true` container, its stdin
//! (`stdinOnce` closing it at the client's end of input) — over WebSocket (kubectl 1.33)
//! and SPDY (1.27); port-forward connects inside the pod's network namespace, so a server
//! listening on the pod's loopback only is reached, as containerd's port-forward reaches
//! it. These tests need root (namespaces, mounts), as the real-pod suites do.

use crate::common;
use crate::kubectl;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use common::real_pods::{kubectl_with, load_script, real_env_with};
use common::{Error, WAIT, wait};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use opkit_kubelet::PodIsolation;
use opkit_testenv::TestEnv;
use serde_json::json;

/// Creates pod `name` from `spec` and waits until its container runs and has logged a
/// line `ready`.
async fn ready_pod(env: &TestEnv, name: &str, spec: serde_json::Value) -> Result<(), Error> {
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec}))?)
        .await?;
    let running = |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.container_statuses.as_ref()?.first()?.state.as_ref()?.running.as_ref())
            .is_some()
    };
    wait(&pods, name, running).await?;
    common::real_pods::logged(&pods, name, "ready").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_attach_joins_the_containers_own_process() -> Result<(), Error> {
    let env = real_env_with(PodIsolation::Contained).await?;
    let tmp = tempfile::tempdir()?;
    let script = "echo ready\nwhile read line; do echo \"got $line\"; echo \"on stderr $line\" >&2; done\necho bye";
    load_script(&env, tmp.path(), "example.com/talker:v1", script)?;
    for version in ["1.33", "1.27"] {
        let name = format!("talker-{}", version.replace('.', "-"));
        let spec = json!({
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "example.com/talker:v1", "stdin": true, "stdinOnce": true}],
        });
        ready_pod(&env, &name, spec).await?;
        let (out, err, code) = kubectl_with(version, &env, &["attach", "-i", &name], b"hello\nworld\n").await?;
        // What the process wrote after the attach (not the `ready` before it), on stdout
        // and stderr; the end of input closed its stdin, so it ended and so did the attach.
        assert_eq!(out, "got hello\ngot world\nbye\n", "kubectl {version} attach: {err}");
        assert!(err.contains("on stderr hello") && err.contains("on stderr world"), "kubectl {version}: {err}");
        assert_eq!(code, 0, "kubectl {version} attach: {err}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_port_forward_reaches_the_pods_loopback() -> Result<(), Error> {
    let env = real_env_with(PodIsolation::Contained).await?;
    let tmp = tempfile::tempdir()?;
    // An echo server on the pod's 127.0.0.1 only: reachable from inside its namespace.
    let server = r#"exec /usr/bin/python3 -u -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 7001)); s.listen()
print("ready", flush=True)
while True:
    c, _ = s.accept()
    while True:
        b = c.recv(65536)
        if not b: break
        c.sendall(b)
    c.close()
'"#;
    load_script(&env, tmp.path(), "example.com/loopback:v1", server)?;
    let spec = json!({
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "main", "image": "example.com/loopback:v1"}],
    });
    ready_pod(&env, "loopback", spec).await?;
    for version in ["1.33", "1.27"] {
        let mut forward = Command::new(kubectl::kubectl_binary(version))
            .arg("--kubeconfig")
            .arg(env.kubeconfig_path())
            .args(["port-forward", "pod/loopback", ":7001"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut out = BufReader::new(forward.stdout.take().ok_or("stdout")?);
        // The reader stays open: kubectl writes a line per connection.
        let (port, _stdout) = tokio::task::spawn_blocking(move || -> Result<(u16, _), Error> {
            let mut line = String::new();
            out.read_line(&mut line)?;
            // "Forwarding from 127.0.0.1:PORT -> 7001"
            let port = line.split(':').nth(1).and_then(|p| p.split_whitespace().next()).ok_or("no port")?;
            Ok((port.parse()?, out))
        })
        .await??;
        let echoed = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, Error> {
            let mut conn = TcpStream::connect(("127.0.0.1", port))?;
            conn.set_read_timeout(Some(WAIT))?;
            conn.write_all(b"through the pod's loopback")?;
            let mut back = vec![0u8; 26];
            conn.read_exact(&mut back)?;
            Ok(back)
        })
        .await?;
        let echoed = match echoed {
            Ok(echoed) => echoed,
            Err(e) => {
                forward.kill()?;
                let mut err = String::new();
                forward.stderr.take().ok_or("stderr")?.read_to_string(&mut err)?;
                return Err(format!("kubectl {version} port-forward: {e}: {err}").into());
            }
        };
        assert_eq!(echoed, b"through the pod's loopback", "kubectl {version} port-forward");
        forward.kill()?;
        forward.wait()?;
    }
    Ok(())
}
