//! CRD conversion: `apiextensions.k8s.io/v1` ConversionReview wire types, the [`Converter`]
//! trait, and the function that turns a review request into its response.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::review::ReviewStatus;

/// `apiVersion` of ConversionReview objects (v1beta1 is accepted and echoed).
pub const CONVERSION_API_VERSION: &str = "apiextensions.k8s.io/v1";

/// Converts custom objects between the versions of a CRD.
pub trait Converter: Send + Sync + 'static {
    /// Converts `obj` (any served version) to `desired_api_version` (`group/version`).
    /// The result's `apiVersion` is set to `desired_api_version` if the converter left it out;
    /// `Err(message)` fails the whole review.
    fn convert(&self, obj: Value, desired_api_version: &str) -> Result<Value, String>;
}

impl<F> Converter for F
where
    F: Fn(Value, &str) -> Result<Value, String> + Send + Sync + 'static,
{
    fn convert(&self, obj: Value, desired_api_version: &str) -> Result<Value, String> {
        self(obj, desired_api_version)
    }
}

/// `request` of a ConversionReview.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversionRequest {
    /// Request id; echoed in the response.
    pub uid: String,
    /// `group/version` to convert every object to.
    #[serde(rename = "desiredAPIVersion")]
    pub desired_api_version: String,
    /// The objects to convert.
    #[serde(default)]
    pub objects: Vec<Value>,
}

/// `response` of a ConversionReview.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversionResponse {
    /// Echo of `request.uid`.
    pub uid: String,
    /// Converted objects, in request order (empty on failure).
    #[serde(default)]
    pub converted_objects: Vec<Value>,
    /// `status: Success`, or `status: Failure` with a message.
    pub result: ReviewStatus,
}

/// A ConversionReview envelope (both directions).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConversionReview {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<ConversionRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ConversionResponse>,
}

/// Converts every object of `req`; the first failure fails the review.
pub fn convert_review(converter: &dyn Converter, req: ConversionRequest) -> ConversionResponse {
    let desired = req.desired_api_version.as_str();
    let converted: Result<Vec<Value>, String> =
        req.objects.into_iter().map(|obj| convert_one(converter, obj, desired)).collect();
    match converted {
        Ok(objects) => ConversionResponse {
            uid: req.uid,
            converted_objects: objects,
            result: ReviewStatus { status: Some("Success".to_owned()), ..ReviewStatus::default() },
        },
        Err(message) => ConversionResponse {
            uid: req.uid,
            converted_objects: Vec::new(),
            result: ReviewStatus {
                status: Some("Failure".to_owned()),
                message: Some(message),
                ..ReviewStatus::default()
            },
        },
    }
}

fn convert_one(converter: &dyn Converter, obj: Value, desired: &str) -> Result<Value, String> {
    if !obj.is_object() {
        return Err("conversion request contains a non-object".to_owned());
    }
    if obj.get("apiVersion").and_then(Value::as_str) == Some(desired) {
        return Ok(obj);
    }
    let kind = obj.get("kind").cloned();
    let name = object_name(&obj);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| converter.convert(obj, desired)));
    let mut out = match caught {
        Ok(Ok(out)) => out,
        Ok(Err(msg)) => return Err(format!("converting {name} to {desired}: {msg}")),
        Err(_) => {
            return Err(format!("converting {name} to {desired}: converter panicked"));
        }
    };
    let Some(map) = out.as_object_mut() else {
        return Err(format!("converting {name}: converter returned a non-object"));
    };
    match map.get("apiVersion").and_then(Value::as_str) {
        None => {
            map.insert("apiVersion".to_owned(), Value::String(desired.to_owned()));
        }
        Some(v) if v != desired => {
            return Err(format!("converting {name}: converter returned apiVersion {v}, expected {desired}"));
        }
        Some(_) => {}
    }
    if let Some(kind) = kind {
        map.entry("kind").or_insert(kind);
    }
    Ok(out)
}

fn object_name(obj: &Value) -> String {
    let meta = obj.get("metadata");
    let get = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str);
    match (get("namespace"), get("name")) {
        (Some(ns), Some(n)) => format!("{ns}/{n}"),
        (None, Some(n)) => n.to_owned(),
        _ => "object".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bump(mut obj: Value, desired: &str) -> Result<Value, String> {
        if obj["spec"]["fail"] == json!(true) {
            return Err("cannot".into());
        }
        obj["apiVersion"] = json!(desired);
        Ok(obj)
    }

    #[test]
    fn success_keeps_order_and_uid() {
        let req: ConversionRequest = serde_json::from_value(json!({
            "uid": "u", "desiredAPIVersion": "x.io/v2",
            "objects": [
                {"apiVersion": "x.io/v1", "kind": "T", "metadata": {"name": "a"}},
                {"apiVersion": "x.io/v2", "kind": "T", "metadata": {"name": "b"}}
            ]
        }))
        .expect("decode");
        let resp = convert_review(&bump, req);
        assert_eq!(resp.uid, "u");
        assert_eq!(resp.result.status.as_deref(), Some("Success"));
        let names: Vec<_> =
            resp.converted_objects.iter().map(|o| (o["metadata"]["name"].clone(), o["apiVersion"].clone())).collect();
        assert_eq!(names, vec![(json!("a"), json!("x.io/v2")), (json!("b"), json!("x.io/v2"))]);
    }

    #[test]
    fn failure_and_wrong_version_are_reported() {
        let req = ConversionRequest {
            uid: "u".into(),
            desired_api_version: "x.io/v2".into(),
            objects: vec![json!({"apiVersion": "x.io/v1", "spec": {"fail": true}})],
        };
        let resp = convert_review(&bump, req);
        assert_eq!(resp.result.status.as_deref(), Some("Failure"));
        assert!(resp.result.message.unwrap_or_default().contains("cannot"));
        let wrong = |o: Value, _: &str| -> Result<Value, String> { Ok(o) };
        let req = ConversionRequest {
            uid: "u".into(),
            desired_api_version: "x.io/v2".into(),
            objects: vec![json!({"apiVersion": "x.io/v1"})],
        };
        assert_eq!(convert_review(&wrong, req).result.status.as_deref(), Some("Failure"));
    }
}
