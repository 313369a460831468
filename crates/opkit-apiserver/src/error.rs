//! API errors, each rendered as a `metav1.Status` with kube-apiserver's code and reason.

use http::StatusCode;
use serde_json::{Value, json};

use crate::schema::FieldError;
use crate::storage::StorageError;

/// One `details.causes` entry of a Status.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// e.g. `FieldValueInvalid`, `FieldManagerConflict`.
    pub reason: String,
    /// Human-readable text.
    pub message: String,
    /// The field path, e.g. `spec.number`.
    pub field: String,
}

/// An error answered to a client as a `metav1.Status`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `Status.reason`, e.g. `NotFound`.
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `Status.details` (boxed: errors travel through every `Result` of the server).
    pub details: Box<Details>,
}

/// `Status.details`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Details {
    /// `details.group`.
    pub group: Option<String>,
    /// `details.kind` (the resource's plural for most errors, as kube-apiserver does).
    pub kind: Option<String>,
    /// `details.name`.
    pub name: Option<String>,
    /// `details.causes`.
    pub causes: Vec<Cause>,
    /// `details.retryAfterSeconds`.
    pub retry_after: Option<u32>,
    /// Emit `details` even when it has no field (`"details":{}`), as kube-apiserver's
    /// 404 for an unserved path does; kubectl reads fields inside it.
    pub always: bool,
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") }
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError { code, reason, message: message.into(), details: Box::default() }
    }

    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.details.group = Some(group.to_string());
        self.details.kind = Some(kind.to_string());
        if !name.is_empty() {
            self.details.name = Some(name.to_string());
        }
        self
    }

    /// 404 NotFound for an object: `deployments.apps "web" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{} \"{name}\" not found", qualified(group, resource)))
            .with_details(group, resource, name)
    }

    /// 404 NotFound for a path the server does not serve.
    pub fn no_route() -> Self {
        let mut e = Self::new(404, "NotFound", "the server could not find the requested resource");
        e.details.always = true;
        e
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", qualified(group, resource)))
            .with_details(group, resource, name)
    }

    /// 409 Conflict for a stale resourceVersion.
    pub fn conflict(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                qualified(group, resource)
            ),
        )
        .with_details(group, resource, name)
    }

    /// 409 Conflict with a custom message (preconditions, SSA conflicts).
    pub fn conflict_msg(group: &str, resource: &str, name: &str, message: String, causes: Vec<Cause>) -> Self {
        let mut e = Self::new(409, "Conflict", message).with_details(group, resource, name);
        e.details.causes = causes;
        e
    }

    /// 422 Invalid with one cause per field: `FlightTicket.flights.com "x" is invalid: spec.number: ...`.
    pub fn invalid(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Self {
        let qualified_kind = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let text: Vec<String> = errors.iter().map(|e| e.to_message()).collect();
        let summary = if text.len() == 1 { text[0].clone() } else { format!("[{}]", text.join(", ")) };
        let mut e = Self::new(422, "Invalid", format!("{qualified_kind} \"{name}\" is invalid: {summary}"))
            .with_details(group, kind, name);
        e.details.causes = errors
            .iter()
            .map(|f| Cause {
                reason: f.reason.as_str().to_string(),
                message: f.message.clone(),
                field: f.field.clone(),
            })
            .collect();
        e
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 403 Forbidden.
    pub fn forbidden(group: &str, resource: &str, name: &str, message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message).with_details(group, resource, name)
    }

    /// 403 Forbidden as kube's `NewForbidden` words it: `deployments.apps "web" is
    /// forbidden: <why>` (without the name for collections).
    pub fn forbidden_object(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let what = qualified(group, resource);
        let message = if name.is_empty() {
            format!("{what} is forbidden: {why}")
        } else {
            format!("{what} {name:?} is forbidden: {why}")
        };
        Self::new(403, "Forbidden", message).with_details(group, resource, name)
    }

    /// 403 Forbidden with no object (a non-resource path).
    pub fn forbidden_raw(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_supported(group: &str, resource: &str, verb: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("{verb} is not supported on resources of kind {}", qualified(group, resource)),
        )
        .with_details(group, resource, "")
    }

    /// 406 NotAcceptable.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// 410 Expired (a compacted resourceVersion or continue token).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(limit: usize) -> Self {
        Self::new(413, "RequestEntityTooLarge", format!("Request entity too large: limit is {limit}"))
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml; got {content_type:?}"
            ),
        )
    }

    /// 429 TooManyRequests, with `details.causes` (each a reason and a message) and, when
    /// given, `retryAfterSeconds`.
    pub fn too_many_requests(message: impl Into<String>, retry_after: Option<u32>, causes: &[(&str, String)]) -> Self {
        let mut e = Self::new(429, "TooManyRequests", message);
        e.details.retry_after = retry_after;
        e.details.causes = causes
            .iter()
            .map(|(reason, message)| Cause {
                reason: reason.to_string(),
                message: message.clone(),
                field: String::new(),
            })
            .collect();
        e
    }

    /// 504 Timeout (e.g. a resourceVersion newer than the server has).
    pub fn timeout(message: impl Into<String>) -> Self {
        let mut e = Self::new(504, "Timeout", message);
        e.details.retry_after = Some(1);
        e
    }

    /// 500 InternalError: only for server faults (storage), never client input.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", format!("Internal error occurred: {}", message.into()))
    }

    /// 500 with no reason (kube's `StatusReasonUnknown`) and `message` as is: how kube
    /// answers an error no layer classified, such as a failed CRD conversion webhook.
    pub fn unclassified(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// 500 InternalError with `message` as is (no "Internal error occurred" prefix).
    pub fn internal_raw(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// An error answer of a backend (a kubelet) whose body is not a Status: its code, the
    /// reason kube gives that code, and its text as the message (kube's
    /// `NewGenericServerResponse`).
    pub fn from_backend(code: u16, message: impl Into<String>) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            406 => "NotAcceptable",
            409 => "Conflict",
            410 => "Gone",
            415 => "UnsupportedMediaType",
            422 => "Invalid",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        let code = if (400..600).contains(&code) { code } else { 500 };
        Self::new(code, reason, message)
    }

    /// 503 ServiceUnavailable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// The HTTP status code.
    pub fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The `metav1.Status` object.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty() {
            // Go omits an empty reason (`omitempty`).
            if let Some(m) = s.as_object_mut() {
                m.remove("reason");
            }
        }
        let mut details = serde_json::Map::new();
        let d = &self.details;
        if let Some(n) = &d.name {
            details.insert("name".into(), json!(n));
        }
        if let Some(g) = d.group.as_ref().filter(|g| !g.is_empty()) {
            details.insert("group".into(), json!(g));
        }
        if let Some(k) = &d.kind {
            details.insert("kind".into(), json!(k));
        }
        if !d.causes.is_empty() {
            details.insert(
                "causes".into(),
                Value::Array(
                    d.causes
                        .iter()
                        .map(|c| {
                            let mut cause = json!({"reason": c.reason, "message": c.message});
                            if !c.field.is_empty() {
                                cause["field"] = json!(c.field);
                            }
                            cause
                        })
                        .collect(),
                ),
            );
        }
        if let Some(r) = d.retry_after {
            details.insert("retryAfterSeconds".into(), json!(r));
        }
        if !details.is_empty() || d.always {
            s["details"] = Value::Object(details);
        }
        s
    }
}

impl From<StorageError> for ApiError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::Expired { .. } => ApiError::expired(format!("{e}")),
            StorageError::TooLarge { .. } => ApiError::timeout(format!("{e}")),
            StorageError::Backend(m) => ApiError::internal(m),
            // What kube-apiserver answers when etcd's space quota is exhausted.
            StorageError::NoSpace => ApiError::internal_raw(e.to_string()),
            StorageError::Unreadable { .. } => ApiError::internal(e.to_string()),
            StorageError::ValueTooLarge { .. } => ApiError::new(413, "RequestEntityTooLarge", format!("{e}")),
        }
    }
}

/// A short-hand for results of API operations.
pub type ApiResult<T> = Result<T, ApiError>;
