//! The pod streaming subresources (`pods/log`, `pods/exec`, `pods/attach`,
//! `pods/portforward`) proxied to the pod's kubelet: a test kubelet (HTTPS, certificate
//! from the server's CA, client certificate required) is named by a Node's
//! `opkit.dev/kubelet-endpoint` annotation; real kubectl reads logs (streamed with `-f`),
//! kube's 400s and 422s come before any proxying, the kubelet's errors are passed on, an
//! upgrade is spliced byte for byte both ways (a WebSocket one authorized as `create`),
//! and an interactive `kubectl debug` that cannot attach fails without panicking.

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::wait::await_condition;
use opkit_apiserver::{ApiServer, RunningServer, ServerConfig};
use opkit_serve::tls::DevCa;
use opkit_testenv::TestEnv;
use parking_lot::Mutex;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use crate::common::{client_for, env, raw, within};

type TestBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// What the test kubelet saw.
#[derive(Default)]
pub(crate) struct Seen {
    /// The common names of the client certificates that connected.
    client_names: Vec<String>,
    /// Method, path and query of each request.
    pub(crate) requests: Vec<String>,
}

/// How many upgraded streams the test kubelet has seen end.
type ClosedStreams = watch::Sender<usize>;

/// An HTTPS kubelet on loopback serving canned logs and echoing upgraded streams.
pub(crate) struct TestKubelet {
    pub(crate) address: String,
    pub(crate) seen: Arc<Mutex<Seen>>,
    /// Set to true to let a followed log write its second line and end.
    release: watch::Sender<bool>,
    closed: Arc<ClosedStreams>,
    _task: tokio::task::JoinHandle<()>,
}

impl TestKubelet {
    pub(crate) async fn start(server: &RunningServer) -> TestKubelet {
        let ca = DevCa::from_pem(server.ca_pem(), server.ca_key_pem()).expect("the server's CA");
        let serving = ca.issue_serving_cert("kubelet", &["127.0.0.1".to_owned()]).expect("serving cert");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(server.ca_pem().as_bytes()).expect("ca")).expect("root");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .expect("a verifier that requires client certificates");
        let chain = vec![CertificateDer::from_pem_slice(serving.cert_pem.as_bytes()).expect("cert")];
        let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes()).expect("key");
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .expect("server config");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("addr").to_string();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (release, released) = watch::channel(false);
        let closed = Arc::new(watch::Sender::new(0));
        let task = tokio::spawn({
            let (seen, closed) = (seen.clone(), closed.clone());
            async move {
                loop {
                    let Ok((tcp, _)) = listener.accept().await else { return };
                    let (acceptor, seen, released, closed) =
                        (acceptor.clone(), seen.clone(), released.clone(), closed.clone());
                    tokio::spawn(async move {
                        let Ok(tls) = acceptor.accept(tcp).await else { return };
                        if let Some(cert) = tls.get_ref().1.peer_certificates().and_then(|c| c.first()) {
                            let (_, parsed) = x509_parser::parse_x509_certificate(cert).expect("client cert");
                            let cn = parsed.subject().iter_common_name().next().and_then(|c| c.as_str().ok());
                            seen.lock().client_names.push(cn.unwrap_or_default().to_owned());
                        }
                        let service = hyper::service::service_fn(move |req| {
                            let (seen, released, closed) = (seen.clone(), released.clone(), closed.clone());
                            async move { Ok::<_, Infallible>(kubelet_answer(req, seen, released, closed).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tls), service)
                            .with_upgrades()
                            .await;
                    });
                }
            }
        });
        TestKubelet { address, seen, release, closed, _task: task }
    }
}

fn full(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<TestBody> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert("content-type", content_type.parse().expect("content type"));
    r
}

/// The test kubelet's answers (as the runtime's kubelet server's contract says).
async fn kubelet_answer(
    mut req: Request<Incoming>,
    seen: Arc<Mutex<Seen>>,
    mut released: watch::Receiver<bool>,
    closed: Arc<ClosedStreams>,
) -> Response<TestBody> {
    let path_and_query = req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
    seen.lock().requests.push(format!("{} {path_and_query}", req.method()));
    let query = req.uri().query().unwrap_or_default().to_owned();
    let segments: Vec<String> = req.uri().path().split('/').skip(1).map(str::to_owned).collect();
    match segments.first().map(String::as_str) {
        Some("containerLogs") => {
            let container = segments.get(3).cloned().unwrap_or_default();
            if query.contains("previous=true") {
                let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": format!("previous terminated container \"{container}\" in pod \"{}\" not found",
                        segments.get(2).cloned().unwrap_or_default()),
                    "reason": "BadRequest", "code": 400});
                return full(StatusCode::BAD_REQUEST, "application/json", status.to_string());
            }
            if query.contains("follow=true") {
                let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
                tokio::spawn(async move {
                    let _ = tx.send(Ok(Frame::data(Bytes::from("first line\n")))).await;
                    let _ = released.wait_for(|r| *r).await;
                    let _ = tx.send(Ok(Frame::data(Bytes::from("second line\n")))).await;
                });
                let mut r =
                    Response::new(BodyExt::boxed(StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx))));
                r.headers_mut().insert("content-type", "text/plain".parse().expect("content type"));
                return r;
            }
            full(StatusCode::OK, "text/plain", format!("log of {container} [{query}]\n"))
        }
        Some("exec" | "attach" | "portForward") => {
            let Some(upgrade) = req.headers().get("upgrade").cloned() else {
                return full(StatusCode::BAD_REQUEST, "text/plain", "Upgrade request required");
            };
            let protocol = req.headers().get("x-stream-protocol-version").cloned();
            let websocket_protocol = req.headers().get("sec-websocket-protocol").cloned();
            let on_upgrade = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                let Ok(upgraded) = on_upgrade.await else { return };
                let mut io = TokioIo::new(upgraded);
                let mut buf = [0u8; 1024];
                loop {
                    match io.read(&mut buf).await {
                        Ok(0) | Err(_) => {
                            closed.send_modify(|n| *n += 1);
                            return;
                        }
                        Ok(n) => {
                            let mut echoed = b"echo:".to_vec();
                            echoed.extend_from_slice(&buf[..n]);
                            if io.write_all(&echoed).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
            let mut r = full(StatusCode::SWITCHING_PROTOCOLS, "text/plain", Bytes::new());
            r.headers_mut().remove("content-type");
            r.headers_mut().insert("connection", "Upgrade".parse().expect("header"));
            r.headers_mut().insert("upgrade", upgrade);
            if let Some(p) = protocol {
                r.headers_mut().insert("x-stream-protocol-version", p);
            }
            if let Some(p) = websocket_protocol {
                r.headers_mut().insert("sec-websocket-protocol", p);
            }
            r
        }
        _ => full(StatusCode::NOT_FOUND, "text/plain", "404 page not found"),
    }
}

/// A Node whose kubelet is at `endpoint`.
pub(crate) async fn node(client: &Client, name: &str, endpoint: &str) {
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name,
        "annotations": {"opkit.dev/kubelet-endpoint": endpoint}}}))
    .expect("node");
    Api::<Node>::all(client.clone()).create(&PostParams::default(), &node).await.expect("create node");
}

/// A pod in `default` on `node` (None: unscheduled) with `containers`, each with the
/// given state (`running` or `waiting`).
async fn pod(client: &Client, name: &str, node: Option<&str>, containers: &[(&str, &str)]) {
    let specs: Vec<Value> = containers.iter().map(|(c, _)| json!({"name": c, "image": "busybox"})).collect();
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"nodeName": node, "containers": specs}}))
    .expect("pod");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod).await.expect("create pod");
    let statuses: Vec<Value> = containers
        .iter()
        .map(|(c, state)| match *state {
            "running" => json!({"name": c, "image": "busybox", "imageID": "", "ready": true, "restartCount": 0,
                "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}}),
            _ => json!({"name": c, "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}}}),
        })
        .collect();
    let status = json!({"status": {"phase": "Running", "containerStatuses": statuses}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.expect("pod status");
}

/// The versioned kubectl binary, found next to the `kubectl` on PATH.
fn kubectl(version: &str, env: &TestEnv, args: &[&str]) -> Command {
    let on_path = std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join("kubectl")).find(|c| c.exists()))
        .expect("kubectl must be on PATH");
    let real = std::fs::canonicalize(on_path).expect("resolve kubectl");
    let bin: PathBuf = real.with_file_name(format!("kubectl.{version}"));
    let mut c = Command::new(bin);
    let home = env.kubeconfig_path().parent().map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    c.env("KUBECONFIG", env.kubeconfig_path()).env("HOME", home).arg("--request-timeout=20s").args(args);
    c
}

/// Runs kubectl to its end (bounded by the test timeout): (success, stdout, stderr).
pub(crate) async fn run_kubectl(version: &str, env: &TestEnv, args: &[&str]) -> (bool, String, String) {
    let mut command = kubectl(version, env, args);
    command.stdin(Stdio::null());
    let output = within(&format!("kubectl {args:?}"), tokio::task::spawn_blocking(move || command.output()))
        .await
        .expect("kubectl task")
        .expect("run kubectl");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn kubectl_logs_reach_the_nodes_kubelet_with_the_servers_client_certificate() {
    let env = env().await;
    let kubelet = TestKubelet::start(env.server()).await;
    node(&env.client(), "n1", &kubelet.address).await;
    pod(&env.client(), "web", Some("n1"), &[("app", "running")]).await;

    let (ok, stdout, stderr) =
        run_kubectl("1.33", &env, &["logs", "web", "--tail=5", "--timestamps", "--limit-bytes=100"]).await;
    assert!(ok, "kubectl logs failed: {stderr}");
    assert!(stdout.starts_with("log of app ["), "{stdout}");
    for option in ["tailLines=5", "timestamps=true", "limitBytes=100"] {
        assert!(stdout.contains(option), "{option} forwarded: {stdout}");
    }
    let seen = kubelet.seen.lock();
    assert!(seen.requests.iter().any(|r| r.starts_with("GET /containerLogs/default/web/app?")), "{:?}", seen.requests);
    assert_eq!(seen.client_names.first().map(String::as_str), Some("kube-apiserver-kubelet-client"));
}

#[tokio::test]
async fn kubectl_logs_follow_streams_lines_before_the_kubelet_ends() {
    let env = env().await;
    let kubelet = TestKubelet::start(env.server()).await;
    node(&env.client(), "n1", &kubelet.address).await;
    pod(&env.client(), "web", Some("n1"), &[("app", "running")]).await;

    let mut child = kubectl("1.33", &env, &["logs", "-f", "web"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kubectl logs -f");
    let stdout = child.stdout.take().expect("stdout");
    let (lines_tx, mut lines) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    let first = within("the first followed line", lines.recv()).await;
    assert_eq!(first.as_deref(), Some("first line"), "streamed while the kubelet still holds the log open");
    kubelet.release.send(true).expect("release the second line");
    let second = within("the second followed line", lines.recv()).await;
    assert_eq!(second.as_deref(), Some("second line"));
    let status = within("kubectl to end with the log", tokio::task::spawn_blocking(move || child.wait()))
        .await
        .expect("wait task")
        .expect("kubectl exit");
    assert!(status.success(), "kubectl logs -f ends when the kubelet ends the log");
}

#[tokio::test]
async fn the_kubelets_error_is_passed_on() {
    let env = env().await;
    let kubelet = TestKubelet::start(env.server()).await;
    node(&env.client(), "n1", &kubelet.address).await;
    pod(&env.client(), "web", Some("n1"), &[("app", "running")]).await;

    let (ok, _, stderr) = run_kubectl("1.33", &env, &["logs", "--previous", "web"]).await;
    assert!(!ok);
    assert!(
        stderr
            .contains(r#"Error from server (BadRequest): previous terminated container "app" in pod "web" not found"#),
        "{stderr}"
    );
    let r = raw(&env.client(), "GET", "/api/v1/namespaces/default/pods/web/log?previous=true", None, vec![]).await;
    assert_eq!((r.code, r.json["reason"].as_str()), (400, Some("BadRequest")), "{}", r.text);
}

#[tokio::test]
async fn checks_before_proxying_answer_as_kube() {
    let env = env().await;
    let kubelet = TestKubelet::start(env.server()).await;
    node(&env.client(), "n1", &kubelet.address).await;
    pod(&env.client(), "two", Some("n1"), &[("a", "running"), ("b", "running")]).await;
    pod(&env.client(), "pending", None, &[("c", "waiting")]).await;
    pod(&env.client(), "starting", Some("n1"), &[("c", "waiting")]).await;
    let client = env.client();
    let get = |path: String| {
        let client = client.clone();
        async move { raw(&client, "GET", &path, None, vec![]).await }
    };
    let base = "/api/v1/namespaces/default/pods";

    let r = get(format!("{base}/two/log")).await;
    assert_eq!(r.code, 400);
    assert_eq!(r.json["message"], "a container name must be specified for pod two, choose one of: [a b]");
    let r = get(format!("{base}/two/log?container=x")).await;
    assert_eq!((r.code, r.json["message"].as_str()), (400, Some("container x is not valid for pod two")));
    let r = get(format!("{base}/missing/log")).await;
    assert_eq!((r.code, r.json["reason"].as_str()), (404, Some("NotFound")));
    assert_eq!(r.json["message"], r#"pods "missing" not found"#);
    let r = raw(&client, "POST", &format!("{base}/pending/exec?command=ls&stdout=true"), None, vec![]).await;
    assert_eq!((r.code, r.json["message"].as_str()), (400, Some("pod pending does not have a host assigned")));
    let r = get(format!("{base}/starting/log")).await;
    assert_eq!(r.code, 400);
    assert_eq!(r.json["message"], r#"container "c" in pod "starting" is waiting to start: ContainerCreating"#);
    let (ok, _, stderr) = run_kubectl("1.33", &env, &["logs", "starting"]).await;
    assert!(!ok && stderr.contains(r#"is waiting to start: ContainerCreating"#), "{stderr}");

    let r = get(format!("{base}/two/log?container=a&tailLines=-1&limitBytes=0")).await;
    assert_eq!((r.code, r.json["reason"].as_str()), (422, Some("Invalid")), "{}", r.text);
    let fields: Vec<&str> =
        r.json["details"]["causes"].as_array().expect("causes").iter().filter_map(|c| c["field"].as_str()).collect();
    assert_eq!(fields, ["tailLines", "limitBytes"]);
    assert_eq!(r.json["details"]["kind"], "PodLogOptions");
    let r = get(format!("{base}/two/log?container=a&sinceSeconds=10&sinceTime=2024-01-01T00:00:00Z")).await;
    assert_eq!(r.code, 422, "{}", r.text);
    assert!(r.text.contains("at most one of `sinceTime` or `sinceSeconds` may be specified"), "{}", r.text);
    let r = get(format!("{base}/two/log?container=a&sinceSeconds=0")).await;
    assert_eq!(r.code, 422, "{}", r.text);
    assert!(kubelet.seen.lock().requests.is_empty(), "nothing reached the kubelet");

    // A pod on no node yet has no logs: an empty answer, as kube gives.
    let r = get(format!("{base}/pending/log")).await;
    assert_eq!((r.code, r.text.as_str()), (200, ""));
}

#[tokio::test]
async fn an_unreachable_kubelet_is_kubes_500_with_the_dial_error() {
    let env = env().await;
    let closed = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = closed.local_addr().expect("addr").to_string();
    drop(closed);
    node(&env.client(), "n1", &address).await;
    pod(&env.client(), "web", Some("n1"), &[("app", "running")]).await;
    let r = raw(&env.client(), "GET", "/api/v1/namespaces/default/pods/web/log", None, vec![]).await;
    assert_eq!((r.code, r.json["reason"].as_str()), (500, Some("InternalError")), "{}", r.text);
    let expected = format!(
        "Get \"https://{address}/containerLogs/default/web/app\": dial tcp {address}: connect: connection refused"
    );
    assert_eq!(r.json["message"], expected.as_str());
}

/// A raw HTTP/1.1 connection to the API server over TLS, verified for `server_name`.
pub(crate) async fn tls_to_server(
    server: &RunningServer,
    server_name: ServerName<'static>,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(server.ca_pem().as_bytes()).expect("ca")).expect("root");
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(server.addr()).await.expect("connect");
    within("the TLS handshake", tokio_rustls::TlsConnector::from(Arc::new(config)).connect(server_name, tcp))
        .await
        .expect("the server's certificate is valid for the name")
}

/// Sends an upgrade request line and headers; returns the response head.
pub(crate) async fn send_upgrade(
    stream: &mut tokio_rustls::client::TlsStream<TcpStream>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> String {
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: kubernetes.default.svc\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.expect("send the request");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = within("the response head", stream.read(&mut byte)).await.expect("read");
        assert_ne!(n, 0, "connection closed before the response head: {}", String::from_utf8_lossy(&head));
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

#[tokio::test]
async fn an_exec_upgrade_is_spliced_byte_for_byte_both_ways() {
    let env = env().await;
    let kubelet = TestKubelet::start(env.server()).await;
    node(&env.client(), "n1", &kubelet.address).await;
    pod(&env.client(), "web", Some("n1"), &[("app", "running")]).await;

    let mut stream = tls_to_server(env.server(), ServerName::try_from("kubernetes.default.svc").expect("name")).await;
    let token = format!("Bearer {}", env.server().token());
    let head = send_upgrade(
        &mut stream,
        "POST",
        "/api/v1/namespaces/default/pods/web/exec?command=cat&command=-n&stdin=true&stdout=true",
        &[
            ("Authorization", &token),
            ("Connection", "Upgrade"),
            ("Upgrade", "SPDY/3.1"),
            ("X-Stream-Protocol-Version", "v4.channel.k8s.io"),
        ],
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("upgrade: spdy/3.1") && lower.contains("x-stream-protocol-version: v4.channel.k8s.io"));
    for payload in [&b"ping\x00\x01"[..], b"second"] {
        stream.write_all(payload).await.expect("write through the splice");
        let mut expected = b"echo:".to_vec();
        expected.extend_from_slice(payload);
        let mut got = vec![0u8; expected.len()];
        within("the echo", stream.read_exact(&mut got)).await.expect("read the echo");
        assert_eq!(got, expected);
    }
    let seen = kubelet.seen.lock();
    assert!(
        seen.requests.contains(&"POST /exec/default/web/app?command=cat&command=-n&stdin=true&stdout=true".to_owned()),
        "{:?}",
        seen.requests
    );
}

#[tokio::test]
async fn a_websocket_exec_is_authorized_as_create() {
    let env = env().await;
    let kubelet = TestKubelet::start(env.server()).await;
    node(&env.client(), "n1", &kubelet.address).await;
    pod(&env.client(), "web", Some("n1"), &[("app", "running")]).await;
    for (user, verb) in [("creator", "create"), ("getter", "get")] {
        let role: Role = serde_json::from_value(json!({"metadata": {"name": user},
            "rules": [{"apiGroups": [""], "resources": ["pods/exec", "pods/portforward"], "verbs": [verb]}]}))
        .expect("role");
        let binding: RoleBinding = serde_json::from_value(json!({"metadata": {"name": user},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}))
        .expect("binding");
        Api::<Role>::namespaced(env.client(), "default").create(&PostParams::default(), &role).await.expect("role");
        Api::<RoleBinding>::namespaced(env.client(), "default")
            .create(&PostParams::default(), &binding)
            .await
            .expect("binding");
    }
    let token = format!("Bearer {}", env.server().token());
    let websocket = |user: &'static str| {
        let token = token.clone();
        let env = &env;
        async move {
            let mut stream = tls_to_server(env.server(), ServerName::try_from("127.0.0.1").expect("ip")).await;
            send_upgrade(
                &mut stream,
                "GET",
                "/api/v1/namespaces/default/pods/web/portforward?ports=80",
                &[
                    ("Authorization", &token),
                    ("Impersonate-User", user),
                    ("Connection", "Upgrade"),
                    ("Upgrade", "websocket"),
                    ("Sec-WebSocket-Version", "13"),
                    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
                    ("Sec-WebSocket-Protocol", "v4.channel.k8s.io"),
                ],
            )
            .await
        }
    };
    let head = websocket("creator").await;
    assert!(head.starts_with("HTTP/1.1 101"), "create on pods/portforward lets the WebSocket GET through: {head}");
    assert!(head.to_ascii_lowercase().contains("sec-websocket-protocol: v4.channel.k8s.io"), "{head}");
    let head = websocket("getter").await;
    assert!(head.starts_with("HTTP/1.1 403"), "get alone is not enough: {head}");
}

/// Spawns kubectl with its output captured; the handle yields (success, stderr).
fn spawn_kubectl(env: &TestEnv, args: &[&str]) -> tokio::task::JoinHandle<(bool, String)> {
    let mut command = kubectl("1.33", env, args);
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = command.spawn().expect("spawn kubectl");
    tokio::task::spawn_blocking(move || {
        let output = child.wait_with_output().expect("kubectl output");
        (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
    })
}

/// Marks `pod`'s `container` running (as an ephemeral container when `ephemeral`).
async fn run_container(pods: &Api<Pod>, pod: &str, container: &str, ephemeral: bool) {
    let status = json!({"name": container, "image": "busybox", "imageID": "", "ready": true, "restartCount": 0,
        "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}});
    let list = if ephemeral { "ephemeralContainerStatuses" } else { "containerStatuses" };
    let patch = json!({"status": {"phase": "Running", list: [status]}});
    pods.patch_status(pod, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("container running");
}

#[tokio::test]
async fn kubectl_debug_interactive_fails_cleanly_without_panicking() {
    let env = env().await;
    let closed = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = closed.local_addr().expect("addr").to_string();
    drop(closed);
    node(&env.client(), "n1", &address).await;
    pod(&env.client(), "web", Some("n1"), &[("app", "running")]).await;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");

    // An ephemeral container: kubectl adds it, waits for it to run, then attaches.
    let debug = spawn_kubectl(&env, &["debug", "-it", "pod/web", "--image=busybox", "--container=dbg"]);
    within(
        "kubectl to add the ephemeral container",
        await_condition(pods.clone(), "web", |p: Option<&Pod>| {
            p.and_then(|p| p.spec.as_ref()?.ephemeral_containers.as_ref())
                .is_some_and(|e| e.iter().any(|c| c.name == "dbg"))
        }),
    )
    .await
    .expect("watch");
    run_container(&pods, "web", "dbg", true).await;
    let (ok, stderr) = within("kubectl debug pod", debug).await.expect("kubectl task");
    assert!(!ok, "the attach cannot reach the kubelet");
    assert!(!stderr.contains("panic") && !stderr.contains("goroutine"), "kubectl debug pod panicked: {stderr}");
    assert!(stderr.contains("connection refused"), "the dial error is shown: {stderr}");

    // A node debugging pod: kubectl creates it on the node, waits for it, then attaches.
    let debug = spawn_kubectl(&env, &["debug", "-it", "node/n1", "--image=busybox"]);
    let mut events =
        kube::runtime::watcher(pods.clone(), kube::runtime::watcher::Config::default()).applied_objects().boxed();
    let debugger = within("kubectl to create the node debugging pod", async {
        loop {
            let pod = events.try_next().await.expect("watch").expect("watch ended");
            if pod.metadata.name.as_deref().is_some_and(|n| n.starts_with("node-debugger-n1-")) {
                return pod.metadata.name.expect("name");
            }
        }
    })
    .await;
    run_container(&pods, &debugger, "debugger", false).await;
    let (ok, stderr) = within("kubectl debug node", debug).await.expect("kubectl task");
    assert!(!ok, "the attach cannot reach the kubelet");
    assert!(!stderr.contains("panic") && !stderr.contains("goroutine"), "kubectl debug node panicked: {stderr}");
}

#[tokio::test]
async fn streaming_requests_are_audited() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("audit.log");
    let cfg =
        opkit_apiserver::ServerConfig { audit_log: Some(path.clone()), ..opkit_apiserver::ServerConfig::in_memory() };
    let env =
        within("an audited server", TestEnv::builder().server(cfg).without_controllers().start()).await.expect("env");
    let kubelet = TestKubelet::start(env.server()).await;
    node(&env.client(), "n1", &kubelet.address).await;
    pod(&env.client(), "web", Some("n1"), &[("app", "running")]).await;

    let r = raw(&env.client(), "GET", "/api/v1/namespaces/default/pods/web/log", None, vec![]).await;
    assert_eq!(r.code, 200, "{}", r.text);
    let mut stream = tls_to_server(env.server(), ServerName::try_from("127.0.0.1").expect("ip")).await;
    let token = format!("Bearer {}", env.server().token());
    let head = send_upgrade(
        &mut stream,
        "POST",
        "/api/v1/namespaces/default/pods/web/exec?command=true&stdout=true",
        &[("Authorization", &token), ("Connection", "Upgrade"), ("Upgrade", "SPDY/3.1")],
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");

    let log = std::fs::read_to_string(&path).expect("audit log");
    let events: Vec<Value> = log.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let audited = |verb: &str, subresource: &str, code: u16| {
        events.iter().any(|e| {
            e["verb"] == verb && e["objectRef"]["subresource"] == subresource && e["responseStatus"]["code"] == code
        })
    };
    assert!(audited("get", "log", 200), "{log}");
    assert!(audited("create", "exec", 101), "{log}");
}

#[tokio::test]
async fn spliced_streams_end_when_the_server_stops() {
    let server = within("a server", ApiServer::start(ServerConfig::in_memory())).await.expect("server");
    let client = client_for(&server).await;
    let kubelet = TestKubelet::start(&server).await;
    node(&client, "n1", &kubelet.address).await;
    pod(&client, "web", Some("n1"), &[("app", "running")]).await;
    let mut stream = tls_to_server(&server, ServerName::try_from("127.0.0.1").expect("ip")).await;
    let token = format!("Bearer {}", server.token());
    let head = send_upgrade(
        &mut stream,
        "POST",
        "/api/v1/namespaces/default/pods/web/attach?stdin=true&stdout=true",
        &[("Authorization", &token), ("Connection", "Upgrade"), ("Upgrade", "SPDY/3.1")],
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    stream.write_all(b"x").await.expect("write");
    let mut echo = [0u8; 6];
    within("the echo", stream.read_exact(&mut echo)).await.expect("echo");

    within("the server to stop", server.shutdown()).await;
    let mut closed = kubelet.closed.subscribe();
    within("the kubelet's end of the stream to close", closed.wait_for(|n| *n >= 1)).await.expect("closed");
    let mut rest = Vec::new();
    let read = within("the client's end to close", stream.read_to_end(&mut rest)).await;
    assert!(read.is_err() || rest.is_empty(), "nothing more arrives: {rest:?}");
}

#[tokio::test]
async fn discovery_lists_the_kubelet_subresources() {
    let env = env().await;
    let list = raw(&env.client(), "GET", "/api/v1", None, vec![]).await;
    let resources = list.json["resources"].as_array().expect("resources");
    let entry = |name: &str| resources.iter().find(|r| r["name"] == name).cloned().unwrap_or_default();
    assert_eq!(
        (entry("pods/exec")["kind"].as_str(), &entry("pods/exec")["verbs"]),
        (Some("PodExecOptions"), &json!(["create", "get"]))
    );
    assert_eq!(entry("pods/log")["verbs"], json!(["get"]));
    assert_eq!(entry("pods/attach")["kind"], "PodAttachOptions");
    assert_eq!(entry("pods/portforward")["kind"], "PodPortForwardOptions");
}
