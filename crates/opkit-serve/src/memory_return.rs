//! Returning the memory of closed connections to the system. A connection's buffers (TLS,
//! HTTP, a watch's events in flight) are freed when it closes, but glibc's allocator keeps
//! freed pages that lie between live allocations, so a server that once held many
//! connections would keep their memory for good. After a burst of closes this asks the
//! allocator to give its free pages back (`malloc_trim`), as Go's scavenger does for
//! kube-apiserver.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long no connection may close before the free pages are returned: a burst of
/// closes is returned once.
const QUIET: Duration = Duration::from_secs(1);
/// The longest a close waits for its pages to be returned while others keep closing.
const MAX_DELAY: Duration = Duration::from_secs(10);

/// Returns freed memory after connections close, until `shutdown`; `closed` is notified
/// by each connection as it ends.
pub(crate) async fn return_freed_memory(closed: Arc<Notify>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = closed.notified() => {}
        }
        let latest = Instant::now() + MAX_DELAY;
        loop {
            let quiet_until = (Instant::now() + QUIET).min(latest);
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = closed.notified() => continue,
                () = tokio::time::sleep_until(quiet_until) => break,
            }
        }
        if tokio::task::spawn_blocking(trim).await.is_err() {
            return;
        }
    }
}

/// Gives the allocator's free pages back to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim takes no pointers; it walks glibc's own arenas under their locks
    // and may be called from any thread at any time.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators return free pages themselves.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
