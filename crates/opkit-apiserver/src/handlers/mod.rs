//! HTTP handlers: authentication, routing and dispatch of every request to discovery,
//! OpenAPI or the registry. Data flows one way: HTTP → handler → registry → storage.

pub mod codec;
mod discovery;
mod openapi;
mod resource;
pub mod route;
mod watch;

use std::sync::Arc;

use http::{Method, Request, Response};

use crate::auth::TokenAuthenticator;
use crate::error::{ApiError, ApiResult};
use crate::registry::Registry;
use codec::Body;
use route::Route;

/// Everything a request handler needs.
pub struct AppState {
    /// The registry.
    pub registry: Registry,
    /// Bearer-token authentication.
    pub auth: TokenAuthenticator,
    /// `host:port` clients reach the server at.
    pub address: String,
    /// Cached OpenAPI documents.
    pub(crate) openapi: openapi::OpenApiCache,
}

impl AppState {
    /// State for a server reachable at `address`.
    pub fn new(registry: Registry, auth: TokenAuthenticator, address: String) -> Arc<AppState> {
        Arc::new(AppState { registry, auth, address, openapi: Default::default() })
    }
}

/// Handles one request. Never fails: errors become `metav1.Status` responses.
pub async fn handle(state: Arc<AppState>, req: Request<hyper::body::Incoming>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    match dispatch(&state, parts, body).await {
        Ok(r) => r,
        Err(e) => {
            if e.code >= 500 {
                tracing::warn!(code = e.code, message = %e.message, "request failed");
            }
            codec::respond_error(&e)
        }
    }
}

async fn dispatch(
    state: &Arc<AppState>,
    parts: http::request::Parts,
    body: hyper::body::Incoming,
) -> ApiResult<Response<Body>> {
    let route = route::parse_path(parts.uri.path());
    let public = matches!(route, Some(Route::Health | Route::Version));
    let authz = parts.headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let user = match state.auth.authenticate(authz) {
        Some(u) => u,
        None if public => Default::default(),
        None => return Err(ApiError::unauthorized()),
    };
    let route = route.ok_or_else(ApiError::no_route)?;
    let cat = state.registry.catalog().snapshot();
    let get_only = |r: ApiResult<Response<Body>>| {
        if parts.method == Method::GET { r } else { Err(ApiError::method_not_supported("", "", parts.method.as_str())) }
    };
    match route {
        Route::Root => get_only(Ok(codec::respond(200, &discovery::root_paths(&cat), codec::Output::Json, &[]))),
        Route::Version => get_only(Ok(codec::respond(200, &discovery::version(), codec::Output::Json, &[]))),
        Route::Health => Ok(codec::respond_bytes("ok", "text/plain; charset=utf-8")),
        Route::LegacyApi => get_only(Ok(match codec::aggregated_discovery(&parts.headers) {
            Some(v) => codec::respond_typed(
                &discovery::aggregated(&cat, true, v),
                &format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList"),
            ),
            None => codec::respond(200, &discovery::legacy_versions(&state.address), codec::Output::Json, &[]),
        })),
        Route::Apis => get_only(Ok(match codec::aggregated_discovery(&parts.headers) {
            Some(v) => codec::respond_typed(
                &discovery::aggregated(&cat, false, v),
                &format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList"),
            ),
            None => codec::respond(200, &discovery::group_list(&cat), codec::Output::Json, &[]),
        })),
        Route::Group(g) => get_only(
            discovery::group(&cat, &g)
                .map(|v| codec::respond(200, &v, codec::Output::Json, &[]))
                .ok_or_else(ApiError::no_route),
        ),
        Route::GroupVersion(g, v) => get_only(
            discovery::resource_list(&cat, &g, &v)
                .map(|v| codec::respond(200, &v, codec::Output::Json, &[]))
                .ok_or_else(ApiError::no_route),
        ),
        Route::OpenApiV2 => get_only(Ok(state.openapi.v2(&cat, &parts.headers))),
        Route::OpenApiV3Index => get_only(Ok(state.openapi.v3_index(&cat))),
        Route::OpenApiV3(path) => get_only(state.openapi.v3(&cat, &path)),
        Route::Resource(req) => {
            let body = match parts.method {
                Method::POST | Method::PUT | Method::PATCH | Method::DELETE => codec::read_body(body).await?,
                _ => Default::default(),
            };
            let query = route::parse_query(parts.uri.query());
            resource::Call { state, method: parts.method, req, query, headers: parts.headers, body, user }.run().await
        }
    }
}
