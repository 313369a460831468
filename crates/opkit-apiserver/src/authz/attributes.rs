//! What is authorized: a verb on a resource or a non-resource path (kube's
//! `authorizer.Attributes`), and the authorizer's answer. A leaf: it imports nothing of
//! the crate, so the registry and admission can describe an action without importing
//! the authorizer.

/// The resource attributes of a request (kube's `ResourceAttributes`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceAttributes {
    /// The namespace ("" for cluster scope or all namespaces).
    pub namespace: String,
    /// The API group ("" for core).
    pub group: String,
    /// The API version.
    pub version: String,
    /// The resource, e.g. `pods`.
    pub resource: String,
    /// The subresource, e.g. `status` ("" for none).
    pub subresource: String,
    /// The object's name ("" for collections).
    pub name: String,
}

impl ResourceAttributes {
    /// `pods` or `pods/status`.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// What an action addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Object {
    /// A resource, collection or subresource.
    Resource(ResourceAttributes),
    /// A path outside the resource API, e.g. `/healthz`.
    NonResource {
        /// The request path.
        path: String,
    },
}

/// A verb on an object: what is authorized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`,
    /// `impersonate`, `bind`, `escalate`, …; for non-resource paths, the lowercase method.
    pub verb: String,
    /// What the verb applies to.
    pub object: Object,
}

impl Action {
    /// A verb on a resource.
    pub fn resource(verb: &str, attributes: ResourceAttributes) -> Action {
        Action { verb: verb.to_string(), object: Object::Resource(attributes) }
    }
}

/// The authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the action is allowed.
    pub allowed: bool,
    /// Why (kube's reason text: the binding that allowed it, or the roles that were
    /// missing); may be empty. Shared, so an allowing binding's reason, made once when
    /// the RBAC index is built, costs no allocation per request.
    pub reason: std::sync::Arc<str>,
}
