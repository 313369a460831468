//! Following the benchmark's Deployments and Pods from the bench process: a list then a
//! watch over the bench's own HTTP client (re-listing when a watch ends), parsing only
//! the fields the benchmark needs, and the [`Progress`] it records — when each pod was
//! first seen, bound to a node and Running+Ready, and when each Deployment became
//! available.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use http::Method;
use http_body_util::BodyExt;
use parking_lot::Mutex;
use serde::Deserialize;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::BenchError;
use crate::client::query_escape;
use crate::client::{Endpoint, call};

/// How long a failed list or watch waits before it is retried.
const RETRY_DELAY: Duration = Duration::from_millis(200);
/// Server-side timeout asked for each watch (it is re-opened when it ends).
const WATCH_TIMEOUT_SECS: u64 = 300;

#[derive(Debug, Default, Deserialize)]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
}

#[derive(Debug, Default, Deserialize)]
struct Condition {
    #[serde(rename = "type")]
    type_: String,
    #[serde(default)]
    status: String,
}

#[derive(Debug, Default, Deserialize)]
struct Spec {
    #[serde(default)]
    replicas: Option<i64>,
    #[serde(default, rename = "nodeName")]
    node_name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Status {
    #[serde(default)]
    phase: Option<String>,
    #[serde(default, rename = "availableReplicas")]
    available_replicas: Option<i64>,
    #[serde(default)]
    conditions: Vec<Condition>,
}

/// The fields of a Pod or Deployment the benchmark reads.
#[derive(Debug, Default, Deserialize)]
pub struct Slim {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    spec: Option<Spec>,
    #[serde(default)]
    status: Option<Status>,
}

impl Slim {
    fn condition_true(&self, type_: &str) -> bool {
        self.status.iter().flat_map(|s| s.conditions.iter()).any(|c| c.type_ == type_ && c.status == "True")
    }

    /// A pod that is bound to a node.
    pub fn is_bound(&self) -> bool {
        self.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty())
    }

    /// A pod in phase Running with the Ready condition true.
    pub fn is_running_ready(&self) -> bool {
        self.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") && self.condition_true("Ready")
    }

    /// A Deployment whose available replicas reach its desired count and whose Available
    /// condition is true.
    pub fn is_available(&self) -> bool {
        let want = self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let have = self.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0);
        have >= want && self.condition_true("Available")
    }
}

#[derive(Debug, Deserialize)]
struct WatchLine {
    #[serde(rename = "type")]
    type_: String,
    #[serde(default)]
    object: Slim,
}

#[derive(Debug, Deserialize)]
struct ListBody {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    items: Vec<Slim>,
}

/// When one pod reached each stage.
#[derive(Debug, Clone, Copy)]
pub struct PodTimes {
    /// First seen (created).
    pub seen: Instant,
    /// First seen bound to a node.
    pub bound: Option<Instant>,
    /// First seen Running and Ready.
    pub ready: Option<Instant>,
}

/// What the watches have seen so far.
#[derive(Debug, Default)]
pub struct Progress {
    /// Every pod seen, by name.
    pub pods: HashMap<String, PodTimes>,
    /// When each Deployment first reported available, by name.
    pub available: HashMap<String, Instant>,
    /// Pods currently bound, Running+Ready.
    pub ready_now: usize,
    /// Watch events received (both kinds).
    pub events: u64,
    /// Lists and watches that failed and were retried.
    pub retries: u64,
}

/// The shared [`Progress`] and a notification on every change.
#[derive(Default)]
pub struct Tracker {
    /// The recorded progress.
    pub progress: Mutex<Progress>,
    /// Signalled after every applied event.
    pub changed: Notify,
}

/// Which kind a follower watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `pods`.
    Pods,
    /// `deployments` (apps/v1).
    Deployments,
}

impl Kind {
    fn path(self, ns: &str) -> String {
        match self {
            Kind::Pods => format!("/api/v1/namespaces/{ns}/pods"),
            Kind::Deployments => format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        }
    }
}

impl Tracker {
    fn apply(&self, kind: Kind, obj: &Slim, deleted: bool) {
        let now = Instant::now();
        let mut p = self.progress.lock();
        p.events += 1;
        match kind {
            Kind::Pods if !deleted => {
                let t =
                    p.pods.entry(obj.metadata.name.clone()).or_insert(PodTimes { seen: now, bound: None, ready: None });
                if t.bound.is_none() && obj.is_bound() {
                    t.bound = Some(now);
                }
                if t.ready.is_none() && obj.is_running_ready() {
                    t.ready = Some(now);
                    p.ready_now += 1;
                }
            }
            Kind::Pods => {}
            Kind::Deployments => {
                if !deleted && obj.is_available() {
                    p.available.entry(obj.metadata.name.clone()).or_insert(now);
                }
            }
        }
        drop(p);
        self.changed.notify_waiters();
    }

    fn retried(&self) {
        self.progress.lock().retries += 1;
    }
}

/// Follows `kind` in namespace `ns` into `tracker` until `stop`: list, then watch from the
/// list's resourceVersion; when a watch ends or fails, watch again from the last version
/// seen, or re-list after an error event (such as 410 Gone).
pub async fn follow(ep: Endpoint, kind: Kind, ns: String, tracker: Arc<Tracker>, stop: CancellationToken) {
    let path = kind.path(&ns);
    let mut rv: Option<String> = None;
    while !stop.is_cancelled() {
        let outcome = match &rv {
            None => list(&ep, &path, kind, &tracker).await.map(Some),
            Some(v) => tokio::select! {
                _ = stop.cancelled() => return,
                r = watch(&ep, &path, v, kind, &tracker) => r,
            },
        };
        match outcome {
            Ok(next) => rv = next,
            Err(_) => {
                tracker.retried();
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(RETRY_DELAY) => {}
                }
            }
        }
    }
}

async fn list(ep: &Endpoint, path: &str, kind: Kind, tracker: &Tracker) -> Result<String, BenchError> {
    let body = call(ep, Method::GET, path, bytes::Bytes::new()).await?;
    let list: ListBody = serde_json::from_slice(&body).map_err(|e| BenchError::Setup(format!("list body: {e}")))?;
    for item in &list.items {
        tracker.apply(kind, item, false);
    }
    Ok(list.metadata.resource_version)
}

/// One watch; returns the version to resume from (`None`: re-list).
async fn watch(
    ep: &Endpoint,
    path: &str,
    rv: &str,
    kind: Kind,
    tracker: &Tracker,
) -> Result<Option<String>, BenchError> {
    let url = format!(
        "{path}?watch=true&allowWatchBookmarks=true&timeoutSeconds={WATCH_TIMEOUT_SECS}&resourceVersion={}",
        query_escape(rv)
    );
    let mut conn = ep.connect().await?;
    let resp = conn.send_streaming(ep.request(Method::GET, &url, bytes::Bytes::new())).await?;
    if !resp.status().is_success() {
        return Ok(None);
    }
    let mut body = resp.into_body();
    let mut buf = BytesMut::new();
    let mut last = rv.to_string();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(BenchError::http)?;
        let Some(data) = frame.data_ref() else { continue };
        buf.extend_from_slice(data);
        while let Some(pos) = buf.iter().position(|&b| b == b'\n') {
            let line = buf.split_to(pos + 1);
            match apply_line(&line[..pos], kind, tracker) {
                LineOutcome::Version(v) => last = v,
                LineOutcome::Skip => {}
                LineOutcome::Relist => return Ok(None),
            }
        }
    }
    Ok(Some(last))
}

enum LineOutcome {
    Version(String),
    Skip,
    Relist,
}

fn apply_line(line: &[u8], kind: Kind, tracker: &Tracker) -> LineOutcome {
    if line.iter().all(u8::is_ascii_whitespace) {
        return LineOutcome::Skip;
    }
    let Ok(ev) = serde_json::from_slice::<WatchLine>(line) else { return LineOutcome::Relist };
    if ev.type_ == "ERROR" {
        return LineOutcome::Relist;
    }
    let obj = ev.object;
    match ev.type_.as_str() {
        "ADDED" | "MODIFIED" => tracker.apply(kind, &obj, false),
        "DELETED" => tracker.apply(kind, &obj, true),
        _ => {}
    }
    LineOutcome::Version(obj.metadata.resource_version)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(v: serde_json::Value) -> Vec<u8> {
        v.to_string().into_bytes()
    }

    #[test]
    fn pod_stages_are_recorded_once() {
        let t = Tracker::default();
        let pending = serde_json::json!({"type": "ADDED", "object": {"metadata": {"name": "p", "resourceVersion": "5"},
            "spec": {"containers": []}, "status": {"phase": "Pending"}}});
        assert!(matches!(apply_line(&line(pending), Kind::Pods, &t), LineOutcome::Version(v) if v == "5"));
        let ready = serde_json::json!({"type": "MODIFIED", "object": {"metadata": {"name": "p", "resourceVersion": "7"},
            "spec": {"nodeName": "n1"}, "status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}}});
        apply_line(&line(ready.clone()), Kind::Pods, &t);
        apply_line(&line(ready), Kind::Pods, &t);
        let p = t.progress.lock();
        let times = p.pods["p"];
        assert!(times.bound.is_some() && times.ready.is_some());
        assert_eq!((p.ready_now, p.events), (1, 3));
    }

    #[test]
    fn deployments_need_replicas_and_condition() {
        let t = Tracker::default();
        let mk = |avail: i64, cond: &str| {
            line(serde_json::json!({"type": "MODIFIED", "object": {"metadata": {"name": "d", "resourceVersion": "9"},
                "spec": {"replicas": 10}, "status": {"availableReplicas": avail,
                "conditions": [{"type": "Available", "status": cond}]}}}))
        };
        apply_line(&mk(9, "True"), Kind::Deployments, &t);
        apply_line(&mk(10, "False"), Kind::Deployments, &t);
        assert!(t.progress.lock().available.is_empty());
        apply_line(&mk(10, "True"), Kind::Deployments, &t);
        assert!(t.progress.lock().available.contains_key("d"));
    }

    #[test]
    fn errors_and_garbage_relist() {
        let t = Tracker::default();
        let err = serde_json::json!({"type": "ERROR", "object": {"kind": "Status", "code": 410}});
        assert!(matches!(apply_line(&line(err), Kind::Pods, &t), LineOutcome::Relist));
        assert!(matches!(apply_line(b"{not json", Kind::Pods, &t), LineOutcome::Relist));
        assert!(matches!(apply_line(b"  ", Kind::Pods, &t), LineOutcome::Skip));
        let bookmark = serde_json::json!({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}});
        assert!(matches!(apply_line(&line(bookmark), Kind::Pods, &t), LineOutcome::Version(v) if v == "12"));
        assert_eq!(t.progress.lock().pods.len(), 0);
    }
}
