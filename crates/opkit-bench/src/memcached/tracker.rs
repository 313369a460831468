//! Which Memcached CRs are done: fed with what the bench's watch sees, it records, per
//! benchmark CR, when its `status.nodes` first listed `size` pod names, and the
//! statistics of those times.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::stats::percentile;

/// The prefix of every benchmark CR's name; the rest is its index.
pub const NAME_PREFIX: &str = "memcached-";

/// The name of benchmark CR `i`.
pub fn cr_name(i: usize) -> String {
    format!("{NAME_PREFIX}{i:05}")
}

/// The index of a benchmark CR's name (`None` for other names).
pub fn cr_index(name: &str) -> Option<usize> {
    name.strip_prefix(NAME_PREFIX)?.parse().ok()
}

/// Completion times of `crs` benchmark CRs, counted from an origin (the first create).
#[derive(Debug)]
pub struct Tracker {
    origin: Instant,
    size: usize,
    done: Vec<Option<Duration>>,
    count: usize,
    events: usize,
}

impl Tracker {
    /// A tracker for CRs `0..crs` that are done at `size` nodes, with its clock at `origin`.
    pub fn new(crs: usize, size: usize, origin: Instant) -> Tracker {
        Tracker { origin, size, done: vec![None; crs], count: 0, events: 0 }
    }

    /// Records an observed state of CR `name` at `at`; returns whether it just became done.
    pub fn observe(&mut self, name: &str, nodes: usize, at: Instant) -> bool {
        self.events += 1;
        let Some(slot) = cr_index(name).and_then(|i| self.done.get_mut(i)) else {
            return false;
        };
        if slot.is_some() || nodes != self.size {
            return false;
        }
        *slot = Some(at.saturating_duration_since(self.origin));
        self.count += 1;
        true
    }

    /// CRs done so far.
    pub fn done(&self) -> usize {
        self.count
    }

    /// Whether every CR is done.
    pub fn complete(&self) -> bool {
        self.count == self.done.len()
    }

    /// The statistics of the completion times so far.
    pub fn stats(&self) -> Completion {
        let mut ms: Vec<f64> = self.done.iter().flatten().map(|d| d.as_secs_f64() * 1000.0).collect();
        ms.sort_by(f64::total_cmp);
        let get = |p| percentile(&ms, p).unwrap_or(0.0) / 1000.0;
        Completion {
            crs: self.done.len(),
            done: self.count,
            watch_events: self.events,
            all_seconds: ms.last().copied().unwrap_or(0.0) / 1000.0,
            first_seconds: ms.first().copied().unwrap_or(0.0) / 1000.0,
            p50_seconds: get(50.0),
            p99_seconds: get(99.0),
        }
    }
}

/// When the CRs got their nodes, counted from the first create.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Completion {
    /// Benchmark CRs.
    pub crs: usize,
    /// CRs whose `status.nodes` reached `size` names.
    pub done: usize,
    /// Watch events seen on Memcached objects.
    pub watch_events: usize,
    /// Until the last CR was done, in seconds.
    pub all_seconds: f64,
    /// Until the first CR was done, in seconds.
    pub first_seconds: f64,
    /// Median time until a CR was done, in seconds.
    pub p50_seconds: f64,
    /// 99th percentile of that time, in seconds.
    pub p99_seconds: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(cr_name(7), "memcached-00007");
        assert_eq!(cr_index(&cr_name(99_999)), Some(99_999));
        assert_eq!(cr_index("memcached-x"), None);
        assert_eq!(cr_index("other"), None);
    }

    #[test]
    fn counts_each_cr_once_when_it_reaches_size() {
        let t0 = Instant::now();
        let mut t = Tracker::new(2, 3, t0);
        assert!(!t.observe(&cr_name(0), 2, t0 + Duration::from_millis(10)));
        assert!(t.observe(&cr_name(0), 3, t0 + Duration::from_millis(100)));
        assert!(!t.observe(&cr_name(0), 3, t0 + Duration::from_millis(500)), "already done");
        assert!(!t.observe(&cr_name(5), 3, t0), "not a benchmark CR index");
        assert!(!t.observe("someone-else", 3, t0));
        assert!(!t.complete());
        assert!(t.observe(&cr_name(1), 3, t0 + Duration::from_millis(300)));
        assert!(t.complete());
        let s = t.stats();
        assert_eq!((s.crs, s.done, s.watch_events), (2, 2, 6));
        assert!((s.all_seconds - 0.3).abs() < 1e-9 && (s.first_seconds - 0.1).abs() < 1e-9);
        assert!((s.p50_seconds - 0.1).abs() < 1e-9 && (s.p99_seconds - 0.3).abs() < 1e-9);
    }

    #[test]
    fn empty_stats_are_zero() {
        let s = Tracker::new(3, 1, Instant::now()).stats();
        assert_eq!((s.done, s.all_seconds, s.p99_seconds), (0, 0.0, 0.0));
    }
}
