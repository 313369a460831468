//! HTTP handlers: authentication, routing and dispatch of every request to discovery,
//! OpenAPI, the registry or (for the pod streaming subresources) the pod's kubelet. Data
//! flows one way: HTTP → handler → registry → storage.

mod aggregation;
pub(crate) mod codec;
mod discovery;
mod health;
mod identity;
mod openapi;
mod pod_proxy;
mod proxy_headers;
mod resource;
mod review;
pub(crate) mod route;
mod watch;

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use http::{Method, Request, Response};
use tokio_util::sync::CancellationToken;

use crate::audit::{AuditLog, AuditRecord};
use crate::auth::Authenticator;
use crate::catalog::CatalogSnapshot;
use crate::error::{ApiError, ApiResult};
use crate::kubelet_client::KubeletClient;
use crate::limits::{InFlight, ServingLimits};
use crate::perturbation::Perturbations;
use crate::registry::Registry;
use codec::Body;
use route::Route;

/// Everything a request handler needs.
pub(crate) struct AppState {
    /// The registry.
    pub registry: Registry,
    /// Authentication (the admin token and ServiceAccount tokens).
    pub auth: Authenticator,
    /// `host:port` clients reach the server at.
    pub address: String,
    /// Cached OpenAPI documents.
    pub(crate) openapi: openapi::OpenApiCache,
    /// Where audit events go, if anywhere.
    pub(crate) audit: Option<AuditLog>,
    /// The faults and traces tests put on one identity's requests.
    pub(crate) perturbations: Arc<Perturbations>,
    /// The max-in-flight pools and the request-body timeout.
    pub(crate) in_flight: InFlight,
    pub(crate) request_timeout: Duration,
    /// The client the pod streaming subresources reach kubelets with.
    pub(crate) kubelet: KubeletClient,
    /// Cancelled when the server stops: ends the streams spliced with kubelets, which
    /// outlive the HTTP connections they were upgraded from.
    pub(crate) shutdown: CancellationToken,
}

impl AppState {
    /// State for a server reachable at `address`, auditing and perturbing requests as
    /// `hooks` say, serving within `limits`, reaching kubelets with `kubelet`, stopping
    /// with `shutdown`.
    pub(crate) fn new(
        registry: Registry,
        auth: Authenticator,
        address: String,
        hooks: RequestHooks,
        limits: &ServingLimits,
        kubelet: KubeletClient,
        shutdown: CancellationToken,
    ) -> Arc<AppState> {
        Arc::new(AppState {
            registry,
            auth,
            address,
            openapi: Default::default(),
            audit: hooks.audit,
            perturbations: hooks.perturbations,
            in_flight: InFlight::new(limits),
            request_timeout: limits.request_timeout,
            kubelet,
            shutdown,
        })
    }
}

/// What watches requests besides the handlers: the audit log and tests' perturbations.
pub(crate) struct RequestHooks {
    /// Where audit events go, if anywhere.
    pub audit: Option<AuditLog>,
    /// The faults and traces tests put on one identity's requests.
    pub perturbations: Arc<Perturbations>,
}

/// Handles one request. Never fails: errors become `metav1.Status` responses, and a
/// panic in a handler becomes a 500 (as kube-apiserver's panic recovery filter).
pub(crate) async fn handle(state: Arc<AppState>, req: Request<hyper::body::Incoming>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let request_line = format!("{} {}", parts.method, parts.uri.path());
    let record = state.audit.as_ref().map(|_| Arc::new(AuditRecord::received(&parts)));
    let served = answer(&request_line, dispatch(&state, parts, body, record.as_deref()), record.as_deref());
    let response = crate::audit::scope(record.clone(), served).await;
    if let (Some(log), Some(record)) = (&state.audit, &record) {
        log.write(record);
    }
    response
}

/// The message of the 500 a panicking handler answers with (kube-apiserver's words).
pub(crate) const PANIC_MESSAGE: &str = "This request caused apiserver to panic. Look in the logs for details.";

/// Runs a handler future and turns its error, or its panic, into a `metav1.Status` response.
/// The answer goes into the audit `record`, if there is one.
async fn answer(
    request_line: &str,
    handler: impl Future<Output = ApiResult<Response<Body>>>,
    record: Option<&AuditRecord>,
) -> Response<Body> {
    let error = match AssertUnwindSafe(handler).catch_unwind().await {
        Ok(Ok(r)) => {
            if let Some(record) = record {
                record.responded(r.status().as_u16(), None);
            }
            return r;
        }
        Ok(Err(e)) => {
            if e.code >= 500 {
                tracing::warn!(code = e.code, message = %e.message, "request failed");
            }
            e
        }
        Err(panic) => {
            tracing::error!(request = request_line, panic = panic_text(panic.as_ref()), "handler panicked");
            ApiError::internal_raw(PANIC_MESSAGE)
        }
    };
    if let Some(record) = record {
        record.responded(error.code, Some((error.reason, &error.message)));
    }
    codec::respond_error(&error)
}

/// The text a panic was raised with, when it is a string.
fn panic_text(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(non-string panic payload)")
}

async fn dispatch(
    state: &Arc<AppState>,
    parts: http::request::Parts,
    body: hyper::body::Incoming,
    record: Option<&AuditRecord>,
) -> ApiResult<Response<Body>> {
    let route = route::parse_path(parts.uri.path());
    let (user, action) = identity::authorize_request(state, &parts, route.as_ref(), record).await?;
    let _slot = {
        let subresource = match &route {
            Some(Route::Resource(r)) => r.subresource.as_deref(),
            _ => None,
        };
        state.in_flight.admit(&action.verb, subresource, &user)?
    };
    let route = route.ok_or_else(ApiError::no_route)?;
    let read_body = |body| codec::read_body(body, state.request_timeout);
    let cat = state.registry.catalog().snapshot();
    let get_only = |r: ApiResult<Response<Body>>| {
        if parts.method == Method::GET { r } else { Err(ApiError::method_not_supported("", "", parts.method.as_str())) }
    };
    match route {
        Route::Root => get_only(Ok(codec::respond(200, &discovery::root_paths(&cat), codec::Output::Json, &[]))),
        Route::Version => get_only(Ok(codec::respond(200, &discovery::version(), codec::Output::Json, &[]))),
        Route::Health => health::answer(state.registry.store(), parts.uri.path(), parts.uri.query()),
        Route::LegacyApi => get_only(Ok(legacy_api_discovery(state, &cat, &parts.headers))),
        Route::Apis => get_only(Ok(apis_discovery(state, &cat, &parts.headers).await)),
        Route::Group(g) => get_only(
            discovery::group(&cat, &g)
                .or_else(|| aggregation::group(&state.registry, &g))
                .map(|v| codec::respond(200, &v, codec::Output::Json, &[]))
                .ok_or_else(ApiError::no_route),
        ),
        Route::GroupVersion(g, v) => match state.registry.aggregated_apiservice(&g, &v) {
            Some(apiservice) => {
                let body = read_body(body).await?;
                aggregation::proxy(&state.registry, &apiservice, parts, body, &user).await
            }
            None => get_only(
                discovery::resource_list(&cat, &state.registry.strategies(), &g, &v)
                    .map(|v| codec::respond(200, &v, codec::Output::Json, &[]))
                    .ok_or_else(ApiError::no_route),
            ),
        },
        Route::OpenIdConfiguration => get_only(Ok(codec::respond(
            200,
            &crate::auth::tokens::openid_configuration(&format!("https://{}", state.address)),
            codec::Output::Json,
            &[],
        ))),
        Route::Jwks => get_only(Ok(codec::respond_typed(&state.auth.signer().jwks(), "application/jwk-set+json"))),
        Route::OpenApiV2 => get_only(Ok(state.openapi.v2(&cat, &parts.headers))),
        Route::OpenApiV3Index => get_only(Ok(state.openapi.v3_index(&cat))),
        Route::OpenApiV3(path) => get_only(state.openapi.v3(&cat, &path)),
        Route::Resource(req)
            if let Some(apiservice) = state.registry.aggregated_apiservice(&req.group, &req.version) =>
        {
            let body = read_body(body).await?;
            aggregation::proxy(&state.registry, &apiservice, parts, body, &user).await
        }
        Route::Resource(req) if let Some(kind) = pod_proxy::stream_of(state, &req) => {
            pod_proxy::serve(state, kind, &req, parts, body).await
        }
        Route::Resource(req) if review::answers(&req) => {
            let body = read_body(body).await?;
            review::answer(state, &user, &req, &parts.method, &parts.headers, &body).await
        }
        Route::Resource(req) => {
            let body = match parts.method {
                Method::POST | Method::PUT | Method::PATCH | Method::DELETE => read_body(body).await?,
                _ => Default::default(),
            };
            let query = route::parse_query(parts.uri.query());
            let answered = Default::default();
            resource::Call { state, method: parts.method, req, query, headers: parts.headers, body, user, answered }
                .run()
                .await
        }
    }
}

/// `/api`: the aggregated discovery of the core group, or the legacy version list.
fn legacy_api_discovery(state: &AppState, cat: &CatalogSnapshot, headers: &http::HeaderMap) -> Response<Body> {
    match codec::aggregated_discovery(headers) {
        Some(v) => codec::respond_typed(
            &discovery::aggregated(cat, &state.registry.strategies(), true, v),
            &format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList"),
        ),
        None => codec::respond(200, &discovery::legacy_versions(&state.address), codec::Output::Json, &[]),
    }
}

/// `/apis`: the aggregated discovery of the named groups, or the group list, with the
/// groups of aggregated APIServices.
async fn apis_discovery(state: &AppState, cat: &CatalogSnapshot, headers: &http::HeaderMap) -> Response<Body> {
    match codec::aggregated_discovery(headers) {
        Some(v) => {
            let mut list = discovery::aggregated(cat, &state.registry.strategies(), false, v);
            if let Some(items) = list["items"].as_array_mut() {
                items.extend(aggregation::discovery_items(&state.registry).await);
            }
            codec::respond_typed(
                &list,
                &format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList"),
            )
        }
        None => {
            let mut list = discovery::group_list(cat);
            if let Some(groups) = list["groups"].as_array_mut() {
                groups.extend(aggregation::groups(&state.registry));
            }
            codec::respond(200, &list, codec::Output::Json, &[])
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;
    use serde_json::Value;

    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_status() {
        let handler = async {
            if "boom".len() == 4 {
                panic!("handler bug");
            }
            Err(ApiError::no_route())
        };
        let response = answer("GET /boom", handler, None).await;
        assert_eq!(response.status(), 500);
        let body = response.into_body().collect().await.expect("body").to_bytes();
        let status: Value = serde_json::from_slice(&body).expect("a JSON Status");
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["code"], 500);
        assert_eq!(status["reason"], "InternalError");
        assert_eq!(status["message"], PANIC_MESSAGE);
    }

    #[tokio::test]
    async fn errors_still_answer_their_status() {
        let response = answer("GET /x", async { Err(ApiError::no_route()) }, None).await;
        assert_eq!(response.status(), 404);
    }
}
