//! The AdmissionReview a webhook is sent (kube's `CreateAdmissionObjects`) and the
//! checks its answer must pass (kube's `VerifyAdmissionResponse`), and how a denial
//! reaches the client (kube's `ToStatusErr`).

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::{Map, Value, json};

use super::config::Hook;
use crate::admission::{Attributes, Operation};
use crate::error::{ApiError, Cause};

/// The AdmissionReview versions the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReviewVersion {
    /// `admission.k8s.io/v1`.
    V1,
    /// `admission.k8s.io/v1beta1`.
    V1beta1,
}

impl ReviewVersion {
    /// `apiVersion` of the review.
    fn api_version(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "admission.k8s.io/v1",
            ReviewVersion::V1beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

/// The first version of `admissionReviewVersions` the server speaks, as kube picks it,
/// or kube's error when there is none.
pub(crate) fn review_version(hook: &Hook) -> Result<ReviewVersion, String> {
    hook.review_versions
        .iter()
        .find_map(|v| match v.as_str() {
            "v1" => Some(ReviewVersion::V1),
            "v1beta1" => Some(ReviewVersion::V1beta1),
            _ => None,
        })
        .ok_or_else(|| {
            "could not create admission objects: webhook does not accept known AdmissionReview versions".into()
        })
}

/// `obj` (at the requested version) converted to `version` of the same resource.
pub(crate) fn at_version(attrs: &Attributes<'_>, obj: &Value, version: &str) -> Value {
    let target = attrs.target;
    if version == target.version || obj.is_null() {
        return obj.clone();
    }
    let mut converted = obj.clone();
    target.strategy.convert_to_storage(&mut converted, &target.version);
    target.strategy.convert_from_storage(&mut converted, version);
    if let Some(m) = converted.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(target.info.api_version(version)));
    }
    converted
}

/// `obj` at `version` converted back to the requested version.
pub(crate) fn from_version(attrs: &Attributes<'_>, obj: &mut Value, version: &str) {
    let target = attrs.target;
    if version == target.version {
        return;
    }
    target.strategy.convert_to_storage(obj, version);
    target.strategy.convert_from_storage(obj, &target.version);
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(target.api_version()));
    }
}

/// The `options` of the request: the Create/Update/DeleteOptions the client sent.
fn options(attrs: &Attributes<'_>) -> Value {
    let kind = match attrs.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
        Operation::Connect => return Value::Null,
    };
    let mut options = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
    if attrs.opts.dry_run {
        options["dryRun"] = json!(["All"]);
    }
    if attrs.operation != Operation::Delete && !attrs.opts.field_manager.is_empty() {
        options["fieldManager"] = json!(attrs.opts.field_manager);
    }
    options
}

/// The AdmissionRequest for a webhook matched at `version`: `object` and `old` are at
/// the requested version and are converted.
pub(crate) fn request(
    attrs: &Attributes<'_>,
    version: &str,
    object: Option<&Value>,
    old: Option<&Value>,
    uid: &str,
) -> Value {
    let info = &attrs.target.info;
    let requested = &attrs.target.version;
    let kind = |v: &str| json!({"group": info.group, "version": v, "kind": info.kind});
    let resource = |v: &str| json!({"group": info.group, "version": v, "resource": info.resource});
    let mut request = Map::new();
    request.insert("uid".into(), json!(uid));
    request.insert("kind".into(), kind(version));
    request.insert("resource".into(), resource(version));
    if let Some(sub) = attrs.subresource {
        request.insert("subResource".into(), json!(sub));
    }
    request.insert("requestKind".into(), kind(requested));
    request.insert("requestResource".into(), resource(requested));
    if let Some(sub) = attrs.subresource {
        request.insert("requestSubResource".into(), json!(sub));
    }
    if !attrs.name.is_empty() {
        request.insert("name".into(), json!(attrs.name));
    }
    if let Some(ns) = attrs.target.namespace.as_ref().filter(|ns| info.namespaced && !ns.is_empty()) {
        request.insert("namespace".into(), json!(ns));
    }
    request.insert("operation".into(), json!(attrs.operation.as_str()));
    let user = &attrs.opts.user;
    let mut user_info = json!({"username": user.name});
    if !user.uid.is_empty() {
        user_info["uid"] = json!(user.uid);
    }
    if !user.groups.is_empty() {
        user_info["groups"] = json!(user.groups);
    }
    if !user.extra.is_empty() {
        user_info["extra"] = json!(user.extra);
    }
    request.insert("userInfo".into(), user_info);
    if let Some(o) = object.filter(|o| !o.is_null()) {
        request.insert("object".into(), at_version(attrs, o, version));
    }
    if let Some(o) = old.filter(|o| !o.is_null()) {
        request.insert("oldObject".into(), at_version(attrs, o, version));
    }
    request.insert("dryRun".into(), json!(attrs.opts.dry_run));
    let options = options(attrs);
    if !options.is_null() {
        request.insert("options".into(), options);
    }
    Value::Object(request)
}

/// The AdmissionReview carrying `request`.
pub(crate) fn review(version: ReviewVersion, request: Value) -> Value {
    json!({"apiVersion": version.api_version(), "kind": "AdmissionReview", "request": request})
}

/// What a webhook answered, checked.
pub(crate) struct Response {
    /// `allowed`.
    pub allowed: bool,
    /// `status` (a metav1.Status), null when absent.
    pub status: Value,
    /// The decoded JSONPatch, if any.
    pub patch: Option<Value>,
    /// `warnings`.
    pub warnings: Vec<String>,
    /// `auditAnnotations`.
    pub audit_annotations: BTreeMap<String, String>,
}

/// Go's `GroupVersionKind.String()` of an `apiVersion` and `kind`.
fn gvk_string(api_version: &str, kind: &str) -> String {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={kind}")
}

/// Checks a webhook's answer to the review of `uid` as kube does; the error is kube's
/// wording, which the caller prefixes with `received invalid webhook response: `.
pub(crate) fn parse_response(
    version: ReviewVersion,
    uid: &str,
    mutating: bool,
    body: &Value,
) -> Result<Response, String> {
    let api_version = body["apiVersion"].as_str().unwrap_or_default();
    let kind = body["kind"].as_str().unwrap_or_default();
    if version == ReviewVersion::V1 && (api_version != version.api_version() || kind != "AdmissionReview") {
        return Err(format!(
            "expected webhook response of {}, got {}",
            gvk_string(version.api_version(), "AdmissionReview"),
            gvk_string(api_version, kind)
        ));
    }
    let response = body.get("response").filter(|r| r.is_object()).ok_or("webhook response was absent")?;
    let got = response["uid"].as_str().unwrap_or_default();
    if got != uid {
        return Err(format!("expected response.uid={uid:?}, got {got:?}"));
    }
    let patch_type = response["patchType"].as_str();
    let patch_b64 = response["patch"].as_str().filter(|p| !p.is_empty());
    let patch = match (patch_b64, patch_type) {
        (None, _) => None,
        (Some(_), _) if !mutating => return Err("validating webhooks may not return patches".into()),
        (Some(_), None) if version == ReviewVersion::V1 => {
            return Err("webhook returned response.patch but not response.patchType".into());
        }
        (Some(_), Some(t)) if t != "JSONPatch" => {
            return Err(format!("webhook returned invalid response.patchType of {t:?}"));
        }
        (Some(p), _) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(p)
                .map_err(|e| format!("received undecodable patch in webhook response: {e}"))?;
            let ops: Value = serde_json::from_slice(&bytes)
                .map_err(|e| format!("received undecodable patch in webhook response: {e}"))?;
            Some(ops)
        }
    };
    let warnings = response["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default();
    let audit_annotations = response["auditAnnotations"]
        .as_object()
        .map(|a| a.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default();
    Ok(Response {
        allowed: response["allowed"].as_bool().unwrap_or(false),
        status: response["status"].clone(),
        patch,
        warnings,
        audit_annotations,
    })
}

/// kube's `metav1.StatusReason` values, so a webhook's reason can be answered as is.
const STATUS_REASONS: [&str; 20] = [
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
    "",
];

/// The error a denial answers (kube's `ToStatusErr`): the webhook's status with its code
/// (400 when below 400), reason and details, and the message
/// `admission webhook "NAME" denied the request: MSG`.
pub(crate) fn rejection(webhook: &str, status: &Value) -> ApiError {
    let denied_by = format!("admission webhook {webhook:?} denied the request");
    let message = status["message"].as_str().unwrap_or_default();
    let reason = status["reason"].as_str().unwrap_or_default();
    let message = if !message.is_empty() {
        format!("{denied_by}: {message}")
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    };
    let code = status["code"].as_u64().and_then(|c| u16::try_from(c).ok()).filter(|c| *c >= 400).unwrap_or(400);
    let reason = STATUS_REASONS.iter().copied().find(|r| *r == reason).unwrap_or_default();
    let mut error = ApiError { code, reason, message, details: Box::default() };
    let details = &status["details"];
    let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(String::from);
    error.details.name = text(&details["name"]);
    error.details.group = text(&details["group"]);
    error.details.kind = text(&details["kind"]);
    error.details.causes = details["causes"]
        .as_array()
        .map(|causes| {
            causes
                .iter()
                .map(|c| Cause {
                    reason: c["reason"].as_str().unwrap_or_default().to_string(),
                    message: c["message"].as_str().unwrap_or_default().to_string(),
                    field: c["field"].as_str().unwrap_or_default().to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    error
}
