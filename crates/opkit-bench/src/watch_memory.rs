//! Server memory per watch from resourceVersion 0: a fresh server holds `objects`
//! ConfigMaps; `watchers` clients each open a watch from resourceVersion 0 on its own
//! connection (as the Python client and kubectl do) and never read it, or read every
//! initial event; the server's VmRSS is read with them open, and again once they are
//! closed and the server counts no open watch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Method;
use http_body_util::BodyExt;
use serde::Serialize;
use tokio::task::JoinSet;

use crate::BenchError;
use crate::client::open_stream;
use crate::fixtures::ensure_namespace;
use crate::fixtures::{cm_path, configmap};
use crate::load::{MakeRequest, Phase, run_phase};
use crate::serve::{Backend, ServerProcess};

const NS: &str = "bench-watch-memory";
/// How long the server's memory is sampled after every watch ended.
const AFTER_CLOSE_SAMPLING: Duration = Duration::from_secs(3);

/// What `opkit-bench watch-memory` measures.
#[derive(Debug, Clone)]
pub struct WatchMemoryOptions {
    /// This executable, started again as the server.
    pub server_exe: std::path::PathBuf,
    /// ConfigMaps the server holds.
    pub objects: usize,
    /// Bytes of each ConfigMap's data.
    pub payload_bytes: usize,
    /// Watches opened.
    pub watchers: usize,
    /// Whether each watch reads its initial events (else it never reads).
    pub read: bool,
    /// How long the closed watches may take to end on the server.
    pub timeout: Duration,
}

/// The server's memory before, with and after the watches.
#[derive(Debug, Clone, Serialize)]
pub struct WatchMemoryReport {
    /// ConfigMaps the server held.
    pub objects: usize,
    /// Watches opened.
    pub watchers: usize,
    /// Whether each watch read its initial events.
    pub read: bool,
    /// Server VmRSS before the watches were opened.
    pub rss_before_bytes: u64,
    /// Server VmRSS with every watch open (and, when reading, every initial event read).
    pub rss_open_bytes: u64,
    /// The lowest server VmRSS in the 3 s after the server counted no watch open.
    pub rss_closed_bytes: u64,
    /// (open - before) / watchers.
    pub bytes_per_watch: f64,
    /// closed - before: what the closed watches left behind.
    pub retained_bytes: i64,
    /// How long the server took to count every closed watch as ended, in milliseconds.
    pub close_ms: f64,
}

/// Runs the measurement on a fresh in-memory server.
pub async fn run(o: &WatchMemoryOptions) -> Result<WatchMemoryReport, BenchError> {
    let server = ServerProcess::spawn(&o.server_exe, Backend::Memory, None).await?;
    let ep = server.endpoint()?;
    ensure_namespace(&ep, NS).await?;
    let path = cm_path(NS);
    let (ep2, path2, size) = (ep.clone(), path.clone(), o.payload_bytes);
    let make: MakeRequest =
        Arc::new(move |i| ep2.request(Method::POST, &path2, configmap(NS, &format!("w-{i:07}"), size, 0)));
    let fill = Phase { op: "fill".into(), concurrency: 32, total: o.objects, limit: o.timeout };
    let filled = run_phase(&ep, &fill, make).await?;
    if filled.stats.ok < o.objects {
        return Err(BenchError::Setup(format!("only {} of {} ConfigMaps were created", filled.stats.ok, o.objects)));
    }
    let before = server.memory()?.rss_bytes;
    let watch_path = format!("{path}?watch=true&resourceVersion=0");
    let mut open = Vec::with_capacity(o.watchers);
    for _ in 0..o.watchers {
        open.push(open_stream(&ep, &watch_path).await?);
    }
    if o.read {
        // Each watch reads until it has every initial event, then stays open, unread.
        let mut readers = JoinSet::new();
        for (conn, resp) in open.drain(..) {
            let (objects, deadline) = (o.objects, tokio::time::Instant::now() + o.timeout);
            readers.spawn(async move {
                let mut body = resp.into_body();
                let mut seen = 0;
                while seen < objects {
                    match tokio::time::timeout_at(deadline, body.frame()).await {
                        Ok(Some(Ok(frame))) => {
                            seen += frame.data_ref().map_or(0, |d| d.iter().filter(|&&b| b == b'\n').count())
                        }
                        _ => break,
                    }
                }
                (seen, conn, body)
            });
        }
        let mut kept = Vec::with_capacity(o.watchers);
        while let Some(r) = readers.join_next().await {
            let (seen, conn, body) = r.map_err(|e| BenchError::Setup(format!("watcher failed: {e}")))?;
            if seen < o.objects {
                return Err(BenchError::Setup(format!("a watch got {seen} of {} initial events", o.objects)));
            }
            kept.push((conn, body));
        }
        let open_bytes = server.memory()?.rss_bytes;
        drop(kept);
        return finish(o, server, before, open_bytes).await;
    }
    let open_bytes = server.memory()?.rss_bytes;
    drop(open);
    finish(o, server, before, open_bytes).await
}

/// Waits until the server counts no open watch, then reads its memory.
async fn finish(
    o: &WatchMemoryOptions,
    mut server: ServerProcess,
    before: u64,
    open_bytes: u64,
) -> Result<WatchMemoryReport, BenchError> {
    let closed_at = Instant::now();
    let deadline = closed_at + o.timeout;
    loop {
        let n = server.open_watches().await?;
        if n == 0 {
            break;
        }
        if Instant::now() > deadline {
            return Err(BenchError::Setup(format!(
                "{n} watches still open {:?} after their clients closed",
                o.timeout
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let close_ms = closed_at.elapsed().as_secs_f64() * 1000.0;
    // The server returns freed memory a moment after a burst of closes: the lowest VmRSS
    // over the next seconds is what the closed watches left.
    let mut closed = server.memory()?.rss_bytes;
    let until = Instant::now() + AFTER_CLOSE_SAMPLING;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
        closed = closed.min(server.memory()?.rss_bytes);
    }
    server.stop().await;
    Ok(WatchMemoryReport {
        objects: o.objects,
        watchers: o.watchers,
        read: o.read,
        rss_before_bytes: before,
        rss_open_bytes: open_bytes,
        rss_closed_bytes: closed,
        bytes_per_watch: open_bytes.saturating_sub(before) as f64 / o.watchers.max(1) as f64,
        retained_bytes: closed as i64 - before as i64,
        close_ms,
    })
}

/// The report for people.
pub fn render_text(r: &WatchMemoryReport) -> String {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    format!(
        "{} watches from resourceVersion 0 ({}) over {} ConfigMaps\n  \
         VmRSS before {:.1} MiB, open {:.1} MiB ({:.1} KiB per watch), lowest in the 3 s after they closed {:.1} MiB ({:+.1} MiB left; \
         ended on the server {:.0} ms after their clients closed)\n",
        r.watchers,
        if r.read { "initial events read" } else { "never read" },
        r.objects,
        mib(r.rss_before_bytes),
        mib(r.rss_open_bytes),
        r.bytes_per_watch / 1024.0,
        mib(r.rss_closed_bytes),
        r.retained_bytes as f64 / (1024.0 * 1024.0),
        r.close_ms,
    )
}
