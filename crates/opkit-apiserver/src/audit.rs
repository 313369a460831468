//! The audit log (kube-apiserver's `--audit-log-path` with a policy of level Metadata for
//! everything): one `audit.k8s.io/v1` Event per request as a JSON line, with who asked
//! (and whom they impersonated), what for, the authorization decision and the answer's
//! status. Requests that stream (watches) are logged when their response starts, as kube
//! logs their `ResponseStarted` stage. Admission plugins and webhooks add annotations to
//! the event of the request they admit ([`annotate`]), as kube's admission adds them to
//! the request's audit context.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::future::Future;
use std::io::{LineWriter, Write};
use std::path::Path;
use std::sync::Arc;

use jiff::Timestamp;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{Value, json};

use crate::auth::user::UserInfo;
use crate::authz::attributes::{Action, Object};

/// Where audit events go: an append-only file, one JSON object per line.
pub(crate) struct AuditLog {
    file: Mutex<LineWriter<File>>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditLog")
    }
}

impl AuditLog {
    /// Opens `path` for appending (creating it, owner-only).
    pub(crate) fn open(path: &Path) -> std::io::Result<AuditLog> {
        let mut options = OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        Ok(AuditLog { file: Mutex::new(LineWriter::new(options.open(path)?)) })
    }

    /// Writes one finished record.
    pub(crate) fn write(&self, record: &AuditRecord) {
        let line = match serde_json::to_string(&*record.event.lock()) {
            Ok(line) => line,
            Err(e) => return tracing::warn!(error = %e, "an audit event could not be encoded"),
        };
        if let Err(e) = writeln!(self.file.lock(), "{line}") {
            tracing::warn!(error = %e, "writing the audit log failed");
        }
    }
}

/// kube's `audit.k8s.io/v1` Event at level Metadata.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct AuditEvent {
    kind: &'static str,
    api_version: &'static str,
    level: &'static str,
    #[serde(rename = "auditID")]
    audit_id: String,
    stage: &'static str,
    #[serde(rename = "requestURI")]
    request_uri: String,
    verb: String,
    user: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    impersonated_user: Option<Value>,
    #[serde(rename = "sourceIPs")]
    source_ips: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_agent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    object_ref: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_status: Option<Value>,
    request_received_timestamp: String,
    stage_timestamp: String,
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    annotations: serde_json::Map<String, Value>,
}

tokio::task_local! {
    /// The audit record of the request the current task serves.
    static CURRENT: Arc<AuditRecord>;
}

/// Runs `request` with `record` as its audit record, so that [`annotate`] reaches it.
pub(crate) async fn scope<F: Future>(record: Option<Arc<AuditRecord>>, request: F) -> F::Output {
    match record {
        Some(record) => CURRENT.scope(record, request).await,
        None => request.await,
    }
}

/// Adds `annotations` to the audit event of the request being served (nothing when the
/// server keeps no audit log).
pub(crate) fn annotate(annotations: &BTreeMap<String, String>) {
    if annotations.is_empty() {
        return;
    }
    let _ = CURRENT.try_with(|record| {
        let mut e = record.event.lock();
        for (key, value) in annotations {
            e.annotations.insert(key.clone(), json!(value));
        }
    });
}

/// One request's audit event, filled in as the request goes through authentication,
/// authorization and its handler.
pub(crate) struct AuditRecord {
    event: Mutex<AuditEvent>,
}

/// kube's timestamps: RFC 3339 with microseconds.
fn now() -> String {
    Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

impl AuditRecord {
    /// A record for a request just received.
    pub(crate) fn received(parts: &http::request::Parts) -> AuditRecord {
        let source = parts.extensions.get::<opkit_serve::RemoteAddr>().map(|a| a.0.ip().to_string());
        let event = AuditEvent {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level: "Metadata",
            audit_id: uuid::Uuid::new_v4().to_string(),
            stage: "ResponseComplete",
            request_uri: parts.uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default(),
            verb: parts.method.as_str().to_lowercase(),
            user: json!({}),
            impersonated_user: None,
            source_ips: source.into_iter().collect(),
            user_agent: parts.headers.get(http::header::USER_AGENT).and_then(|v| v.to_str().ok()).map(String::from),
            object_ref: None,
            response_status: None,
            request_received_timestamp: now(),
            stage_timestamp: String::new(),
            annotations: serde_json::Map::new(),
        };
        AuditRecord { event: Mutex::new(event) }
    }

    /// Who sent the request and, when different, whom it acts as.
    pub(crate) fn users(&self, authenticated: &UserInfo, acting: &UserInfo) {
        let mut e = self.event.lock();
        e.user = authenticated.to_json();
        e.impersonated_user = (authenticated != acting).then(|| acting.to_json());
    }

    /// What the request asks (kube's verb and object) and the authorization decision.
    pub(crate) fn authorization(&self, action: &Action, allowed: bool, reason: &str) {
        let mut e = self.event.lock();
        e.verb = action.verb.clone();
        if matches!(action.verb.as_str(), "watch") {
            e.stage = "ResponseStarted";
        }
        if let Object::Resource(r) = &action.object {
            let mut object = json!({"resource": r.resource, "apiVersion": r.version});
            for (key, value) in [
                ("namespace", &r.namespace),
                ("name", &r.name),
                ("apiGroup", &r.group),
                ("subresource", &r.subresource),
            ] {
                if !value.is_empty() {
                    object[key] = json!(value);
                }
            }
            e.object_ref = Some(object);
        }
        e.annotations.insert("authorization.k8s.io/decision".into(), json!(if allowed { "allow" } else { "forbid" }));
        e.annotations.insert("authorization.k8s.io/reason".into(), json!(reason));
    }

    /// The answer: its code and, for a failure, the Status's reason and message.
    pub(crate) fn responded(&self, code: u16, failure: Option<(&str, &str)>) {
        let mut e = self.event.lock();
        let mut status = json!({"metadata": {}, "code": code});
        if let Some((reason, message)) = failure {
            status["status"] = json!("Failure");
            status["reason"] = json!(reason);
            status["message"] = json!(message);
        }
        e.response_status = Some(status);
        e.stage_timestamp = now();
    }
}
