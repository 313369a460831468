//! Status helpers: `metav1.Condition` list manipulation with apimachinery's
//! `meta.SetStatusCondition` semantics, the client-go style `retry_on_conflict`, and status
//! updates through the `/status` subresource that re-read and retry on a 409 Conflict.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How many times conflicting writes are attempted (client-go's `retry.DefaultRetry` steps).
pub const CONFLICT_RETRIES: u32 = 5;

/// The status of a condition: `"True"`, `"False"` or `"Unknown"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// `"True"`.
    True,
    /// `"False"`.
    False,
    /// `"Unknown"`.
    Unknown,
}

impl ConditionStatus {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(b: bool) -> Self {
        if b { ConditionStatus::True } else { ConditionStatus::False }
    }
}

/// Builds a condition whose `lastTransitionTime` is unset (the Unix epoch), so that
/// [`set_condition`] stamps it with the current time when the status changes.
pub fn new_condition(
    type_: &str,
    status: impl Into<ConditionStatus>,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: status.into().as_str().to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation,
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
    }
}

/// Whether a time counts as unset (Go's `Time.IsZero`): at or before the Unix epoch.
fn is_zero(t: &Time) -> bool {
    t.0 <= Timestamp::UNIX_EPOCH
}

/// The current time at the one-second precision `metav1.Time` is serialized with.
pub fn now() -> Time {
    let now = Timestamp::now();
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// Adds or updates the condition of `new.type_` (apimachinery's `meta.SetStatusCondition`).
/// `lastTransitionTime` changes only when the status changes (to `new`'s time if set, else
/// now); reason, message and observedGeneration are always taken from `new`. Returns whether
/// anything changed.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == new.type_) else {
        if is_zero(&new.last_transition_time) {
            new.last_transition_time = now();
        }
        conditions.push(new);
        return true;
    };
    let mut changed = false;
    if existing.status != new.status {
        existing.status = new.status;
        existing.last_transition_time =
            if is_zero(&new.last_transition_time) { now() } else { new.last_transition_time };
        changed = true;
    }
    if existing.reason != new.reason {
        existing.reason = new.reason;
        changed = true;
    }
    if existing.message != new.message {
        existing.message = new.message;
        changed = true;
    }
    if existing.observed_generation != new.observed_generation {
        existing.observed_generation = new.observed_generation;
        changed = true;
    }
    changed
}

/// Removes the condition of the given type; returns whether it was present.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The condition of the given type, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of the given type is present with the given status.
pub fn is_condition_present_and_equal(conditions: &[Condition], type_: &str, status: ConditionStatus) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == status.as_str())
}

/// Whether the condition of the given type is `"True"`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    is_condition_present_and_equal(conditions, type_, ConditionStatus::True)
}

/// Whether the condition of the given type is `"False"`.
pub fn is_condition_false(conditions: &[Condition], type_: &str) -> bool {
    is_condition_present_and_equal(conditions, type_, ConditionStatus::False)
}

/// Whether a client error is a 409 Conflict.
pub fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.is_conflict())
}

/// Whether a client error is a 404 Not Found.
pub fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.is_not_found())
}

/// Whether a create was refused because its namespace is being deleted (the Status
/// carries the `NamespaceTerminating` cause, as client-go's
/// `HasStatusCause(err, v1.NamespaceTerminatingCause)` checks). Nothing can be created
/// there any more, so a controller has nothing to retry.
pub fn is_namespace_terminating(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.details.as_ref()
        .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating")))
}

/// Runs `attempt` until it succeeds or fails with something other than a conflict, at most
/// [`CONFLICT_RETRIES`] times with a short jittered pause between tries (client-go's
/// `retry.RetryOnConflict(retry.DefaultRetry, ..)`). The attempt number starts at 0.
pub async fn retry_on_conflict<T, F, Fut>(mut attempt: F) -> kube::Result<T>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = kube::Result<T>>,
{
    let mut n = 0;
    loop {
        match attempt(n).await {
            Err(e) if is_conflict(&e) && n + 1 < CONFLICT_RETRIES => {
                n += 1;
                backoff().await;
            }
            other => return other,
        }
    }
}

/// Reads object `name`, applies `mutate` and writes it back through the `/status`
/// subresource, re-reading and re-applying `mutate` after a 409 Conflict. Returns the
/// stored object; when `mutate` changes nothing no write is made.
pub async fn update_status<K, F>(api: &Api<K>, name: &str, mutate: F) -> kube::Result<K>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
    F: FnMut(&mut K),
{
    let current = api.get(name).await?;
    update_status_from(api, current, mutate).await
}

/// Like [`update_status`], but starts from `current` (typically the object a reconcile was
/// given, which may be stale) and only re-reads it after a conflict, as controller-runtime's
/// `r.Status().Update(ctx, obj)` wrapped in `retry.RetryOnConflict`.
pub async fn update_status_from<K, F>(api: &Api<K>, current: K, mut mutate: F) -> kube::Result<K>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
    F: FnMut(&mut K),
{
    let name = current.name_any();
    let mut obj = current;
    let mut attempt = 0;
    loop {
        let mut next = obj.clone();
        mutate(&mut next);
        let unchanged = serde_json::to_value(&next).map_err(kube::Error::SerdeError)?
            == serde_json::to_value(&obj).map_err(kube::Error::SerdeError)?;
        if unchanged {
            return Ok(obj);
        }
        match api.replace_status(&name, &PostParams::default(), &next).await {
            Err(e) if is_conflict(&e) && attempt + 1 < CONFLICT_RETRIES => {
                attempt += 1;
                backoff().await;
                obj = api.get(&name).await?;
            }
            other => return other,
        }
    }
}

/// The pause between conflicting attempts: 10ms plus up to 1ms of jitter.
async fn backoff() {
    let jitter = rand::random_range(0..=1_000u64);
    tokio::time::sleep(Duration::from_millis(10) + Duration::from_micros(jitter)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).expect("valid timestamp"))
    }

    #[test]
    fn new_condition_is_stamped_on_insert() {
        let mut conds = Vec::new();
        assert!(set_condition(&mut conds, new_condition("Ready", true, "Up", "all good", Some(3))));
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].status, "True");
        assert_eq!(conds[0].observed_generation, Some(3));
        assert!(!is_zero(&conds[0].last_transition_time));
        assert!(is_condition_true(&conds, "Ready"));
        assert!(!is_condition_false(&conds, "Ready"));
    }

    #[test]
    fn transition_time_kept_when_status_unchanged() {
        let mut conds = vec![Condition {
            last_transition_time: at(1_000_000),
            ..new_condition("Ready", true, "Up", "old", Some(1))
        }];
        assert!(!set_condition(&mut conds, new_condition("Ready", true, "Up", "old", Some(1))));
        assert!(set_condition(&mut conds, new_condition("Ready", true, "StillUp", "new", Some(2))));
        assert_eq!(conds[0].last_transition_time, at(1_000_000));
        assert_eq!(conds[0].reason, "StillUp");
        assert_eq!(conds[0].message, "new");
        assert_eq!(conds[0].observed_generation, Some(2));
    }

    #[test]
    fn transition_time_changes_with_status() {
        let mut conds =
            vec![Condition { last_transition_time: at(1_000_000), ..new_condition("Ready", true, "Up", "", None) }];
        assert!(set_condition(&mut conds, new_condition("Ready", false, "Down", "", None)));
        assert!(conds[0].last_transition_time > at(1_000_000));
        assert!(is_condition_false(&conds, "Ready"));
        // An explicit time is honoured.
        let explicit = Condition {
            last_transition_time: at(2_000_000),
            ..new_condition("Ready", ConditionStatus::Unknown, "Down", "", None)
        };
        assert!(set_condition(&mut conds, explicit));
        assert_eq!(conds[0].last_transition_time, at(2_000_000));
        assert!(is_condition_present_and_equal(&conds, "Ready", ConditionStatus::Unknown));
    }

    #[test]
    fn find_and_remove() {
        let mut conds = Vec::new();
        set_condition(&mut conds, new_condition("A", true, "R", "", None));
        set_condition(&mut conds, new_condition("B", false, "R", "", None));
        assert_eq!(find_condition(&conds, "B").map(|c| c.status.as_str()), Some("False"));
        assert!(find_condition(&conds, "C").is_none());
        assert!(!is_condition_true(&conds, "C"));
        assert!(remove_condition(&mut conds, "A"));
        assert!(!remove_condition(&mut conds, "A"));
        assert_eq!(conds.len(), 1);
    }

    #[test]
    fn now_has_second_precision() {
        assert_eq!(now().0.subsec_nanosecond(), 0);
    }

    #[tokio::test]
    async fn retry_on_conflict_retries_only_conflicts() {
        let conflict = || kube::Error::Api(kube::core::Status::failure("conflict", "Conflict").with_code(409).boxed());
        let mut calls = 0;
        let out = retry_on_conflict(|n| {
            calls += 1;
            let err = conflict();
            async move { if n < 2 { Err(err) } else { Ok(n) } }
        })
        .await
        .expect("succeeds on third try");
        assert_eq!((out, calls), (2, 3));

        let mut calls = 0;
        let res: kube::Result<()> = retry_on_conflict(|_| {
            calls += 1;
            let err = conflict();
            async move { Err(err) }
        })
        .await;
        assert!(res.as_ref().is_err_and(is_conflict));
        assert_eq!(calls, CONFLICT_RETRIES);

        let mut calls = 0;
        let res: kube::Result<()> = retry_on_conflict(|_| {
            calls += 1;
            async move { Err(kube::Error::Api(kube::core::Status::failure("gone", "NotFound").with_code(404).boxed())) }
        })
        .await;
        assert!(res.as_ref().is_err_and(is_not_found));
        assert_eq!(calls, 1);
    }

    mod envtest {
        use super::super::*;
        use kube::CustomResource;
        use kube::CustomResourceExt;
        use schemars::JsonSchema;
        use serde::Deserialize;

        /// A test resource with a status subresource.
        #[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
        #[kube(group = "status.opkit.test", version = "v1", kind = "Gadget", namespaced, status = "GadgetStatus")]
        pub(super) struct GadgetSpec {
            size: i32,
        }

        /// The status of a Gadget.
        #[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
        pub(super) struct GadgetStatus {
            #[serde(default)]
            conditions: Vec<Condition>,
        }

        fn mark(g: &mut Gadget, ready: bool, reason: &str) {
            let generation = g.metadata.generation;
            let status = g.status.get_or_insert_with(GadgetStatus::default);
            set_condition(&mut status.conditions, new_condition("Ready", ready, reason, "", generation));
        }

        #[tokio::test]
        async fn status_update_retries_after_a_conflicting_write() {
            let env = opkit_testenv::TestEnv::start().await.expect("test env");
            env.install_crds([Gadget::crd()]).await.expect("crd");
            let api: Api<Gadget> = Api::namespaced(env.client(), "default");
            let pp = PostParams::default();
            let stale = api.create(&pp, &Gadget::new("g", GadgetSpec { size: 1 })).await.expect("create");
            // A conflicting write bumps the resourceVersion (and the generation).
            let mut newer = stale.clone();
            newer.spec.size = 2;
            let newer = api.replace("g", &pp, &newer).await.expect("replace");
            assert_ne!(newer.metadata.generation, stale.metadata.generation);

            let mut calls = 0;
            let updated = update_status_from(&api, stale, |g| {
                calls += 1;
                mark(g, true, "Up");
            })
            .await
            .expect("status update");
            assert_eq!(calls, 2, "mutate re-applied after the conflict");
            assert_eq!(updated.spec.size, 2, "the newer spec was kept");
            let conds = updated.status.clone().unwrap_or_default().conditions;
            assert!(is_condition_true(&conds, "Ready"));
            let ready = find_condition(&conds, "Ready").expect("Ready").clone();
            assert_eq!(ready.observed_generation, newer.metadata.generation);

            // Same status again: no write at all.
            let same = update_status(&api, "g", |g| mark(g, true, "Up")).await.expect("noop");
            assert_eq!(same.metadata.resource_version, updated.metadata.resource_version);

            // New reason, same status: transition time kept. New status: it may move.
            let reasoned = update_status(&api, "g", |g| mark(g, true, "StillUp")).await.expect("reason");
            let conds = reasoned.status.clone().unwrap_or_default().conditions;
            let again = find_condition(&conds, "Ready").expect("Ready");
            assert_eq!(again.reason, "StillUp");
            assert_eq!(again.last_transition_time, ready.last_transition_time);
            let down = update_status(&api, "g", |g| mark(g, false, "Down")).await.expect("down");
            let conds = down.status.unwrap_or_default().conditions;
            assert!(is_condition_false(&conds, "Ready"));
            assert!(find_condition(&conds, "Ready").expect("Ready").last_transition_time >= ready.last_transition_time);
            // The status subresource ignores spec changes.
            let ignored = update_status(&api, "g", |g| g.spec.size = 99).await.expect("spec via status");
            assert_eq!(api.get("g").await.expect("get").spec.size, 2);
            assert_eq!(ignored.spec.size, 2);
        }
    }
}
