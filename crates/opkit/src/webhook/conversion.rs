//! CRD conversion: the [`Converter`] trait and the function that answers a
//! `apiextensions.k8s.io/v1` ConversionReview request (kube's wire types, re-exported).

use kube::core::Status;
use serde_json::Value;

pub use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};

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

/// Converts every object of `req`; the first failure fails the review.
pub fn convert_review(converter: &dyn Converter, mut req: ConversionRequest) -> ConversionResponse {
    let objects = std::mem::take(&mut req.objects);
    let desired = req.desired_api_version.clone();
    let converted: Result<Vec<Value>, String> =
        objects.into_iter().map(|obj| convert_one(converter, obj, &desired)).collect();
    let response = ConversionResponse::for_request(req);
    match converted {
        Ok(objects) => response.success(objects),
        Err(message) => response.failure(Status::failure(&message, "")),
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
        assert!(resp.result.is_success());
        assert_eq!(serde_json::to_value(&resp.result).expect("encode"), json!({"status": "Success"}));
        let names: Vec<_> =
            resp.converted_objects.iter().map(|o| (o["metadata"]["name"].clone(), o["apiVersion"].clone())).collect();
        assert_eq!(names, vec![(json!("a"), json!("x.io/v2")), (json!("b"), json!("x.io/v2"))]);
    }

    #[test]
    fn failure_and_wrong_version_are_reported() {
        let req = ConversionRequest {
            types: None,
            uid: "u".into(),
            desired_api_version: "x.io/v2".into(),
            objects: vec![json!({"apiVersion": "x.io/v1", "spec": {"fail": true}})],
        };
        let resp = convert_review(&bump, req);
        assert!(resp.result.is_failure());
        assert!(resp.result.message.contains("cannot"));
        assert!(resp.converted_objects.is_empty());
        let wrong = |o: Value, _: &str| -> Result<Value, String> { Ok(o) };
        let req = ConversionRequest {
            types: None,
            uid: "u".into(),
            desired_api_version: "x.io/v2".into(),
            objects: vec![json!({"apiVersion": "x.io/v1"})],
        };
        assert!(convert_review(&wrong, req).result.is_failure());
    }
}
