//! Waiting for an object to reach a state, with an error that says what was awaited and
//! what was last seen: kube's `await_condition` under a timeout, but a test that times
//! out reports `timed out after 30s waiting for Memcached default/cache to have 3 ready
//! nodes; last seen: status {...}` instead of `Elapsed(())`.

use std::fmt;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::wait::Condition;
use kube::runtime::watcher::watch_object;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How much of the last seen state a [`WaitError`] quotes.
const LAST_SEEN_LIMIT: usize = 2000;

/// Why [`wait_for`] gave up. Its `Debug` is its message, so a test returning
/// `Result<(), Box<dyn Error>>` prints the message when it fails.
pub struct WaitError {
    /// What was awaited: the object (`Memcached default/cache`) and the description.
    what: String,
    /// Why waiting stopped.
    reason: WaitFailure,
}

/// Why waiting stopped.
enum WaitFailure {
    /// The condition did not hold within the timeout.
    Timeout {
        /// The timeout.
        after: Duration,
        /// The last state seen (the object's status, "not found", or that nothing was
        /// received).
        last_seen: String,
    },
    /// Watching the object failed (e.g. its kind is not served, or watching is forbidden).
    Watch(kube::runtime::watcher::Error),
}

impl WaitError {
    /// What was awaited, as the message words it.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// The last state seen before the timeout (`None` if watching failed instead).
    pub fn last_seen(&self) -> Option<&str> {
        match &self.reason {
            WaitFailure::Timeout { last_seen, .. } => Some(last_seen),
            WaitFailure::Watch(_) => None,
        }
    }
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            WaitFailure::Timeout { after, last_seen } => {
                write!(f, "timed out after {after:?} waiting for {}; last seen: {last_seen}", self.what)
            }
            WaitFailure::Watch(e) => write!(f, "waiting for {}: watch failed: {e}", self.what),
        }
    }
}

impl fmt::Debug for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for WaitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.reason {
            WaitFailure::Watch(e) => Some(e),
            WaitFailure::Timeout { .. } => None,
        }
    }
}

/// Waits until `condition` holds for the object `name` that `api` reads (it is given
/// `None` while the object does not exist), up to `timeout`; returns the object as it
/// was then (`None` if absent). `description` says what the condition means, for the
/// error: `"to have 3 ready nodes"`.
///
/// On timeout the [`WaitError`] names the object, the description and the last state
/// seen: the object's `status` (with its generation and resource version, and the
/// pending finalizers once deletion was requested) or "not found".
///
/// ```no_run
/// # use k8s_openapi::api::apps::v1::Deployment;
/// # use kube::Api;
/// # async fn f(env: &opkit_testenv::TestEnv) -> Result<(), opkit_testenv::WaitError> {
/// let deployments: Api<Deployment> = Api::namespaced(env.client(), "default");
/// let available = |d: Option<&Deployment>| {
///     d.and_then(|d| d.status.as_ref()).and_then(|s| s.available_replicas) == Some(3)
/// };
/// opkit_testenv::wait_for(&deployments, "web", "to have 3 available replicas", available, opkit_testenv::WAIT)
///     .await?;
/// # Ok(()) }
/// ```
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    description: &str,
    condition: impl Condition<K>,
    timeout: Duration,
) -> Result<Option<K>, WaitError>
where
    K: Resource<DynamicType = ()> + Clone + fmt::Debug + Serialize + DeserializeOwned + Send + 'static,
{
    wait_for_with(api, &(), name, description, condition, timeout).await
}

/// [`wait_for`] for kinds with a run-time type (`DynamicObject` and its `ApiResource`).
pub async fn wait_for_with<K>(
    api: &Api<K>,
    dyntype: &K::DynamicType,
    name: &str,
    description: &str,
    condition: impl Condition<K>,
    timeout: Duration,
) -> Result<Option<K>, WaitError>
where
    K: Resource + Clone + fmt::Debug + Serialize + DeserializeOwned + Send + 'static,
{
    let namespace = api.namespace().map(|ns| format!("{ns}/")).unwrap_or_default();
    let what = format!("{} {namespace}{name} {description}", K::kind(dyntype));
    let mut last_seen = String::from("nothing yet (the watch returned no list)");
    let mut stream = std::pin::pin!(watch_object(api.clone(), name));
    let watching = async {
        while let Some(event) = stream.next().await {
            let object = event?;
            if condition.matches_object(object.as_ref()) {
                return Ok(object);
            }
            last_seen = object.as_ref().map_or_else(|| "not found".to_string(), describe);
        }
        // A watcher's stream never ends; if it did, the object was never seen to match.
        Ok(None)
    };
    match tokio::time::timeout(timeout, watching).await {
        Ok(Ok(object)) => Ok(object),
        Ok(Err(e)) => Err(WaitError { what, reason: WaitFailure::Watch(e) }),
        Err(_) => Err(WaitError { what, reason: WaitFailure::Timeout { after: timeout, last_seen } }),
    }
}

/// An object's state for a timeout message: generation, resource version, deletion in
/// progress (with its finalizers) and its `status`.
fn describe<K: Resource + Serialize>(object: &K) -> String {
    let meta = object.meta();
    let mut text = format!(
        "generation {}, resourceVersion {}",
        meta.generation.map_or_else(|| "-".to_string(), |g| g.to_string()),
        object.resource_version().unwrap_or_default()
    );
    if meta.deletion_timestamp.is_some() {
        text.push_str(&format!(", deleting (finalizers: {:?})", object.finalizers()));
    }
    let status = serde_json::to_value(object).ok().and_then(|v| v.get("status").cloned());
    match status {
        Some(status) if !status.is_null() => text.push_str(&format!(", status {status}")),
        _ => text.push_str(", no status"),
    }
    if text.len() > LAST_SEEN_LIMIT {
        let cut = (0..=LAST_SEEN_LIMIT).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        text.truncate(cut);
        text.push_str(" …");
    }
    text
}
