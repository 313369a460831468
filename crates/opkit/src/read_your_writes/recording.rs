//! Recording what a reconcile writes: a client whose successful writes (create, update,
//! patch, delete, and the status and scale subresources) are noted, with the
//! resourceVersion or the deletion their response shows, in the log of the reconcile
//! whose task made them.
//!
//! The log is a task-local the worker sets around the reconcile, so writes made from
//! tasks the reconciler spawns are not recorded. Responses of other requests pass
//! through untouched; a write's response body is read once and handed on as it came.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::Method;
use kube::Client;
use kube::client::Body;
use opkit_apimachinery::ResourcePath;
use parking_lot::Mutex;

use crate::cache::{WriteOutcome, WrittenObject};

tokio::task_local! {
    static CURRENT: WriteLog;
}

/// The writes of one reconcile.
#[derive(Clone, Default)]
pub(crate) struct WriteLog(Arc<Mutex<Vec<WrittenObject>>>);

impl WriteLog {
    /// Runs `f` with this log as the one its writes go to.
    pub(crate) async fn scope<F: Future>(&self, f: F) -> F::Output {
        CURRENT.scope(self.clone(), f).await
    }

    /// The writes recorded so far, in order; the log is left empty.
    pub(crate) fn take(&self) -> Vec<WrittenObject> {
        std::mem::take(&mut *self.0.lock())
    }

    fn push(&self, written: WrittenObject) {
        self.0.lock().push(written);
    }
}

/// `base`, with the writes made inside a [`WriteLog::scope`] recorded in that log.
pub(crate) fn recording_client(base: Client) -> Client {
    let namespace = base.default_namespace().to_string();
    let service = tower::service_fn(move |request: http::Request<Body>| {
        let base = base.clone();
        async move {
            let log = CURRENT.try_with(WriteLog::clone).ok();
            let Some(log) = log.filter(|_| is_write(&request)) else {
                return base.send(request).await;
            };
            let method = request.method().clone();
            let path = request.uri().path().to_string();
            let response = base.send(request).await?;
            if !response.status().is_success() {
                return Ok(response);
            }
            let (parts, body) = response.into_parts();
            let bytes = body.collect_bytes().await?;
            if let Some(written) = written_object(&method, &path, &bytes) {
                log.push(written);
            }
            Ok::<_, kube::Error>(http::Response::from_parts(parts, Body::from(bytes)))
        }
    });
    Client::new(service, namespace)
}

/// A request that may change an object: not a read, not a dry run.
fn is_write(request: &http::Request<Body>) -> bool {
    let method = request.method();
    let mutating =
        *method == Method::POST || *method == Method::PUT || *method == Method::PATCH || *method == Method::DELETE;
    mutating && !request.uri().query().is_some_and(|q| q.split('&').any(|p| p.starts_with("dryRun=")))
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    deletion_timestamp: Option<String>,
    finalizers: Option<Vec<String>>,
}

#[derive(serde::Deserialize, Default)]
struct Answer {
    kind: Option<String>,
    #[serde(default)]
    metadata: Meta,
}

/// What a successful write's response says it left, for the writes read-your-own-writes
/// follows: an object (or its status or scale) written, or deleted. `None` for the rest
/// (collection deletes, other subresources, answers without a numeric resourceVersion).
fn written_object(method: &Method, path: &str, body: &[u8]) -> Option<WrittenObject> {
    let path = ResourcePath::parse(path)?;
    if !matches!(path.subresource.as_deref(), None | Some("status" | "scale")) {
        return None;
    }
    let answer: Answer = serde_json::from_slice(body).ok()?;
    let is_delete = *method == Method::DELETE && path.subresource.is_none();
    let status_answer = answer.kind.as_deref() == Some("Status");
    if answer.kind.as_deref().is_some_and(|k| k.ends_with("List")) || (status_answer && !is_delete) {
        return None;
    }
    let meta = answer.metadata;
    let name = path.name.clone().or(meta.name)?;
    let namespace = path.namespace.clone().or(meta.namespace);
    let finalizing = meta.deletion_timestamp.is_some() && meta.finalizers.as_ref().is_some_and(|f| !f.is_empty());
    let outcome = if is_delete && (status_answer || !finalizing) {
        WriteOutcome::Deleted { uid: if status_answer { None } else { meta.uid } }
    } else {
        WriteOutcome::Version(meta.resource_version?.parse().ok()?)
    };
    Some(WrittenObject { group: path.group, resource: path.resource, namespace, name, labels: meta.labels, outcome })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(method: Method, path: &str, body: serde_json::Value) -> Option<WrittenObject> {
        written_object(&method, path, body.to_string().as_bytes())
    }

    #[test]
    fn a_create_is_its_resource_version() {
        let w = written(
            Method::POST,
            "/api/v1/namespaces/ns/configmaps",
            serde_json::json!({"kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "42", "labels": {"x": "y"}}}),
        )
        .expect("recorded");
        assert_eq!(
            (w.group.as_str(), w.resource.as_str(), w.namespace.as_deref(), w.name.as_str()),
            ("", "configmaps", Some("ns"), "a")
        );
        assert_eq!(w.outcome, WriteOutcome::Version(42));
        assert_eq!(w.labels.and_then(|l| l.get("x").cloned()).as_deref(), Some("y"));
    }

    #[test]
    fn a_delete_is_a_tombstone_unless_finalizers_keep_the_object() {
        let gone = written(
            Method::DELETE,
            "/apis/apps/v1/namespaces/ns/deployments/d",
            serde_json::json!({"kind": "Deployment", "metadata": {"name": "d", "uid": "u1", "resourceVersion": "7"}}),
        )
        .expect("recorded");
        assert_eq!(gone.outcome, WriteOutcome::Deleted { uid: Some("u1".into()) });
        let status = written(
            Method::DELETE,
            "/api/v1/namespaces/ns/pods/p",
            serde_json::json!({"kind": "Status", "status": "Success"}),
        )
        .expect("recorded");
        assert_eq!((status.name.as_str(), status.outcome), ("p", WriteOutcome::Deleted { uid: None }));
        let finalizing = written(
            Method::DELETE,
            "/api/v1/namespaces/ns/pods/p",
            serde_json::json!({"kind": "Pod", "metadata": {"name": "p", "resourceVersion": "9", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["f"]}}),
        )
        .expect("recorded");
        assert_eq!(finalizing.outcome, WriteOutcome::Version(9));
    }

    #[test]
    fn lists_other_subresources_and_opaque_versions_are_not_followed() {
        assert!(
            written(
                Method::DELETE,
                "/api/v1/namespaces/ns/pods",
                serde_json::json!({"kind": "PodList", "metadata": {}})
            )
            .is_none()
        );
        assert!(
            written(Method::POST, "/api/v1/namespaces/ns/pods/p/eviction", serde_json::json!({"kind": "Status"}))
                .is_none()
        );
        assert!(
            written(
                Method::PUT,
                "/api/v1/namespaces/ns/configmaps/c",
                serde_json::json!({"metadata": {"name": "c", "resourceVersion": "abc"}})
            )
            .is_none()
        );
        let status = written(
            Method::PATCH,
            "/apis/example.com/v1/things/t/status",
            serde_json::json!({"kind": "Thing", "metadata": {"name": "t", "resourceVersion": "5"}}),
        )
        .expect("recorded");
        assert_eq!(
            (status.group.as_str(), status.namespace, status.outcome),
            ("example.com", None, WriteOutcome::Version(5))
        );
    }
}
