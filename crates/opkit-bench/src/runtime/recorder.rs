//! What the trivial reconciler records: for each benchmark object, when its first
//! reconcile ended (and, in the live scenario, when its create request was sent), counted
//! lock-free so the recording costs the same, and little, under either runtime.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::Notify;

use crate::stats::percentile;

/// The prefix of every benchmark object's name; the rest is its index.
pub const NAME_PREFIX: &str = "cm-";
/// The object the live scenario reconciles first, to know the watch is established.
pub const WARMUP_NAME: &str = "warmup";

/// The name of benchmark object `i`.
pub fn object_name(i: usize) -> String {
    format!("{NAME_PREFIX}{i:07}")
}

/// The index of a benchmark object's name (`None` for other objects).
pub fn object_index(name: &str) -> Option<usize> {
    name.strip_prefix(NAME_PREFIX)?.parse().ok()
}

/// Timestamps of `n` objects' first reconciles, as nanoseconds since the recorder's
/// origin plus one (zero: not yet).
pub struct Recorder {
    origin: Instant,
    done_ns: Vec<AtomicU64>,
    trigger_ns: Vec<AtomicU64>,
    distinct: AtomicUsize,
    calls: AtomicUsize,
    others: AtomicUsize,
    warm: AtomicBool,
    changed: Notify,
}

impl Recorder {
    /// A recorder for objects `0..n`, with its clock starting now.
    pub fn new(n: usize) -> Recorder {
        Recorder {
            origin: Instant::now(),
            done_ns: (0..n).map(|_| AtomicU64::new(0)).collect(),
            trigger_ns: (0..n).map(|_| AtomicU64::new(0)).collect(),
            distinct: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
            others: AtomicUsize::new(0),
            warm: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX - 1) + 1
    }

    /// Nanoseconds (plus one) since the origin, for [`Recorder::set_trigger_all`].
    pub fn stamp(&self) -> u64 {
        self.now_ns()
    }

    /// Records that object `i`'s triggering event (its create request) happens now.
    pub fn trigger(&self, i: usize) {
        if let Some(slot) = self.trigger_ns.get(i) {
            slot.store(self.now_ns(), Ordering::Relaxed);
        }
    }

    /// Sets every object's trigger to `stamp` (the controller start, for a backlog).
    pub fn set_trigger_all(&self, stamp: u64) {
        for slot in &self.trigger_ns {
            slot.store(stamp, Ordering::Relaxed);
        }
    }

    /// Called by the reconciler with the reconciled object's name.
    pub fn record(&self, name: &str) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let now = self.now_ns();
        match object_index(name).and_then(|i| self.done_ns.get(i)) {
            Some(slot) => {
                if slot.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
                    && self.distinct.fetch_add(1, Ordering::AcqRel) + 1 == self.done_ns.len()
                {
                    self.changed.notify_waiters();
                }
            }
            None if name == WARMUP_NAME => {
                self.warm.store(true, Ordering::Release);
                self.changed.notify_waiters();
            }
            None => {
                self.others.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Distinct benchmark objects reconciled so far.
    pub fn distinct(&self) -> usize {
        self.distinct.load(Ordering::Acquire)
    }

    /// Reconciler calls so far (all objects, repeats included).
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }

    async fn wait_until(&self, done: impl Fn(&Recorder) -> bool, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if done(self) {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return done(self);
            }
        }
    }

    /// Waits until every benchmark object was reconciled, up to `timeout`.
    pub async fn wait_all(&self, timeout: Duration) -> bool {
        self.wait_until(|r| r.distinct() >= r.done_ns.len(), timeout).await
    }

    /// Waits until the warm-up object was reconciled, up to `timeout`.
    pub async fn wait_warm(&self, timeout: Duration) -> bool {
        self.wait_until(|r| r.warm.load(Ordering::Acquire), timeout).await
    }

    /// The statistics of a run whose clock started at `start` (a [`Recorder::stamp`]).
    pub fn stats(&self, start: u64, timed_out: bool) -> RunStats {
        let mut micros = Vec::with_capacity(self.done_ns.len());
        let mut last = start;
        let mut first_trigger = u64::MAX;
        for (done, trig) in self.done_ns.iter().zip(&self.trigger_ns) {
            let (d, t) = (done.load(Ordering::Relaxed), trig.load(Ordering::Relaxed));
            if t != 0 {
                first_trigger = first_trigger.min(t);
            }
            if d == 0 || t == 0 {
                continue;
            }
            last = last.max(d);
            micros.push(d.saturating_sub(t) / 1000);
        }
        micros.sort_unstable();
        let begin = if first_trigger == u64::MAX { start } else { start.min(first_trigger) };
        let seconds = last.saturating_sub(begin) as f64 / 1e9;
        let ms = |v: Option<u64>| v.map(|u| u as f64 / 1000.0).unwrap_or(0.0);
        RunStats {
            objects: self.done_ns.len(),
            reconciled: micros.len(),
            reconcile_calls: self.calls(),
            other_calls: self.others.load(Ordering::Relaxed),
            seconds,
            per_sec: if seconds > 0.0 { micros.len() as f64 / seconds } else { 0.0 },
            p50_ms: ms(percentile(&micros, 50.0)),
            p99_ms: ms(percentile(&micros, 99.0)),
            max_ms: ms(micros.last().copied()),
            timed_out,
        }
    }
}

/// One measured run: how fast the objects got their first reconcile.
#[derive(Debug, Clone, Serialize)]
pub struct RunStats {
    /// Benchmark objects.
    pub objects: usize,
    /// Objects reconciled at least once (within the time limit).
    pub reconciled: usize,
    /// Reconciler calls on benchmark objects and others, repeats included.
    pub reconcile_calls: usize,
    /// Calls on objects that are not benchmark objects (e.g. the warm-up object).
    pub other_calls: usize,
    /// From the start (controller start, or first create sent) to the last first
    /// reconcile, in seconds.
    pub seconds: f64,
    /// Objects reconciled per second over `seconds`.
    pub per_sec: f64,
    /// Median latency from trigger to the end of the first reconcile, in ms.
    pub p50_ms: f64,
    /// 99th percentile of that latency, in ms.
    pub p99_ms: f64,
    /// The slowest, in ms.
    pub max_ms: f64,
    /// Whether the wait hit its time limit before every object was reconciled.
    pub timed_out: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(object_name(42), "cm-0000042");
        assert_eq!(object_index(&object_name(9_999)), Some(9_999));
        assert_eq!(object_index(WARMUP_NAME), None);
        assert_eq!(object_index("cm-x"), None);
    }

    #[tokio::test]
    async fn counts_first_reconciles_and_wakes_the_waiter() {
        let r = std::sync::Arc::new(Recorder::new(3));
        let start = r.stamp();
        r.set_trigger_all(start);
        let waiter = {
            let r = r.clone();
            tokio::spawn(async move { r.wait_all(Duration::from_secs(10)).await })
        };
        for name in [object_name(0), object_name(1), object_name(1), "kube-root-ca.crt".into(), object_name(2)] {
            r.record(&name);
        }
        assert!(waiter.await.expect("waiter"));
        let s = r.stats(start, false);
        assert_eq!((s.objects, s.reconciled, s.reconcile_calls, s.other_calls), (3, 3, 5, 1));
        assert!(s.p50_ms <= s.p99_ms && s.p99_ms <= s.max_ms);
        assert!(s.per_sec > 0.0);
    }

    #[tokio::test]
    async fn wait_times_out_when_incomplete() {
        let r = Recorder::new(2);
        r.record(&object_name(0));
        assert!(!r.wait_all(Duration::from_millis(1)).await);
        assert!(!r.wait_warm(Duration::from_millis(1)).await);
        r.record(WARMUP_NAME);
        assert!(r.wait_warm(Duration::from_millis(1)).await);
        let s = r.stats(r.stamp(), true);
        assert_eq!(s.reconciled, 0, "no triggers were set");
    }

    #[test]
    fn live_latency_is_from_each_trigger() {
        let r = Recorder::new(2);
        let start = r.stamp();
        r.trigger(0);
        r.record(&object_name(0));
        r.trigger(1);
        r.record(&object_name(1));
        let s = r.stats(start, false);
        assert_eq!(s.reconciled, 2);
        assert!(s.max_ms < 1000.0);
    }
}
