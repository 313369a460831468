//! Conversion of custom resources between the versions a CRD serves
//! (`spec.conversion`). With the strategy `None` only `apiVersion` changes; with
//! `Webhook` the objects go to the CRD's conversion webhook in a `ConversionReview`, as
//! apiextensions-apiserver's `webhook_converter.go` sends them: only objects not already
//! at the desired version, the objects of a list in one review, and the answer checked
//! (uid, count, groupVersion, kind, name, namespace and uid kept; of the metadata only
//! labels and annotations may change).
//!
//! Reads convert stored objects to the requested version. Writes convert the admitted
//! object (admission sees the request's version) to the storage version before it is
//! stored, and the stored object back for the answer. Objects stay at the version they
//! were stored in until they are written again. Built-in kinds convert in their strategy
//! (`convert_to_storage` / `convert_from_storage`) instead.
//!
//! The registry does not call webhooks itself: the server hands it a
//! [`ConversionWebhooks`] (the webhook client it shares with admission).

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{WebhookClientConfig, WebhookConversion};
use serde_json::{Value, json};

use super::view::StoreView;
use super::{Registry, Target, parse_stored};
use crate::error::{ApiError, ApiResult};

/// The answer of a conversion webhook: its JSON, or why the call failed.
pub(crate) type ConversionFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, String>> + Send + 'a>>;

/// How the registry reaches a CRD's conversion webhook (kube's webhook converter's
/// client).
pub(crate) trait ConversionWebhooks: Send + Sync {
    /// POSTs `review` (a ConversionReview) to the webhook `config` names (None: a
    /// conversion with no client config), reading the Services and pods it resolves
    /// through `view`, and gives up after `timeout`.
    fn call<'a>(
        &'a self,
        view: StoreView<'a>,
        config: Option<&'a WebhookClientConfig>,
        review: &'a Value,
        timeout: Duration,
    ) -> ConversionFuture<'a>;
}

/// How long a conversion webhook may take: kube's webhook client timeout (`?timeout=30s`).
const CONVERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether the objects converted are one object or the items of a list (kube words its
/// errors about the returned objects differently for each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Object,
    List,
}

impl Registry {
    /// One object read from storage, at `target`'s version.
    pub(crate) async fn at_requested_version(&self, target: &Target, obj: Value) -> ApiResult<Value> {
        let mut objects = [obj];
        self.convert(target, &mut objects, &target.version, Shape::Object).await?;
        let [obj] = objects;
        Ok(obj)
    }

    /// Objects read from storage (a list's items, or an event's object and its previous
    /// state), at `target`'s version; a conversion webhook gets them in one review.
    pub(crate) async fn all_at_requested_version(&self, target: &Target, objects: &mut [Value]) -> ApiResult<()> {
        self.convert(target, objects, &target.version, Shape::List).await
    }

    /// An admitted object at `target`'s version, at the storage version of its custom
    /// resource (a built-in kind's object is returned as it is: its strategy converts it
    /// as it is stored).
    pub(crate) async fn at_storage_version(&self, target: &Target, obj: Value) -> ApiResult<Value> {
        if target.info.builtin {
            return Ok(obj);
        }
        let storage = target.info.storage_version().to_string();
        let mut objects = [obj];
        self.convert(target, &mut objects, &storage, Shape::Object).await?;
        let [obj] = objects;
        Ok(obj)
    }

    /// A list's stored items with those stored at another version than the requested
    /// one (before the CRD's storage version changed) converted to it, as bytes; a
    /// converted object is kept only if `keep` says so (selectors match it as converted).
    pub(super) async fn stored_items_at_version(
        &self,
        target: &Target,
        mut items: Vec<Bytes>,
        mut keep: impl FnMut(&Value) -> bool,
    ) -> ApiResult<Vec<Bytes>> {
        let api_version = target.api_version();
        let stale: Vec<usize> = (0..items.len()).filter(|&i| !stored_at(&items[i], &api_version)).collect();
        if stale.is_empty() {
            return Ok(items);
        }
        let mut objects = stale.iter().map(|&i| parse_stored(&items[i])).collect::<ApiResult<Vec<_>>>()?;
        self.all_at_requested_version(target, &mut objects).await?;
        let mut dropped = Vec::new();
        for (&i, obj) in stale.iter().zip(objects) {
            if keep(&obj) {
                items[i] = Bytes::from(crate::json::to_vec(&obj));
            } else {
                dropped.push(i);
            }
        }
        let mut index = 0;
        items.retain(|_| {
            index += 1;
            dropped.binary_search(&(index - 1)).is_err()
        });
        Ok(items)
    }

    /// Brings `objects` to `version` of `target`'s resource.
    async fn convert(&self, target: &Target, objects: &mut [Value], version: &str, shape: Shape) -> ApiResult<()> {
        let desired = target.info.api_version(version);
        let Some(webhook) = target.info.conversion_webhook.as_deref() else {
            for obj in objects.iter_mut() {
                target.strategy.convert_from_storage(obj, version);
                if let Some(m) = obj.as_object_mut() {
                    m.insert("apiVersion".into(), Value::String(desired.clone()));
                }
            }
            return Ok(());
        };
        let pending: Vec<usize> = (0..objects.len()).filter(|&i| objects[i]["apiVersion"] != *desired).collect();
        let Some(&first) = pending.first() else {
            return Ok(());
        };
        let gvk = go_gvk(&objects[first]);
        let sent: Vec<Value> = pending.iter().map(|&i| objects[i].clone()).collect();
        let converted = self.call_conversion_webhook(webhook, sent, &desired, &gvk).await?;
        for (n, (&i, out)) in pending.iter().zip(converted).enumerate() {
            objects[i] = checked_object(&objects[i], out, &desired, shape, n)
                .map_err(|e| ApiError::unclassified(format!("conversion webhook for {gvk} {e}")))?;
        }
        Ok(())
    }

    /// Sends `objects` to the webhook in one ConversionReview and returns the converted
    /// objects, as many as were sent (not yet checked one by one).
    async fn call_conversion_webhook(
        &self,
        webhook: &WebhookConversion,
        objects: Vec<Value>,
        desired: &str,
        gvk: &str,
    ) -> ApiResult<Vec<Value>> {
        let review_version = webhook
            .conversion_review_versions
            .iter()
            .find(|v| matches!(v.as_str(), "v1" | "v1beta1"))
            .ok_or_else(|| ApiError::unclassified("no supported conversion review versions"))?;
        let uid = uuid::Uuid::new_v4().to_string();
        let sent = objects.len();
        let review = json!({
            "kind": "ConversionReview",
            "apiVersion": format!("apiextensions.k8s.io/{review_version}"),
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
        });
        let failed = |why: String| ApiError::unclassified(format!("conversion webhook for {gvk} failed: {why}"));
        let started = std::time::Instant::now();
        let answer = self
            .conversion_webhooks
            .call(self.view(), webhook.client_config.as_ref(), &review, CONVERSION_TIMEOUT)
            .await;
        tracing::debug!(%gvk, desired, objects = sent, elapsed = ?started.elapsed(), ok = answer.is_ok(), "conversion webhook called");
        let answer = answer.map_err(failed)?;
        let converted = converted_objects(answer, &uid, review_version).map_err(failed)?;
        if converted.len() != sent {
            return Err(ApiError::unclassified(format!(
                "conversion webhook for {gvk} returned {} objects, expected {sent}",
                converted.len()
            )));
        }
        Ok(converted)
    }
}

/// Whether stored bytes hold an object at `api_version`, reading only `apiVersion`.
pub(super) fn stored_at(bytes: &[u8], api_version: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct TypeMeta<'a> {
        #[serde(borrow, rename = "apiVersion", default)]
        api_version: Option<Cow<'a, str>>,
    }
    serde_json::from_slice::<TypeMeta<'_>>(bytes).is_ok_and(|t| t.api_version.as_deref() == Some(api_version))
}

/// Whether objects of `target`'s resource may be stored at another version than its
/// storage version (a custom resource serving several versions).
pub(super) fn may_be_stored_at_other_versions(target: &Target) -> bool {
    !target.info.builtin && target.info.versions.len() > 1
}

/// An object's group, version and kind as Go prints a `GroupVersionKind`:
/// `group/version, Kind=Kind`.
fn go_gvk(obj: &Value) -> String {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={}", obj["kind"].as_str().unwrap_or_default())
}

/// The converted objects of a webhook's answer, or why the answer is refused (kube's
/// `getConvertedObjectsFromResponse`). v1beta1 answers are not checked for their type
/// and uid, as kube does not check them.
fn converted_objects(mut answer: Value, uid: &str, review_version: &str) -> Result<Vec<Value>, String> {
    if review_version == "v1" {
        let expected = "apiextensions.k8s.io/v1, Kind=ConversionReview";
        let got = go_gvk(&answer);
        if got != expected {
            return Err(format!("expected webhook response of {expected}, got {got}"));
        }
    }
    let response = match answer.get_mut("response") {
        Some(r) if r.is_object() => r.take(),
        _ => return Err("no response provided".into()),
    };
    if review_version == "v1" {
        let got = response["uid"].as_str().unwrap_or_default();
        if got != uid {
            return Err(format!("expected response.uid={uid:?}, got {got:?}"));
        }
    }
    let result = &response["result"];
    let status = result["status"].as_str().unwrap_or_default();
    if status != "Success" {
        return Err(match result["message"].as_str().filter(|m| !m.is_empty()) {
            Some(message) => message.to_string(),
            None => format!("response.result.status was '{status}', not 'Success'"),
        });
    }
    match response {
        Value::Object(mut m) => match m.remove("convertedObjects") {
            Some(Value::Array(objects)) => Ok(objects),
            _ => Ok(Vec::new()),
        },
        _ => Ok(Vec::new()),
    }
}

/// Checks one converted object against the one sent (`n`th of those sent) and returns
/// it with the sent object's metadata, keeping only the converted labels and
/// annotations. The error continues `conversion webhook for <gvk> `.
fn checked_object(
    original: &Value,
    mut converted: Value,
    desired: &str,
    shape: Shape,
    n: usize,
) -> Result<Value, String> {
    // kube counts the object before it checks it, so a list's messages name index n + 1.
    let (invalid, invalid_meta) = match shape {
        Shape::Object => ("returned invalid object at index 0".to_string(), "returned invalid metadata".to_string()),
        Shape::List => (
            format!("returned invalid converted object at index {}", n + 1),
            format!("returned invalid metadata in object at index {}", n + 1),
        ),
    };
    if !converted.is_object() {
        return Err(format!(
            "returned invalid converted object at index {n}: cannot unmarshal {} into an object",
            go_type(&converted)
        ));
    }
    let got_version = converted["apiVersion"].as_str().unwrap_or_default();
    if got_version != desired {
        return Err(format!("{invalid}: invalid groupVersion (expected {desired}, received {got_version})"));
    }
    let (want_kind, got_kind) =
        (original["kind"].as_str().unwrap_or_default(), converted["kind"].as_str().unwrap_or_default());
    if want_kind != got_kind {
        return Err(format!("{invalid}: invalid kind (expected {want_kind}, received {got_kind})"));
    }
    let unchanged = match shape {
        Shape::Object => "returned invalid object".to_string(),
        Shape::List => format!("returned invalid converted object at index {}", n + 1),
    };
    for (field, shown) in [("name", "name"), ("namespace", "namespace"), ("uid", "UID")] {
        let (want, got) = (meta_str(original, field), meta_str(&converted, field));
        if want != got {
            return Err(format!("{unchanged}: must have the same {shown}: {want} != {got}"));
        }
    }
    restore_metadata(original, &mut converted).map_err(|e| format!("{invalid_meta}: {e}"))?;
    Ok(converted)
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj["metadata"][field].as_str().unwrap_or_default()
}

/// Gives `converted` the metadata of `original`, with the labels and annotations the
/// webhook returned (kube's `restoreObjectMeta`).
fn restore_metadata(original: &Value, converted: &mut Value) -> Result<(), String> {
    let returned = match converted.get("metadata") {
        None => return Err("missing metadata in converted object".into()),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => return Err(format!("invalid metadata of type {} in converted object", go_type(other))),
    };
    let mut metadata = original["metadata"].as_object().cloned().unwrap_or_default();
    for field in ["labels", "annotations"] {
        match returned.get(field) {
            None | Some(Value::Null) => {
                metadata.remove(field);
            }
            Some(Value::Object(values)) => {
                if let Some((k, v)) = values.iter().find(|(_, v)| !v.is_string()) {
                    return Err(format!(
                        "metadata.{field}[{k}] must be a string, but is {} in converted object",
                        go_type(v)
                    ));
                }
                metadata.insert(field.into(), Value::Object(values.clone()));
            }
            Some(other) => {
                return Err(format!("invalid metadata.{field} of type {} in converted object", go_type(other)));
            }
        }
    }
    converted["metadata"] = Value::Object(metadata);
    Ok(())
}

/// The Go type a JSON value decodes to in an unstructured object, as `%T` prints it.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gvk_is_printed_as_go_prints_it() {
        assert_eq!(go_gvk(&json!({"apiVersion": "flights.com/v1", "kind": "Flight"})), "flights.com/v1, Kind=Flight");
        assert_eq!(go_gvk(&json!({})), "/, Kind=");
    }

    #[test]
    fn only_labels_and_annotations_of_the_metadata_are_taken_from_the_webhook() {
        let original = json!({"apiVersion": "g/v1", "kind": "K",
            "metadata": {"name": "a", "uid": "u", "resourceVersion": "7", "labels": {"x": "1"}}});
        let converted = json!({"apiVersion": "g/v2", "kind": "K",
            "metadata": {"name": "a", "uid": "u", "resourceVersion": "99", "annotations": {"n": "v"}}, "spec": {}});
        let out = checked_object(&original, converted, "g/v2", Shape::Object, 0).expect("valid");
        assert_eq!(
            out["metadata"],
            json!({"name": "a", "uid": "u", "resourceVersion": "7", "annotations": {"n": "v"}})
        );
    }

    #[test]
    fn a_renamed_object_is_refused_as_kube_refuses_it() {
        let original = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "a"}});
        let converted = json!({"apiVersion": "g/v2", "kind": "K", "metadata": {"name": "b"}});
        let e = checked_object(&original, converted.clone(), "g/v2", Shape::Object, 0).expect_err("renamed");
        assert_eq!(e, "returned invalid object: must have the same name: a != b");
        let e = checked_object(&original, converted, "g/v2", Shape::List, 0).expect_err("renamed");
        assert_eq!(e, "returned invalid converted object at index 1: must have the same name: a != b");
    }

    #[test]
    fn stored_version_is_read_without_parsing_the_object() {
        assert!(stored_at(br#"{"apiVersion":"g/v1","kind":"K","spec":{"x":[1,2]}}"#, "g/v1"));
        assert!(!stored_at(br#"{"kind":"K","apiVersion":"g/v2"}"#, "g/v1"));
        assert!(!stored_at(b"not json", "g/v1"));
    }
}
