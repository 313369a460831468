//! The API proxy a run's Kubernetes modules talk to (operator-sdk's
//! `internal/ansible/proxy`): a local HTTP server (`opkit_serve::Server`) forwarding every
//! request to the API server with the operator's credentials. The run's kubeconfig ([`kubeconfig_for`])
//! carries the owning custom resource as its basic-auth user name (base64 JSON of an
//! owner reference and its namespace) and the proxy's token ([`proxy_token`], random per
//! operator process) as its password: the proxy answers 401 to any other request, so no
//! other local process can act with the operator's credentials through it. From the
//! owner, the proxy
//!
//! - adds an owner reference to what a run creates (`POST`), or, for a cluster-scoped
//!   object of a namespaced owner or one in another namespace, the annotations
//!   `operator-sdk/primary-resource` and `operator-sdk/primary-resource-type`;
//! - watches that kind for the owner's controller when its watch has
//!   `watchDependentResources` (annotated cluster-scoped kinds only with
//!   `watchClusterScopedResources`), enqueuing the owner on a change or deletion but not
//!   on creation nor on status-only updates (operator-lib's `DependentPredicate`);
//! - answers `GET`s of watched kinds (single objects, and lists with at most a label
//!   selector) from the operator's cache (`X-Cache: HIT`), forwarding misses.
//!
//! It also serves ansible-operator's own API: `POST /metrics` creates or updates a
//! user metric ([`crate::user_metrics`], what the `osdk_metric` module sends), here and on
//! the metrics-only listener ([`ApiProxy::start_metrics_api`], ansible-operator's
//! `localhost:5050`).

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine;
use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use http_body_util::BodyExt;
use kube::api::{ApiResource, DynamicObject};
use kube::client::Body;
use kube::core::gvk::GroupVersionResource;
use kube::discovery::{Scope, verbs};
use kube::runtime::reflector::ObjectRef;
use opkit::cache::{Informer, InformerEvent};
use opkit::discovery::{MappingError, RestMapper};
use opkit::{ControllerHandle, Request};
use opkit_apimachinery::ResourcePath;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::OperatorError;
use crate::user_metrics::{UserMetric, UserMetrics};
use crate::watches::GroupVersionKind;

/// Annotation naming a dependent's owner (`namespace/name`), as operator-lib writes it.
pub(crate) const PRIMARY_RESOURCE_ANNOTATION: &str = "operator-sdk/primary-resource";
/// Annotation naming a dependent owner's `Kind.group`.
pub(crate) const PRIMARY_RESOURCE_TYPE_ANNOTATION: &str = "operator-sdk/primary-resource-type";

/// The owner a run's requests carry: an owner reference and the owner's namespace
/// (operator-sdk's `NamespacedOwnerReference`, the same JSON).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct NamespacedOwner {
    /// The owner's apiVersion.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// The owner's kind.
    pub kind: String,
    /// The owner's name.
    pub name: String,
    /// The owner's uid.
    pub uid: String,
    /// The owner's namespace (empty when cluster-scoped).
    #[serde(rename = "Namespace", default)]
    pub namespace: String,
}

impl NamespacedOwner {
    fn group(&self) -> &str {
        self.api_version.rsplit_once('/').map_or("", |(g, _)| g)
    }
}

/// The secret a run's kubeconfig carries as its basic-auth password, which the proxy
/// requires of every request it forwards: 32 random bytes (URL-safe base64), made once
/// per operator process.
pub fn proxy_token() -> &'static str {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN.get_or_init(|| {
        let bytes: [u8; 32] = rand::random();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    })
}

/// Whether a request's basic-auth password is [`proxy_token`] (compared in constant time).
fn presents_token(headers: &http::HeaderMap) -> bool {
    let Some(value) = headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else { return false };
    let Some(encoded) = value.strip_prefix("Basic ") else { return false };
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else { return false };
    let Some(colon) = decoded.iter().position(|b| *b == b':') else { return false };
    let (given, expected) = (&decoded[colon + 1..], proxy_token().as_bytes());
    given.len() == expected.len() && given.iter().zip(expected).fold(0u8, |diff, (a, b)| diff | (a ^ b)) == 0
}

/// The kubeconfig a run uses: the proxy at `proxy`, the owner as the user name and
/// [`proxy_token`] as the password.
pub fn kubeconfig_for(owner: &NamespacedOwner, proxy: SocketAddr) -> String {
    let user = base64::engine::general_purpose::URL_SAFE.encode(serde_json::to_vec(owner).unwrap_or_default());
    let ns = if owner.namespace.is_empty() { "default" } else { owner.namespace.as_str() };
    format!(
        "---\napiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    insecure-skip-tls-verify: true\n    server: http://{proxy}\n  name: proxy-server\ncontexts:\n- context:\n    cluster: proxy-server\n    user: admin/proxy-server\n    namespace: {ns}\n  name: {ns}/proxy-server\ncurrent-context: {ns}/proxy-server\npreferences: {{}}\nusers:\n- name: admin/proxy-server\n  user:\n    username: {user}\n    password: {token}\n",
        token = proxy_token()
    )
}

/// The owner in a request's basic-auth user name, if any.
fn owner_of(headers: &http::HeaderMap) -> Option<NamespacedOwner> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = value.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let user = decoded.split_once(':').map_or(decoded.as_str(), |(u, _)| u);
    let json = base64::engine::general_purpose::URL_SAFE
        .decode(user)
        .or_else(|_| base64::engine::general_purpose::STANDARD.decode(user))
        .ok()?;
    serde_json::from_slice(&json).ok()
}

/// A resource as the API server's discovery describes it.
#[derive(Clone)]
struct ResourceInfo {
    resource: ApiResource,
    scope: Scope,
    /// It cannot be read and watched (e.g. a review): never cached.
    is_virtual: bool,
}

/// A watched kind's controller, as [`ApiProxy::register_owner`] registers it.
pub(crate) struct OwnerRegistration<'a> {
    /// The watched kind.
    pub resource: &'a ApiResource,
    /// Its scope.
    pub scope: Scope,
    /// Its controller, which dependents' events requeue.
    pub handle: ControllerHandle,
    /// The watch's `watchDependentResources`.
    pub watch_dependent_resources: bool,
    /// The watch's `watchClusterScopedResources`.
    pub watch_cluster_scoped_resources: bool,
    /// The watch's `blacklist`: dependent kinds never watched nor read from the cache.
    pub blacklist: Vec<GroupVersionKind>,
}

/// How an owner kind's controller takes dependent watches.
#[derive(Clone)]
struct OwnerController {
    handle: ControllerHandle,
    namespaced: bool,
    watch_dependent_resources: bool,
    watch_cluster_scoped_resources: bool,
    blacklist: Vec<GroupVersionKind>,
}

/// The proxy's shared state.
pub(crate) struct ApiProxy {
    client: kube::Client,
    cache: opkit::Cache,
    mapper: RestMapper,
    owners: Mutex<HashMap<(String, String), OwnerController>>,
    /// Dependent watches already set up: (owner group, owner kind, child api version, child plural).
    dependents: Mutex<HashSet<(String, String, String, String)>>,
    /// The informers whose objects are served from the cache, by `apiVersion/plural`.
    cached: Mutex<HashMap<String, Arc<Informer<DynamicObject>>>>,
    /// Whether creates get the owner reference (or annotations) and dependent watches.
    inject_owner_ref: bool,
    /// Where `POST /metrics` registers user metrics.
    user_metrics: UserMetrics,
    shutdown: CancellationToken,
}

impl ApiProxy {
    /// A proxy forwarding with `client` and reading from `cache` (the manager's); with
    /// `inject_owner_ref` false (`--inject-owner-ref=false`) creates are forwarded as they
    /// are. User metrics go to `user_metrics`.
    pub(crate) fn new(
        client: kube::Client,
        cache: opkit::Cache,
        shutdown: CancellationToken,
        inject_owner_ref: bool,
        user_metrics: UserMetrics,
    ) -> Arc<ApiProxy> {
        Arc::new(ApiProxy {
            mapper: RestMapper::new(client.clone()),
            client,
            cache,
            owners: Mutex::new(HashMap::new()),
            dependents: Mutex::new(HashSet::new()),
            cached: Mutex::new(HashMap::new()),
            inject_owner_ref,
            user_metrics,
            shutdown,
        })
    }

    /// The kinds' resources, as the proxy resolves them; shared with its operator.
    pub(crate) fn rest_mapper(&self) -> &RestMapper {
        &self.mapper
    }

    /// Registers the controller of a watched kind: its objects are served from the cache
    /// and the dependents its runs create are watched as the watch says.
    pub(crate) fn register_owner(&self, owner: OwnerRegistration<'_>) {
        let OwnerRegistration {
            resource,
            scope,
            handle,
            watch_dependent_resources,
            watch_cluster_scoped_resources,
            blacklist,
        } = owner;
        let informer = self.cache.dynamic_informer(resource, scope.clone());
        if let Ok(mut cached) = self.cached.lock() {
            cached.insert(format!("{}/{}", resource.api_version, resource.plural), informer);
        }
        let owner = OwnerController {
            handle,
            namespaced: matches!(scope, Scope::Namespaced),
            watch_dependent_resources,
            watch_cluster_scoped_resources,
            blacklist,
        };
        if let Ok(mut owners) = self.owners.lock() {
            owners.insert((resource.group.clone(), resource.kind.clone()), owner);
        }
    }

    /// Listens on `address` (port 0: any free port) and serves until the shutdown token
    /// is cancelled; returns the address it listens on.
    pub(crate) async fn start(self: &Arc<Self>, address: SocketAddr) -> Result<SocketAddr, OperatorError> {
        let bound = self.serve(address, false).await?;
        tracing::info!(address = %bound, "the ansible API proxy listens");
        Ok(bound)
    }

    /// Listens on `address` for ansible-operator's metrics API only (`POST /metrics`,
    /// where operator-sdk's `osdk_metric` module sends by default, `localhost:5050`);
    /// returns the address it listens on.
    pub(crate) async fn start_metrics_api(self: &Arc<Self>, address: SocketAddr) -> Result<SocketAddr, OperatorError> {
        let bound = self.serve(address, true).await?;
        tracing::info!(address = %bound, "Starting to serve metrics listener");
        Ok(bound)
    }

    async fn serve(self: &Arc<Self>, address: SocketAddr, metrics_only: bool) -> Result<SocketAddr, OperatorError> {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|source| OperatorError::ProxyListen { address: address.to_string(), source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| OperatorError::ProxyListen { address: address.to_string(), source })?;
        let proxy = self.clone();
        let service = hyper::service::service_fn(move |req| {
            let proxy = proxy.clone();
            async move { Ok::<_, Infallible>(proxy.handle(req, metrics_only).await) }
        });
        tokio::spawn(opkit_serve::Server::new(listener).serve(service, self.shutdown.clone()));
        Ok(bound)
    }

    /// ansible-operator's metrics API: `POST /metrics` with a [`UserMetric`].
    fn user_metric(&self, method: &Method, body: &[u8]) -> http::Response<Body> {
        if method != Method::POST {
            return plain_response(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed");
        }
        let metric: UserMetric = match serde_json::from_slice(body) {
            Ok(metric) => metric,
            Err(e) => return plain_response(StatusCode::BAD_REQUEST, &e.to_string()),
        };
        match self.user_metrics.handle(&metric) {
            Ok(()) => plain_response(StatusCode::OK, ""),
            Err(e) => {
                tracing::info!(metric = metric.name, error = %e, "refusing a user metric");
                plain_response(StatusCode::BAD_REQUEST, &e.to_string())
            }
        }
    }

    async fn handle(&self, req: http::Request<hyper::body::Incoming>, metrics_only: bool) -> http::Response<Body> {
        let (parts, incoming) = req.into_parts();
        let body = match incoming.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) => return status_response(StatusCode::BAD_REQUEST, &format!("reading the request body: {e}")),
        };
        if parts.uri.path() == "/metrics" && (metrics_only || parts.method == Method::POST) {
            return self.user_metric(&parts.method, &body);
        }
        if metrics_only {
            return plain_response(StatusCode::NOT_FOUND, "404 page not found");
        }
        if !presents_token(&parts.headers) {
            return status_response(StatusCode::UNAUTHORIZED, "Unauthorized");
        }
        let owner = owner_of(&parts.headers);
        let path = ResourcePath::parse(parts.uri.path());
        let mut body = body;
        if let (Some(owner), Some(path)) = (&owner, &path) {
            let watch_query =
                parts.uri.query().is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
            if parts.method == Method::GET
                && !watch_query
                && path.name.is_some()
                && path.subresource.as_deref().is_none_or(|s| s == "status")
                && let Some(hit) = self.cached_object(owner, path).await
            {
                return hit;
            }
            if parts.method == Method::GET
                && !watch_query
                && path.name.is_none()
                && path.subresource.is_none()
                && let Some(hit) = self.cached_list(owner, path, parts.uri.query().unwrap_or_default()).await
            {
                return hit;
            }
            if self.inject_owner_ref
                && parts.method == Method::POST
                && path.name.is_none()
                && path.subresource.is_none()
            {
                match self.inject_owner(owner, path, &body).await {
                    Ok(Some(new_body)) => body = new_body,
                    Ok(None) => {}
                    Err(message) => return status_response(StatusCode::INTERNAL_SERVER_ERROR, &message),
                }
            }
        }
        let uri = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        let mut forward = http::Request::builder().method(parts.method.clone()).uri(uri);
        for name in [http::header::CONTENT_TYPE, http::header::ACCEPT, http::header::USER_AGENT] {
            if let Some(value) = parts.headers.get(&name) {
                forward = forward.header(name, value);
            }
        }
        let request = match forward.body(Body::from(body)) {
            Ok(r) => r,
            Err(e) => return status_response(StatusCode::BAD_REQUEST, &e.to_string()),
        };
        match self.client.send(request).await {
            Ok(mut response) => {
                for hop in [http::header::CONNECTION, http::header::TRANSFER_ENCODING, http::header::CONTENT_LENGTH] {
                    response.headers_mut().remove(hop);
                }
                response
            }
            Err(e) => status_response(StatusCode::BAD_GATEWAY, &format!("the API server: {e}")),
        }
    }

    /// Resolves `group/version` `plural` through the mapper (a miss refreshes).
    async fn resolve(&self, group: &str, version: &str, plural: &str) -> Option<ResourceInfo> {
        match self.mapper.kind_for(&GroupVersionResource::gvr(group, version, plural)).await {
            Ok((resource, caps)) => Some(ResourceInfo {
                is_virtual: ![verbs::GET, verbs::LIST, verbs::WATCH].iter().all(|verb| caps.supports_operation(verb)),
                resource,
                scope: caps.scope,
            }),
            Err(MappingError::Discovery { api_version, source }) => {
                tracing::warn!(api_version, error = %source, "discovery through the proxy failed");
                None
            }
            Err(_) => None,
        }
    }

    fn owner_controller(&self, owner: &NamespacedOwner) -> Option<OwnerController> {
        self.owners.lock().ok()?.get(&(owner.group().to_string(), owner.kind.clone())).cloned()
    }

    /// A cached object for a `GET`, unless the kind is not cached or is blacklisted.
    async fn cached_object(&self, owner: &NamespacedOwner, path: &ResourcePath) -> Option<http::Response<Body>> {
        let (info, informer) = self.informer_for(owner, path).await?;
        let mut key = ObjectRef::<DynamicObject>::new_with(path.name.as_deref()?, info.resource.clone());
        if let Some(ns) = &path.namespace {
            key = key.within(ns);
        }
        let object = informer.get(&key)?;
        Some(cache_hit(serde_json::to_vec(&*object).ok()?))
    }

    /// The informer serving a resource's reads, unless the resource is virtual, not
    /// watched, not synced yet or blacklisted for the owner.
    async fn informer_for(
        &self,
        owner: &NamespacedOwner,
        path: &ResourcePath,
    ) -> Option<(ResourceInfo, Arc<Informer<DynamicObject>>)> {
        let info = self.resolve(&path.group, &path.version, &path.resource).await?;
        if info.is_virtual {
            return None;
        }
        if let Some(controller) = self.owner_controller(owner)
            && blacklisted(&controller.blacklist, &info.resource)
        {
            return None;
        }
        let informer = self
            .cached
            .lock()
            .ok()?
            .get(&format!("{}/{}", info.resource.api_version, info.resource.plural))
            .cloned()?;
        informer.is_synced().then_some((info, informer))
    }

    /// A list of a watched kind from the cache (`labelSelector` applied); lists with a
    /// field selector or paging go to the API server.
    async fn cached_list(
        &self,
        owner: &NamespacedOwner,
        path: &ResourcePath,
        query: &str,
    ) -> Option<http::Response<Body>> {
        let mut label_selector = opkit_apimachinery::selector::LabelSelector::everything();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_encoding::percent_decode_str(&value.replace('+', " ")).decode_utf8().ok()?.into_owned();
            match key {
                "labelSelector" => label_selector = opkit_apimachinery::selector::LabelSelector::parse(&value).ok()?,
                "fieldSelector" | "limit" | "continue" | "resourceVersionMatch" if !value.is_empty() => return None,
                _ => {}
            }
        }
        let (info, informer) = self.informer_for(owner, path).await?;
        let mut items: Vec<Arc<DynamicObject>> = match &path.namespace {
            Some(ns) => {
                informer.list().into_iter().filter(|o| o.metadata.namespace.as_deref() == Some(ns.as_str())).collect()
            }
            None => informer.list(),
        };
        items.retain(|o| label_selector.matches_labels(o.metadata.labels.as_ref()));
        items.sort_by(|a, b| (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name)));
        let list = json!({
            "apiVersion": info.resource.api_version,
            "kind": format!("{}List", info.resource.kind),
            "metadata": {"resourceVersion": ""},
            "items": items.iter().map(|o| serde_json::to_value(&**o).unwrap_or(Value::Null)).collect::<Vec<_>>(),
        });
        Some(cache_hit(list.to_string().into_bytes()))
    }

    /// Adds the owner reference (or annotations) to a created object and watches its
    /// kind; `None` leaves the body as it is.
    async fn inject_owner(
        &self,
        owner: &NamespacedOwner,
        path: &ResourcePath,
        body: &Bytes,
    ) -> Result<Option<Bytes>, String> {
        let Some(info) = self.resolve(&path.group, &path.version, &path.resource).await else {
            return Err(format!(
                "Unable to determine if virtual resource: {}/{} {}",
                path.group, path.version, path.resource
            ));
        };
        if info.is_virtual {
            return Ok(None);
        }
        let Ok(mut object) = serde_json::from_slice::<Value>(body) else { return Ok(None) };
        let child_namespaced = matches!(info.scope, Scope::Namespaced);
        let child_namespace = path
            .namespace
            .clone()
            .or_else(|| object.pointer("/metadata/namespace").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_default();
        let owner_namespaced = !owner.namespace.is_empty();
        let use_owner_ref = !owner_namespaced || (child_namespaced && child_namespace == owner.namespace);
        let Some(meta) = object.as_object_mut().map(|o| o.entry("metadata").or_insert_with(|| json!({}))) else {
            return Ok(None);
        };
        let Some(meta) = meta.as_object_mut() else { return Ok(None) };
        if use_owner_ref {
            let refs = meta.entry("ownerReferences").or_insert_with(|| json!([]));
            if let Some(list) = refs.as_array_mut() {
                list.push(
                    json!({"apiVersion": owner.api_version, "kind": owner.kind, "name": owner.name, "uid": owner.uid}),
                );
            }
        } else {
            let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
            if let Some(map) = annotations.as_object_mut() {
                map.insert(PRIMARY_RESOURCE_ANNOTATION.into(), json!(format!("{}/{}", owner.namespace, owner.name)));
                map.insert(PRIMARY_RESOURCE_TYPE_ANNOTATION.into(), json!(format!("{}.{}", owner.kind, owner.group())));
            }
        }
        let new_body = serde_json::to_vec(&object).map_err(|e| format!("Could not serialize body: {e}"))?;
        self.watch_dependent(owner, &info, use_owner_ref);
        Ok(Some(Bytes::from(new_body)))
    }

    /// operator-sdk's `addWatchToController`.
    fn watch_dependent(&self, owner: &NamespacedOwner, child: &ResourceInfo, use_owner_ref: bool) {
        let Some(controller) = self.owner_controller(owner) else { return };
        if !controller.watch_dependent_resources || blacklisted(&controller.blacklist, &child.resource) {
            return;
        }
        let child_namespaced = matches!(child.scope, Scope::Namespaced);
        if !use_owner_ref && !child_namespaced && !controller.watch_cluster_scoped_resources {
            return;
        }
        let key = (
            owner.group().to_string(),
            owner.kind.clone(),
            child.resource.api_version.clone(),
            child.resource.plural.clone(),
        );
        let first = self.dependents.lock().map(|mut seen| seen.insert(key)).unwrap_or(false);
        if !first {
            return;
        }
        tracing::info!(kind = %child.resource.kind, owner = %owner.kind, "watching dependent resource");
        let informer = self.cache.dynamic_informer(&child.resource, child.scope.clone());
        if let Ok(mut cached) = self.cached.lock() {
            cached.insert(format!("{}/{}", child.resource.api_version, child.resource.plural), informer.clone());
        }
        let owner_group = owner.group().to_string();
        let owner_kind = owner.kind.clone();
        let owner_type = format!("{}.{}", owner.kind, owner.group());
        let map = move |o: &DynamicObject| -> Vec<Request> {
            if use_owner_ref {
                let ns = if controller.namespaced { o.metadata.namespace.as_deref() } else { None };
                o.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .filter(|r| {
                        r.kind == owner_kind && r.api_version.rsplit_once('/').map_or("", |(g, _)| g) == owner_group
                    })
                    .map(|r| Request::new(r.name.clone(), ns))
                    .collect()
            } else {
                let annotations = o.metadata.annotations.clone().unwrap_or_default();
                match (annotations.get(PRIMARY_RESOURCE_TYPE_ANNOTATION), annotations.get(PRIMARY_RESOURCE_ANNOTATION))
                {
                    (Some(t), Some(primary)) if *t == owner_type => {
                        let (ns, name) = primary.split_once('/').unwrap_or(("", primary));
                        vec![Request::new(name, (!ns.is_empty()).then_some(ns))]
                    }
                    _ => Vec::new(),
                }
            }
        };
        let handle = controller.handle.clone();
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            loop {
                let mut subscription = informer.subscribe();
                loop {
                    let event = tokio::select! {
                        () = shutdown.cancelled() => return,
                        event = subscription.events.recv() => event,
                    };
                    let requests = match event {
                        Ok(InformerEvent::Apply { old: Some(old), new }) if changed_beyond_status(&old, &new) => {
                            map(&new)
                        }
                        Ok(InformerEvent::Delete(gone)) => map(&gone),
                        Ok(_) => Vec::new(),
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => break,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    };
                    for request in requests {
                        handle.reconcile(request);
                    }
                }
            }
        });
    }
}

/// operator-lib's `DependentPredicate` for updates: something besides the status and
/// the resourceVersion changed.
fn changed_beyond_status(old: &DynamicObject, new: &DynamicObject) -> bool {
    let strip = |o: &DynamicObject| {
        let mut v = serde_json::to_value(o).unwrap_or(Value::Null);
        if let Some(map) = v.as_object_mut() {
            map.remove("status");
        }
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            meta.remove("managedFields");
        }
        v
    };
    strip(old) != strip(new)
}

fn blacklisted(list: &[GroupVersionKind], resource: &ApiResource) -> bool {
    list.iter().any(|g| g.group == resource.group && g.version == resource.version && g.kind == resource.kind)
}

/// A JSON response read from the cache (`X-Cache: HIT`, as operator-sdk's proxy says).
fn cache_hit(body: Vec<u8>) -> http::Response<Body> {
    let mut response = http::Response::new(Body::from(body));
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response.headers_mut().insert("x-cache", HeaderValue::from_static("HIT"));
    response
}

/// A plain-text response, as Go's `http.Error` writes.
fn plain_response(code: StatusCode, message: &str) -> http::Response<Body> {
    let mut response = http::Response::new(Body::from(if message.is_empty() {
        Vec::new()
    } else {
        format!("{message}\n").into_bytes()
    }));
    *response.status_mut() = code;
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

/// A Kubernetes `Status` response.
fn status_response(code: StatusCode, message: &str) -> http::Response<Body> {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "code": code.as_u16()});
    let mut response = http::Response::new(Body::from(status.to_string().into_bytes()));
    *response.status_mut() = code;
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_round_trips_through_the_kubeconfig_user() {
        let owner = NamespacedOwner {
            api_version: "cache.example.com/v1alpha1".into(),
            kind: "Memcached".into(),
            name: "m".into(),
            uid: "u-1".into(),
            namespace: "ns".into(),
        };
        let config = kubeconfig_for(&owner, "127.0.0.1:8888".parse().expect("addr"));
        let user = config.split("username: ").nth(1).and_then(|r| r.lines().next()).expect("user");
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:unused"));
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, HeaderValue::from_str(&format!("Basic {basic}")).expect("header"));
        assert_eq!(owner_of(&headers), Some(owner));
        assert!(!presents_token(&headers), "the password `unused` is not the proxy's token");
        let password = config.split("password: ").nth(1).and_then(|r| r.lines().next()).expect("password");
        assert_eq!(password, proxy_token());
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        headers.insert(http::header::AUTHORIZATION, HeaderValue::from_str(&format!("Basic {basic}")).expect("header"));
        assert!(presents_token(&headers));
        assert_eq!(proxy_token().len(), 43, "32 bytes of URL-safe base64");
        assert!(!presents_token(&http::HeaderMap::new()));
        let json: Value =
            serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE.decode(user).expect("base64"))
                .expect("json");
        assert_eq!(json["Namespace"], "ns", "operator-sdk's NamespacedOwnerReference JSON");
    }
}
