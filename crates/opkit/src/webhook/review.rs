//! `admission.k8s.io/v1` AdmissionReview: kube's wire types (re-exported), the
//! [`AdmissionResponseExt`] builders for controller-runtime-style responses, and the encoding
//! of a review response with its patch in base64 as Kubernetes documents it.

use kube::Resource;
use kube::core::admission::AdmissionReview;
use kube::core::{DynamicObject, Status, TypeMeta};
use serde_json::Value;

pub use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};

/// `apiVersion` of AdmissionReview objects this server speaks (v1beta1 is accepted and echoed).
pub const ADMISSION_API_VERSION: &str = kube::core::admission::META_API_VERSION_V1;

/// Builders on kube's [`AdmissionResponse`] for the responses controller-runtime's helpers
/// make (`Allowed`, `Denied`, `Errored`, `WithWarnings`).
pub trait AdmissionResponseExt: Sized {
    /// An allowing response to `req` with status code 200 (controller-runtime's `Allowed("")`).
    fn allowed<K: Resource>(req: &AdmissionRequest<K>) -> Self;
    /// Denies the request with `code`, `reason` (e.g. 403 `Forbidden`, 400 `BadRequest`) and
    /// `message`.
    fn deny_with(self, code: u16, reason: &str, message: impl Into<String>) -> Self;
    /// Denies the request with code 403, reason `Forbidden` and `message`.
    fn forbid(self, message: impl Into<String>) -> Self {
        self.deny_with(403, "Forbidden", message)
    }
    /// Adds warnings shown to the client.
    fn with_warnings(self, warnings: impl IntoIterator<Item = String>) -> Self;
}

impl AdmissionResponseExt for AdmissionResponse {
    fn allowed<K: Resource>(req: &AdmissionRequest<K>) -> Self {
        let mut resp = AdmissionResponse::from(req);
        resp.result = Status { code: 200, ..Status::default() };
        resp
    }

    fn deny_with(self, code: u16, reason: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        let mut resp = self.deny(&message);
        resp.result = Status::failure(&message, reason).with_code(code);
        resp
    }

    fn with_warnings(mut self, warnings: impl IntoIterator<Item = String>) -> Self {
        let mut warnings = warnings.into_iter().peekable();
        if warnings.peek().is_some() {
            self.warnings.get_or_insert_with(Vec::new).extend(warnings);
        }
        self
    }
}

/// The AdmissionReview answering a request of review type `types` (whose apiVersion it
/// echoes) with `response`, as JSON.
///
/// kube serializes `response.patch` as an array of numbers (kube-rs#1781); Kubernetes
/// documents `patch` as base64, so it is re-encoded here.
pub(crate) fn review_json(types: TypeMeta, response: AdmissionResponse) -> serde_json::Result<Value> {
    let patch = response.patch.clone();
    let mut review = response.into_review();
    review.types = types;
    let mut json = serde_json::to_value(&review)?;
    if let (Some(patch), Some(out)) = (patch, json.get_mut("response").and_then(Value::as_object_mut)) {
        out.insert("patch".to_owned(), serde_json::to_value(k8s_openapi::ByteString(patch))?);
    }
    Ok(json)
}

/// The review `types` and request `uid` of a body that is an AdmissionReview envelope even if
/// its objects do not decode, so that the failure can be answered in a review.
pub(crate) fn envelope_of(body: &[u8]) -> Option<(TypeMeta, String)> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let types = TypeMeta { api_version: field(&value, "apiVersion")?, kind: field(&value, "kind")? };
    let uid = field(value.get("request")?, "uid")?;
    Some((types, uid))
}

/// Whether `types` names an AdmissionReview version this server answers.
pub(crate) fn is_admission_review(types: &TypeMeta) -> bool {
    types.kind == kube::core::admission::META_KIND
        && matches!(types.api_version.as_str(), "admission.k8s.io/v1" | "admission.k8s.io/v1beta1")
}

/// The response to a review (request `uid`) whose objects could not be decoded: denied with
/// code 400 and `message`.
pub(crate) fn undecodable(uid: String, message: &str) -> AdmissionResponse {
    let mut resp = AdmissionResponse::invalid(message).deny_with(400, "BadRequest", message);
    resp.uid = uid;
    resp
}

/// An AdmissionReview as the server receives it: objects stay schemaless until a handler
/// decodes them.
pub(crate) type ReviewIn = AdmissionReview<DynamicObject>;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request() -> AdmissionRequest<DynamicObject> {
        let review: ReviewIn = serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                "namespace": "default", "operation": "UPDATE",
                "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
                "object": {"metadata": {"name": "a"}, "a": 1}, "oldObject": {"a": 0}, "dryRun": true
            }
        }))
        .expect("decode");
        review.try_into().expect("request")
    }

    #[test]
    fn request_decodes_from_apiserver_json() {
        let req = request();
        assert_eq!(req.operation, Operation::Update);
        assert_eq!(req.user_info.username.as_deref(), Some("alice"));
        assert_eq!(req.old_object.as_ref().map(|o| o.data.clone()), Some(json!({"a": 0})));
        assert!(req.dry_run);
    }

    #[test]
    fn responses_serialize_like_kubernetes() {
        let req = request();
        let denied = AdmissionResponse::from(&req).forbid("no");
        let v = serde_json::to_value(&denied).expect("encode");
        assert_eq!(v["uid"], json!("u1"));
        assert_eq!(v["allowed"], json!(false));
        assert_eq!(v["status"]["code"], json!(403));
        assert_eq!(v["status"]["reason"], json!("Forbidden"));
        assert_eq!(v["status"]["message"], json!("no"));
        assert!(v.get("warnings").is_none());

        let allowed = AdmissionResponse::allowed(&req).with_warnings(Vec::new());
        let v = serde_json::to_value(&allowed).expect("encode");
        assert_eq!(v["allowed"], json!(true));
        assert_eq!(v["status"], json!({"code": 200}));
        assert!(v.get("warnings").is_none());

        let patched = AdmissionResponse::allowed(&req).with_patch(json_patch::Patch(Vec::new())).expect("patch");
        let review = review_json(req.types.clone(), patched).expect("encode");
        assert_eq!(review["apiVersion"], json!("admission.k8s.io/v1beta1"), "the request's version is echoed");
        assert_eq!(review["response"]["patch"], json!("W10="));
        assert_eq!(review["response"]["patchType"], json!("JSONPatch"));
    }

    #[test]
    fn envelope_survives_undecodable_objects() {
        let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                          "request": {"uid": "u2", "object": {"metadata": {"name": 5}}}});
        let bytes = serde_json::to_vec(&body).expect("encode");
        assert!(serde_json::from_slice::<ReviewIn>(&bytes).is_err());
        let (types, uid) = envelope_of(&bytes).expect("envelope");
        assert!(is_admission_review(&types));
        let resp = serde_json::to_value(undecodable(uid, "bad")).expect("encode");
        assert_eq!(resp["uid"], json!("u2"));
        assert_eq!(resp["status"]["code"], json!(400));
        assert_eq!(resp["allowed"], json!(false));
    }
}
