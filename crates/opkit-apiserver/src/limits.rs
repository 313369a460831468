//! The API server's serving limits, as kube-apiserver has them: the max-in-flight filter
//! (`--max-requests-inflight` 400 read-only and `--max-mutating-requests-inflight` 200
//! mutating requests served at once; more get 429 with `Retry-After`), the time a client
//! may take to send a request body (`--request-timeout`, 1 minute), and the cap on open
//! connections, derived from the process's file-descriptor limit so that running out of
//! descriptors leaves room for the store's files and for the connections already open.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::auth::user::UserInfo;
use crate::error::ApiError;

/// kube-apiserver's default `--max-requests-inflight`.
pub const DEFAULT_MAX_REQUESTS_INFLIGHT: usize = 400;
/// kube-apiserver's default `--max-mutating-requests-inflight`.
pub const DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT: usize = 200;
/// kube-apiserver's default `--request-timeout`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// File descriptors kept free of client connections: the store, its log and certificates.
const RESERVED_DESCRIPTORS: u64 = 64;

/// How much the server serves at once. `0` means no limit, as for kube's flags.
#[derive(Debug, Clone)]
pub struct ServingLimits {
    /// Read-only requests (get, list) served at once.
    pub max_requests_inflight: usize,
    /// Mutating requests (create, update, patch, delete, …) served at once.
    pub max_mutating_requests_inflight: usize,
    /// How long a client may take to send a request body; a slower one gets 504.
    pub request_timeout: Duration,
    /// Open connections at most (None: the file-descriptor limit less a reserve).
    pub max_connections: Option<usize>,
}

impl Default for ServingLimits {
    fn default() -> Self {
        ServingLimits {
            max_requests_inflight: DEFAULT_MAX_REQUESTS_INFLIGHT,
            max_mutating_requests_inflight: DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_connections: None,
        }
    }
}

impl ServingLimits {
    /// The connection cap: the configured one, or the soft file-descriptor limit less a
    /// reserve (None when the limit is unknown or unlimited).
    pub fn connection_cap(&self) -> Option<usize> {
        self.max_connections.or_else(|| {
            let limit = descriptor_limit()?;
            usize::try_from(limit.saturating_sub(RESERVED_DESCRIPTORS).max(16)).ok()
        })
    }
}

/// The soft `RLIMIT_NOFILE` of this process, if it is finite.
#[cfg(unix)]
fn descriptor_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

#[cfg(not(unix))]
fn descriptor_limit() -> Option<u64> {
    None
}

/// The max-in-flight filter's two pools of request slots.
pub(crate) struct InFlight {
    read_only: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
}

impl InFlight {
    /// Pools sized by `limits` (no pool for a limit of 0).
    pub(crate) fn new(limits: &ServingLimits) -> Self {
        let pool = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        InFlight {
            read_only: pool(limits.max_requests_inflight),
            mutating: pool(limits.max_mutating_requests_inflight),
        }
    }

    /// Takes a slot for a request with `verb` on `subresource` by `user`, or answers 429.
    /// Long-running requests and `system:masters` take none, as in kube.
    pub(crate) fn admit(
        &self,
        verb: &str,
        subresource: Option<&str>,
        user: &UserInfo,
    ) -> Result<Option<OwnedSemaphorePermit>, ApiError> {
        if is_long_running(verb, subresource) || user.groups.iter().any(|g| g == "system:masters") {
            return Ok(None);
        }
        let pool = match verb {
            "get" | "list" => &self.read_only,
            _ => &self.mutating,
        };
        let Some(pool) = pool else { return Ok(None) };
        match pool.clone().try_acquire_owned() {
            Ok(permit) => Ok(Some(permit)),
            Err(_) => Err(ApiError::too_many_requests("Too many requests, please try again later.", Some(1), &[])),
        }
    }
}

/// kube's long-running requests: watches and the streaming subresources.
fn is_long_running(verb: &str, subresource: Option<&str>) -> bool {
    verb == "watch" || matches!(subresource, Some("attach" | "exec" | "proxy" | "log" | "portforward"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(groups: &[&str]) -> UserInfo {
        UserInfo { name: "u".into(), groups: groups.iter().map(|g| g.to_string()).collect(), ..Default::default() }
    }

    #[test]
    fn each_pool_is_bounded_and_masters_and_watches_are_exempt() {
        let limits =
            ServingLimits { max_requests_inflight: 1, max_mutating_requests_inflight: 1, ..Default::default() };
        let in_flight = InFlight::new(&limits);
        let sa = user(&["system:serviceaccounts"]);
        let read = in_flight.admit("get", None, &sa).expect("first read").expect("a slot");
        let write = in_flight.admit("create", None, &sa).expect("first write").expect("a slot");
        let refused = in_flight.admit("list", None, &sa).expect_err("second read");
        assert_eq!((refused.code, refused.reason), (429, "TooManyRequests"));
        assert!(in_flight.admit("patch", None, &sa).is_err(), "second write");
        assert!(in_flight.admit("watch", None, &sa).expect("watch").is_none(), "watches take no slot");
        assert!(in_flight.admit("get", Some("log"), &sa).expect("logs").is_none(), "logs take no slot");
        assert!(in_flight.admit("create", None, &user(&["system:masters"])).expect("admin").is_none());
        drop((read, write));
        assert!(in_flight.admit("list", None, &sa).expect("freed").is_some());
    }

    #[test]
    fn zero_means_unlimited() {
        let limits =
            ServingLimits { max_requests_inflight: 0, max_mutating_requests_inflight: 0, ..Default::default() };
        let in_flight = InFlight::new(&limits);
        assert!(in_flight.admit("create", None, &user(&[])).expect("unlimited").is_none());
    }

    #[test]
    fn the_connection_cap_leaves_descriptors_free() {
        let configured = ServingLimits { max_connections: Some(7), ..Default::default() };
        assert_eq!(configured.connection_cap(), Some(7));
        if let Some(limit) = descriptor_limit() {
            let cap = ServingLimits::default().connection_cap().expect("a cap under a finite limit");
            assert!((cap as u64) < limit.max(RESERVED_DESCRIPTORS + 16));
        }
    }
}
