//! The objects and paths the API server scenarios create and request: ConfigMaps of a
//! given size (optionally labelled), their collection path, and the benchmark namespaces.

use bytes::Bytes;
use http::Method;
use serde_json::{Value, json};

use crate::BenchError;
use crate::client::{Endpoint, snippet};

/// A ConfigMap request body of about `size` bytes (at least the bare object).
pub fn configmap(ns: &str, name: &str, size: usize, variant: u64) -> Bytes {
    labelled_configmap(ns, name, size, variant, json!({"app": "opkit-bench"}))
}

/// [`configmap`] with the given `metadata.labels`.
pub fn labelled_configmap(ns: &str, name: &str, size: usize, variant: u64, labels: Value) -> Bytes {
    let bare = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "data": {"payload": ""},
    });
    let base = bare.to_string().len();
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let pad: String =
        (0..size.saturating_sub(base)).map(|i| ALPHABET[(i + variant as usize) % ALPHABET.len()] as char).collect();
    let mut obj = bare;
    obj["data"]["payload"] = Value::String(pad);
    Bytes::from(obj.to_string())
}

/// A Pod request body as a Deployment's pod looks (labels, an owner, one container with
/// ports, env, probes and resources): about 1.5 KB before the server's defaults.
pub fn pod(ns: &str, name: &str) -> Bytes {
    let body = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "web", "pod-template-hash": "5d8f7c9b6d"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-01T00:00:00Z"}},
        "spec": {"containers": [{
            "name": "web", "image": "registry.example.com/web:1.27.3",
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 5},
            "livenessProbe": {"httpGet": {"path": "/livez", "port": "http"}, "periodSeconds": 10}
        }]}
    });
    Bytes::from(body.to_string())
}

/// The collection path of ConfigMaps in `ns`.
pub fn cm_path(ns: &str) -> String {
    format!("/api/v1/namespaces/{ns}/configmaps")
}

/// Creates `ns` (an existing one is fine).
pub async fn ensure_namespace(ep: &Endpoint, ns: &str) -> Result<(), BenchError> {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}).to_string();
    let mut c = ep.connect().await?;
    let (status, resp) = c.send(ep.request(Method::POST, "/api/v1/namespaces", Bytes::from(body))).await?;
    if status.is_success() || status == http::StatusCode::CONFLICT {
        Ok(())
    } else {
        Err(BenchError::Status {
            what: format!("creating namespace {ns}"),
            status: status.as_u16(),
            body: snippet(&resp),
        })
    }
}
