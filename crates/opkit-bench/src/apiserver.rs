//! The API server scenarios, run against a server in a child process: create/get/update
//! throughput as the admin and create/get as a ServiceAccount authorized by RBAC (next to
//! unrelated roles and bindings, so the authorizer's cost shows), full and paged lists,
//! watch fan-out, memory per object; plus the in-process start-up time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use http_body_util::BodyExt;
use opkit_apiserver::{ApiServer, ServerConfig};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::BenchError;
use crate::client::{Endpoint, REQUEST_TIMEOUT, call, open_stream, query_escape, snippet};
use crate::config::{Options, Workload, progress};
use crate::fixtures::{cm_path, configmap, ensure_namespace};
use crate::load::{MakeRequest, Phase, run_phase};
use crate::report::{BackendReport, ListReport, MemoryReport, StartupReport, WatchReport};
use crate::serve::{Backend, ServerProcess};
use crate::stats::{PhaseStats, median};

const NS_OPS: &str = "bench";
const NS_LIST: &str = "bench-list";
const NS_WATCH: &str = "bench-watch";
const NS_MEM: &str = "bench-mem";

fn creates(ep: &Endpoint, ns: &str, prefix: &str, size: usize) -> MakeRequest {
    let (ep, ns, prefix) = (ep.clone(), ns.to_string(), prefix.to_string());
    let path = cm_path(&ns);
    Arc::new(move |i| ep.request(Method::POST, &path, configmap(&ns, &format!("{prefix}{i:07}"), size, 0)))
}

/// In-process start-up: `ApiServer::start` with in-memory storage, `runs` times.
pub async fn startup(runs: usize) -> Result<StartupReport, BenchError> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let server = ApiServer::start(ServerConfig::in_memory()).await?;
        times.push(server.startup_time());
        server.shutdown().await;
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Ok(StartupReport {
        runs: times.len(),
        first_ms: times.first().copied().map(ms).unwrap_or(0.0),
        median_ms: median(&times).map(ms).unwrap_or(0.0),
        min_ms: times.iter().min().copied().map(ms).unwrap_or(0.0),
        max_ms: times.iter().max().copied().map(ms).unwrap_or(0.0),
    })
}

/// Runs every scenario for one backend (two server processes: one for throughput,
/// lists and watches; a fresh one for the memory measurement).
pub async fn bench_backend(opts: &Options, backend: Backend) -> Result<BackendReport, BenchError> {
    let w = &opts.workload;
    let limit = Duration::from_secs(w.phase_limit_secs);
    let server = ServerProcess::spawn(&opts.server_exe, backend, opts.tmp_root.as_deref()).await?;
    let ep = server.endpoint()?;
    for ns in [NS_OPS, NS_LIST, NS_WATCH] {
        ensure_namespace(&ep, ns).await?;
    }
    // Warm-up: a few requests so first-use costs (lazy statics, caches) are not measured.
    let warm = Phase { op: "warmup".into(), concurrency: 4, total: 100, limit };
    run_phase(&ep, &warm, creates(&ep, NS_OPS, "warm-", w.payload_bytes)).await?;

    let mut run = Throughput { opts, backend, ep: ep.clone(), limit, phases: Vec::new(), failures: Vec::new() };
    let stall = match run.all_phases(&server).await {
        Ok(()) => None,
        Err(PhaseError::Stalled(at)) => Some(at),
        Err(PhaseError::Bench(e)) => return Err(e),
    };
    let mut report = BackendReport {
        backend,
        server_startup_ms: server.info.startup_ms,
        phases: run.phases,
        list: None,
        watch: None,
        label_lists: None,
        memory: None,
        failures: run.failures,
    };
    if let Some(at) = stall {
        report.failures.push(format!(
            "the server stopped answering during {at} (requests got no response within {REQUEST_TIMEOUT:?}); \
             the remaining phases, list and watch were skipped for this server"
        ));
    } else {
        reads_and_watches(opts, &server, &ep, &mut report).await;
    }
    server.stop().await;

    progress(opts, &format!("{backend}: memory with {} objects (fresh server)", w.memory_objects));
    match memory(opts, backend).await {
        Ok(m) => report.memory = Some(m),
        Err(e) => report.failures.push(format!("memory: {e}")),
    }
    Ok(report)
}

/// The list, watch fan-out and label-list scenarios, each reported or listed as failed.
async fn reads_and_watches(opts: &Options, server: &ServerProcess, ep: &Endpoint, report: &mut BackendReport) {
    let (w, backend) = (&opts.workload, report.backend);
    let limit = Duration::from_secs(w.phase_limit_secs);
    progress(opts, &format!("{backend}: list {} objects", w.list_objects));
    match list(ep, w, limit).await {
        Ok(l) => report.list = Some(l),
        Err(e) => report.failures.push(format!("list: {e}")),
    }
    progress(opts, &format!("{backend}: watch fan-out {}x{}", w.watchers, w.watch_events));
    match watch_fanout(ep, w, limit).await {
        Ok(x) => report.watch = Some(x),
        Err(e) => report.failures.push(format!("watch: {e}")),
    }
    match crate::label_lists::lease_under_label_lists(opts, server, ep, backend).await {
        Ok(x) => report.label_lists = Some(x),
        Err(e) => report.failures.push(format!("Lease renewal under label lists: {e}")),
    }
}

/// Why the throughput phases ended early.
enum PhaseError {
    /// A phase's requests got no answer in time (the phase named here).
    Stalled(String),
    /// Setting up or running a phase failed.
    Bench(BenchError),
}

impl From<BenchError> for PhaseError {
    fn from(e: BenchError) -> Self {
        PhaseError::Bench(e)
    }
}

/// The create, get, ServiceAccount and update phases against one server, at every
/// concurrency of the workload.
struct Throughput<'a> {
    opts: &'a Options,
    backend: Backend,
    /// The admin's endpoint.
    ep: Endpoint,
    limit: Duration,
    phases: Vec<PhaseStats>,
    failures: Vec<String>,
}

impl Throughput<'_> {
    async fn all_phases(&mut self, server: &ServerProcess) -> Result<(), PhaseError> {
        let created = self.creates().await?;
        self.gets(&created).await?;
        self.service_account(server).await?;
        self.updates(&created).await
    }

    /// Runs one phase as `client` and keeps its stats; returns the requests that
    /// succeeded, or `Stalled` when some timed out.
    async fn measure(
        &mut self,
        client: &Endpoint,
        op: String,
        c: usize,
        make: MakeRequest,
    ) -> Result<usize, PhaseError> {
        let phase = Phase { op, concurrency: c, total: self.opts.workload.ops(c), limit: self.limit };
        let out = run_phase(client, &phase, make).await?;
        let (ok, stalled) = (out.stats.ok, out.stats.timeouts > 0);
        self.phases.push(out.stats);
        if stalled {
            return Err(PhaseError::Stalled(format!("{} c={c}", phase.op)));
        }
        Ok(ok)
    }

    fn progress(&self, what: &str) {
        progress(self.opts, &format!("{}: {what}", self.backend));
    }

    /// Creates at every concurrency; returns how many each created (`c{c}-NNNNNNN`).
    async fn creates(&mut self) -> Result<Vec<(usize, usize)>, PhaseError> {
        let mut created = Vec::new();
        for c in self.opts.workload.concurrencies.clone() {
            self.progress(&format!("create c={c}"));
            let make = creates(&self.ep, NS_OPS, &format!("c{c}-"), self.opts.workload.payload_bytes);
            let ok = self.measure(&self.ep.clone(), "create".into(), c, make).await?;
            created.push((c, ok));
        }
        Ok(created)
    }

    /// Gets of the created objects, at the concurrency that created them.
    async fn gets(&mut self, created: &[(usize, usize)]) -> Result<(), PhaseError> {
        for &(c, n) in created {
            self.progress(&format!("get c={c}"));
            let ep = self.ep.clone();
            self.measure(&ep.clone(), "get".into(), c, gets(&ep, &format!("c{c}-"), n)).await?;
        }
        Ok(())
    }

    /// Creates as a ServiceAccount, then the same gets as the admin and as the
    /// ServiceAccount back to back, so the two differ only in who asks.
    async fn service_account(&mut self, server: &ServerProcess) -> Result<(), PhaseError> {
        let sa = match service_account_endpoint(server, &self.ep).await {
            Ok(sa) => sa,
            Err(e) => {
                self.failures.push(format!("ServiceAccount phases: {e}"));
                return Ok(());
            }
        };
        for c in self.opts.workload.concurrencies.clone() {
            self.progress(&format!("create and get as a ServiceAccount c={c}"));
            let make = creates(&sa, NS_OPS, &format!("sa{c}-"), self.opts.workload.payload_bytes);
            let n = self.measure(&sa, "create (SA)".into(), c, make).await?;
            for (who, client) in [("admin", self.ep.clone()), ("SA", sa.clone())] {
                self.measure(&client, format!("get ({who})"), c, gets(&client, &format!("sa{c}-"), n)).await?;
            }
        }
        Ok(())
    }

    /// Updates of the created objects, at the concurrency that created them.
    async fn updates(&mut self, created: &[(usize, usize)]) -> Result<(), PhaseError> {
        for &(c, n) in created {
            self.progress(&format!("update c={c}"));
            let base = cm_path(NS_OPS);
            let (ep, size) = (self.ep.clone(), self.opts.workload.payload_bytes);
            let make: MakeRequest = Arc::new(move |i| {
                let name = format!("c{c}-{:07}", i % n.max(1));
                ep.request(Method::PUT, &format!("{base}/{name}"), configmap(NS_OPS, &name, size, i as u64 + 1))
            });
            self.measure(&self.ep.clone(), "update".into(), c, make).await?;
        }
        Ok(())
    }
}

/// GETs of the `n` ConfigMaps named `<prefix>NNNNNNN` in the ops namespace, round robin.
fn gets(client: &Endpoint, prefix: &str, n: usize) -> MakeRequest {
    let (base, client, prefix) = (cm_path(NS_OPS), client.clone(), prefix.to_string());
    Arc::new(move |i| client.request(Method::GET, &format!("{base}/{prefix}{:07}", i % n.max(1)), Bytes::new()))
}

/// How many unrelated Roles and RoleBindings sit next to the ServiceAccount's own.
const NOISE_BINDINGS: usize = 200;

/// Sets up ServiceAccount `bench-sa` in the ops namespace with a Role granting ConfigMap
/// create and get, plus [`NOISE_BINDINGS`] Roles bound to other users, and returns an
/// endpoint authenticated with a token from the TokenRequest API.
async fn service_account_endpoint(server: &ServerProcess, admin: &Endpoint) -> Result<Endpoint, BenchError> {
    let post = |path: String, body: Value| async move {
        call(admin, Method::POST, &path, Bytes::from(body.to_string())).await
    };
    let rbac = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NS_OPS}");
    post(format!("/api/v1/namespaces/{NS_OPS}/serviceaccounts"), json!({"metadata": {"name": "bench-sa"}})).await?;
    for i in 0..=NOISE_BINDINGS {
        let (name, subject) = if i == 0 {
            ("bench-sa".to_string(), json!({"kind": "ServiceAccount", "name": "bench-sa", "namespace": NS_OPS}))
        } else {
            (
                format!("noise-{i}"),
                json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": format!("user-{i}")}),
            )
        };
        let rules = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get"]}]);
        post(format!("{rbac}/roles"), json!({"metadata": {"name": name}, "rules": rules})).await?;
        let role_ref = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name});
        post(
            format!("{rbac}/rolebindings"),
            json!({"metadata": {"name": name}, "roleRef": role_ref, "subjects": [subject]}),
        )
        .await?;
    }
    let issued = post(
        format!("/api/v1/namespaces/{NS_OPS}/serviceaccounts/bench-sa/token"),
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 86400}}),
    )
    .await?;
    let issued: Value = serde_json::from_slice(&issued).map_err(|e| BenchError::Setup(format!("TokenRequest: {e}")))?;
    let token =
        issued["status"]["token"].as_str().ok_or_else(|| BenchError::Setup("TokenRequest returned no token".into()))?;
    server.endpoint_with_token(token)
}

async fn list(ep: &Endpoint, w: &Workload, limit: Duration) -> Result<ListReport, BenchError> {
    let fill = Phase { op: "fill".into(), concurrency: 64, total: w.list_objects, limit: limit * 4 };
    let filled = run_phase(ep, &fill, creates(ep, NS_LIST, "l-", w.payload_bytes)).await?;
    if filled.stats.ok < w.list_objects {
        return Err(BenchError::Setup(format!(
            "only {} of {} list objects were created",
            filled.stats.ok, w.list_objects
        )));
    }
    let path = cm_path(NS_LIST);
    let mut conn = ep.connect().await?;
    let (mut full, mut heads, mut bytes, mut items) = (Vec::new(), Vec::new(), 0, 0);
    for _ in 0..w.list_repeats.max(1) {
        let t0 = Instant::now();
        let resp = conn.send_streaming(ep.request(Method::GET, &path, Bytes::new())).await?;
        heads.push(t0.elapsed());
        let status = resp.status();
        let body = tokio::time::timeout(REQUEST_TIMEOUT, resp.into_body().collect())
            .await
            .map_err(|_| BenchError::Timeout(REQUEST_TIMEOUT))?
            .map_err(BenchError::http)?
            .to_bytes();
        full.push(t0.elapsed());
        if !status.is_success() {
            return Err(BenchError::Status {
                what: format!("GET {path}"),
                status: status.as_u16(),
                body: snippet(&body),
            });
        }
        bytes = body.len();
        let v: Value = serde_json::from_slice(&body).map_err(|e| BenchError::Setup(format!("list body: {e}")))?;
        items = v["items"].as_array().map_or(0, Vec::len);
    }
    let max_pages = w.list_objects / w.page_size.max(1) + 5;
    let (mut paged, mut pages) = (Vec::new(), 0);
    for _ in 0..w.list_repeats.max(1) {
        let t0 = Instant::now();
        let mut token = String::new();
        pages = 0;
        loop {
            let mut p = format!("{path}?limit={}", w.page_size);
            if !token.is_empty() {
                p.push_str(&format!("&continue={}", query_escape(&token)));
            }
            let (status, body) = conn.send(ep.request(Method::GET, &p, Bytes::new())).await?;
            if !status.is_success() {
                return Err(BenchError::Status {
                    what: format!("GET {p}"),
                    status: status.as_u16(),
                    body: snippet(&body),
                });
            }
            pages += 1;
            let v: Value = serde_json::from_slice(&body).map_err(|e| BenchError::Setup(format!("page body: {e}")))?;
            token = v["metadata"]["continue"].as_str().unwrap_or_default().to_string();
            if token.is_empty() {
                break;
            }
            if pages >= max_pages {
                return Err(BenchError::Setup(format!("paged list did not end after {pages} pages")));
            }
        }
        paged.push(t0.elapsed());
    }
    let ms = |d: Option<Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    Ok(ListReport {
        objects: w.list_objects,
        items_returned: items,
        full_list_ms: ms(median(&full)),
        full_list_min_ms: ms(full.iter().min().copied()),
        full_list_head_ms: ms(median(&heads)),
        full_list_bytes: bytes,
        page_size: w.page_size,
        pages,
        paged_ms: ms(median(&paged)),
    })
}

async fn watch_fanout(ep: &Endpoint, w: &Workload, limit: Duration) -> Result<WatchReport, BenchError> {
    let path = cm_path(NS_WATCH);
    let list = call(ep, Method::GET, &format!("{path}?limit=1"), Bytes::new()).await?;
    let v: Value = serde_json::from_slice(&list).map_err(|e| BenchError::Setup(format!("list body: {e}")))?;
    let rv = v["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
    let watch_path = format!("{path}?watch=true&resourceVersion={}", query_escape(&rv));
    // Open every watch before writing; a response head means the watch is registered.
    let mut bodies = Vec::with_capacity(w.watchers);
    for _ in 0..w.watchers {
        let (conn, resp) = open_stream(ep, &watch_path).await?;
        bodies.push((conn, resp.into_body()));
    }
    let events = w.watch_events;
    let deadline = tokio::time::Instant::now() + limit;
    let mut readers = JoinSet::new();
    for (conn, mut body) in bodies {
        readers.spawn(async move {
            let _conn = conn;
            let mut seen = 0usize;
            while seen < events {
                match tokio::time::timeout_at(deadline, body.frame()).await {
                    Ok(Some(Ok(frame))) => {
                        if let Some(d) = frame.data_ref() {
                            seen += d.iter().filter(|&&b| b == b'\n').count();
                        }
                    }
                    _ => break,
                }
            }
            (seen, Instant::now())
        });
    }
    let start = Instant::now();
    let writes = Phase { op: "watch-writes".into(), concurrency: 16, total: events, limit };
    let out = run_phase(ep, &writes, creates(ep, NS_WATCH, "w-", w.payload_bytes)).await?;
    let write_seconds = start.elapsed().as_secs_f64();
    if out.stats.ok < events {
        return Err(BenchError::Setup(format!("only {} of {events} watch writes succeeded", out.stats.ok)));
    }
    let (mut complete, mut min_seen, mut last) = (0, usize::MAX, start);
    while let Some(r) = readers.join_next().await {
        let (seen, at) = r.map_err(|e| BenchError::Setup(format!("watcher failed: {e}")))?;
        min_seen = min_seen.min(seen);
        if seen >= events {
            complete += 1;
            last = last.max(at);
        }
    }
    Ok(WatchReport {
        watchers: w.watchers,
        events,
        write_seconds,
        all_delivered_seconds: last.duration_since(start).as_secs_f64(),
        complete_watchers: complete,
        min_events_received: if min_seen == usize::MAX { 0 } else { min_seen },
    })
}

async fn memory(opts: &Options, backend: Backend) -> Result<MemoryReport, BenchError> {
    let w = &opts.workload;
    let server = ServerProcess::spawn(&opts.server_exe, backend, opts.tmp_root.as_deref()).await?;
    let ep = server.endpoint()?;
    ensure_namespace(&ep, NS_MEM).await?;
    let before = server.memory()?;
    let fill = Phase {
        op: "fill".into(),
        concurrency: 64,
        total: w.memory_objects,
        limit: Duration::from_secs(w.memory_limit_secs),
    };
    let out = run_phase(&ep, &fill, creates(&ep, NS_MEM, "m-", w.payload_bytes)).await?;
    let after = server.memory()?;
    server.stop().await;
    if out.stats.timeouts > 0 {
        return Err(BenchError::Setup(format!(
            "the server stopped answering after {} objects (requests got no response within {REQUEST_TIMEOUT:?})",
            out.stats.ok
        )));
    }
    let json = out.response_bytes.max(1) as f64;
    Ok(MemoryReport {
        objects: out.stats.ok,
        create_ops_per_sec: out.stats.ops_per_sec,
        json_bytes: out.response_bytes,
        rss_before_bytes: before.rss_bytes,
        rss_after_bytes: after.rss_bytes,
        hwm_after_bytes: after.hwm_bytes,
        growth_ratio: after.rss_bytes.saturating_sub(before.rss_bytes) as f64 / json,
        rss_ratio: after.rss_bytes as f64 / json,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configmap_has_requested_size() {
        let b = configmap("bench", "c1-0000001", 500, 0);
        assert_eq!(b.len(), 500);
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["metadata"]["name"], "c1-0000001");
        let other = configmap("bench", "c1-0000001", 500, 3);
        assert_eq!(other.len(), 500);
        assert_ne!(b, other, "variants differ so updates change the object");
        // Too small a size still yields the bare, valid object.
        let small = configmap("bench", "x", 10, 0);
        assert!(serde_json::from_slice::<Value>(&small).is_ok());
    }

    #[test]
    fn escapes_query_values() {
        assert_eq!(query_escape("abc-_.~9"), "abc-_.~9");
        assert_eq!(query_escape("a+b/c=="), "a%2Bb%2Fc%3D%3D");
    }
}
