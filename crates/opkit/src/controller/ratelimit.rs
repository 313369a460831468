//! Per-item exponential backoff for retries (client-go's
//! ItemExponentialFailureRateLimiter): 5 ms, 10 ms, 20 ms … capped at 1000 s by default.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

/// Computes retry delays per item.
#[derive(Debug, Clone)]
pub struct RateLimiter<T> {
    base: Duration,
    max: Duration,
    failures: HashMap<T, u32>,
}

impl<T> Default for RateLimiter<T> {
    fn default() -> Self {
        RateLimiter::exponential(Duration::from_millis(5), Duration::from_secs(1000))
    }
}

impl<T> RateLimiter<T> {
    /// Doubles from `base` up to `max` with each consecutive failure of an item.
    pub fn exponential(base: Duration, max: Duration) -> Self {
        RateLimiter { base, max, failures: HashMap::new() }
    }
}

impl<T: Clone + Eq + Hash> RateLimiter<T> {
    /// The delay before the next retry of `item`; counts a failure.
    pub fn when(&mut self, item: &T) -> Duration {
        let n = self.failures.entry(item.clone()).or_insert(0);
        let exp = (*n).min(60);
        *n = n.saturating_add(1);
        let nanos = self.base.as_nanos().saturating_mul(1u128 << exp).min(self.max.as_nanos());
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
    /// Forgets an item's failures.
    pub fn forget(&mut self, item: &T) {
        self.failures.remove(item);
    }
    /// Failures recorded for an item.
    pub fn retries(&self, item: &T) -> u32 {
        self.failures.get(item).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_and_caps() {
        let mut r = RateLimiter::default();
        let d: Vec<u128> = (0..4).map(|_| r.when(&"x").as_millis()).collect();
        assert_eq!(d, [5, 10, 20, 40]);
        for _ in 0..60 {
            r.when(&"x");
        }
        assert_eq!(r.when(&"x"), Duration::from_secs(1000));
        assert_eq!(r.when(&"y"), Duration::from_millis(5));
        r.forget(&"x");
        assert_eq!(r.retries(&"x"), 0);
        assert_eq!(r.when(&"x"), Duration::from_millis(5));
    }
}
