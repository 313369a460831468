//! CrashLoopBackOff: how long a real container waits before it is restarted, as the
//! kubelet's back-off does it — the first restart at once, then the base (10 s) doubling
//! per restart up to 30 times the base (5 min), back to the start once an instance ran
//! for twice that (10 min).

use std::time::Duration;

/// The kubelet's initial crash-loop back-off.
pub const DEFAULT_BASE: Duration = Duration::from_secs(10);

/// One container's restart back-off.
#[derive(Debug, Clone)]
pub(crate) struct RestartBackoff {
    base: Duration,
    /// The back-off given last (`None`: the next restart is immediate).
    current: Option<Duration>,
}

impl RestartBackoff {
    /// A back-off starting at `base`.
    pub(crate) fn new(base: Duration) -> RestartBackoff {
        RestartBackoff { base, current: None }
    }

    /// The longest back-off.
    pub(crate) fn max(&self) -> Duration {
        self.base.saturating_mul(30)
    }

    /// The wait before restarting an instance that ran for `ran`: none after the first
    /// exit (or a long enough run), then the base, then double the previous one (capped).
    pub(crate) fn next(&mut self, ran: Duration) -> Duration {
        if ran >= self.max().saturating_mul(2) {
            self.current = None;
        }
        let (wait, next) = match self.current {
            None => (Duration::ZERO, self.base),
            Some(d) => (d, d.saturating_mul(2).min(self.max())),
        };
        self.current = Some(next);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_and_resets_after_a_long_run() {
        let mut b = RestartBackoff::new(DEFAULT_BASE);
        let short = Duration::from_secs(1);
        let got: Vec<u64> = (0..7).map(|_| b.next(short).as_secs()).collect();
        assert_eq!(got, [0, 10, 20, 40, 80, 160, 300]);
        assert_eq!(b.next(short).as_secs(), 300);
        assert_eq!(b.next(Duration::from_secs(600)).as_secs(), 0);
    }
}
