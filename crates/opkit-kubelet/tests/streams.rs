//! The kubelet's exec and port-forward streams against real kubectl binaries (1.33 speaks
//! WebSocket `v5.channel.k8s.io` for exec and falls back to SPDY for port-forward; 1.27
//! speaks SPDY/3.1 for both). A small HTTP/1.1 server plays the API server: it answers
//! discovery and `GET pods/p` with a Running pod, and hands the `exec` and `portforward`
//! upgrades to `opkit_kubelet::exec::serve` and `port_forward::serve`, as the API
//! server's proxy passes them through to the kubelet.
#![cfg(unix)]

use crate::kubectl;

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use opkit_kubelet::exec::{self, ExecTarget};
use opkit_kubelet::port_forward;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};

/// How long any step may take.
const STEP: Duration = Duration::from_secs(60);

/// The in-test API server, a kubeconfig pointing at it and kubectl's home.
struct FakeApiServer {
    addr: SocketAddr,
    /// Port-forward requests that asked for a WebSocket.
    websocket_port_forwards: Arc<AtomicUsize>,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn json_response(status: StatusCode, body: serde_json::Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    response
}

/// What the fake API server answers.
async fn route(
    req: Request<Incoming>,
    target: ExecTarget,
    websocket_port_forwards: Arc<AtomicUsize>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_owned();
    let response = match path.as_str() {
        "/api" => json_response(
            StatusCode::OK,
            json!({"kind": "APIVersions", "versions": ["v1"],
                   "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}),
        ),
        "/apis" => json_response(StatusCode::OK, json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})),
        "/api/v1" => json_response(
            StatusCode::OK,
            json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                 "verbs": ["get", "list"], "shortNames": ["po"]},
                {"name": "pods/exec", "singularName": "", "namespaced": true, "kind": "PodExecOptions", "verbs": ["create", "get"]},
                {"name": "pods/portforward", "singularName": "", "namespaced": true, "kind": "PodPortForwardOptions", "verbs": ["create", "get"]}
            ]}),
        ),
        "/api/v1/namespaces/default/pods/p" => json_response(
            StatusCode::OK,
            json!({"kind": "Pod", "apiVersion": "v1",
                   "metadata": {"name": "p", "namespace": "default", "uid": "6d3b6f4e-0000-4000-8000-000000000001"},
                   "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                   "status": {"phase": "Running", "podIP": "127.0.0.1",
                              "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "image": "busybox",
                                                     "imageID": "", "state": {"running": {}}}]}}),
        ),
        "/api/v1/namespaces/default/pods/p/exec" => exec::serve(req, target).await,
        "/api/v1/namespaces/default/pods/p/portforward" => {
            if req.headers().get("upgrade").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket")) {
                websocket_port_forwards.fetch_add(1, Ordering::SeqCst);
            }
            port_forward::serve(req, IpAddr::V4(Ipv4Addr::LOCALHOST)).await
        }
        _ => json_response(
            StatusCode::NOT_FOUND,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
                   "message": "the server could not find the requested resource"}),
        ),
    };
    Ok(response)
}

impl FakeApiServer {
    /// Starts the server; exec'd commands run with `target`.
    async fn start(target: ExecTarget) -> FakeApiServer {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let websocket_port_forwards = Arc::new(AtomicUsize::new(0));
        let counter = websocket_port_forwards.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((io, _)) = listener.accept().await else { return };
                let target = target.clone();
                let counter = counter.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| route(req, target.clone(), counter.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(io), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = dir.path().join("kubeconfig");
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{addr}\n\
             users:\n- name: u\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: u\n    namespace: default\n\
             current-context: fake\n"
        );
        std::fs::write(&kubeconfig, config).expect("write kubeconfig");
        FakeApiServer { addr, websocket_port_forwards, dir, kubeconfig, task }
    }

    /// How many port-forward requests asked for a WebSocket.
    fn websocket_port_forwards(&self) -> usize {
        self.websocket_port_forwards.load(Ordering::SeqCst)
    }

    /// A kubectl command of `version` against this server.
    fn kubectl(&self, version: &str, args: &[&str]) -> Command {
        let mut command = Command::new(kubectl::kubectl_binary(version));
        command
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir.path())
            .args(["--request-timeout=0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }
}

/// A target running in `dir` with a greeting in its environment.
fn target_in(dir: &Path) -> ExecTarget {
    ExecTarget {
        env: vec![("GREETING".to_owned(), "hello from the pod".to_owned())],
        working_dir: dir.to_path_buf(),
        netns: None,
    }
}

/// Runs kubectl to completion with `input` on stdin: (exit code, stdout, stderr).
async fn run(mut command: Command, input: Option<&str>) -> (Option<i32>, String, String) {
    if input.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command.spawn().expect("spawn kubectl");
    if let Some(input) = input {
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input.as_bytes()).await.expect("write stdin");
        drop(stdin);
    }
    let output = tokio::time::timeout(STEP, child.wait_with_output()).await.expect("kubectl in time").expect("output");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

async fn exec_reports_output_and_exit_code(version: &str) {
    let workdir = tempfile::tempdir().expect("workdir");
    let server = FakeApiServer::start(target_in(workdir.path())).await;
    let command = server.kubectl(version, &["exec", "p", "--", "sh", "-c", "echo out; echo err >&2; exit 3"]);
    let (code, stdout, stderr) = run(command, None).await;
    assert_eq!(code, Some(3), "kubectl {version} exits with the command's code\nstdout: {stdout}\nstderr: {stderr}");
    assert_eq!(stdout, "out\n", "kubectl {version} stdout");
    assert!(stderr.starts_with("err\n"), "kubectl {version} stderr: {stderr}");
    assert!(stderr.contains("command terminated with exit code 3"), "kubectl {version} stderr: {stderr}");

    // The command runs in the target's working directory, with its environment.
    let command = server.kubectl(version, &["exec", "p", "--", "sh", "-c", "pwd; echo \"$GREETING\""]);
    let (code, stdout, stderr) = run(command, None).await;
    assert_eq!(code, Some(0), "kubectl {version}: {stderr}");
    let expected = format!("{}\nhello from the pod\n", workdir.path().canonicalize().expect("canonical").display());
    assert_eq!(stdout, expected, "kubectl {version}");

    // A command that cannot start is reported as kube's internal error.
    let command = server.kubectl(version, &["exec", "p", "--", "/no/such/binary"]);
    let (code, _, stderr) = run(command, None).await;
    assert_ne!(code, Some(0), "kubectl {version}");
    assert!(
        stderr.contains(
            "Internal error occurred: error executing command in container: failed to exec in container: \
             failed to start exec: exec: \"/no/such/binary\": stat /no/such/binary: no such file or directory"
        ),
        "kubectl {version} stderr: {stderr}"
    );
    let command = server.kubectl(version, &["exec", "p", "--", "no-such-command"]);
    let (code, _, stderr) = run(command, None).await;
    assert_ne!(code, Some(0), "kubectl {version}");
    assert!(
        stderr.contains("exec: \"no-such-command\": executable file not found in $PATH"),
        "kubectl {version} stderr: {stderr}"
    );
}

async fn exec_copies_stdin(version: &str) {
    let workdir = tempfile::tempdir().expect("workdir");
    let server = FakeApiServer::start(target_in(workdir.path())).await;
    let input = "first line\nsecond line\n".repeat(2000);
    let command = server.kubectl(version, &["exec", "-i", "p", "--", "cat"]);
    let (code, stdout, stderr) = run(command, Some(&input)).await;
    assert_eq!(code, Some(0), "kubectl {version}: {stderr}");
    assert_eq!(stdout.len(), input.len(), "kubectl {version} echoes all of stdin");
    assert_eq!(stdout, input, "kubectl {version}");
}

/// A TCP echo server on loopback; its port.
async fn echo_server() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("bind echo");
    let port = listener.local_addr().expect("addr").port();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                let (mut read, mut write) = conn.split();
                let _ = tokio::io::copy(&mut read, &mut write).await;
            });
        }
    });
    (port, task)
}

/// Waits for kubectl port-forward's `Forwarding from 127.0.0.1:LOCAL -> REMOTE` line.
async fn forwarded_port(child: &mut Child, remote: u16) -> u16 {
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let wait = async {
        while let Some(line) = lines.next_line().await.expect("read kubectl stdout") {
            if let Some(rest) = line.strip_prefix("Forwarding from 127.0.0.1:") {
                let (local, to) = rest.split_once(" -> ").expect("arrow");
                assert_eq!(to, remote.to_string());
                return local.parse::<u16>().expect("local port");
            }
        }
        panic!("kubectl port-forward ended before forwarding");
    };
    let port = tokio::time::timeout(STEP, wait).await.expect("Forwarding from in time");
    // Keep draining stdout (kubectl logs each connection) so kubectl never blocks on it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    port
}

/// Sends `payload` through the forwarded port and reads it back.
async fn round_trip(local: u16, payload: &[u8]) -> Vec<u8> {
    let mut conn = TcpStream::connect(SocketAddr::from((Ipv4Addr::LOCALHOST, local))).await.expect("connect local");
    let (mut read, mut write) = conn.split();
    let send = async {
        write.write_all(payload).await.expect("send");
        write.shutdown().await.expect("half-close");
    };
    let mut back = Vec::new();
    let receive = read.read_to_end(&mut back);
    let ((), received) = tokio::time::timeout(STEP, async { tokio::join!(send, receive) }).await.expect("echo in time");
    received.expect("read echo");
    back
}

async fn port_forward_echoes(version: &str) {
    let workdir = tempfile::tempdir().expect("workdir");
    let server = FakeApiServer::start(target_in(workdir.path())).await;
    let (remote, echo) = echo_server().await;
    let mut child =
        server.kubectl(version, &["port-forward", "pod/p", &format!(":{remote}")]).spawn().expect("spawn kubectl");
    let local = forwarded_port(&mut child, remote).await;
    for round in 0..2u8 {
        let payload: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8 ^ round).collect();
        let back = round_trip(local, &payload).await;
        assert_eq!(back.len(), payload.len(), "kubectl {version} round {round}");
        assert!(back == payload, "kubectl {version} round {round}: the echo differs");
    }
    child.kill().await.expect("kill kubectl");
    if version == "1.33" {
        // kubectl 1.30+ tries the WebSocket tunnel first; refused, it fell back to SPDY.
        assert!(server.websocket_port_forwards() >= 1, "kubectl {version} tried the WebSocket tunnel");
    }
    echo.abort();
}

/// Forwarding to a port nothing listens on reports the kubelet's error on the error
/// stream, and kubectl prints it.
async fn port_forward_reports_refused_connections(version: &str) {
    let workdir = tempfile::tempdir().expect("workdir");
    let server = FakeApiServer::start(target_in(workdir.path())).await;
    let closed = {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let mut child =
        server.kubectl(version, &["port-forward", "pod/p", &format!(":{closed}")]).spawn().expect("spawn kubectl");
    let local = forwarded_port(&mut child, closed).await;
    let mut conn = TcpStream::connect(SocketAddr::from((Ipv4Addr::LOCALHOST, local))).await.expect("connect local");
    let mut sink = Vec::new();
    let _ = tokio::time::timeout(STEP, conn.read_to_end(&mut sink)).await.expect("closed in time");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    // The kubelet's words, as text (kubectl prints what the error stream carries).
    let expected = format!(
        "-> {closed}: error forwarding port {closed} to pod p_default, uid : dial tcp 127.0.0.1:{closed}: connect: \
         connection refused"
    );
    let printed = tokio::time::timeout(STEP, async {
        let mut printed = String::new();
        while let Ok(Some(line)) = lines.next_line().await {
            printed.push_str(&line);
            printed.push('\n');
            if line.contains(&expected) {
                break;
            }
        }
        printed
    })
    .await
    .expect("error in time");
    assert!(printed.contains(&expected), "kubectl {version} prints the kubelet's error: {expected}\nstderr: {printed}");
    child.kill().await.expect("kill kubectl");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33_exec_output_and_exit_code() {
    exec_reports_output_and_exit_code("1.33").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_27_exec_output_and_exit_code() {
    exec_reports_output_and_exit_code("1.27").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33_exec_stdin() {
    exec_copies_stdin("1.33").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_27_exec_stdin() {
    exec_copies_stdin("1.27").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33_port_forward() {
    port_forward_echoes("1.33").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_27_port_forward() {
    port_forward_echoes("1.27").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33_port_forward_refused() {
    port_forward_reports_refused_connections("1.33").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_27_port_forward_refused() {
    port_forward_reports_refused_connections("1.27").await;
}

/// A pseudo-terminal for kubectl itself, so that `kubectl exec -it` asks for a tty: the
/// controller side and the terminal (sized `rows` x `cols`).
fn terminal_for_kubectl(rows: u16, cols: u16) -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let controller = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("openpt");
    grantpt(&controller).expect("grantpt");
    unlockpt(&controller).expect("unlockpt");
    let name = ptsname(&controller, Vec::new()).expect("ptsname");
    let terminal = rustix::fs::open(
        name.as_c_str(),
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .expect("open terminal");
    let size = rustix::termios::Winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
    rustix::termios::tcsetwinsize(&controller, size).expect("size the terminal");
    (controller, terminal)
}

/// `kubectl exec -it` runs the command on a terminal sized as kubectl's own (sent on the
/// resize stream) and exits with its code.
async fn exec_with_a_terminal(version: &str) {
    let workdir = tempfile::tempdir().expect("workdir");
    let server = FakeApiServer::start(target_in(workdir.path())).await;
    let (controller, terminal) = terminal_for_kubectl(33, 101);
    // The size arrives on the resize stream once the command runs: wait for it.
    let script = "while [ \"$(stty size)\" = \"0 0\" ]; do :; done; stty size; test -t 0 && echo on-a-tty; exit 7";
    let mut command = server.kubectl(version, &["exec", "-it", "p", "--", "sh", "-c", script]);
    command
        .stdin(Stdio::from(terminal.try_clone().expect("dup")))
        .stdout(Stdio::from(terminal.try_clone().expect("dup")))
        .stderr(Stdio::from(terminal));
    let mut child = command.spawn().expect("spawn kubectl");
    drop(command);
    // Everything kubectl prints, until its terminal closes (EIO on the controller side).
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut output = Vec::new();
        let mut file = std::fs::File::from(controller);
        let mut buf = [0u8; 4096];
        while let Ok(n) = file.read(&mut buf) {
            if n == 0 {
                break;
            }
            output.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&output).into_owned()
    });
    let status = tokio::time::timeout(STEP, child.wait()).await.expect("kubectl in time").expect("wait");
    let output = tokio::task::spawn_blocking(move || reader.join().expect("reader")).await.expect("join");
    assert!(output.contains("33 101"), "kubectl {version}: the terminal has kubectl's size:\n{output}");
    assert!(output.contains("on-a-tty"), "kubectl {version}: stdin is a terminal:\n{output}");
    assert_eq!(status.code(), Some(7), "kubectl {version}:\n{output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33_exec_tty() {
    exec_with_a_terminal("1.33").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_27_exec_tty() {
    exec_with_a_terminal("1.27").await;
}

/// Opens an exec WebSocket with one subprotocol, as a client of the wire protocol would.
async fn open_exec_socket(
    server: &FakeApiServer,
    query: &str,
    protocol: &str,
) -> tokio_tungstenite::WebSocketStream<TcpStream> {
    open_socket(server, &format!("exec?{query}"), protocol).await
}

/// Opens a WebSocket on a subresource of pod `p` with one subprotocol.
async fn open_socket(
    server: &FakeApiServer,
    subresource: &str,
    protocol: &str,
) -> tokio_tungstenite::WebSocketStream<TcpStream> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let url = format!("ws://{}/api/v1/namespaces/default/pods/p/{subresource}", server.addr);
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert("Sec-WebSocket-Protocol", http::HeaderValue::from_str(protocol).expect("protocol"));
    let tcp = TcpStream::connect(server.addr).await.expect("connect");
    let (socket, response) = tokio_tungstenite::client_async(request, tcp).await.expect("upgrade");
    let chosen = response.headers().get("Sec-WebSocket-Protocol").and_then(|v| v.to_str().ok());
    assert_eq!(chosen, Some(protocol));
    socket
}

/// Reads the socket to its close: the bytes of each channel.
async fn read_channels(
    socket: &mut tokio_tungstenite::WebSocketStream<TcpStream>,
) -> std::collections::BTreeMap<u8, Vec<u8>> {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let mut channels = std::collections::BTreeMap::<u8, Vec<u8>>::new();
    let read = async {
        while let Some(Ok(message)) = socket.next().await {
            if let Message::Binary(data) = message
                && let Some((&channel, payload)) = data.split_first()
            {
                channels.entry(channel).or_default().extend_from_slice(payload);
            }
        }
    };
    tokio::time::timeout(STEP, read).await.expect("socket closed in time");
    channels
}

/// The error channel carries a JSON `metav1.Status` on v4 (with the exit code as a cause)
/// and only the failure's message on the older `channel.k8s.io`; an empty message on
/// stdout comes first (the streams are ready).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_status_formats_by_protocol() {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let workdir = tempfile::tempdir().expect("workdir");
    let server = FakeApiServer::start(target_in(workdir.path())).await;
    let query = "command=sh&command=-c&command=echo+hi%3B+exit+2&stdout=1";

    let mut socket = open_exec_socket(&server, query, "v4.channel.k8s.io").await;
    let first = tokio::time::timeout(STEP, socket.next()).await.expect("first message in time");
    assert!(matches!(first, Some(Ok(Message::Binary(ref b))) if b.as_ref() == [1u8]), "{first:?}");
    let channels = read_channels(&mut socket).await;
    assert_eq!(channels.get(&1).map(Vec::as_slice), Some(&b"hi\n"[..]));
    let status: serde_json::Value = serde_json::from_slice(&channels[&3]).expect("status JSON");
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["reason"], "NonZeroExitCode");
    assert_eq!(status["details"]["causes"][0], json!({"reason": "ExitCode", "message": "2"}));
    assert_eq!(
        status["message"],
        "command terminated with non-zero exit code: error executing command [sh -c echo hi; exit 2], exit code 2"
    );

    let mut socket = open_exec_socket(&server, query, "channel.k8s.io").await;
    let channels = read_channels(&mut socket).await;
    assert_eq!(
        String::from_utf8_lossy(&channels[&3]),
        "command terminated with non-zero exit code: error executing command [sh -c echo hi; exit 2], exit code 2"
    );

    // Success is a Status on v4, nothing at all before it.
    let mut socket = open_exec_socket(&server, "command=true&stdout=1", "v4.channel.k8s.io").await;
    let channels = read_channels(&mut socket).await;
    let status: serde_json::Value = serde_json::from_slice(&channels[&3]).expect("status JSON");
    assert_eq!(status["status"], "Success");
    let mut socket = open_exec_socket(&server, "command=true&stdout=1", "channel.k8s.io").await;
    let channels = read_channels(&mut socket).await;
    assert_eq!(channels.get(&3), None, "no error text on success");
}

/// v5's close signal (channel 255) ends stdin: `cat` sees EOF and the exec completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_v5_close_signal_ends_stdin() {
    use futures::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let workdir = tempfile::tempdir().expect("workdir");
    let server = FakeApiServer::start(target_in(workdir.path())).await;
    let mut socket = open_exec_socket(&server, "command=cat&stdin=true&stdout=true", "v5.channel.k8s.io").await;
    socket.send(Message::Binary(Bytes::from_static(b"\x00typed in"))).await.expect("stdin");
    socket.send(Message::Binary(Bytes::from_static(&[255, 0]))).await.expect("close stdin");
    let channels = read_channels(&mut socket).await;
    assert_eq!(channels.get(&1).map(Vec::as_slice), Some(&b"typed in"[..]));
    let status: serde_json::Value = serde_json::from_slice(&channels[&3]).expect("status JSON");
    assert_eq!(status["status"], "Success");
}

/// Sends one raw HTTP/1.1 request; the response head and body.
async fn raw_request(addr: SocketAddr, request: &str) -> (String, serde_json::Value) {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(request.as_bytes()).await.expect("send");
    let mut response = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            let n = tcp.read(&mut buf).await.expect("read");
            response.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&response).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_owned))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if body.len() >= length || n == 0 {
                    return (head.to_owned(), serde_json::from_str(body).unwrap_or(serde_json::Value::Null));
                }
            }
            assert!(n > 0, "connection closed early: {text}");
        }
    };
    tokio::time::timeout(STEP, read).await.expect("response in time")
}

/// Requests the endpoints refuse are answered with kube's `metav1.Status`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_statuses() {
    let workdir = tempfile::tempdir().expect("workdir");
    let server = FakeApiServer::start(target_in(workdir.path())).await;
    let host = server.addr;

    // No stream asked for.
    let (head, status) = raw_request(
        host,
        &format!("POST /api/v1/namespaces/default/pods/p/exec?command=ls HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\n"),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(status["message"], "you must specify at least 1 of stdin, stdout, stderr");

    // No shared stream protocol.
    let (head, status) = raw_request(
        host,
        &format!("POST /api/v1/namespaces/default/pods/p/exec?command=ls&stdout=true HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v9.channel.k8s.io\r\nContent-Length: 0\r\n\r\n"),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(head.to_ascii_lowercase().contains("x-accepted-stream-protocol-versions: v4.channel.k8s.io"), "{head}");
    assert_eq!(status["code"], 403);
    assert_eq!(
        status["message"],
        "unable to upgrade: unable to negotiate protocol: client supports [v9.channel.k8s.io], server accepts \
         [v5.channel.k8s.io v4.channel.k8s.io v3.channel.k8s.io v2.channel.k8s.io channel.k8s.io]"
    );

    // Not an upgrade.
    let (head, status) = raw_request(
        host,
        &format!(
            "POST /api/v1/namespaces/default/pods/p/portforward HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\n\r\n"
        ),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    assert_eq!(status["message"], "unable to upgrade: missing upgrade headers in request");

    // The PortForwardWebsockets tunnel names no port: refused as the kubelet refuses it
    // (kubectl 1.30+ then falls back to SPDY).
    let (head, status) = raw_request(
        host,
        &format!("GET /api/v1/namespaces/default/pods/p/portforward HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io\r\n\r\n"),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(status["message"], "query parameter \"port\" is required");
}

/// A process holding a new network namespace; killed when dropped.
struct NetnsHolder {
    child: Child,
}

impl NetnsHolder {
    async fn start() -> NetnsHolder {
        let mut child = Command::new("unshare")
            .args(["--net", "sh", "-c", "echo ready; exec cat"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn unshare");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(STEP, lines.next_line()).await.expect("ready in time").expect("read");
        assert_eq!(ready.as_deref(), Some("ready"));
        NetnsHolder { child }
    }

    fn netns(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/ns/net", self.child.id().expect("running")))
    }
}

/// With a network namespace, the command runs inside it (setns between fork and exec).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_enters_the_network_namespace() {
    let holder = NetnsHolder::start().await;
    let workdir = tempfile::tempdir().expect("workdir");
    let target = ExecTarget { netns: Some(holder.netns()), ..target_in(workdir.path()) };
    let server = FakeApiServer::start(target).await;
    let mut socket =
        open_exec_socket(&server, "command=readlink&command=%2Fproc%2Fself%2Fns%2Fnet&stdout=1", "v4.channel.k8s.io")
            .await;
    let channels = read_channels(&mut socket).await;
    let inside = String::from_utf8_lossy(&channels[&1]).trim().to_owned();
    let pod = std::fs::read_link(holder.netns()).expect("pod netns");
    let host = std::fs::read_link("/proc/self/ns/net").expect("host netns");
    assert_eq!(inside, pod.display().to_string());
    assert_ne!(pod, host);
}

/// `kubectl cp` runs tar in the container both ways: binary data on stdin (ended by the
/// v5 close signal on 1.33, a SPDY FIN on 1.27) and on stdout.
async fn copy_files(version: &str) {
    let workdir = tempfile::tempdir().expect("workdir");
    let server = FakeApiServer::start(target_in(workdir.path())).await;
    let local = tempfile::tempdir().expect("local dir");
    let content: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    std::fs::write(local.path().join("upload.bin"), &content).expect("write upload");
    let inside = workdir.path().join("in-pod");
    std::fs::create_dir(&inside).expect("pod dir");

    let source = local.path().join("upload.bin");
    let destination = format!("p:{}", inside.join("upload.bin").display());
    let (code, _, stderr) =
        run(server.kubectl(version, &["cp", &source.display().to_string(), &destination]), None).await;
    assert_eq!(code, Some(0), "kubectl {version} cp to the pod: {stderr}");
    assert!(
        std::fs::read(inside.join("upload.bin")).expect("uploaded") == content,
        "kubectl {version}: upload differs"
    );

    let back = local.path().join("download.bin");
    let source = format!("p:{}", inside.join("upload.bin").display());
    let (code, _, stderr) = run(server.kubectl(version, &["cp", &source, &back.display().to_string()]), None).await;
    assert_eq!(code, Some(0), "kubectl {version} cp from the pod: {stderr}");
    assert!(std::fs::read(&back).expect("downloaded") == content, "kubectl {version}: download differs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33_cp() {
    copy_files("1.33").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_27_cp() {
    copy_files("1.27").await;
}

/// Port-forward over WebSocket as the kubelet serves it to non-kubectl clients: per port a
/// data channel and an error channel, each opened with the port (little-endian u16).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_port_forward_channels() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let workdir = tempfile::tempdir().expect("workdir");
    let server = FakeApiServer::start(target_in(workdir.path())).await;
    let (echo_port, echo) = echo_server().await;
    let closed = {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let mut socket =
        open_socket(&server, &format!("portforward?port={echo_port}&port={closed}"), "v4.channel.k8s.io").await;
    socket.send(Message::Binary(Bytes::from_static(b"\x00ping"))).await.expect("send");
    let mut channels = std::collections::BTreeMap::<u8, Vec<u8>>::new();
    let mut echoed = echo_port.to_le_bytes().to_vec();
    echoed.extend_from_slice(b"ping");
    let refused = format!(
        "error forwarding port {closed} to pod p_default, uid : dial tcp 127.0.0.1:{closed}: connect: connection refused"
    );
    let read = async {
        while let Some(Ok(message)) = socket.next().await {
            if let Message::Binary(data) = message
                && let Some((&channel, payload)) = data.split_first()
            {
                channels.entry(channel).or_default().extend_from_slice(payload);
            }
            let error = channels.get(&3).map(|e| String::from_utf8_lossy(e).into_owned()).unwrap_or_default();
            if channels.get(&0) == Some(&echoed) && error.ends_with(&refused) {
                return;
            }
        }
        panic!("the socket closed early: {channels:?}");
    };
    tokio::time::timeout(STEP, read).await.expect("echo and error in time");
    assert_eq!(channels[&1], echo_port.to_le_bytes());
    assert_eq!(channels[&2], closed.to_le_bytes());
    assert_eq!(&channels[&3][..2], closed.to_le_bytes());
    echo.abort();
}

/// The `base64.` variants send text messages: the channel as a digit, then base64.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_base64_protocol() {
    use base64::Engine as _;
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let workdir = tempfile::tempdir().expect("workdir");
    let server = FakeApiServer::start(target_in(workdir.path())).await;
    let query = "command=sh&command=-c&command=echo+hi%3B+exit+2&stdout=1";
    let mut socket = open_exec_socket(&server, query, "v4.base64.channel.k8s.io").await;
    let mut channels = std::collections::BTreeMap::<u8, Vec<u8>>::new();
    let mut texts = Vec::new();
    let read = async {
        while let Some(Ok(message)) = socket.next().await {
            if let Message::Text(text) = message {
                texts.push(text.to_string());
                let (digit, data) = text.split_at(1);
                let decoded = base64::engine::general_purpose::STANDARD.decode(data).expect("base64");
                channels.entry(digit.as_bytes()[0] - b'0').or_default().extend_from_slice(&decoded);
            }
        }
    };
    tokio::time::timeout(STEP, read).await.expect("socket closed in time");
    assert_eq!(texts.first().map(String::as_str), Some("1"), "the ready message");
    assert_eq!(channels.get(&1).map(Vec::as_slice), Some(&b"hi\n"[..]));
    let status: serde_json::Value = serde_json::from_slice(&channels[&3]).expect("status JSON");
    assert_eq!(status["reason"], "NonZeroExitCode");
}
