//! Wire types of `admission.k8s.io/v1` AdmissionReview: the request the API server sends, the
//! response a webhook returns, and the `metav1.Status` subset used to explain a denial.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `apiVersion` of AdmissionReview objects this server speaks (v1beta1 is accepted and echoed).
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";
/// The only `patchType` Kubernetes supports in admission responses.
pub const PATCH_TYPE_JSON_PATCH: &str = "JSONPatch";

/// Group, version and kind of the object under admission (`request.kind`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersionKind {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// API version, e.g. `v1`.
    #[serde(default)]
    pub version: String,
    /// Kind, e.g. `ConfigMap`.
    #[serde(default)]
    pub kind: String,
}

/// Group, version and resource being requested (`request.resource`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersionResource {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// API version, e.g. `v1`.
    #[serde(default)]
    pub version: String,
    /// Plural resource name, e.g. `configmaps`.
    #[serde(default)]
    pub resource: String,
}

/// The operation being admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operation {
    /// Object creation (`request.object` is set).
    #[serde(rename = "CREATE")]
    Create,
    /// Object update (`request.object` and `request.oldObject` are set).
    #[serde(rename = "UPDATE")]
    Update,
    /// Object deletion (`request.oldObject` is set).
    #[serde(rename = "DELETE")]
    Delete,
    /// Connect to a subresource such as `pods/exec`.
    #[serde(rename = "CONNECT")]
    Connect,
}

/// The authenticated user that made the request (`request.userInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserInfo {
    /// User name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// Unique user id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Groups the user belongs to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Extra authenticator-provided attributes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

/// `request` of an AdmissionReview, with the objects decoded as `K`.
///
/// `AdmissionRequest<serde_json::Value>` (the default) is the raw form handed to
/// [`AdmissionHandler`](super::AdmissionHandler)s; typed handlers get it with `K` decoded.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest<K = Value> {
    /// Request id; the response must echo it.
    pub uid: String,
    /// Kind of the object in `object`/`oldObject`.
    #[serde(default)]
    pub kind: GroupVersionKind,
    /// Resource being requested.
    #[serde(default)]
    pub resource: GroupVersionResource,
    /// Subresource (e.g. `status`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_resource: Option<String>,
    /// Kind of the original request, when it was converted before admission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_kind: Option<GroupVersionKind>,
    /// Resource of the original request, when it was converted before admission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_resource: Option<GroupVersionResource>,
    /// Subresource of the original request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_sub_resource: Option<String>,
    /// Object name; may be empty on CREATE with `generateName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace for namespaced objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The operation being performed.
    pub operation: Operation,
    /// Who is making the request.
    #[serde(default)]
    pub user_info: UserInfo,
    /// The new object (CREATE, UPDATE); `None` for DELETE.
    #[serde(default = "none", skip_serializing_if = "Option::is_none")]
    pub object: Option<K>,
    /// The existing object (UPDATE, DELETE).
    #[serde(default = "none", skip_serializing_if = "Option::is_none")]
    pub old_object: Option<K>,
    /// Whether the request is a dry run (no side effects allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// Operation options (e.g. `CreateOptions`, `DeleteOptions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Value>,
}

fn none<K>() -> Option<K> {
    None
}

impl<K> AdmissionRequest<K> {
    /// Replaces the object types, keeping every other field.
    pub fn with_objects<T>(&self, object: Option<T>, old_object: Option<T>) -> AdmissionRequest<T> {
        AdmissionRequest {
            uid: self.uid.clone(),
            kind: self.kind.clone(),
            resource: self.resource.clone(),
            sub_resource: self.sub_resource.clone(),
            request_kind: self.request_kind.clone(),
            request_resource: self.request_resource.clone(),
            request_sub_resource: self.request_sub_resource.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            operation: self.operation,
            user_info: self.user_info.clone(),
            object,
            old_object,
            dry_run: self.dry_run,
            options: self.options.clone(),
        }
    }

    /// Whether this is a dry-run request.
    pub fn is_dry_run(&self) -> bool {
        self.dry_run.unwrap_or(false)
    }
}

/// The `metav1.Status` subset carried in `response.status` (and in conversion `result`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewStatus {
    /// `Success` or `Failure` (set for conversion results; optional for admission).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Human-readable explanation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Machine-readable reason, e.g. `Forbidden`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// HTTP-style status code, e.g. 403.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
}

/// `response` of an AdmissionReview.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// Echo of `request.uid` (the server fills it in).
    pub uid: String,
    /// Whether the request is admitted.
    pub allowed: bool,
    /// Why it was denied (or a 200 status when allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ReviewStatus>,
    /// Base64 of a JSON patch (RFC 6902) to apply to the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<k8s_openapi::ByteString>,
    /// Always `JSONPatch` when `patch` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    /// Annotations recorded in the audit log.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub audit_annotations: BTreeMap<String, String>,
    /// Warnings shown to the client (kubectl prints them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl AdmissionResponse {
    /// An allowing response (status code 200, like controller-runtime's `Allowed("")`).
    pub fn allowed() -> Self {
        AdmissionResponse {
            allowed: true,
            status: Some(ReviewStatus { code: Some(200), ..ReviewStatus::default() }),
            ..AdmissionResponse::default()
        }
    }

    /// A denial with code 403, reason `Forbidden` and `message`.
    pub fn denied(message: impl Into<String>) -> Self {
        Self::errored(403, "Forbidden", message)
    }

    /// A denial with an arbitrary code and reason (e.g. 400 `BadRequest` for undecodable input).
    pub fn errored(code: u16, reason: &str, message: impl Into<String>) -> Self {
        AdmissionResponse {
            allowed: false,
            status: Some(ReviewStatus {
                status: Some("Failure".to_owned()),
                message: Some(message.into()),
                reason: Some(reason.to_owned()),
                code: Some(code),
            }),
            ..AdmissionResponse::default()
        }
    }

    /// Adds warnings.
    pub fn with_warnings(mut self, warnings: impl IntoIterator<Item = String>) -> Self {
        self.warnings.extend(warnings);
        self
    }

    /// Attaches a JSON patch (the serialized RFC 6902 operation array); `patchType` becomes
    /// `JSONPatch`.
    pub fn with_patch(mut self, patch_json: Vec<u8>) -> Self {
        self.patch = Some(k8s_openapi::ByteString(patch_json));
        self.patch_type = Some(PATCH_TYPE_JSON_PATCH.to_owned());
        self
    }
}

/// An AdmissionReview envelope as received: `request` is raw JSON.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AdmissionReviewIn {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub request: Option<AdmissionRequest<Value>>,
}

/// An AdmissionReview envelope as sent back.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AdmissionReviewOut {
    pub api_version: String,
    pub kind: &'static str,
    pub response: AdmissionResponse,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_decodes_from_apiserver_json() {
        let req: AdmissionRequest = serde_json::from_value(json!({
            "uid": "u1",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "namespace": "default", "operation": "UPDATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": {"a": 1}, "oldObject": {"a": 0}, "dryRun": true
        }))
        .expect("decode");
        assert_eq!(req.operation, Operation::Update);
        assert_eq!(req.user_info.username, "alice");
        assert_eq!(req.old_object, Some(json!({"a": 0})));
        assert!(req.is_dry_run());
        let none: AdmissionRequest =
            serde_json::from_value(json!({"uid": "u", "operation": "DELETE", "object": null})).expect("decode");
        assert_eq!(none.object, None);
    }

    #[test]
    fn responses_serialize_like_kubernetes() {
        let denied = AdmissionResponse::denied("no");
        let v = serde_json::to_value(&denied).expect("encode");
        assert_eq!(v["allowed"], json!(false));
        assert_eq!(v["status"]["code"], json!(403));
        assert_eq!(v["status"]["reason"], json!("Forbidden"));
        assert_eq!(v["status"]["message"], json!("no"));
        assert!(v.get("warnings").is_none());
        let patched = AdmissionResponse::allowed().with_patch(b"[]".to_vec());
        let v = serde_json::to_value(&patched).expect("encode");
        assert_eq!(v["patch"], json!("W10="));
        assert_eq!(v["patchType"], json!("JSONPatch"));
    }
}
