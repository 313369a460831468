//! Who a request acts as and whether it may: kube-apiserver's authentication,
//! impersonation and authorization filters, in that order, before any handler runs.

use std::collections::BTreeMap;

use http::{HeaderMap, Method};
use opkit_serve::PeerCertificates;
use percent_encoding::percent_decode_str;

use super::AppState;
use super::route::{Route, parse_query};
use crate::audit::AuditRecord;
use crate::auth::{self, ANONYMOUS, AUTHENTICATED, Credentials, UNAUTHENTICATED, UserInfo};
use crate::authz::{self, Action, Object, ResourceAttributes};
use crate::error::{ApiError, ApiResult};
use crate::selector::FieldSelector;

const IMPERSONATE_USER: &str = "impersonate-user";
const IMPERSONATE_GROUP: &str = "impersonate-group";
const IMPERSONATE_UID: &str = "impersonate-uid";
const IMPERSONATE_EXTRA: &str = "impersonate-extra-";

/// The user a request acts as, once authenticated, impersonated and authorized for what
/// it asks (returned with it): a 401 without a valid credential (anonymous requests reach
/// only what kube's bootstrap policy lets them), a 403 when the user may not.
pub(super) async fn authorize_request(
    state: &AppState,
    request: &http::request::Parts,
    route: Option<&Route>,
    record: Option<&AuditRecord>,
) -> ApiResult<(UserInfo, Action)> {
    let (method, path, query, headers) = (&request.method, request.uri.path(), request.uri.query(), &request.headers);
    let credentials = Credentials {
        authorization: headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()),
        client_certificate: request.extensions.get::<PeerCertificates>().and_then(|c| c.leaf()).map(|c| c.as_ref()),
    };
    let user = state.auth.authenticate(&state.registry, credentials).await.map_err(|e| {
        // kube answers every failed authentication with the same "Unauthorized".
        tracing::debug!(error = %e, "unable to authenticate the request");
        ApiError::unauthorized()
    })?;
    if let Some(record) = record {
        record.users(&user, &user);
    }
    let authenticated = record.map(|_| user.clone());
    let user = impersonate(state, user, headers)?;
    if let (Some(record), Some(authenticated)) = (record, &authenticated) {
        record.users(authenticated, &user);
    }
    let action = action_of(method, path, query, route, headers);
    let decision = state.registry.authorizer().authorize(state.registry.store(), &user, &action);
    if let Some(record) = record {
        record.authorization(&action, decision.allowed, &decision.reason);
    }
    if decision.allowed {
        return Ok((user, action));
    }
    if user.is_anonymous() {
        return Err(ApiError::unauthorized());
    }
    Err(authz::forbidden(&user, &action, &decision.reason))
}

/// What a request asks to do, as kube's RequestInfo describes it. A WebSocket upgrade
/// (a GET) of `pods/exec`, `pods/attach` or `pods/portforward` asks to `create`, as the
/// SPDY upgrade (a POST) does (kube's `AuthorizePodWebsocketUpgradeCreatePermission`).
fn action_of(method: &Method, path: &str, query: Option<&str>, route: Option<&Route>, headers: &HeaderMap) -> Action {
    let Some(Route::Resource(req)) = route else {
        return Action { verb: method.as_str().to_lowercase(), object: Object::NonResource { path: path.to_string() } };
    };
    if *method == Method::GET && is_pod_connect(req) && is_websocket_upgrade(headers) {
        return Action::resource("create", attributes_of(req, None));
    }
    let q = parse_query(query);
    let verb = match (method, req.name.is_some()) {
        (&Method::GET | &Method::HEAD, true) => "get",
        (&Method::GET | &Method::HEAD, false) if matches!(q.get("watch").map(String::as_str), Some("true" | "1")) => {
            "watch"
        }
        (&Method::GET | &Method::HEAD, false) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        (other, _) => return Action::resource(&other.as_str().to_lowercase(), attributes_of(req, None)),
    };
    // A list or watch of one object by name (`fieldSelector=metadata.name=x`) is
    // authorized for that name, as kube-apiserver does.
    let by_name = match verb {
        "list" | "watch" => q
            .get("fieldSelector")
            .and_then(|s| FieldSelector::parse(s).ok())
            .and_then(|s| s.exact_value("metadata.name").map(str::to_string)),
        _ => None,
    };
    Action::resource(verb, attributes_of(req, by_name))
}

/// Whether `req` is one of the pod subresources that upgrade the connection.
fn is_pod_connect(req: &super::route::ResourceRequest) -> bool {
    req.group.is_empty()
        && req.resource == "pods"
        && matches!(req.subresource.as_deref(), Some("exec" | "attach" | "portforward"))
}

/// Whether a request asks to upgrade to WebSocket (`Connection: Upgrade`, `Upgrade: websocket`).
fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    let has = |name: http::header::HeaderName, token: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    has(http::header::CONNECTION, "upgrade") && has(http::header::UPGRADE, "websocket")
}

fn attributes_of(req: &super::route::ResourceRequest, by_name: Option<String>) -> ResourceAttributes {
    let name = req.name.clone().or(by_name).unwrap_or_default();
    // A namespace object is in its own namespace, so a RoleBinding there may grant it.
    let namespace = match (&req.namespace, req.resource.as_str()) {
        (Some(ns), _) => ns.clone(),
        (None, "namespaces") if req.group.is_empty() => name.clone(),
        (None, _) => String::new(),
    };
    ResourceAttributes {
        namespace,
        group: req.group.clone(),
        version: req.version.clone(),
        resource: req.resource.clone(),
        subresource: req.subresource.clone().unwrap_or_default(),
        name,
    }
}

/// Header values of `name`, each trimmed.
fn header_values<'h>(headers: &'h HeaderMap, name: &str) -> impl Iterator<Item = String> + 'h {
    headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(|v| v.trim().to_string())
}

/// Applies `Impersonate-*` headers: each requested attribute must be authorized with the
/// `impersonate` verb (users, groups, uids, userextras, or the ServiceAccount).
fn impersonate(state: &AppState, user: UserInfo, headers: &HeaderMap) -> ApiResult<UserInfo> {
    let name = header_values(headers, IMPERSONATE_USER).next();
    let groups: Vec<String> = header_values(headers, IMPERSONATE_GROUP).collect();
    let uid = header_values(headers, IMPERSONATE_UID).next();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (header, value) in headers {
        if let Some(key) = header.as_str().strip_prefix(IMPERSONATE_EXTRA)
            && let Ok(v) = value.to_str()
        {
            let key = percent_decode_str(key).decode_utf8_lossy().into_owned();
            extra.entry(key).or_default().push(v.trim().to_string());
        }
    }
    let Some(name) = name else {
        if !groups.is_empty() || uid.is_some() || !extra.is_empty() {
            return Err(ApiError::bad_request(
                "requested impersonation of groups, a uid or extras without impersonating a user",
            ));
        }
        return Ok(user);
    };
    let may = |action: Action| -> ApiResult<()> {
        let decision = state.registry.authorizer().authorize(state.registry.store(), &user, &action);
        if decision.allowed { Ok(()) } else { Err(authz::forbidden(&user, &action, &decision.reason)) }
    };
    let on = |group: &str, resource: &str, subresource: &str, namespace: &str, name: &str| {
        Action::resource(
            "impersonate",
            ResourceAttributes {
                namespace: namespace.into(),
                group: group.into(),
                resource: resource.into(),
                subresource: subresource.into(),
                name: name.into(),
                ..Default::default()
            },
        )
    };
    let mut acting = UserInfo {
        name: name.clone(),
        uid: uid.clone().unwrap_or_default(),
        groups: groups.clone(),
        extra: extra.clone(),
    };
    match auth::service_account_of(&name) {
        Some((ns, sa)) => {
            may(on("", "serviceaccounts", "", ns, sa))?;
            if groups.is_empty() {
                acting.groups = auth::service_account_groups(ns).to_vec();
            }
        }
        None => may(on("", "users", "", "", &name))?,
    }
    for group in &groups {
        may(on("", "groups", "", "", group))?;
    }
    if let Some(uid) = &uid {
        may(on("authentication.k8s.io", "uids", "", "", uid))?;
    }
    for (key, values) in &extra {
        for value in values {
            may(on("authentication.k8s.io", "userextras", key, "", value))?;
        }
    }
    let implied = if name == ANONYMOUS { UNAUTHENTICATED } else { AUTHENTICATED };
    if !acting.groups.iter().any(|g| g == implied) {
        acting.groups.push(implied.to_string());
    }
    Ok(acting)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::route::parse_path;

    fn action(method: Method, path_and_query: &str) -> Action {
        let (path, query) = path_and_query.split_once('?').map_or((path_and_query, None), |(p, q)| (p, Some(q)));
        action_of(&method, path, query, parse_path(path).as_ref(), &HeaderMap::new())
    }

    #[test]
    fn request_info_matches_kube() {
        let a = action(Method::GET, "/api/v1/namespaces/t/pods?watch=true");
        assert_eq!(a.verb, "watch");
        let a = action(Method::GET, "/api/v1/namespaces/t/pods?fieldSelector=metadata.name%3Dweb");
        let Object::Resource(r) = &a.object else { panic!("resource") };
        assert_eq!((a.verb.as_str(), r.name.as_str(), r.namespace.as_str()), ("list", "web", "t"));
        let a = action(Method::DELETE, "/apis/apps/v1/namespaces/t/deployments");
        assert_eq!(a.verb, "deletecollection");
        let a = action(Method::PUT, "/apis/apps/v1/namespaces/t/deployments/web/scale");
        let Object::Resource(r) = &a.object else { panic!("resource") };
        assert_eq!(r.combined_resource(), "deployments/scale");
        let a = action(Method::GET, "/api/v1/namespaces/t");
        let Object::Resource(r) = &a.object else { panic!("resource") };
        assert_eq!((r.resource.as_str(), r.namespace.as_str(), r.name.as_str()), ("namespaces", "t", "t"));
        let a = action(Method::GET, "/api/v1/namespaces/t/pods/p/exec?command=ls");
        assert_eq!(a.verb, "get", "a GET that does not upgrade");
        let mut upgrade = HeaderMap::new();
        upgrade.insert(http::header::CONNECTION, http::HeaderValue::from_static("Upgrade"));
        upgrade.insert(http::header::UPGRADE, http::HeaderValue::from_static("websocket"));
        let path = "/api/v1/namespaces/t/pods/p/exec";
        let a = action_of(&Method::GET, path, Some("command=ls"), parse_path(path).as_ref(), &upgrade);
        let Object::Resource(r) = &a.object else { panic!("resource") };
        assert_eq!((a.verb.as_str(), r.combined_resource().as_str()), ("create", "pods/exec"));
        let a = action(Method::GET, "/healthz");
        assert_eq!(a.object, Object::NonResource { path: "/healthz".into() });
    }
}
