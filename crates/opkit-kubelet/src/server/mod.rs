//! The kubelet server: HTTPS on `127.0.0.1:<random port>` with a serving certificate the
//! cluster CA signs, answering only clients with a certificate from that CA (the API
//! server's), each request authorized as kube's kubelet in `Webhook` mode authorizes it
//! ([`authorize`]: a SubjectAccessReview on `nodes/proxy` and the other node subresources),
//! at the real kubelet's paths. Every simulated Node advertises it (the
//! `opkit.dev/kubelet-endpoint` annotation and `daemonEndpoints.kubeletEndpoint.port`).
//! `containerLogs` is served here ([`logs`]), `exec` and `attach` ([`exec`]) and
//! `portForward` ([`port_forward`]) over the streaming protocols kubectl speaks
//! ([`stream`]); errors are a `metav1.Status` with kube's code.

pub(crate) mod authorize;
#[cfg(unix)]
pub mod exec;
pub(crate) mod logs;
#[cfg(unix)]
pub mod port_forward;
#[cfg(unix)]
pub(crate) mod stream;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::Api;
use opkit::{Runnable, RunnableError};
use opkit_serve::PeerCertificates;
use tokio_util::sync::CancellationToken;

use super::runtime::{ExecTargetData, LookupError, Runtime};

/// The annotation on simulated Nodes naming their kubelet server (`127.0.0.1:<port>`).
pub const ENDPOINT_ANNOTATION: &str = "opkit.dev/kubelet-endpoint";

/// The body of every kubelet server response.
pub(crate) type ResponseBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// Errors setting up the kubelet server.
#[derive(Debug, thiserror::Error)]
pub enum KubeletServerError {
    /// The serving certificate could not be made from the cluster CA.
    #[error("kubelet serving certificate: {0}")]
    Certificate(String),
    /// The listener could not be bound.
    #[error("binding the kubelet server: {0}")]
    Bind(#[from] std::io::Error),
}

/// A bound, not yet serving, kubelet server.
pub struct KubeletListener {
    listener: std::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    port: u16,
}

impl std::fmt::Debug for KubeletListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeletListener").field("port", &self.port).finish_non_exhaustive()
    }
}

impl KubeletListener {
    /// Binds a kubelet server on a free loopback port, with a serving certificate signed
    /// by the cluster CA `ca_pem` (key `ca_key_pem`), which also signs the clients it
    /// accepts.
    pub fn bind(ca_pem: &str, ca_key_pem: &str) -> Result<KubeletListener, KubeletServerError> {
        let ca = opkit_serve::tls::DevCa::from_pem(ca_pem, ca_key_pem)
            .map_err(|e| KubeletServerError::Certificate(e.to_string()))?;
        let cert = ca
            .issue_serving_cert("opkit-kubelet", &["127.0.0.1".to_string()])
            .map_err(|e| KubeletServerError::Certificate(e.to_string()))?;
        let tls = opkit_serve::tls::server_config_with_client_ca(&cert.cert_pem, &cert.key_pem, ca_pem)
            .map_err(|e| KubeletServerError::Certificate(e.to_string()))?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        Ok(KubeletListener { listener, tls, port })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }
}

/// What the server's handlers consult.
pub(crate) struct KubeletServer {
    listener: KubeletListener,
    handler: Arc<Handler>,
}

impl KubeletServer {
    /// Serves `listener` for the real pods of `runtime` (if any), looking simulated pods
    /// up with `client`.
    pub(crate) fn new(listener: KubeletListener, runtime: Option<Arc<Runtime>>, client: kube::Client) -> KubeletServer {
        let authorizer = authorize::Authorizer::new(client.clone());
        KubeletServer { listener, handler: Arc::new(Handler { runtime, client, authorizer }) }
    }
}

/// Routes requests.
pub(crate) struct Handler {
    /// The real pods.
    pub runtime: Option<Arc<Runtime>>,
    /// The kubelet's client.
    pub client: kube::Client,
    /// Decides whether a client may do what it asks.
    pub authorizer: authorize::Authorizer,
}

/// A failure `metav1.Status` with kube's code, reason and message.
pub(crate) fn failure_status(code: StatusCode, reason: &str, message: &str) -> Status {
    Status {
        code: Some(i32::from(code.as_u16())),
        message: Some(message.to_string()),
        reason: Some(reason.to_string()),
        status: Some("Failure".to_string()),
        ..Status::default()
    }
}

/// The JSON of `status` with its `kind` and `apiVersion`, as the kubelet writes it.
pub(crate) fn status_json(status: &Status) -> Bytes {
    let mut value = serde_json::to_value(status).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("kind".into(), "Status".into());
        object.insert("apiVersion".into(), "v1".into());
    }
    Bytes::from(value.to_string())
}

/// A `metav1.Status` response.
pub(crate) fn status_response(code: StatusCode, reason: &str, message: &str) -> Response<ResponseBody> {
    let mut res = Response::new(full(status_json(&failure_status(code, reason, message))));
    *res.status_mut() = code;
    res.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    res
}

/// The response to a failed lookup, with the kubelet's code (404 for a pod this kubelet
/// does not run, 400 for a container not in it or not running).
#[cfg_attr(not(unix), allow(dead_code))] // used only by the unix-only real-pod runtime
pub(crate) fn lookup_error(e: &LookupError) -> Response<ResponseBody> {
    match e {
        LookupError::PodNotFound(_) => status_response(StatusCode::NOT_FOUND, "NotFound", &e.to_string()),
        LookupError::ContainerNotFound { .. } | LookupError::NotRunning { .. } => {
            status_response(StatusCode::BAD_REQUEST, "BadRequest", &e.to_string())
        }
    }
}

/// A streaming endpoint's answer with the server's body type.
#[cfg(unix)]
fn boxed(res: Response<http_body_util::Full<Bytes>>) -> Response<ResponseBody> {
    res.map(|b| b.map_err(|never: Infallible| match never {}).boxed_unsync())
}

/// A complete body.
pub(crate) fn full(bytes: Bytes) -> ResponseBody {
    http_body_util::Full::new(bytes).map_err(|never: Infallible| match never {}).boxed_unsync()
}

impl Handler {
    /// What `exec` / `attach` in `container` of pod `ns/pod` runs with (the routes
    /// `/exec` and `/attach` hand it to the streams; [`lookup_error`] answers failures).
    #[cfg_attr(not(unix), allow(dead_code))] // used only by the unix-only real-pod runtime
    pub(crate) fn exec_target(&self, ns: &str, pod: &str, container: &str) -> Result<ExecTargetData, LookupError> {
        let rt = self.runtime.as_ref().ok_or_else(|| LookupError::PodNotFound(pod.to_string()))?;
        rt.exec_target(ns, pod, container)
    }

    /// Where `/portForward` to pod `ns/pod` connects: its IP and network namespace.
    #[cfg(unix)]
    pub(crate) fn forward_target(&self, ns: &str, pod: &str) -> Result<port_forward::ForwardTarget, LookupError> {
        let rt = self.runtime.as_ref().ok_or_else(|| LookupError::PodNotFound(pod.to_string()))?;
        let (ip, netns) = rt.pod_sandbox(ns, pod)?;
        Ok(port_forward::ForwardTarget { ip, netns })
    }

    /// The node pod `ns/pod` is bound to (empty when it is not found or not bound): the
    /// node name a request about the pod is authorized on.
    async fn node_of(&self, ns: &str, pod: &str) -> String {
        match Api::<Pod>::namespaced(self.client.clone(), ns).get_opt(pod).await {
            Ok(found) => found.and_then(|p| p.spec).and_then(|s| s.node_name).unwrap_or_default(),
            Err(e) => {
                tracing::debug!(error = %e, %ns, %pod, "kubelet: looking up the pod's node failed");
                String::new()
            }
        }
    }

    /// Answers one request.
    pub(crate) async fn handle(&self, req: Request<Incoming>) -> Response<ResponseBody> {
        let Some(requester) =
            req.extensions().get::<PeerCertificates>().and_then(authorize::Requester::of_certificates)
        else {
            return status_response(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
        };
        let path = req.uri().path().to_string();
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let node = match segments.as_slice() {
            ["containerLogs" | "exec" | "attach" | "run", ns, pod, ..] | ["portForward", ns, pod, ..] => {
                self.node_of(ns, pod).await
            }
            _ => String::new(),
        };
        let attributes = authorize::attributes(req.method(), &path);
        if let Err(denied) = self.authorizer.authorize(&requester, &attributes, &node).await {
            return denied;
        }
        match segments.as_slice() {
            ["containerLogs", ns, pod, container] => {
                if req.method() != http::Method::GET {
                    return status_response(
                        StatusCode::METHOD_NOT_ALLOWED,
                        "MethodNotAllowed",
                        &format!("the server does not allow this method on the requested resource: {}", req.method()),
                    );
                }
                logs::serve(self, ns, pod, container, req.uri().query().unwrap_or_default()).await
            }
            #[cfg(unix)]
            ["exec", ns, pod, container] => match self.exec_target(ns, pod, container) {
                Ok(t) => {
                    let target = exec::ExecTarget { env: t.env, working_dir: t.working_dir, netns: t.netns };
                    boxed(exec::serve_in(req, target, t.container).await)
                }
                Err(e) => lookup_error(&e),
            },
            #[cfg(unix)]
            ["attach", ns, pod, container] => {
                match self.runtime.as_ref().map(|rt| rt.attach_target(ns, pod, container)) {
                    Some(Ok(attachment)) => boxed(exec::serve_attach(req, attachment).await),
                    Some(Err(e)) => lookup_error(&e),
                    None => lookup_error(&LookupError::PodNotFound((*pod).to_string())),
                }
            }
            #[cfg(unix)]
            ["portForward", ns, pod] => match self.forward_target(ns, pod) {
                Ok(target) => boxed(port_forward::serve_in(req, target).await),
                Err(e) => lookup_error(&e),
            },
            _ => status_response(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("the server could not find the requested resource: {path}"),
            ),
        }
    }
}

impl Runnable for KubeletServer {
    fn name(&self) -> String {
        "kubelet-server".into()
    }
    fn needs_leader_election(&self) -> bool {
        false
    }
    fn start(self: Box<Self>, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), RunnableError>> {
        Box::pin(async move {
            let listener = tokio::net::TcpListener::from_std(self.listener.listener)
                .map_err(|e| RunnableError(format!("kubelet server: {e}")))?;
            let handler = self.handler.clone();
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let handler = handler.clone();
                async move { Ok::<_, Infallible>(handler.handle(req).await) }
            });
            opkit_serve::Server::new(listener)
                .tls(self.listener.tls.clone())
                .shutdown_grace(Some(Duration::from_secs(1)))
                .serve(service, shutdown)
                .await;
            Ok(())
        })
    }
}
