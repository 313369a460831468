//! Latency statistics computed from raw samples: nearest-rank percentiles, medians and
//! the per-phase summary (throughput, p50, p99) the report prints.

use std::time::Duration;

use serde::Serialize;

/// The nearest-rank percentile `p` (0–100) of `sorted`, which must be sorted ascending.
/// Returns `None` for an empty slice.
///
/// Nearest rank: the smallest sample such that at least `p`% of the samples are ≤ it.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let p = p.clamp(0.0, 100.0);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let idx = rank.saturating_sub(1).min(sorted.len() - 1);
    Some(sorted[idx])
}

/// The median of `samples` (sorts a copy; the lower middle for an even count).
pub fn median(samples: &[Duration]) -> Option<Duration> {
    let mut v = samples.to_vec();
    v.sort_unstable();
    percentile(&v, 50.0)
}

/// What one measured phase (N operations at concurrency C) achieved.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseStats {
    /// Operation name: `create`, `get`, `update`, `put`.
    pub op: String,
    /// Concurrent in-flight requests (one connection each).
    pub concurrency: usize,
    /// Operations that succeeded.
    pub ok: usize,
    /// Operations that failed (non-2xx status or transport error).
    pub errors: usize,
    /// Of the errors, requests that got no response in time (a stalled server).
    pub timeouts: usize,
    /// The first failure seen, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Wall time of the phase in seconds.
    pub seconds: f64,
    /// Successful operations per second.
    pub ops_per_sec: f64,
    /// Median latency in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile latency in milliseconds.
    pub p99_ms: f64,
    /// Slowest operation in milliseconds.
    pub max_ms: f64,
    /// Whether the phase stopped at its time limit before finishing its count.
    pub time_limited: bool,
}

/// What one phase recorded, as [`PhaseStats::from_samples`] summarises it.
#[derive(Debug, Clone)]
pub struct PhaseSamples<'a> {
    /// The operation measured.
    pub op: &'a str,
    /// Concurrent workers.
    pub concurrency: usize,
    /// Latencies of the successful operations in microseconds (any order).
    pub micros: Vec<u64>,
    /// Failed operations.
    pub errors: usize,
    /// The first failure seen, if any.
    pub first_error: Option<String>,
    /// Wall time of the phase.
    pub elapsed: Duration,
    /// Whether the phase stopped at its time limit before finishing its count.
    pub time_limited: bool,
}

impl PhaseStats {
    /// Builds the summary from one phase's samples.
    pub fn from_samples(samples: PhaseSamples<'_>) -> PhaseStats {
        let PhaseSamples { op, concurrency, mut micros, errors, first_error, elapsed, time_limited } = samples;
        micros.sort_unstable();
        let ms = |v: Option<u64>| v.map(|u| u as f64 / 1000.0).unwrap_or(0.0);
        let secs = elapsed.as_secs_f64();
        PhaseStats {
            op: op.to_string(),
            concurrency,
            ok: micros.len(),
            errors,
            timeouts: 0,
            first_error,
            seconds: secs,
            ops_per_sec: if secs > 0.0 { micros.len() as f64 / secs } else { 0.0 },
            p50_ms: ms(percentile(&micros, 50.0)),
            p99_ms: ms(percentile(&micros, 99.0)),
            max_ms: ms(micros.last().copied()),
            time_limited,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&v, 0.0), Some(1));
        let w = [10u64, 20, 30, 40, 50];
        assert_eq!(percentile(&w, 50.0), Some(30));
        assert_eq!(percentile(&w, 99.0), Some(50));
        assert_eq!(percentile(&w, 20.0), Some(10));
        assert_eq!(percentile(&w, 21.0), Some(20));
    }

    #[test]
    fn percentile_edges() {
        assert_eq!(percentile::<u64>(&[], 50.0), None);
        assert_eq!(percentile(&[7u64], 99.0), Some(7));
        assert_eq!(percentile(&[1u64, 2], 150.0), Some(2));
        assert_eq!(percentile(&[1u64, 2], -3.0), Some(1));
    }

    #[test]
    fn median_of_unsorted() {
        let d = |ms| Duration::from_millis(ms);
        assert_eq!(median(&[d(5), d(1), d(3)]), Some(d(3)));
        assert_eq!(median(&[d(4), d(2)]), Some(d(2)));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn phase_stats_summary() {
        let micros: Vec<u64> = (1..=1000).rev().map(|i| i * 10).collect();
        let s = PhaseStats::from_samples(PhaseSamples {
            op: "get",
            concurrency: 4,
            micros,
            errors: 2,
            first_error: Some("boom".into()),
            elapsed: Duration::from_secs(2),
            time_limited: false,
        });
        assert_eq!(s.ok, 1000);
        assert_eq!(s.errors, 2);
        assert!((s.ops_per_sec - 500.0).abs() < 1e-9);
        assert!((s.p50_ms - 5.0).abs() < 1e-9);
        assert!((s.p99_ms - 9.9).abs() < 1e-9);
        assert!((s.max_ms - 10.0).abs() < 1e-9);
    }
}
