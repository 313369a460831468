//! Authorization of the kubelet server's requests, as kube's kubelet does it in `Webhook`
//! authorization mode (`pkg/kubelet/server/auth.go`):
//!
//! - the client is the user its verified certificate names ([`Requester::of_certificates`]:
//!   CN the user, each O a group, plus `system:authenticated` and the credential id);
//! - the request becomes [`Attributes`] on the `nodes` resource: the verb of its HTTP method,
//!   and the subresource of its path (`stats`, `metrics`, `log` or `checkpoint` for theirs,
//!   `proxy` for every other path such as `containerLogs`, `exec`, `attach`, `portForward`
//!   and `run`; `/pods`, `/healthz`, `/configz` and `/statusz` first try their own
//!   subresource, then `proxy`, as kube's fine-grained kubelet authorization does);
//! - [`Authorizer`] asks the API server a SubjectAccessReview per subresource until one is
//!   allowed, caching each answer as kube's webhook authorizer does (allowed for five
//!   minutes, denied for thirty seconds), and otherwise answers 403 with kube's message
//!   (`Forbidden (user=…, verb=…, resource=nodes, subresource(s)=[proxy])`), or 500 when the
//!   API server could not be asked.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use http::{Method, Response, StatusCode};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::{Api, PostParams};
use opkit_serve::PeerCertificates;
use opkit_serve::tls::CertificateSubject;
use parking_lot::Mutex;

use super::{ResponseBody, full};

/// How long an allowed access is kept (kube's `--authorization-webhook-cache-authorized-ttl`).
pub(crate) const ALLOW_TTL: Duration = Duration::from_secs(5 * 60);
/// How long a denied access is kept (`--authorization-webhook-cache-unauthorized-ttl`).
pub(crate) const DENY_TTL: Duration = Duration::from_secs(30);
/// At most this many answers are kept; past it, expired ones are dropped, and if none
/// expired, all.
const CACHE_ENTRIES: usize = 4096;
/// The group every authenticated user is in.
const AUTHENTICATED: &str = "system:authenticated";
/// The `extra` key kube's authenticators record a credential's id under.
const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

/// Who sent a request: the user a verified client certificate names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Requester {
    /// The user name (the certificate's CN).
    pub name: String,
    /// The groups (each O, then `system:authenticated`).
    pub groups: Vec<String>,
    /// The credential id (`X509SHA256=<hex>` of the certificate).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Requester {
    /// The user the leaf of `certificates` names; `None` when it does not parse or names
    /// no one (the request is then unauthenticated, as for kube's x509 authenticator).
    pub(crate) fn of_certificates(certificates: &PeerCertificates) -> Option<Requester> {
        let der = certificates.leaf()?;
        let subject = CertificateSubject::of_der(der)?;
        if subject.common_name.is_empty() {
            return None;
        }
        let mut groups = subject.organizations;
        groups.push(AUTHENTICATED.to_owned());
        let digest = ring::digest::digest(&ring::digest::SHA256, der);
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        let extra = BTreeMap::from([(CREDENTIAL_ID.to_owned(), vec![format!("X509SHA256={hex}")])]);
        Some(Requester { name: subject.common_name, groups, extra })
    }
}

/// What a request asks of the `nodes` resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attributes {
    /// The API verb of the HTTP method (empty for methods kube does not map).
    pub verb: &'static str,
    /// The subresources any one of which allows the request, in the order they are asked.
    pub subresources: Vec<&'static str>,
}

/// Whether `subpath` is `path` or below it (`path`'s trailing slash ignored), as kube's
/// `isSubpath`.
fn is_subpath(subpath: &str, path: &str) -> bool {
    let path = path.strip_suffix('/').unwrap_or(path);
    subpath == path || subpath.strip_prefix(path).is_some_and(|rest| rest.starts_with('/'))
}

/// The attributes of a `method` request for `path`, as kube's kubelet maps them.
pub(crate) fn attributes(method: &Method, path: &str) -> Attributes {
    let verb = match *method {
        Method::POST => "create",
        Method::GET => "get",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    };
    let mut subresources = Vec::with_capacity(2);
    let fine_grained = [("/pods", "pods"), ("/healthz", "healthz"), ("/configz", "configz"), ("/statusz", "statusz")];
    if let Some((_, sub)) = fine_grained.iter().find(|(prefix, _)| is_subpath(path, prefix)) {
        subresources.push(*sub);
    } else if is_subpath(path, "/runningpods/") {
        subresources.push("pods");
    }
    let coarse = [("/stats/", "stats"), ("/metrics", "metrics"), ("/logs/", "log"), ("/checkpoint", "checkpoint")];
    match coarse.iter().find(|(prefix, _)| is_subpath(path, prefix)) {
        Some((_, sub)) => subresources.push(*sub),
        None => subresources.push("proxy"),
    }
    Attributes { verb, subresources }
}

/// kube's text for a request none of whose subresources is allowed.
pub(crate) fn forbidden_message(user: &str, attributes: &Attributes) -> String {
    format!(
        "Forbidden (user={user}, verb={}, resource=nodes, subresource(s)=[{}])",
        attributes.verb,
        attributes.subresources.join(" ")
    )
}

/// Decides requests through SubjectAccessReviews, remembering the answers for a while.
pub(crate) struct Authorizer {
    client: kube::Client,
    /// User, verb, subresource and node → (kept until, allowed).
    decisions: Mutex<HashMap<String, (Instant, bool)>>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer").field("cached", &self.decisions.lock().len()).finish_non_exhaustive()
    }
}

impl Authorizer {
    /// Asks `client`'s API server (which must let it create SubjectAccessReviews).
    pub(crate) fn new(client: kube::Client) -> Authorizer {
        Authorizer { client, decisions: Mutex::new(HashMap::new()) }
    }

    /// `Ok` when `requester` may do what `attributes` ask on node `node` (empty: any node);
    /// else the response to send: 403 with kube's message, or 500 when the API server
    /// could not be asked.
    pub(crate) async fn authorize(
        &self,
        requester: &Requester,
        attributes: &Attributes,
        node: &str,
    ) -> Result<(), Response<ResponseBody>> {
        let mut failed = false;
        for subresource in &attributes.subresources {
            match self.allowed(requester, attributes.verb, subresource, node).await {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, user = %requester.name, subresource, "kubelet: SubjectAccessReview failed");
                    failed = true;
                }
            }
        }
        if failed {
            let message = format!(
                "Authorization error (user={}, verb={}, resource=nodes, subresource(s)=[{}])",
                requester.name,
                attributes.verb,
                attributes.subresources.join(" ")
            );
            return Err(plain(StatusCode::INTERNAL_SERVER_ERROR, &message));
        }
        Err(plain(StatusCode::FORBIDDEN, &forbidden_message(&requester.name, attributes)))
    }

    /// Whether `requester` may `verb` `nodes/<subresource>` named `node`: the cached answer,
    /// or the API server's.
    async fn allowed(
        &self,
        requester: &Requester,
        verb: &str,
        subresource: &str,
        node: &str,
    ) -> Result<bool, kube::Error> {
        let now = Instant::now();
        let key = format!(
            "{}\n{}\n{:?}\n{verb}\n{subresource}\n{node}",
            requester.name,
            requester.groups.join("\n"),
            requester.extra
        );
        if let Some((until, allowed)) = self.decisions.lock().get(&key).copied()
            && now < until
        {
            return Ok(allowed);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(requester.name.clone()),
                groups: Some(requester.groups.clone()),
                extra: Some(requester.extra.clone()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.to_owned()),
                    version: Some("v1".to_owned()),
                    resource: Some("nodes".to_owned()),
                    subresource: Some(subresource.to_owned()),
                    name: (!node.is_empty()).then(|| node.to_owned()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer =
            Api::<SubjectAccessReview>::all(self.client.clone()).create(&PostParams::default(), &review).await?;
        let allowed = answer.status.is_some_and(|s| s.allowed);
        let mut decisions = self.decisions.lock();
        if decisions.len() >= CACHE_ENTRIES {
            decisions.retain(|_, (until, _)| now < *until);
            if decisions.len() >= CACHE_ENTRIES {
                decisions.clear();
            }
        }
        decisions.insert(key, (now + if allowed { ALLOW_TTL } else { DENY_TTL }, allowed));
        Ok(allowed)
    }
}

/// A plain-text error answer, as Go's `http.Error` writes it.
fn plain(code: StatusCode, message: &str) -> Response<ResponseBody> {
    let mut res = Response::new(full(bytes::Bytes::from(format!("{message}\n"))));
    *res.status_mut() = code;
    res.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
    res.headers_mut().insert("x-content-type-options", http::HeaderValue::from_static("nosniff"));
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subresources(method: Method, path: &str) -> (&'static str, Vec<&'static str>) {
        let a = attributes(&method, path);
        (a.verb, a.subresources)
    }

    #[test]
    fn paths_map_to_kubes_node_subresources() {
        assert_eq!(subresources(Method::GET, "/containerLogs/ns/pod/c"), ("get", vec!["proxy"]));
        assert_eq!(subresources(Method::POST, "/exec/ns/pod/c"), ("create", vec!["proxy"]));
        assert_eq!(subresources(Method::GET, "/exec/ns/pod/c"), ("get", vec!["proxy"]));
        assert_eq!(subresources(Method::POST, "/portForward/ns/pod"), ("create", vec!["proxy"]));
        assert_eq!(subresources(Method::GET, "/stats/summary"), ("get", vec!["stats"]));
        assert_eq!(subresources(Method::GET, "/stats"), ("get", vec!["stats"]));
        assert_eq!(subresources(Method::GET, "/metrics/cadvisor"), ("get", vec!["metrics"]));
        assert_eq!(subresources(Method::GET, "/logs/syslog"), ("get", vec!["log"]));
        assert_eq!(subresources(Method::POST, "/checkpoint/ns/pod/c"), ("create", vec!["checkpoint"]));
        assert_eq!(subresources(Method::GET, "/pods"), ("get", vec!["pods", "proxy"]));
        assert_eq!(subresources(Method::GET, "/healthz"), ("get", vec!["healthz", "proxy"]));
        assert_eq!(subresources(Method::GET, "/runningpods/"), ("get", vec!["pods", "proxy"]));
        assert_eq!(subresources(Method::GET, "/metricsfoo"), ("get", vec!["proxy"]), "not below /metrics");
        assert_eq!(subresources(Method::OPTIONS, "/spec"), ("", vec!["proxy"]));
    }

    #[test]
    fn the_forbidden_message_is_kubes() {
        let a = attributes(&Method::POST, "/exec/ns/pod/c");
        assert_eq!(
            forbidden_message("jane", &a),
            "Forbidden (user=jane, verb=create, resource=nodes, subresource(s)=[proxy])"
        );
        let a = attributes(&Method::GET, "/pods");
        assert_eq!(
            forbidden_message("system:anonymous", &a),
            "Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource(s)=[pods proxy])"
        );
    }

    #[test]
    fn a_client_certificate_names_the_requester() {
        let ca = opkit_serve::tls::DevCa::generate("ca").expect("ca");
        let cert = ca.issue_client_cert("jane", "dev").expect("cert");
        let der = rustls_pki_types::pem::PemObject::from_pem_slice(cert.cert_pem.as_bytes()).expect("pem");
        let requester = Requester::of_certificates(&PeerCertificates(std::sync::Arc::new(vec![der]))).expect("user");
        assert_eq!(requester.name, "jane");
        assert_eq!(requester.groups, ["dev", AUTHENTICATED]);
        assert!(requester.extra[CREDENTIAL_ID][0].starts_with("X509SHA256="));
    }
}
