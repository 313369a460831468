//! Shared test helpers: a reconcile log to wait on, HTTP GET, object builders.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use opkit::{Manager, Request};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How long a test waits for a condition before failing.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// Every reconcile call, to wait on and assert about.
#[derive(Clone, Default)]
pub(crate) struct Log {
    calls: Arc<Mutex<Vec<(Request, Instant, String)>>>,
    changed: Arc<Notify>,
}

impl Log {
    /// Records a call with a note.
    pub(crate) fn record(&self, req: &Request, note: impl Into<String>) {
        self.calls.lock().push((req.clone(), Instant::now(), note.into()));
        self.changed.notify_waiters();
    }
    /// Calls for the object named `name`.
    pub(crate) fn calls(&self, name: &str) -> Vec<(Instant, String)> {
        self.calls.lock().iter().filter(|(r, _, _)| r.name == name).map(|(_, t, n)| (*t, n.clone())).collect()
    }
    /// How many calls per object name.
    pub(crate) fn counts(&self) -> HashMap<String, usize> {
        let mut m = HashMap::new();
        for (r, _, _) in self.calls.lock().iter() {
            *m.entry(r.name.clone()).or_insert(0) += 1;
        }
        m
    }
    /// Waits until `pred` holds for the log.
    pub(crate) async fn wait(&self, what: &str, pred: impl Fn(&Log) -> bool) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let notified = self.changed.notified();
            if pred(self) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() && !pred(self) {
                panic!("timed out waiting for {what}; calls: {:?}", self.counts());
            }
        }
    }
    /// Waits until `name` was reconciled at least `n` times.
    pub(crate) async fn wait_calls(&self, name: &str, n: usize) {
        self.wait(&format!("{n} reconciles of {name}"), |l| l.calls(name).len() >= n).await;
    }
}

/// A plain HTTP GET to 127.0.0.1; returns (status, body).
pub(crate) async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.expect("read");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (code, body)
}

/// Creates a ConfigMap with labels.
pub(crate) async fn configmap(api: &Api<ConfigMap>, name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    if !labels.is_empty() {
        cm.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    }
    api.create(&PostParams::default(), &cm).await.expect("create configmap")
}

/// Polls `f` until it returns Some, with a timeout; for conditions outside the log
/// (HTTP endpoints) where there is nothing to subscribe to.
pub(crate) async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `mgr` in the background; cancel the returned token to stop it.
pub(crate) fn start(mgr: Manager) -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move { mgr.run_until(t).await });
    token
}

/// A control plane whose only ConfigMaps are the test's own: the root CA publisher
/// (which puts `kube-root-ca.crt` in every namespace, as a cluster does) is off, so
/// tests that count ConfigMap reconciles see only theirs.
pub(crate) async fn env_without_root_ca() -> opkit_testenv::TestEnv {
    opkit_testenv::TestEnv::builder().disable_controller("root-ca-cert-publisher").start().await.expect("env")
}
