//! Perturbing one client's requests, for reliability tests (issue 32): faults injected
//! into the k-th matching request of one identity, and a trace of that identity's
//! requests.
//!
//! A test names the identity under test (an operator's ServiceAccount, say) and what to
//! do to the k-th request of it that a filter matches:
//! - [`FaultAction::Reject`]: answer an error (409, 429 with `Retry-After`, 500, 504)
//!   without running the request;
//! - [`FaultAction::FailAfterCommit`]: run the request, then answer 504 `Timeout` as
//!   kube-apiserver does when a write outlives its deadline: the write applied, the client
//!   saw an error;
//! - [`FaultAction::CrashAfterCommit`]: run the request, then never answer: the client
//!   is killed there, between its write and reading the answer.
//!
//! Every other identity (the test's own steps, the cluster controllers) sees a normal
//! server. A [`RequestTrace`] records what the identity asked for, with each answer's
//! code and whether a write changed anything. Both cost one atomic load per request when
//! no test uses them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::error::ApiError;

/// Which requests of one identity a fault or a trace applies to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequestFilter {
    /// The user name, e.g. `system:serviceaccount:operators:memcached`.
    pub user: String,
    /// Only these verbs (`create`, `update`, `patch`, `delete`, `deletecollection`,
    /// `get`, `list`, `watch`); empty: every verb.
    pub verbs: Vec<String>,
    /// Only this API group (`""` for the core group).
    pub group: Option<String>,
    /// Only this resource (plural), e.g. `configmaps`.
    pub resource: Option<String>,
    /// Only objects in this namespace.
    pub namespace: Option<String>,
    /// Only the object of this name.
    pub name: Option<String>,
}

/// The verbs that write.
pub const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

impl RequestFilter {
    /// Every request of `user`.
    #[must_use]
    pub fn user(user: impl Into<String>) -> RequestFilter {
        RequestFilter { user: user.into(), ..RequestFilter::default() }
    }

    /// Only the writes ([`WRITE_VERBS`]).
    #[must_use]
    pub fn writes(mut self) -> RequestFilter {
        self.verbs = WRITE_VERBS.iter().map(|v| (*v).to_string()).collect();
        self
    }

    /// Only requests with verb `verb`; may be given more than once.
    #[must_use]
    pub fn verb(mut self, verb: impl Into<String>) -> RequestFilter {
        self.verbs.push(verb.into());
        self
    }

    /// Only requests for `resource` in `group`.
    #[must_use]
    pub fn resource(mut self, group: impl Into<String>, resource: impl Into<String>) -> RequestFilter {
        self.group = Some(group.into());
        self.resource = Some(resource.into());
        self
    }

    /// Only requests for objects in `namespace`.
    #[must_use]
    pub fn in_namespace(mut self, namespace: impl Into<String>) -> RequestFilter {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only requests for the object named `name`.
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> RequestFilter {
        self.name = Some(name.into());
        self
    }

    fn matches(&self, request: &RequestLine) -> bool {
        let same = |want: &Option<String>, have: Option<&str>| want.as_deref().is_none_or(|w| have == Some(w));
        self.user == request.user
            && (self.verbs.is_empty() || self.verbs.iter().any(|v| *v == request.verb))
            && same(&self.group, Some(&request.group))
            && same(&self.resource, Some(&request.resource))
            && same(&self.namespace, request.namespace.as_deref())
            && same(&self.name, request.name.as_deref())
    }
}

/// What a fault does to the request it fires on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "action")]
pub enum FaultAction {
    /// Answer this code without running the request: 409 `Conflict`, 429
    /// `TooManyRequests` (with `Retry-After: 1`), 500 `InternalError`, 503
    /// `ServiceUnavailable` or 504 `Timeout`; any other code answers 500.
    Reject {
        /// The HTTP status code.
        code: u16,
    },
    /// Run the request, then answer 504 `Timeout`: the write applied, the client saw an
    /// error.
    FailAfterCommit,
    /// Run the request, then never answer (until the server stops): the client is to be
    /// killed between its write and reading the answer.
    CrashAfterCommit,
    /// As [`FaultAction::CrashAfterCommit`]; from then on, the identity's lists that
    /// accept any resourceVersion (`resourceVersion=0`, as informers list: kube serves
    /// them from its watch cache, which may lag) are served as of the revision before
    /// this write, as from a lagging API server. Their watches then deliver what came
    /// after, so the restarted client's cache catches up.
    CrashWithStaleRestart,
}

/// A fault: `action` on the `nth` (1-based) request that `filter` matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fault {
    /// Which requests count.
    pub filter: RequestFilter,
    /// Which of them it fires on (1 is the first).
    pub nth: usize,
    /// What it does there.
    pub action: FaultAction,
}

/// What one request is: who asked, which verb, for what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestLine {
    pub user: String,
    pub verb: &'static str,
    pub group: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    /// The object's name: from the path, or for a create from the body's `metadata.name`.
    pub name: Option<String>,
    /// A create's `metadata.generateName`, when it gives no name.
    pub generate_name: Option<String>,
}

/// One traced request and its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TracedRequest {
    /// Milliseconds since the trace began.
    pub at_ms: u64,
    /// The verb.
    pub verb: String,
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource (`status`, `scale`, ...), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    /// The namespace, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The object's name; for a create by `generateName`, the name the server chose.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A create's `generateName`, when it gave no name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generate_name: Option<String>,
    /// The code the client got.
    pub code: u16,
    /// For a write that succeeded: whether it changed the object (an update or patch
    /// that changed nothing keeps the resourceVersion).
    pub changed: bool,
    /// The fault that fired on this request, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<FaultAction>,
}

impl TracedRequest {
    /// Whether the verb writes.
    pub fn is_write(&self) -> bool {
        WRITE_VERBS.contains(&self.verb.as_str())
    }
}

struct Rule {
    fault: Fault,
    seen: AtomicUsize,
    fired: watch::Sender<bool>,
}

/// How long a stale restart's lag lasts at most: the lagging cache catches up then, or
/// at the identity's first write, whichever comes first.
const STALE_LAG: std::time::Duration = std::time::Duration::from_secs(2);

/// One identity's lagging reads after a stale restart.
struct Stale {
    user: String,
    /// Its "any version" lists are served as of this revision.
    revision: u64,
    /// The rule that set it: disarming the rule ends it.
    rule: Arc<Rule>,
    /// Set once the lag is over: its watches' events flow again, its lists are fresh.
    caught_up: watch::Sender<bool>,
}

struct TraceSink {
    user: String,
    started: Instant,
    requests: Mutex<Vec<TracedRequest>>,
    changed: tokio::sync::Notify,
}

/// The faults and traces of one API server (see the module's text).
#[derive(Default)]
pub struct Perturbations {
    rules: Mutex<Vec<Arc<Rule>>>,
    traces: Mutex<Vec<Arc<TraceSink>>>,
    /// The users whose reads lag (see [`FaultAction::CrashWithStaleRestart`]).
    stale: Mutex<Vec<Stale>>,
    active: AtomicUsize,
}

impl std::fmt::Debug for Perturbations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Perturbations").field("active", &self.active.load(Ordering::Relaxed)).finish()
    }
}

impl Perturbations {
    /// Arms `fault` until the returned handle is dropped.
    pub fn inject(self: &Arc<Self>, fault: Fault) -> InjectedFault {
        let rule = Arc::new(Rule { fault, seen: AtomicUsize::new(0), fired: watch::Sender::new(false) });
        self.rules.lock().push(rule.clone());
        self.active.fetch_add(1, Ordering::SeqCst);
        InjectedFault { perturbations: self.clone(), rule }
    }

    /// Traces every request of `user` until the returned handle is dropped.
    pub fn trace(self: &Arc<Self>, user: impl Into<String>) -> RequestTrace {
        let sink = Arc::new(TraceSink {
            user: user.into(),
            started: Instant::now(),
            requests: Mutex::new(Vec::new()),
            changed: tokio::sync::Notify::new(),
        });
        self.traces.lock().push(sink.clone());
        self.active.fetch_add(1, Ordering::SeqCst);
        RequestTrace { perturbations: self.clone(), sink }
    }

    /// Whether any fault or trace is armed (one atomic load).
    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed) > 0
    }

    /// The fault that fires on `request`, if one does: each armed fault whose filter
    /// matches counts the request, and the first to reach its `nth` fires (once).
    pub(crate) fn fault_for(&self, request: &RequestLine) -> Option<FaultAction> {
        let rules: Vec<Arc<Rule>> =
            self.rules.lock().iter().filter(|r| r.fault.filter.matches(request)).cloned().collect();
        let mut fired = None;
        for rule in rules {
            let seen = rule.seen.fetch_add(1, Ordering::SeqCst) + 1;
            if seen == rule.fault.nth && fired.is_none() {
                fired = Some(rule.fault.action);
                rule.fired.send_replace(true);
            }
        }
        fired
    }

    /// Makes `user`'s reads lag behind `revision`'s successors, if the rule that just
    /// fired on its request is a [`FaultAction::CrashWithStaleRestart`]: its "any
    /// version" lists are served as of `revision`, and its watches deliver nothing new,
    /// until its first write or [`STALE_LAG`].
    pub(crate) fn serve_stale(&self, user: &str, revision: u64) {
        let rule = self
            .rules
            .lock()
            .iter()
            .find(|r| {
                r.fault.filter.user == user && r.fault.action == FaultAction::CrashWithStaleRestart && *r.fired.borrow()
            })
            .cloned();
        let Some(rule) = rule else { return };
        let caught_up = watch::Sender::new(false);
        let timer = caught_up.clone();
        tokio::spawn(async move {
            tokio::time::sleep(STALE_LAG).await;
            timer.send_replace(true);
        });
        self.stale.lock().push(Stale { user: user.to_string(), revision, rule, caught_up });
    }

    /// The revision `user`'s "any version" lists are served as of, while its reads lag.
    pub(crate) fn stale_revision(&self, user: &str) -> Option<u64> {
        self.stale.lock().iter().find(|s| s.user == user && !*s.caught_up.borrow()).map(|s| s.revision)
    }

    /// While `user`'s reads lag: what its watches wait on before each event.
    pub(crate) fn watch_lag(&self, user: &str) -> Option<watch::Receiver<bool>> {
        self.stale.lock().iter().find(|s| s.user == user && !*s.caught_up.borrow()).map(|s| s.caught_up.subscribe())
    }

    /// Ends `user`'s lag: it writes, so the cache it acted on catches up now.
    pub(crate) fn catch_up(&self, user: &str) {
        for stale in self.stale.lock().iter().filter(|s| s.user == user) {
            stale.caught_up.send_replace(true);
        }
    }

    /// Records `request`'s answer in the traces of its user.
    pub(crate) fn record(&self, request: &RequestLine, answer: Answer, fault: Option<FaultAction>) {
        let sinks: Vec<Arc<TraceSink>> =
            self.traces.lock().iter().filter(|s| s.user == request.user).cloned().collect();
        for sink in sinks {
            let traced = TracedRequest {
                at_ms: u64::try_from(sink.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                verb: request.verb.to_string(),
                group: request.group.clone(),
                resource: request.resource.clone(),
                subresource: request.subresource.clone(),
                namespace: request.namespace.clone(),
                name: answer.name.clone().or_else(|| request.name.clone()),
                generate_name: request.generate_name.clone(),
                code: answer.code,
                changed: answer.changed,
                fault,
            };
            sink.requests.lock().push(traced);
            sink.changed.notify_waiters();
        }
    }
}

/// What a traced request was answered.
#[derive(Debug, Clone, Default)]
pub(crate) struct Answer {
    /// The HTTP code the client got.
    pub code: u16,
    /// The name of the object written (a create by `generateName` learns it here).
    pub name: Option<String>,
    /// Whether a write changed the stored object.
    pub changed: bool,
}

/// The error a [`FaultAction::Reject`] answers with.
pub(crate) fn rejection(code: u16, request: &RequestLine) -> ApiError {
    let name = request.name.as_deref().unwrap_or_default();
    match code {
        409 => ApiError::conflict_msg(
            &request.group,
            &request.resource,
            name,
            format!(
                "Operation cannot be fulfilled on {}.{} \"{name}\": the object has been modified; please apply your changes to the latest version and try again (injected fault)",
                request.resource, request.group
            ),
            Vec::new(),
        ),
        429 => ApiError::too_many_requests("Too many requests, please try again later (injected fault).", Some(1), &[]),
        503 => ApiError::unavailable("the server is currently unable to handle the request (injected fault)"),
        504 => timeout(),
        _ => ApiError::internal("injected fault"),
    }
}

/// kube-apiserver's answer to a request that outlived its deadline.
pub(crate) fn timeout() -> ApiError {
    ApiError::timeout("Timeout: request did not complete within the allotted timeout (injected fault)")
}

/// An armed fault; dropping it disarms it.
pub struct InjectedFault {
    perturbations: Arc<Perturbations>,
    rule: Arc<Rule>,
}

impl InjectedFault {
    /// Whether it has fired.
    pub fn fired(&self) -> bool {
        *self.rule.fired.borrow()
    }

    /// Waits until it fires.
    pub async fn wait_fired(&self) {
        let mut rx = self.rule.fired.subscribe();
        let _ = rx.wait_for(|fired| *fired).await;
    }

    /// How many requests its filter has matched so far.
    pub fn matched(&self) -> usize {
        self.rule.seen.load(Ordering::SeqCst)
    }
}

impl Drop for InjectedFault {
    fn drop(&mut self) {
        self.perturbations.rules.lock().retain(|r| !Arc::ptr_eq(r, &self.rule));
        self.perturbations.stale.lock().retain(|s| !Arc::ptr_eq(&s.rule, &self.rule));
        self.perturbations.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running trace of one identity's requests; dropping it stops it.
pub struct RequestTrace {
    perturbations: Arc<Perturbations>,
    sink: Arc<TraceSink>,
}

impl RequestTrace {
    /// The requests so far, in the order they were answered.
    pub fn requests(&self) -> Vec<TracedRequest> {
        self.sink.requests.lock().clone()
    }

    /// How many requests have been recorded so far.
    pub fn len(&self) -> usize {
        self.sink.requests.lock().len()
    }

    /// Whether none has been recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Milliseconds since the trace began (the clock of [`TracedRequest::at_ms`]).
    pub fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.sink.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Waits until a request is recorded after the call.
    pub async fn next_request(&self) {
        self.sink.changed.notified().await;
    }
}

impl Drop for RequestTrace {
    fn drop(&mut self) {
        self.perturbations.traces.lock().retain(|s| !Arc::ptr_eq(s, &self.sink));
        self.perturbations.active.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(user: &str, verb: &'static str, name: &str) -> RequestLine {
        RequestLine {
            user: user.into(),
            verb,
            group: String::new(),
            resource: "configmaps".into(),
            subresource: None,
            namespace: Some("default".into()),
            name: Some(name.into()),
            generate_name: None,
        }
    }

    #[test]
    fn a_fault_fires_once_on_the_nth_matching_request_of_its_user() {
        let p = Arc::new(Perturbations::default());
        let fault = p.inject(Fault {
            filter: RequestFilter::user("op").writes().resource("", "configmaps"),
            nth: 2,
            action: FaultAction::FailAfterCommit,
        });
        assert!(p.active());
        assert_eq!(p.fault_for(&line("someone-else", "create", "a")), None);
        assert_eq!(p.fault_for(&line("op", "get", "a")), None);
        assert_eq!(p.fault_for(&line("op", "create", "a")), None);
        assert!(!fault.fired());
        assert_eq!(p.fault_for(&line("op", "patch", "a")), Some(FaultAction::FailAfterCommit));
        assert!(fault.fired());
        assert_eq!(p.fault_for(&line("op", "patch", "a")), None);
        assert_eq!(fault.matched(), 3);
        drop(fault);
        assert!(!p.active());
    }
}
