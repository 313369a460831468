//! Request routing: turns a method, path and query into what kube-apiserver calls a
//! RequestInfo (discovery endpoint, or resource request with verb, namespace, name and
//! subresource).

use std::collections::HashMap;

use percent_encoding::percent_decode_str;

/// What a request addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// `/`
    Root,
    /// `/version`
    Version,
    /// `/healthz`, `/livez`, `/readyz` (and their sub-checks)
    Health,
    /// `/api`
    LegacyApi,
    /// `/apis`
    Apis,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1`, `/apis/{group}/{version}`
    GroupVersion(String, String),
    /// `/openapi/v2`
    OpenApiV2,
    /// `/openapi/v3`
    OpenApiV3Index,
    /// `/openapi/v3/{api/v1 | apis/g/v}`
    OpenApiV3(String),
    /// `/.well-known/openid-configuration`: the ServiceAccount issuer's discovery document
    OpenIdConfiguration,
    /// `/openid/v1/jwks`: the keys ServiceAccount tokens are signed with
    Jwks,
    /// A resource request.
    Resource(ResourceRequest),
}

/// A request for a resource collection, object or subresource.
pub(crate) type ResourceRequest = opkit_apimachinery::ResourcePath;

fn decode(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// Parses a request path.
pub(crate) fn parse_path(path: &str) -> Option<Route> {
    let parts: Vec<String> = path.split('/').filter(|s| !s.is_empty()).map(decode).collect();
    let p: Vec<&str> = parts.iter().map(String::as_str).collect();
    match p.as_slice() {
        [] => Some(Route::Root),
        ["version"] => Some(Route::Version),
        ["healthz" | "livez" | "readyz", ..] => Some(Route::Health),
        ["api"] => Some(Route::LegacyApi),
        ["apis"] => Some(Route::Apis),
        ["apis", g] => Some(Route::Group(g.to_string())),
        ["api", v] => Some(Route::GroupVersion(String::new(), v.to_string())),
        ["apis", g, v] => Some(Route::GroupVersion(g.to_string(), v.to_string())),
        [".well-known", "openid-configuration"] => Some(Route::OpenIdConfiguration),
        ["openid", "v1", "jwks"] => Some(Route::Jwks),
        ["openapi", "v2"] => Some(Route::OpenApiV2),
        ["openapi", "v3"] => Some(Route::OpenApiV3Index),
        ["openapi", "v3", rest @ ..] => Some(Route::OpenApiV3(rest.join("/"))),
        ["api", v, rest @ ..] => ResourceRequest::from_segments("", v, rest).map(Route::Resource),
        ["apis", g, v, rest @ ..] => ResourceRequest::from_segments(g, v, rest).map(Route::Resource),
        _ => None,
    }
}

/// Parses a query string into a map (last value wins), percent-decoding and turning `+`
/// into spaces.
pub(crate) fn parse_query(q: Option<&str>) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for pair in q.unwrap_or_default().split('&').filter(|s| !s.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.insert(decode(&k.replace('+', " ")), decode(&v.replace('+', " ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourceRequest {
        match parse_path(path) {
            Some(Route::Resource(r)) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn resource_paths() {
        let r = res("/apis/apps/v1/namespaces/default/deployments/web/scale");
        assert_eq!(
            (
                r.group.as_str(),
                r.namespace.as_deref(),
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            ("apps", Some("default"), "deployments", Some("web"), Some("scale"))
        );
        let r = res("/api/v1/namespaces/kube-system");
        assert_eq!((r.resource.as_str(), r.name.as_deref(), r.namespace), ("namespaces", Some("kube-system"), None));
        let r = res("/api/v1/namespaces/x/finalize");
        assert_eq!((r.resource.as_str(), r.subresource.as_deref()), ("namespaces", Some("finalize")));
        let r = res("/api/v1/namespaces");
        assert_eq!((r.resource.as_str(), r.name), ("namespaces", None));
        let r = res("/api/v1/pods");
        assert_eq!((r.resource.as_str(), r.namespace), ("pods", None));
        assert_eq!(parse_path("/apis/apps/v1"), Some(Route::GroupVersion("apps".into(), "v1".into())));
        assert_eq!(parse_path("/openapi/v3/apis/apps/v1"), Some(Route::OpenApiV3("apis/apps/v1".into())));
        assert_eq!(parse_path("/api/v1/a/b/c/d"), None);
    }

    #[test]
    fn query() {
        let q = parse_query(Some("labelSelector=app%3Dweb%2Ctier+in+(a)&watch=1&x"));
        assert_eq!(q["labelSelector"], "app=web,tier in (a)");
        assert_eq!(q["watch"], "1");
        assert_eq!(q["x"], "");
    }
}
