//! Lease renewal while many clients list by label: the server holds many ConfigMaps
//! carrying one of a few values of a `group` label; clients list them by that label in a
//! loop while one client renews a Lease every ~150 ms, as a leader-elected controller
//! does (GET, then PUT with the new `renewTime`). A renewal that waits for the lists
//! misses leader election's deadline. Afterwards, watches from resourceVersion 0 over the
//! same objects are opened and never read, and the server's resident memory is sampled.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::BenchError;
use crate::client::query_escape;
use crate::client::{Conn, Endpoint, REQUEST_TIMEOUT, call, open_stream, snippet};
use crate::config::{Options, progress};
use crate::fixtures::{cm_path, ensure_namespace, labelled_configmap};
use crate::load::{MakeRequest, Phase, run_phase};
use crate::report::{IdleWatchReport, LabelListReport};
use crate::serve::{Backend, ServerProcess};
use crate::stats::{PhaseSamples, PhaseStats};

const NS_LABELS: &str = "bench-labels";
const NS_LEASE: &str = "bench-lease";
const LEASE: &str = "bench-leader";
/// The label the listed ConfigMaps carry, and its values `g0`, `g1`, ...
const GROUP_LABEL: &str = "bench.opkit.dev/group";
/// How long the idle watches' memory is sampled, and how often.
const IDLE_WATCH_SAMPLING: Duration = Duration::from_secs(3);
const IDLE_WATCH_SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Creates the objects, runs the listers and the renewals, then the idle watches.
pub async fn lease_under_label_lists(
    opts: &Options,
    server: &ServerProcess,
    ep: &Endpoint,
    backend: Backend,
) -> Result<LabelListReport, BenchError> {
    let w = &opts.workload;
    let objects = w.label_list_objects;
    let values = w.label_values.max(1);
    progress(opts, &format!("{backend}: {objects} ConfigMaps with {values} label values"));
    let path = fill_labelled_configmaps(opts, ep).await?;
    let lease_path = format!("/apis/coordination.k8s.io/v1/namespaces/{NS_LEASE}/leases");
    call(ep, Method::POST, &lease_path, lease_body(None)?).await?;

    progress(
        opts,
        &format!("{backend}: Lease renewals while {} clients list {objects} objects by label", w.label_listers),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicUsize::new(0));
    let mut listers = JoinSet::new();
    for i in 0..w.label_listers {
        let conn = ep.connect().await?;
        let selector = query_escape(&format!("{GROUP_LABEL}=g{}", i % values));
        let lister = Lister {
            ep: ep.clone(),
            list_path: format!("{path}?labelSelector={selector}"),
            stop: stop.clone(),
            started: started.clone(),
        };
        listers.spawn(lister.run(conn));
    }
    wait_for_first_lists(&started, w.label_listers).await;
    let measure_from = Instant::now();
    let renewals = renewals_on_own_thread(ep, lease_path, w.lease_renew_every_ms, w.lease_renew_secs).await;
    stop.store(true, Ordering::Relaxed);
    let all = join_listers(listers).await?;
    let items_per_list = serde_json::from_slice::<Value>(&all.last_body)
        .ok()
        .and_then(|v| v["items"].as_array().map(Vec::len))
        .unwrap_or(0);
    let lists = PhaseStats::from_samples(PhaseSamples {
        op: "list by label",
        concurrency: w.label_listers,
        micros: all.micros,
        errors: all.errors,
        first_error: all.first_error,
        elapsed: measure_from.elapsed(),
        time_limited: false,
    });

    progress(opts, &format!("{backend}: {} unread watches from resourceVersion 0", w.idle_watches));
    let idle_watches = idle_watches(server, ep, &path, w.idle_watches).await?;
    Ok(LabelListReport {
        objects,
        label_values: values,
        listers: w.label_listers,
        items_per_list,
        renew_every_ms: w.lease_renew_every_ms,
        renewals: renewals?,
        lists,
        idle_watches,
    })
}

/// Creates the namespaces and the labelled ConfigMaps; returns the ConfigMaps' path.
async fn fill_labelled_configmaps(opts: &Options, ep: &Endpoint) -> Result<String, BenchError> {
    let w = &opts.workload;
    let objects = w.label_list_objects;
    let values = w.label_values.max(1);
    for ns in [NS_LABELS, NS_LEASE] {
        ensure_namespace(ep, ns).await?;
    }
    let path = cm_path(NS_LABELS);
    let (ep2, size, path2) = (ep.clone(), w.payload_bytes, path.clone());
    let make: MakeRequest = Arc::new(move |i| {
        let labels = json!({ GROUP_LABEL: format!("g{}", i % values) });
        ep2.request(Method::POST, &path2, labelled_configmap(NS_LABELS, &format!("g-{i:07}"), size, 0, labels))
    });
    let fill = Phase {
        op: "fill".into(),
        concurrency: 64,
        total: objects,
        limit: Duration::from_secs(w.memory_limit_secs.max(w.phase_limit_secs * 4)),
    };
    let filled = run_phase(ep, &fill, make).await?;
    if filled.stats.ok < objects {
        return Err(BenchError::Setup(format!(
            "only {} of {objects} ConfigMaps were created ({:?})",
            filled.stats.ok, filled.stats.first_error
        )));
    }
    Ok(path)
}

/// One client listing by label in a loop until told to stop.
struct Lister {
    /// The server.
    ep: Endpoint,
    /// The list request's path with its label selector.
    list_path: String,
    /// Set when the renewals are done.
    stop: Arc<AtomicBool>,
    /// Counts listers that finished their first list.
    started: Arc<AtomicUsize>,
}

impl Lister {
    /// Lists until stopped, reconnecting after a failed request.
    async fn run(self, mut conn: Conn) -> ListerResult {
        let mut lists = ListerResult::default();
        let mut first = true;
        while !self.stop.load(Ordering::Relaxed) {
            let t0 = Instant::now();
            match conn.send(self.ep.request(Method::GET, &self.list_path, Bytes::new())).await {
                Ok((status, body)) if status.is_success() => {
                    lists.micros.push(t0.elapsed().as_micros() as u64);
                    lists.last_body = body;
                }
                Ok((status, body)) => lists.fail(format!("HTTP {}: {}", status.as_u16(), snippet(&body))),
                Err(e) => {
                    lists.fail(e.to_string());
                    match self.ep.connect().await {
                        Ok(c) => conn = c,
                        Err(_) => break,
                    }
                }
            }
            if std::mem::take(&mut first) {
                self.started.fetch_add(1, Ordering::Relaxed);
            }
        }
        lists
    }
}

/// Renewals are measured once every lister has finished its first list, so the load is
/// in its steady state; waits for that, bounded.
async fn wait_for_first_lists(started: &AtomicUsize, listers: usize) {
    let ramp_deadline = Instant::now() + REQUEST_TIMEOUT * 3;
    while started.load(Ordering::Relaxed) < listers && Instant::now() < ramp_deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Renews the Lease for `secs` seconds on a thread and runtime of its own, so the
/// renewals measure the server, not this process's workers busy reading the lists.
async fn renewals_on_own_thread(
    ep: &Endpoint,
    lease_path: String,
    every_ms: u64,
    secs: u64,
) -> Result<PhaseStats, BenchError> {
    let ep2 = ep.clone();
    tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(renew_lease(&ep2, &lease_path, every_ms, Duration::from_secs(secs)))
    })
    .await
    .map_err(|e| BenchError::Setup(format!("Lease renewals failed: {e}")))
    .and_then(|r| r)
}

/// Waits for every lister and merges their results.
async fn join_listers(mut listers: JoinSet<ListerResult>) -> Result<ListerResult, BenchError> {
    let mut all = ListerResult::default();
    while let Some(r) = listers.join_next().await {
        let r = r.map_err(|e| BenchError::Setup(format!("lister failed: {e}")))?;
        all.micros.extend(r.micros);
        all.errors += r.errors;
        if all.first_error.is_none() {
            all.first_error = r.first_error;
        }
        if !r.last_body.is_empty() {
            all.last_body = r.last_body;
        }
    }
    Ok(all)
}

#[derive(Default)]
struct ListerResult {
    micros: Vec<u64>,
    errors: usize,
    first_error: Option<String>,
    last_body: Bytes,
}

impl ListerResult {
    fn fail(&mut self, why: String) {
        self.errors += 1;
        self.first_error.get_or_insert(why);
    }
}

/// A Lease held by the bench, renewed now; with the resourceVersion it replaces.
fn lease_body(resource_version: Option<String>) -> Result<Bytes, BenchError> {
    let now = MicroTime(Timestamp::now());
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(LEASE.into()),
            namespace: Some(NS_LEASE.into()),
            resource_version,
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("opkit-bench".into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..Default::default()
        }),
    };
    let mut v = serde_json::to_value(&lease).map_err(|e| BenchError::Setup(format!("Lease: {e}")))?;
    v["apiVersion"] = json!("coordination.k8s.io/v1");
    v["kind"] = json!("Lease");
    Ok(Bytes::from(v.to_string()))
}

/// Renews the Lease every `every_ms` for `duration`, as client-go's leader election does
/// (GET, then PUT with a new renewTime); each renewal's latency is the GET and the PUT.
async fn renew_lease(ep: &Endpoint, leases: &str, every_ms: u64, duration: Duration) -> Result<PhaseStats, BenchError> {
    let mut conn = ep.connect().await?;
    let path = format!("{leases}/{LEASE}");
    let mut tick = tokio::time::interval(Duration::from_millis(every_ms.max(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut micros, mut errors, mut first_error) = (Vec::new(), 0, None::<String>);
    let start = Instant::now();
    while start.elapsed() < duration {
        tick.tick().await;
        let t0 = Instant::now();
        let renewed = async {
            let (status, body) = conn.send(ep.request(Method::GET, &path, Bytes::new())).await?;
            if !status.is_success() {
                return Err(BenchError::Status {
                    what: format!("GET {path}"),
                    status: status.as_u16(),
                    body: snippet(&body),
                });
            }
            let current: Value = serde_json::from_slice(&body).map_err(|e| BenchError::Setup(format!("Lease: {e}")))?;
            let rv = current["metadata"]["resourceVersion"].as_str().map(str::to_string);
            let (status, body) = conn.send(ep.request(Method::PUT, &path, lease_body(rv)?)).await?;
            if !status.is_success() {
                return Err(BenchError::Status {
                    what: format!("PUT {path}"),
                    status: status.as_u16(),
                    body: snippet(&body),
                });
            }
            Ok(())
        };
        match renewed.await {
            Ok(()) => micros.push(t0.elapsed().as_micros() as u64),
            Err(e) => {
                errors += 1;
                first_error.get_or_insert_with(|| e.to_string());
                if conn.is_closed() || matches!(e, BenchError::Timeout(_)) {
                    conn = ep.connect().await?;
                }
            }
        }
    }
    Ok(PhaseStats::from_samples(PhaseSamples {
        op: "lease renew",
        concurrency: 1,
        micros,
        errors,
        first_error,
        elapsed: start.elapsed(),
        time_limited: false,
    }))
}

/// Opens `n` watches from resourceVersion 0 on `path` and never reads them; samples the
/// server's VmRSS while they are open.
async fn idle_watches(
    server: &ServerProcess,
    ep: &Endpoint,
    path: &str,
    n: usize,
) -> Result<Option<IdleWatchReport>, BenchError> {
    if n == 0 {
        return Ok(None);
    }
    let before = server.memory()?;
    let watch_path = format!("{path}?watch=true&resourceVersion=0");
    let mut open = Vec::with_capacity(n);
    let mut peak = before.rss_bytes;
    for _ in 0..n {
        open.push(open_stream(ep, &watch_path).await?);
        peak = peak.max(server.memory()?.rss_bytes);
    }
    let until = Instant::now() + IDLE_WATCH_SAMPLING;
    while Instant::now() < until {
        tokio::time::sleep(IDLE_WATCH_SAMPLE_EVERY).await;
        peak = peak.max(server.memory()?.rss_bytes);
    }
    drop(open);
    Ok(Some(IdleWatchReport { watches: n, rss_before_bytes: before.rss_bytes, rss_peak_bytes: peak }))
}
