//! The HTTPS server: [`WebhookServer`] (builder; the listener is served by opkit-serve's accept
//! loop with TLS, HTTP/1.1 and HTTP/2) and the request router that turns AdmissionReview and
//! ConversionReview bodies into responses.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::WebhookError;
use super::admission::{
    AdmissionHandler, AsyncAdmissionHandler, Defaulter, MutatingHandler, ValidatingHandler, Validator,
};
use super::conversion::{ConversionRequest, ConversionReview, Converter, convert_review};
use super::hub::KindConverters;
use super::review::{AdmissionRequest, ReviewIn, envelope_of, is_admission_review, review_json, undecodable};
use super::tls::{DevCerts, server_config};

/// Largest request body accepted (controller-runtime's limit).
pub const MAX_REQUEST_BYTES: usize = 7 * 1024 * 1024;
/// The path of the CRD conversion webhook of the kinds registered with
/// [`WebhookBuilder::with_spoke`](super::WebhookBuilder::with_spoke) (controller-runtime's).
pub const CONVERSION_PATH: &str = "/convert";
/// Default listen address.
pub const DEFAULT_ADDR: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 9443);

/// What a path serves.
#[derive(Clone)]
enum Route {
    Admission(Arc<dyn AdmissionHandler>),
    AsyncAdmission(Arc<dyn AsyncAdmissionHandler>),
    Conversion(Arc<dyn Converter>),
}

/// HTTPS server for admission and conversion webhooks (controller-runtime's `webhook.Server`).
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use opkit::webhook::{Validator, WebhookServer};
///
/// struct NoPasswords;
/// impl Validator<ConfigMap> for NoPasswords {
///     fn validate_create(&self, cm: &ConfigMap) -> Result<Vec<String>, String> {
///         match cm.data.as_ref().is_some_and(|d| d.contains_key("password")) {
///             true => Err("passwords belong in Secrets".into()),
///             false => Ok(vec![]),
///         }
///     }
///     fn validate_update(&self, _old: &ConfigMap, new: &ConfigMap) -> Result<Vec<String>, String> {
///         self.validate_create(new)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let certs = tempfile::tempdir()?; // in a cluster: the mounted serving-certs directory
/// let stop = tokio_util::sync::CancellationToken::new();
/// let addr = WebhookServer::new()
///     .bind("127.0.0.1:0".parse()?)
///     .dev_certs(certs.path().to_path_buf(), vec!["localhost".into()])
///     .validating::<ConfigMap, _>("/validate-configmap", NoPasswords)
///     .start(stop.clone())
///     .await?;
/// assert_ne!(addr.port(), 0);
/// stop.cancel();
/// # Ok(())
/// # }
/// ```
pub struct WebhookServer {
    addr: SocketAddr,
    cert_dir: Option<PathBuf>,
    dev_hosts: Option<Vec<String>>,
    routes: Vec<(String, Route)>,
    /// Hub/spoke converters by (group, kind), served together at [`CONVERSION_PATH`].
    kind_converters: HashMap<(String, String), Arc<dyn Converter>>,
}

impl Default for WebhookServer {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for WebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookServer")
            .field("addr", &self.addr)
            .field("cert_dir", &self.cert_dir)
            .field("dev_hosts", &self.dev_hosts)
            .field("paths", &self.paths())
            .finish()
    }
}

impl WebhookServer {
    /// A server on `0.0.0.0:9443` with no handlers and no certificate directory.
    pub fn new() -> Self {
        WebhookServer {
            addr: DEFAULT_ADDR,
            cert_dir: None,
            dev_hosts: None,
            routes: Vec::new(),
            kind_converters: HashMap::new(),
        }
    }

    /// Sets the listen address (port 0 picks a free port; `start` returns the bound address).
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }

    /// Serves `tls.crt`/`tls.key` from `dir`, re-read whenever they change.
    pub fn cert_dir(mut self, dir: PathBuf) -> Self {
        self.cert_dir = Some(dir);
        self
    }

    /// Uses `dir` as the certificate directory and, at `start`, generates a development CA and a
    /// serving certificate for `hosts` there (`ca.crt`, `tls.crt`, `tls.key`) unless the pair
    /// already exists.
    pub fn dev_certs(mut self, dir: PathBuf, hosts: Vec<String>) -> Self {
        self.cert_dir = Some(dir);
        self.dev_hosts = Some(hosts);
        self
    }

    /// Serves a validating admission webhook for `K` at `path`.
    pub fn validating<K, V>(self, path: &str, validator: V) -> Self
    where
        K: Resource + DeserializeOwned + 'static,
        V: Validator<K>,
    {
        self.admission(path, ValidatingHandler::<K, V>::new(validator))
    }

    /// Serves a mutating (defaulting) admission webhook for `K` at `path`.
    pub fn mutating<K, D>(self, path: &str, defaulter: D) -> Self
    where
        K: Resource + DeserializeOwned + Serialize + Clone + 'static,
        D: Defaulter<K>,
    {
        self.admission(path, MutatingHandler::<K, D>::new(defaulter))
    }

    /// Serves a raw admission handler at `path` (full control over the response).
    pub fn admission<H: AdmissionHandler>(mut self, path: &str, handler: H) -> Self {
        self.routes.push((path.to_owned(), Route::Admission(Arc::new(handler))));
        self
    }

    /// Serves a CRD conversion webhook at `path`.
    pub fn conversion<C: Converter>(mut self, path: &str, converter: C) -> Self {
        self.routes.push((path.to_owned(), Route::Conversion(Arc::new(converter))));
        self
    }

    /// Serves an async admission handler at `path`.
    pub(crate) fn async_admission(mut self, path: String, handler: Arc<dyn AsyncAdmissionHandler>) -> Self {
        self.routes.push((path, Route::AsyncAdmission(handler)));
        self
    }

    /// Converts objects of `group`/`kind` with `converter` at [`CONVERSION_PATH`] (a kind
    /// registered twice keeps its last converter).
    pub(crate) fn kind_conversion(mut self, group: String, kind: String, converter: Arc<dyn Converter>) -> Self {
        self.kind_converters.insert((group, kind), converter);
        self
    }

    /// The registered paths, in registration order ([`CONVERSION_PATH`] last when a kind
    /// converts by hub and spokes).
    pub fn paths(&self) -> Vec<&str> {
        let convert = (!self.kind_converters.is_empty()).then_some(CONVERSION_PATH);
        self.routes.iter().map(|(p, _)| p.as_str()).chain(convert).collect()
    }

    /// Prepares certificates, binds the listener and spawns the accept loop; returns the bound
    /// address once listening. The server stops accepting on `shutdown` and asks open
    /// connections to finish gracefully (aborting them after
    /// [`opkit_serve::DEFAULT_SHUTDOWN_GRACE`]). TLS handshakes time out after
    /// [`opkit_serve::DEFAULT_TLS_HANDSHAKE_TIMEOUT`].
    pub async fn start(self, shutdown: CancellationToken) -> Result<SocketAddr, WebhookError> {
        let mut routes = HashMap::new();
        let mut all = self.routes;
        if !self.kind_converters.is_empty() {
            let converters = KindConverters::new(self.kind_converters);
            all.push((CONVERSION_PATH.to_owned(), Route::Conversion(Arc::new(converters))));
        }
        for (path, route) in all {
            if !path.starts_with('/') {
                return Err(WebhookError::InvalidPath(path));
            }
            if routes.insert(path.clone(), route).is_some() {
                return Err(WebhookError::DuplicatePath(path));
            }
        }
        let dir = self.cert_dir.ok_or(WebhookError::NoCertDir)?;
        if let Some(hosts) = &self.dev_hosts {
            DevCerts::ensure(&dir, hosts)?;
        }
        let (config, _reloader) = server_config(&dir)?;
        let listener =
            TcpListener::bind(self.addr).await.map_err(|source| WebhookError::Bind { addr: self.addr, source })?;
        let local = listener.local_addr().map_err(|source| WebhookError::Bind { addr: self.addr, source })?;
        let routes: Routes = Arc::new(routes);
        let service = hyper::service::service_fn(move |req| {
            let routes = routes.clone();
            async move { Ok::<_, Infallible>(route(&routes, req).await) }
        });
        tokio::spawn(opkit_serve::Server::new(listener).tls(config).serve(service, shutdown));
        tracing::info!(addr = %local, "webhook server listening");
        Ok(local)
    }
}

type Routes = Arc<HashMap<String, Route>>;
type HttpResponse = Response<Full<Bytes>>;

/// A `metav1.Status`-shaped error body.
fn error_response(code: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let reason = match code {
        StatusCode::NOT_FOUND => "NotFound",
        StatusCode::METHOD_NOT_ALLOWED => "MethodNotAllowed",
        StatusCode::PAYLOAD_TOO_LARGE => "RequestEntityTooLarge",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "UnsupportedMediaType",
        _ => "BadRequest",
    };
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code.as_u16(),
    });
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
    *resp.status_mut() = code;
    resp.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    if code == StatusCode::METHOD_NOT_ALLOWED {
        resp.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static("POST"));
    }
    resp
}

fn json_response(body: &impl Serialize) -> Response<Full<Bytes>> {
    match serde_json::to_vec(body) {
        Ok(bytes) => {
            let mut resp = Response::new(Full::new(Bytes::from(bytes)));
            resp.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
            resp
        }
        Err(e) => error_response(StatusCode::INTERNAL_SERVER_ERROR, &format!("encoding response: {e}")),
    }
}

async fn route(routes: &Routes, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let Some(route) = routes.get(req.uri().path()).cloned() else {
        return error_response(StatusCode::NOT_FOUND, "no webhook is served at this path");
    };
    if req.method() != Method::POST {
        return error_response(StatusCode::METHOD_NOT_ALLOWED, "only POST is supported");
    }
    if let Some(ct) = req.headers().get(header::CONTENT_TYPE) {
        let media = ct.to_str().unwrap_or_default().split(';').next().unwrap_or_default().trim();
        if !media.eq_ignore_ascii_case("application/json") {
            return error_response(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                &format!("content type {media:?} is not application/json"),
            );
        }
    }
    let body = match Limited::new(req.into_body(), MAX_REQUEST_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return error_response(StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
        }
        Err(e) => {
            return error_response(StatusCode::BAD_REQUEST, &format!("reading request body: {e}"));
        }
    };
    match route {
        Route::Admission(handler) => match admission_request(&body) {
            Ok((types, request)) => {
                let mut response = handler.handle(&request);
                response.uid = request.uid;
                admission_review_response(types, response)
            }
            Err(resp) => *resp,
        },
        Route::AsyncAdmission(handler) => match admission_request(&body) {
            Ok((types, request)) => {
                let mut response = handler.handle(&request).await;
                response.uid = request.uid;
                admission_review_response(types, response)
            }
            Err(resp) => *resp,
        },
        Route::Conversion(converter) => convert(converter, &body),
    }
}

/// The request of an AdmissionReview body and the review's type meta, or the response that
/// answers a body that is not one.
fn admission_request(
    body: &[u8],
) -> Result<(kube::core::TypeMeta, AdmissionRequest<kube::core::DynamicObject>), Box<HttpResponse>> {
    let review: ReviewIn = match serde_json::from_slice(body) {
        Ok(r) => r,
        // An envelope whose objects do not decode is still answered in a review (denied, 400).
        Err(e) => match envelope_of(body) {
            Some((types, uid)) if is_admission_review(&types) => {
                let message = format!("unable to decode the request: {e}");
                return Err(Box::new(admission_review_response(types, undecodable(uid, &message))));
            }
            _ => {
                return Err(Box::new(error_response(
                    StatusCode::BAD_REQUEST,
                    &format!("malformed AdmissionReview: {e}"),
                )));
            }
        },
    };
    if !is_admission_review(&review.types) {
        return Err(Box::new(error_response(
            StatusCode::BAD_REQUEST,
            &format!(
                "expected admission.k8s.io/v1 AdmissionReview, got {} {}",
                review.types.api_version, review.types.kind
            ),
        )));
    }
    let types = review.types.clone();
    let request: Result<AdmissionRequest<_>, _> = review.try_into();
    match request {
        Ok(request) => Ok((types, request)),
        Err(_) => Err(Box::new(error_response(StatusCode::BAD_REQUEST, "AdmissionReview has no request"))),
    }
}

fn admission_review_response(
    types: kube::core::TypeMeta,
    response: kube::core::admission::AdmissionResponse,
) -> Response<Full<Bytes>> {
    match review_json(types, response) {
        Ok(review) => json_response(&review),
        Err(e) => error_response(StatusCode::INTERNAL_SERVER_ERROR, &format!("encoding response: {e}")),
    }
}

fn convert(converter: Arc<dyn Converter>, body: &[u8]) -> Response<Full<Bytes>> {
    let review: ConversionReview = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            return error_response(StatusCode::BAD_REQUEST, &format!("malformed ConversionReview: {e}"));
        }
    };
    if review.types.kind != "ConversionReview"
        || !matches!(review.types.api_version.as_str(), "apiextensions.k8s.io/v1" | "apiextensions.k8s.io/v1beta1")
    {
        return error_response(
            StatusCode::BAD_REQUEST,
            &format!(
                "expected apiextensions.k8s.io/v1 ConversionReview, got {} {}",
                review.types.api_version, review.types.kind
            ),
        );
    }
    let Ok(request) = ConversionRequest::try_from(review) else {
        return error_response(StatusCode::BAD_REQUEST, "ConversionReview has no request");
    };
    json_response(&convert_review(converter.as_ref(), request).into_review())
}
