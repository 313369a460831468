//! [`AcceptBackoff`]: how long the accept loop pauses after `accept` fails for a reason that
//! is not the peer's fault (out of file descriptors, out of memory), so that it neither spins
//! nor stops serving.

use std::time::Duration;

/// Exponential back-off between failed `accept` calls: 5 ms, doubling up to 1 s, reset by
/// the next successful accept (the schedule hyper's and tokio's accept loops use).
#[derive(Debug, Clone)]
pub struct AcceptBackoff {
    next: Duration,
}

impl AcceptBackoff {
    /// The first pause.
    pub const MIN: Duration = Duration::from_millis(5);
    /// The longest pause.
    pub const MAX: Duration = Duration::from_secs(1);

    /// A back-off whose next pause is [`Self::MIN`].
    pub fn new() -> Self {
        AcceptBackoff { next: Self::MIN }
    }

    /// The pause to take after a failure; each call doubles the following one, up to [`Self::MAX`].
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        delay
    }

    /// Starts over at [`Self::MIN`] (after a successful accept).
    pub fn reset(&mut self) {
        self.next = Self::MIN;
    }
}

impl Default for AcceptBackoff {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether an `accept` error concerns only the connection being accepted (the peer reset or
/// aborted it before it was accepted), so the loop can go on at once.
pub(crate) fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset, Interrupted};
    matches!(e.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset | Interrupted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_five_milliseconds_to_one_second_and_resets() {
        let mut backoff = AcceptBackoff::new();
        let schedule: Vec<u64> = (0..11).map(|_| backoff.next_delay().as_millis() as u64).collect();
        assert_eq!(schedule, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), AcceptBackoff::MIN);
        assert_eq!(backoff.next_delay(), Duration::from_millis(10));
    }

    #[test]
    fn only_peer_errors_skip_the_pause() {
        let peer = std::io::Error::from(std::io::ErrorKind::ConnectionAborted);
        assert!(is_connection_error(&peer));
        let emfile = std::io::Error::from_raw_os_error(24); // EMFILE
        assert!(!is_connection_error(&emfile));
    }
}
