//! The work queue, with client-go's semantics: an item is queued at most once, is never
//! handed to two workers at once (re-adds while it is processed wait until it is done),
//! and can be delayed or rate limited. Updates the workqueue_* metrics.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::ratelimit::RateLimiter;
use crate::metrics::ControllerMetrics;

struct State<T> {
    queue: VecDeque<T>,
    dirty: HashSet<T>,
    processing: HashMap<T, Instant>,
    added_at: HashMap<T, Instant>,
    delayed: BinaryHeap<Reverse<(Instant, u64, T)>>,
    waiting_until: HashMap<T, Instant>,
    seq: u64,
    shutting_down: bool,
}

/// A deduplicating, delaying, rate-limited work queue.
pub struct WorkQueue<T> {
    state: Mutex<State<T>>,
    notify: Notify,
    limiter: Mutex<RateLimiter<T>>,
    metrics: Option<ControllerMetrics>,
}

impl<T: Clone + Eq + Hash + Ord + Send + 'static> WorkQueue<T> {
    /// An empty queue.
    pub fn new(limiter: RateLimiter<T>, metrics: Option<ControllerMetrics>) -> Arc<Self> {
        Arc::new(WorkQueue {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashMap::new(),
                added_at: HashMap::new(),
                delayed: BinaryHeap::new(),
                waiting_until: HashMap::new(),
                seq: 0,
                shutting_down: false,
            }),
            notify: Notify::new(),
            limiter: Mutex::new(limiter),
            metrics,
        })
    }

    fn add_locked(&self, st: &mut State<T>, item: T) {
        if st.shutting_down || st.dirty.contains(&item) {
            return;
        }
        if let Some(m) = &self.metrics {
            m.queue_add();
        }
        st.dirty.insert(item.clone());
        st.added_at.entry(item.clone()).or_insert_with(Instant::now);
        if !st.processing.contains_key(&item) {
            st.queue.push_back(item);
            if let Some(m) = &self.metrics {
                m.queue_depth(st.queue.len() as i64);
            }
            self.notify.notify_one();
        }
    }

    /// Adds an item now.
    pub fn add(&self, item: T) {
        let mut st = self.state.lock();
        self.add_locked(&mut st, item);
    }

    /// Adds an item after `delay` (the earliest of several pending delays wins).
    pub fn add_after(&self, item: T, delay: Duration) {
        if delay.is_zero() {
            return self.add(item);
        }
        let mut st = self.state.lock();
        if st.shutting_down {
            return;
        }
        let at = Instant::now() + delay;
        if st.waiting_until.get(&item).is_some_and(|t| *t <= at) {
            return;
        }
        st.waiting_until.insert(item.clone(), at);
        st.seq += 1;
        let seq = st.seq;
        st.delayed.push(Reverse((at, seq, item)));
        drop(st);
        // Wake a waiter so it recomputes its deadline.
        self.notify.notify_one();
    }

    /// Adds an item after the rate limiter's delay for it (a retry); returns that delay.
    pub fn add_rate_limited(&self, item: T) -> Duration {
        let delay = self.limiter.lock().when(&item);
        if let Some(m) = &self.metrics {
            m.queue_retry();
        }
        self.add_after(item, delay);
        delay
    }

    /// Clears the rate limiter's memory of an item (after success).
    pub fn forget(&self, item: &T) {
        self.limiter.lock().forget(item);
    }

    /// How many times the item has been retried.
    pub fn retries(&self, item: &T) -> u32 {
        self.limiter.lock().retries(item)
    }

    fn promote_due(st: &mut State<T>, now: Instant) -> Vec<T> {
        let mut due = Vec::new();
        while let Some(Reverse((at, _, _))) = st.delayed.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((at, _, item))) = st.delayed.pop() else { break };
            if st.waiting_until.get(&item) == Some(&at) {
                st.waiting_until.remove(&item);
                due.push(item);
            }
        }
        due
    }

    /// Takes the next item, waiting for one. `None` once shut down and drained.
    pub async fn get(&self) -> Option<T> {
        loop {
            let notified = self.notify.notified();
            let next_deadline = {
                let mut st = self.state.lock();
                for item in Self::promote_due(&mut st, Instant::now()) {
                    self.add_locked(&mut st, item);
                }
                if let Some(item) = st.queue.pop_front() {
                    st.dirty.remove(&item);
                    st.processing.insert(item.clone(), Instant::now());
                    if let Some(m) = &self.metrics {
                        m.queue_depth(st.queue.len() as i64);
                        if let Some(at) = st.added_at.remove(&item) {
                            m.queue_latency(at.elapsed());
                        }
                    }
                    if !st.queue.is_empty() {
                        self.notify.notify_one();
                    }
                    return Some(item);
                }
                if st.shutting_down {
                    return None;
                }
                st.delayed.peek().map(|Reverse((at, _, _))| *at)
            };
            match next_deadline {
                Some(at) => {
                    let _ = tokio::time::timeout_at(tokio::time::Instant::from_std(at), notified).await;
                }
                None => notified.await,
            }
        }
    }

    /// Marks an item finished; if it was re-added meanwhile it is queued again.
    pub fn done(&self, item: &T) {
        let mut st = self.state.lock();
        if let Some(started) = st.processing.remove(item)
            && let Some(m) = &self.metrics
        {
            m.work_duration(started.elapsed());
        }
        if st.dirty.contains(item) {
            st.queue.push_back(item.clone());
            if let Some(m) = &self.metrics {
                m.queue_depth(st.queue.len() as i64);
            }
            self.notify.notify_one();
        }
    }

    /// Stops accepting items and drops queued ones; `get` returns `None` from now on.
    /// Items being processed finish normally.
    pub fn shutdown(&self) {
        let mut st = self.state.lock();
        st.shutting_down = true;
        st.queue.clear();
        st.dirty.clear();
        st.delayed.clear();
        st.waiting_until.clear();
        drop(st);
        self.notify.notify_waiters();
    }

    /// Items queued now (not counting delayed or in-flight ones).
    pub fn len(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q() -> Arc<WorkQueue<&'static str>> {
        WorkQueue::new(RateLimiter::default(), None)
    }

    #[tokio::test]
    async fn dedupes_and_never_hands_out_an_item_twice() {
        let q = q();
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
        let a = q.get().await.expect("a");
        assert_eq!(a, "a");
        q.add("a"); // re-added while processing: held back
        assert_eq!(q.get().await, Some("b"));
        assert!(q.is_empty());
        q.done(&"a"); // now it comes back
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        q.done(&"b");
        q.shutdown();
        assert_eq!(q.get().await, None);
    }

    // Real (short) delays: tokio's paused clock needs its `test-util` feature, and a
    // dev-dependency feature on tokio made `cargo test` rebuild everything above tokio
    // after `cargo build`.
    #[tokio::test]
    async fn delays_fire_in_order() {
        let q = q();
        q.add_after("late", Duration::from_millis(300));
        q.add_after("soon", Duration::from_millis(30));
        assert_eq!(q.get().await, Some("soon"));
        assert_eq!(q.get().await, Some("late"));
    }
}
