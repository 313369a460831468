//! The parts of a resource request's path (kube-apiserver's `RequestInfo` for resource
//! paths): `/api/{version}/...` or `/apis/{group}/{version}/...`, then an optional
//! `namespaces/{namespace}`, the resource, an optional name and subresource. The API
//! server routes by it; the Ansible operator's proxy and the runtime's write tracking read
//! requests with it.

/// A request for a resource collection, object or subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    /// API group (`""` for the core group).
    pub group: String,
    /// API version.
    pub version: String,
    /// The namespace from the path (`None` for cluster-scoped resources, all namespaces,
    /// and the Namespace objects themselves).
    pub namespace: Option<String>,
    /// The plural resource name.
    pub resource: String,
    /// The object's name.
    pub name: Option<String>,
    /// The subresource, e.g. `status`, `scale`.
    pub subresource: Option<String>,
}

impl ResourcePath {
    /// Parses a path as a client sends it (segments are taken as they are: names of
    /// Kubernetes objects need no percent-decoding). `None` if it is not a resource path.
    ///
    /// ```
    /// use opkit_apimachinery::ResourcePath;
    /// let p = ResourcePath::parse("/apis/apps/v1/namespaces/web/deployments/front/scale").unwrap();
    /// assert_eq!((p.group.as_str(), p.namespace.as_deref()), ("apps", Some("web")));
    /// assert_eq!((p.name.as_deref(), p.subresource.as_deref()), (Some("front"), Some("scale")));
    /// ```
    #[must_use]
    pub fn parse(path: &str) -> Option<ResourcePath> {
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        match segments.as_slice() {
            ["api", version, rest @ ..] => ResourcePath::from_segments("", version, rest),
            ["apis", group, version, rest @ ..] => ResourcePath::from_segments(group, version, rest),
            _ => None,
        }
    }

    /// The path after `/api/{version}` or `/apis/{group}/{version}`, as segments (already
    /// decoded, if the caller decodes). `None` if they do not name a resource.
    #[must_use]
    pub fn from_segments(group: &str, version: &str, rest: &[&str]) -> Option<ResourcePath> {
        let mut rest = rest;
        let mut namespace = None;
        if rest.first() == Some(&"namespaces") && rest.len() > 1 {
            if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
                namespace = Some(rest[1].to_string());
                rest = &rest[2..];
            } else {
                // The namespace object itself: /namespaces/{name}[/status|/finalize].
                return match rest {
                    [_, name] | [_, name, _] => Some(ResourcePath {
                        group: group.to_string(),
                        version: version.to_string(),
                        namespace: None,
                        resource: "namespaces".into(),
                        name: Some(name.to_string()),
                        subresource: rest.get(2).map(|s| s.to_string()),
                    }),
                    _ => None,
                };
            }
        }
        let (resource, name, subresource) = match rest {
            [r] => (r, None, None),
            [r, n] => (r, Some(n.to_string()), None),
            [r, n, s] => (r, Some(n.to_string()), Some(s.to_string())),
            _ => return None,
        };
        Some(ResourcePath {
            group: group.to_string(),
            version: version.to_string(),
            namespace,
            resource: resource.to_string(),
            name,
            subresource,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(p: &ResourcePath) -> (&str, Option<&str>, &str, Option<&str>, Option<&str>) {
        (&p.group, p.namespace.as_deref(), &p.resource, p.name.as_deref(), p.subresource.as_deref())
    }

    #[test]
    fn paths_are_parsed_like_kubes_request_info() {
        let p = ResourcePath::parse("/apis/apps/v1/namespaces/ns/deployments/web/status").expect("path");
        assert_eq!(parts(&p), ("apps", Some("ns"), "deployments", Some("web"), Some("status")));
        assert_eq!(p.version, "v1");
        let p = ResourcePath::parse("/api/v1/namespaces").expect("path");
        assert_eq!(parts(&p), ("", None, "namespaces", None, None));
        let p = ResourcePath::parse("/api/v1/namespaces/kube-system").expect("path");
        assert_eq!(parts(&p), ("", None, "namespaces", Some("kube-system"), None));
        let p = ResourcePath::parse("/api/v1/namespaces/x/finalize").expect("path");
        assert_eq!(parts(&p), ("", None, "namespaces", Some("x"), Some("finalize")));
        let p = ResourcePath::parse("/api/v1/namespaces/ns/configmaps").expect("path");
        assert_eq!(parts(&p), ("", Some("ns"), "configmaps", None, None));
        let p = ResourcePath::parse("/api/v1/pods").expect("path");
        assert_eq!(parts(&p), ("", None, "pods", None, None));
        assert!(ResourcePath::parse("/version").is_none());
        assert!(ResourcePath::parse("/api/v1/a/b/c/d").is_none());
        assert!(ResourcePath::parse("/apis/apps/v1").is_none());
    }
}
