//! Notices that the leader lease was released (holder cleared) or deleted, so a
//! waiting replica tries to acquire it at once instead of at its next retry tick.
//!
//! client-go only polls, so after a release a follower may wait a whole jittered retry
//! period (up to 2.2 × retryPeriod) before it takes over. Watching the one Lease object
//! removes that wait; polling stays the fallback, so a failing watch only costs speed.

use futures::{Stream, StreamExt, future};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

/// Yields once for every observation of lease `name` released (no holder) or deleted.
/// Watch errors are logged and retried with kube's default backoff; the stream never ends.
pub(super) fn lease_released(api: Api<Lease>, name: &str) -> impl Stream<Item = ()> + Send + 'static {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    watcher(api, config).default_backoff().filter_map(|event| {
        future::ready(match event {
            Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => is_released(&lease).then_some(()),
            Ok(watcher::Event::Delete(_)) => Some(()),
            Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
            Err(e) => {
                tracing::debug!(error = %e, "watching the leader lease failed; polling only until it recovers");
                None
            }
        })
    })
}

/// Whether nobody holds `lease`.
fn is_released(lease: &Lease) -> bool {
    lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()).is_none_or(str::is_empty)
}
