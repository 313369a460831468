//! kubectl against a real pod, the whole way: client → API server (pods/log, pods/exec,
//! pods/portforward, proxied with its client certificate) → kubelet server → the pod's
//! process and network namespace. With kubectl 1.33 (WebSocket exec, SPDY port-forward
//! after the WebSocket tunnel is refused) and 1.27 (SPDY for both).

use crate::common;
use crate::kubectl;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use common::real_pods::{kubectl_with, load_script, real_env};
use common::{Error, WAIT, wait};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use opkit_testenv::TestEnv;

/// A pod `name` running `image` that listens on TCP 7000 (echoing what it reads) and
/// prints a line every 100 ms; returns once it is Running.
async fn echo_pod(env: &TestEnv, dir: &std::path::Path, name: &str) -> Result<Pod, Error> {
    let image = format!("example.com/{name}:v1");
    load_script(
        env,
        dir,
        &image,
        r#"python3 -u -c '
import socket, threading, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7000)); s.listen()
def serve():
    while True:
        c, _ = s.accept()
        while True:
            b = c.recv(65536)
            if not b: break
            c.sendall(b)
        c.close()
threading.Thread(target=serve, daemon=True).start()
n = 0
while True:
    print("tick", n, flush=True); n += 1; time.sleep(0.1)
'"#,
    )?;
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": image}]}
    }))?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(&PostParams::default(), &pod).await?;
    let running = |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.container_statuses.as_ref()?.first()?.state.as_ref()?.running.as_ref())
            .is_some()
    };
    wait(&pods, name, running).await
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_exec_logs_and_port_forward_reach_a_real_pod() -> Result<(), Error> {
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    let pod = echo_pod(&env, tmp.path(), "echo").await?;
    let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap_or_default();

    for version in ["1.33", "1.27"] {
        // exec: output, exit code, stdin, and the pod's own network namespace.
        let (out, err, code) = kubectl_with(
            version,
            &env,
            &["exec", "echo", "--", "sh", "-c", "echo out; echo err >&2; hostname; exit 3"],
            b"",
        )
        .await?;
        assert_eq!(code, 3, "kubectl {version} exec: {err}");
        assert_eq!(out, "out\necho\n", "kubectl {version}: stdout has the output and the pod's hostname");
        assert!(err.contains("err"), "kubectl {version}: {err}");
        let (out, err, code) =
            kubectl_with(version, &env, &["exec", "-i", "echo", "--", "cat"], b"through stdin").await?;
        assert_eq!((out.as_str(), code), ("through stdin", 0), "kubectl {version} exec -i: {err}");
        if !ip.starts_with("127.") {
            let (out, err, _) =
                kubectl_with(version, &env, &["exec", "echo", "--", "cat", "/proc/net/fib_trie"], b"").await?;
            assert!(out.contains(&ip), "kubectl {version}: exec runs in the pod's namespace ({ip}): {err}");
        }
        // logs through the API server.
        let (out, err, code) = kubectl_with(version, &env, &["logs", "echo", "--tail=1"], b"").await?;
        assert!(code == 0 && out.starts_with("tick "), "kubectl {version} logs: {out}{err}");
    }

    // logs -f streams lines as they are written.
    let mut follow = Command::new(kubectl::kubectl_binary("1.33"))
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(["logs", "-f", "echo", "--tail=0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut lines = BufReader::new(follow.stdout.take().ok_or("stdout")?).lines();
    let first = tokio::task::spawn_blocking(move || lines.next()).await?.ok_or("no line followed")??;
    assert!(first.starts_with("tick "), "{first}");
    follow.kill()?;
    follow.wait()?;

    // port-forward to the pod's port 7000 echoes bytes both ways.
    for version in ["1.33", "1.27"] {
        let mut forward = Command::new(kubectl::kubectl_binary(version))
            .arg("--kubeconfig")
            .arg(env.kubeconfig_path())
            .args(["port-forward", "pod/echo", ":7000"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut out = BufReader::new(forward.stdout.take().ok_or("stdout")?);
        // The reader stays open: kubectl writes a line per connection, and a closed pipe
        // would end it.
        let (port, _stdout) = tokio::task::spawn_blocking(move || -> Result<(u16, _), Error> {
            let mut line = String::new();
            out.read_line(&mut line)?;
            // "Forwarding from 127.0.0.1:PORT -> 7000"
            let port = line.split(':').nth(1).and_then(|p| p.split_whitespace().next()).ok_or("no port")?;
            Ok((port.parse()?, out))
        })
        .await??;
        let echoed = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, Error> {
            let mut conn = TcpStream::connect(("127.0.0.1", port))?;
            conn.set_read_timeout(Some(WAIT))?;
            let payload = vec![7u8; 100_000];
            conn.write_all(&payload)?;
            let mut back = vec![0u8; payload.len()];
            conn.read_exact(&mut back)?;
            Ok(back)
        })
        .await?;
        if echoed.is_err() {
            forward.kill()?;
            let mut err = String::new();
            forward.stderr.take().ok_or("stderr")?.read_to_string(&mut err)?;
            return Err(format!("kubectl {version} port-forward: {echoed:?}: {err}").into());
        }
        let echoed = echoed?;
        assert!(echoed.len() == 100_000 && echoed.iter().all(|b| *b == 7), "kubectl {version} port-forward");
        forward.kill()?;
        forward.wait()?;
    }
    Ok(())
}
