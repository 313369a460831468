//! The closed-loop load generator: C workers, each with its own connection, take
//! operation indices from a shared counter until N operations were issued or the time
//! limit passed, recording each operation's latency.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use tokio::task::JoinSet;

use crate::BenchError;
use crate::client::{Conn, Endpoint, snippet};
use crate::stats::{PhaseSamples, PhaseStats};

/// Builds the request for operation number `i`.
pub type MakeRequest = Arc<dyn Fn(usize) -> Request<Full<Bytes>> + Send + Sync>;

/// One measured phase: `total` operations at `concurrency`, stopped at `limit`.
#[derive(Debug, Clone)]
pub struct Phase {
    /// Operation name for the report.
    pub op: String,
    /// Number of workers, each with one connection.
    pub concurrency: usize,
    /// Operations to issue.
    pub total: usize,
    /// Wall-time limit; no new operation starts after it.
    pub limit: Duration,
}

/// The result of a phase: its statistics and the summed size of successful responses.
#[derive(Debug, Clone)]
pub struct PhaseOutcome {
    /// Throughput and latency.
    pub stats: PhaseStats,
    /// Bytes of successful response bodies.
    pub response_bytes: u64,
}

struct WorkerResult {
    micros: Vec<u64>,
    errors: usize,
    timeouts: usize,
    first_error: Option<String>,
    bytes: u64,
}

/// Runs `phase` against `ep`; connections are opened before the clock starts.
pub async fn run_phase(ep: &Endpoint, phase: &Phase, make: MakeRequest) -> Result<PhaseOutcome, BenchError> {
    let c = phase.concurrency.max(1);
    let mut conns = Vec::with_capacity(c);
    for _ in 0..c {
        conns.push(ep.connect().await?);
    }
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let deadline = start + phase.limit;
    let mut set = JoinSet::new();
    for conn in conns {
        let worker = Worker { ep: ep.clone(), make: make.clone(), next: next.clone(), total: phase.total, deadline };
        set.spawn(worker.run(conn, phase.total / c + 1));
    }
    let mut all = Vec::with_capacity(phase.total);
    let (mut errors, mut timeouts, mut first_error, mut bytes) = (0, 0, None, 0);
    while let Some(r) = set.join_next().await {
        let r = r.map_err(|e| BenchError::Setup(format!("load worker failed: {e}")))?;
        all.extend(r.micros);
        errors += r.errors;
        timeouts += r.timeouts;
        bytes += r.bytes;
        if first_error.is_none() {
            first_error = r.first_error;
        }
    }
    let elapsed = start.elapsed();
    let time_limited = all.len() + errors < phase.total;
    let mut stats = PhaseStats::from_samples(PhaseSamples {
        op: &phase.op,
        concurrency: c,
        micros: all,
        errors,
        first_error,
        elapsed,
        time_limited,
    });
    stats.timeouts = timeouts;
    Ok(PhaseOutcome { stats, response_bytes: bytes })
}

/// One connection's share of a phase: takes the next request number until the phase's
/// count or time limit is reached.
struct Worker {
    /// The server, for reconnecting.
    ep: Endpoint,
    /// Builds request number `i`.
    make: MakeRequest,
    /// The next request number, shared by the phase's workers.
    next: Arc<AtomicUsize>,
    /// Requests in the phase.
    total: usize,
    /// When the phase stops.
    deadline: Instant,
}

impl Worker {
    /// Sends requests on `conn` (reconnecting after a time-out or a closed connection)
    /// and records each one's latency or failure.
    async fn run(self, mut conn: Conn, capacity: usize) -> WorkerResult {
        let mut r =
            WorkerResult { micros: Vec::with_capacity(capacity), errors: 0, timeouts: 0, first_error: None, bytes: 0 };
        loop {
            if Instant::now() >= self.deadline {
                break;
            }
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.total {
                break;
            }
            let req = (self.make)(i);
            let t0 = Instant::now();
            let res = conn.send(req).await;
            let took = t0.elapsed();
            match res {
                Ok((status, body)) if status.is_success() => {
                    r.micros.push(took.as_micros() as u64);
                    r.bytes += body.len() as u64;
                }
                Ok((status, body)) => {
                    r.errors += 1;
                    r.first_error.get_or_insert_with(|| format!("HTTP {}: {}", status.as_u16(), snippet(&body)));
                }
                Err(e) => {
                    r.errors += 1;
                    let timed_out = matches!(e, BenchError::Timeout(_));
                    if timed_out {
                        r.timeouts += 1;
                    }
                    r.first_error.get_or_insert_with(|| e.to_string());
                    if timed_out || conn.is_closed() {
                        match self.ep.connect().await {
                            Ok(c) => conn = c,
                            Err(_) => break,
                        }
                    }
                }
            }
        }
        r
    }
}
