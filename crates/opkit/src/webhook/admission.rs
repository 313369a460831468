//! Admission handlers: the raw [`AdmissionHandler`] trait, the typed [`Validator`] and
//! [`Defaulter`] traits, the adapters that decode `request.object` into a kube `Resource` type,
//! and the JSON-patch computation for mutating responses.

use std::marker::PhantomData;

use futures::future::BoxFuture;
use kube::Resource;
use kube::core::DynamicObject;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::review::{AdmissionRequest, AdmissionResponse, AdmissionResponseExt, Operation};

/// Handles one admission request, its objects still schemaless. The server echoes
/// `request.uid` into the response.
pub trait AdmissionHandler: Send + Sync + 'static {
    /// Decides on `req`.
    fn handle(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse;
}

/// An admission handler whose decision is awaited (the server side of
/// [`CustomDefaulter`](super::CustomDefaulter) and [`CustomValidator`](super::CustomValidator)).
pub(crate) trait AsyncAdmissionHandler: Send + Sync + 'static {
    /// Decides on `req`.
    fn handle<'a>(&'a self, req: &'a AdmissionRequest<DynamicObject>) -> BoxFuture<'a, AdmissionResponse>;
}

impl<F> AdmissionHandler for F
where
    F: Fn(&AdmissionRequest<DynamicObject>) -> AdmissionResponse + Send + Sync + 'static,
{
    fn handle(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        self(req)
    }
}

/// Validating webhook logic for objects of type `K` (controller-runtime's `CustomValidator`).
///
/// `Ok(warnings)` admits the request (the warnings are shown to the client); `Err(message)`
/// denies it with code 403, reason `Forbidden`.
pub trait Validator<K: Resource>: Send + Sync + 'static {
    /// Validates a new object.
    fn validate_create(&self, obj: &K) -> Result<Vec<String>, String>;
    /// Validates an update from `old` to `new`.
    fn validate_update(&self, old: &K, new: &K) -> Result<Vec<String>, String>;
    /// Validates a deletion of `obj`; admits by default.
    fn validate_delete(&self, obj: &K) -> Result<Vec<String>, String> {
        let _ = obj;
        Ok(Vec::new())
    }
    /// Entry point with the full request (user, operation, dry run, ...). The default dispatches
    /// on the operation to the methods above; override it when the context matters. CONNECT is
    /// admitted.
    fn validate(&self, req: &AdmissionRequest<K>) -> Result<Vec<String>, String> {
        match (&req.operation, &req.object, &req.old_object) {
            (Operation::Create, Some(obj), _) => self.validate_create(obj),
            (Operation::Update, Some(new), Some(old)) => self.validate_update(old, new),
            (Operation::Delete, _, Some(old)) => self.validate_delete(old),
            (Operation::Connect, _, _) => Ok(Vec::new()),
            (op, _, _) => Err(format!("{op:?} request without the objects it needs")),
        }
    }
}

/// Mutating (defaulting) webhook logic for objects of type `K` (controller-runtime's
/// `CustomDefaulter`). The response carries the JSON patch from the submitted object to the
/// defaulted one. Runs on CREATE and UPDATE; DELETE and CONNECT are admitted unchanged.
pub trait Defaulter<K: Resource>: Send + Sync + 'static {
    /// Fills in defaults on `obj`.
    fn default(&self, obj: &mut K);
    /// Entry point with the full request (`req.object` is the object as submitted). The default
    /// calls [`Defaulter::default`]; override it when the context matters. `Err(message)` denies
    /// the request with code 403.
    fn default_with(&self, req: &AdmissionRequest<K>, obj: &mut K) -> Result<(), String> {
        let _ = req;
        self.default(obj);
        Ok(())
    }
}

/// Decodes an optional schemaless object as `K`; `what` names it in the error.
fn decode<K: Resource + DeserializeOwned>(raw: &Option<DynamicObject>, what: &str) -> Result<Option<K>, String> {
    match raw {
        None => Ok(None),
        Some(obj) => obj.clone().try_parse::<K>().map(Some).map_err(|e| format!("unable to decode {what}: {e}")),
    }
}

/// Decodes `req`'s object and old object as `K`; a 400 denial when one the operation needs
/// is missing or does not decode.
pub(crate) fn decode_objects<K: Resource + DeserializeOwned>(
    req: &AdmissionRequest<DynamicObject>,
) -> Result<(Option<K>, Option<K>), Box<AdmissionResponse>> {
    if let Some(resp) = missing_objects(req) {
        return Err(Box::new(resp));
    }
    decode::<K>(&req.object, "object")
        .and_then(|o| Ok((o, decode::<K>(&req.old_object, "oldObject")?)))
        .map_err(|msg| Box::new(bad_request(req, msg)))
}

/// `req` with its objects replaced by `object` and `old_object`.
pub(crate) fn with_objects<K: Resource>(
    req: &AdmissionRequest<DynamicObject>,
    object: Option<K>,
    old_object: Option<K>,
) -> AdmissionRequest<K> {
    AdmissionRequest {
        types: req.types.clone(),
        uid: req.uid.clone(),
        kind: req.kind.clone(),
        resource: req.resource.clone(),
        sub_resource: req.sub_resource.clone(),
        request_kind: req.request_kind.clone(),
        request_resource: req.request_resource.clone(),
        request_sub_resource: req.request_sub_resource.clone(),
        name: req.name.clone(),
        namespace: req.namespace.clone(),
        operation: req.operation.clone(),
        user_info: req.user_info.clone(),
        object,
        old_object,
        dry_run: req.dry_run,
        options: req.options.clone(),
    }
}

/// A 400 denial when an object the operation needs is missing.
fn missing_objects(req: &AdmissionRequest<DynamicObject>) -> Option<AdmissionResponse> {
    let missing = match req.operation {
        Operation::Create if req.object.is_none() => Some("object"),
        Operation::Update if req.object.is_none() => Some("object"),
        Operation::Update if req.old_object.is_none() => Some("oldObject"),
        Operation::Delete if req.old_object.is_none() => Some("oldObject"),
        _ => None,
    };
    missing.map(|field| bad_request(req, format!("{:?} request has no {field}", req.operation)))
}

fn bad_request(req: &AdmissionRequest<DynamicObject>, message: String) -> AdmissionResponse {
    AdmissionResponse::from(req).deny_with(400, "BadRequest", message)
}

/// Runs `f`, turning a panic in user code into a 500 denial.
fn guarded(req: &AdmissionRequest<DynamicObject>, f: impl FnOnce() -> AdmissionResponse) -> AdmissionResponse {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| AdmissionResponse::from(req).deny_with(500, "InternalError", "webhook handler panicked"))
}

/// Adapts a [`Validator`] to an [`AdmissionHandler`].
pub(crate) struct ValidatingHandler<K, V> {
    validator: V,
    _kind: PhantomData<fn() -> K>,
}

impl<K, V> ValidatingHandler<K, V> {
    pub(crate) fn new(validator: V) -> Self {
        ValidatingHandler { validator, _kind: PhantomData }
    }
}

impl<K, V> AdmissionHandler for ValidatingHandler<K, V>
where
    K: Resource + DeserializeOwned + 'static,
    V: Validator<K>,
{
    fn handle(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        if let Some(resp) = missing_objects(req) {
            return resp;
        }
        let typed =
            decode::<K>(&req.object, "object").and_then(|o| Ok((o, decode::<K>(&req.old_object, "oldObject")?)));
        let (object, old_object) = match typed {
            Ok(pair) => pair,
            Err(msg) => return bad_request(req, msg),
        };
        let typed = with_objects(req, object, old_object);
        guarded(req, || match self.validator.validate(&typed) {
            Ok(warnings) => AdmissionResponse::allowed(req).with_warnings(warnings),
            Err(msg) => AdmissionResponse::from(req).forbid(msg),
        })
    }
}

/// Adapts a [`Defaulter`] to an [`AdmissionHandler`].
pub(crate) struct MutatingHandler<K, D> {
    defaulter: D,
    _kind: PhantomData<fn() -> K>,
}

impl<K, D> MutatingHandler<K, D> {
    pub(crate) fn new(defaulter: D) -> Self {
        MutatingHandler { defaulter, _kind: PhantomData }
    }
}

impl<K, D> AdmissionHandler for MutatingHandler<K, D>
where
    K: Resource + DeserializeOwned + Serialize + Clone + 'static,
    D: Defaulter<K>,
{
    fn handle(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        if !matches!(req.operation, Operation::Create | Operation::Update) {
            return AdmissionResponse::allowed(req);
        }
        if let Some(resp) = missing_objects(req) {
            return resp;
        }
        let decoded =
            decode::<K>(&req.object, "object").and_then(|o| Ok((o, decode::<K>(&req.old_object, "oldObject")?)));
        let (object, old_object) = match decoded {
            Ok((Some(o), old)) => (o, old),
            Ok((None, _)) => return bad_request(req, "request has no object".to_owned()),
            Err(msg) => return bad_request(req, msg),
        };
        guarded(req, || {
            let encoded = serde_json::to_value(&req.object).and_then(|raw| Ok((raw, serde_json::to_value(&object)?)));
            let (raw, before) = match encoded {
                Ok(pair) => pair,
                Err(e) => return encode_error(req, e),
            };
            let mut defaulted = object.clone();
            let typed = with_objects(req, Some(object), old_object);
            if let Err(msg) = self.defaulter.default_with(&typed, &mut defaulted) {
                return AdmissionResponse::from(req).forbid(msg);
            }
            let after = match serde_json::to_value(&defaulted) {
                Ok(v) => v,
                Err(e) => return encode_error(req, e),
            };
            patch_response(req, &raw, &before, &after)
        })
    }
}

pub(crate) fn encode_error(req: &AdmissionRequest<DynamicObject>, e: impl std::fmt::Display) -> AdmissionResponse {
    AdmissionResponse::from(req).deny_with(500, "InternalError", format!("encoding object: {e}"))
}

/// An allowing response carrying the patch from `raw` to the defaulted object (none when the
/// defaulter changed nothing).
pub(crate) fn patch_response(
    req: &AdmissionRequest<DynamicObject>,
    raw: &Value,
    before: &Value,
    after: &Value,
) -> AdmissionResponse {
    let ops = defaulting_patch(raw, before, after);
    if ops.0.is_empty() {
        return AdmissionResponse::allowed(req);
    }
    AdmissionResponse::allowed(req).with_patch(ops).unwrap_or_else(|e| encode_error(req, e))
}

/// The JSON patch that applies, to the submitted object `raw`, exactly the changes the defaulter
/// made (`before` → `after`, both re-encoded from the typed object).
///
/// Diffing `raw` against `after` directly would also "remove" fields the typed object cannot
/// represent (unknown fields, explicit nulls) and rewrite values whose encoding differs; so the
/// target is `raw` with only the defaulter's changes overlaid.
pub fn defaulting_patch(raw: &Value, before: &Value, after: &Value) -> json_patch::Patch {
    let target = overlay(Some(raw), Some(before), after);
    json_patch::diff(raw, &target)
}

/// `raw` with the difference between `before` and `after` applied.
fn overlay(raw: Option<&Value>, before: Option<&Value>, after: &Value) -> Value {
    let Some(raw) = raw else {
        return after.clone();
    };
    if before == Some(after) {
        return raw.clone();
    }
    match (raw, before, after) {
        (Value::Object(r), Some(Value::Object(b)), Value::Object(a)) => {
            let mut out = serde_json::Map::new();
            for (k, rv) in r {
                match a.get(k) {
                    Some(av) => {
                        out.insert(k.clone(), overlay(Some(rv), b.get(k), av));
                    }
                    // Removed by the defaulter: drop it.
                    None if b.contains_key(k) => {}
                    // Never represented in the typed object: keep it.
                    None => {
                        out.insert(k.clone(), rv.clone());
                    }
                }
            }
            for (k, av) in a {
                if !r.contains_key(k) && b.get(k) != Some(av) {
                    out.insert(k.clone(), av.clone());
                }
            }
            Value::Object(out)
        }
        (Value::Array(r), Some(Value::Array(b)), Value::Array(a)) if r.len() == b.len() && b.len() == a.len() => {
            Value::Array(r.iter().zip(b).zip(a).map(|((rv, bv), av)| overlay(Some(rv), Some(bv), av)).collect())
        }
        _ => after.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    fn apply(raw: &Value, p: &json_patch::Patch) -> Value {
        let mut doc = raw.clone();
        json_patch::patch(&mut doc, p).expect("patch applies");
        doc
    }

    #[test]
    fn patch_keeps_unknown_fields_and_nulls() {
        let raw = json!({"metadata": {"name": "a", "x-unknown": 1, "labels": null}, "data": {"k": "v"}});
        let before = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
        let after = json!({"metadata": {"name": "a", "labels": {"d": "1"}}, "data": {"k": "v", "n": "2"}});
        let p = defaulting_patch(&raw, &before, &after);
        let got = apply(&raw, &p);
        assert_eq!(got["metadata"]["x-unknown"], json!(1));
        assert_eq!(got["metadata"]["labels"], json!({"d": "1"}));
        assert_eq!(got["data"], json!({"k": "v", "n": "2"}));
    }

    #[test]
    fn patch_removes_what_the_defaulter_removed_only() {
        let raw = json!({"a": 1, "b": 2, "unknown": 3, "arr": [{"x": 1, "u": 0}, {"x": 2}]});
        let before = json!({"a": 1, "b": 2, "arr": [{"x": 1}, {"x": 2}]});
        let after = json!({"a": 1, "arr": [{"x": 1}, {"x": 5}]});
        let got = apply(&raw, &defaulting_patch(&raw, &before, &after));
        assert_eq!(got, json!({"a": 1, "unknown": 3, "arr": [{"x": 1, "u": 0}, {"x": 5}]}));
        assert!(defaulting_patch(&raw, &before, &before).0.is_empty());
    }

    struct NoDots;
    impl Validator<ConfigMap> for NoDots {
        fn validate_create(&self, obj: &ConfigMap) -> Result<Vec<String>, String> {
            match obj.data.as_ref().is_some_and(|d| d.contains_key("bad")) {
                true => Err("key bad is forbidden".into()),
                false => Ok(vec!["checked".into()]),
            }
        }
        fn validate_update(&self, _: &ConfigMap, new: &ConfigMap) -> Result<Vec<String>, String> {
            self.validate_create(new)
        }
    }

    fn request(op: &str, object: Value, old: Value) -> AdmissionRequest<DynamicObject> {
        let review: crate::webhook::review::ReviewIn = serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "1", "operation": op, "object": object, "oldObject": old, "userInfo": {},
                "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            }
        }))
        .expect("review");
        review.try_into().expect("request")
    }

    #[test]
    fn validating_adapter_decodes_and_dispatches() {
        let h = ValidatingHandler::<ConfigMap, _>::new(NoDots);
        let ok = h.handle(&request("CREATE", json!({"data": {"k": "v"}}), Value::Null));
        assert!(ok.allowed);
        assert_eq!(ok.warnings, Some(vec!["checked".to_string()]));
        let bad = h.handle(&request("UPDATE", json!({"data": {"bad": "v"}}), json!({})));
        assert!(!bad.allowed);
        let undecodable = h.handle(&request("CREATE", json!({"data": 5}), Value::Null));
        assert!(!undecodable.allowed);
        assert_eq!(undecodable.result.code, 400);
        let no_old = h.handle(&request("DELETE", Value::Null, Value::Null));
        assert_eq!(no_old.result.code, 400);
        assert!(h.handle(&request("DELETE", Value::Null, json!({}))).allowed);
    }

    struct Panics;
    impl Defaulter<ConfigMap> for Panics {
        fn default(&self, _: &mut ConfigMap) {
            panic!("user bug");
        }
    }

    #[test]
    fn handler_panic_becomes_500_denial() {
        let h = MutatingHandler::<ConfigMap, _>::new(Panics);
        let resp = h.handle(&request("CREATE", json!({}), Value::Null));
        assert!(!resp.allowed);
        assert_eq!(resp.result.code, 500);
        // DELETE never reaches the defaulter.
        assert!(h.handle(&request("DELETE", Value::Null, json!({}))).allowed);
    }
}
