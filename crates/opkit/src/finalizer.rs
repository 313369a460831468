//! Finalizers, as controller-runtime's `controllerutil` finalizer helpers: in-memory
//! add/remove/contains, server-side add/remove that are safe against concurrent writers
//! (a JSON merge patch carrying `metadata.resourceVersion`, so the API server answers 409 on a
//! stale read; the object is re-read and the change retried), and [`with_finalizer`], which
//! runs cleanup when the object is deleted and then releases it.

use std::fmt::Debug;
use std::future::Future;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::status::{CONFLICT_RETRIES, is_conflict, is_not_found};

/// Whether `obj` carries finalizer `name` (`controllerutil.ContainsFinalizer`).
pub fn contains_finalizer<K: Resource>(obj: &K, name: &str) -> bool {
    obj.meta().finalizers.iter().flatten().any(|f| f == name)
}

/// Adds finalizer `name` to `obj` in memory; returns whether it was added
/// (`controllerutil.AddFinalizer`).
pub fn add_finalizer<K: Resource>(obj: &mut K, name: &str) -> bool {
    if contains_finalizer(obj, name) {
        return false;
    }
    obj.meta_mut().finalizers.get_or_insert_with(Vec::new).push(name.to_string());
    true
}

/// Removes finalizer `name` from `obj` in memory; returns whether it was present
/// (`controllerutil.RemoveFinalizer`).
pub fn strip_finalizer<K: Resource>(obj: &mut K, name: &str) -> bool {
    let Some(list) = obj.meta_mut().finalizers.as_mut() else {
        return false;
    };
    let before = list.len();
    list.retain(|f| f != name);
    list.len() != before
}

/// Whether `obj` is being deleted (has `metadata.deletionTimestamp`).
pub fn is_being_deleted<K: Resource>(obj: &K) -> bool {
    obj.meta().deletion_timestamp.is_some()
}

/// The merge patch that sets the finalizer list, guarded by the object's resourceVersion.
fn finalizers_patch(resource_version: Option<&str>, finalizers: &[String]) -> serde_json::Value {
    json!({
        "metadata": {
            "resourceVersion": resource_version,
            "finalizers": finalizers,
        }
    })
}

/// Adds finalizer `name` to the stored object, starting from `obj` (which may be stale) and
/// re-reading it after a conflict. Returns `true` when the finalizer was added, `false` when
/// it was already there (a copy that has it is trusted and nothing is sent) or the object is being deleted (the API server refuses new
/// finalizers then).
pub async fn ensure_finalizer<K>(api: &Api<K>, obj: &K, name: &str) -> kube::Result<bool>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    let object_name = obj.name_any();
    let mut current = if obj.resource_version().is_some() { obj.clone() } else { api.get(&object_name).await? };
    let mut attempt = 0;
    loop {
        if contains_finalizer(&current, name) || is_being_deleted(&current) {
            return Ok(false);
        }
        let mut list = current.finalizers().to_vec();
        list.push(name.to_string());
        let patch = finalizers_patch(current.resource_version().as_deref(), &list);
        match api.patch(&object_name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(true),
            Err(e) if is_conflict(&e) && attempt + 1 < CONFLICT_RETRIES => {
                attempt += 1;
                current = api.get(&object_name).await?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Removes finalizer `name` from the stored object, starting from `obj` (which may be stale)
/// and re-reading it after a conflict. Succeeds when the finalizer or the object is already
/// gone; like controller-runtime, a copy without the finalizer is trusted and nothing is
/// sent. Removing the last finalizer of a deleted object lets the API server delete it.
pub async fn remove_finalizer<K>(api: &Api<K>, obj: &K, name: &str) -> kube::Result<()>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    let object_name = obj.name_any();
    let mut current = if obj.resource_version().is_some() {
        obj.clone()
    } else {
        match api.get_opt(&object_name).await? {
            Some(o) => o,
            None => return Ok(()),
        }
    };
    let mut attempt = 0;
    loop {
        if !contains_finalizer(&current, name) {
            return Ok(());
        }
        let list: Vec<String> = current.finalizers().iter().filter(|f| *f != name).cloned().collect();
        let patch = finalizers_patch(current.resource_version().as_deref(), &list);
        match api.patch(&object_name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(()),
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) if is_conflict(&e) && attempt + 1 < CONFLICT_RETRIES => {
                attempt += 1;
                current = match api.get_opt(&object_name).await? {
                    Some(o) => o,
                    None => return Ok(()),
                };
            }
            Err(e) => return Err(e),
        }
    }
}

/// What [`with_finalizer`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalizerOutcome {
    /// The object is live and the finalizer was just added; go on reconciling.
    Added,
    /// The object is live and already had the finalizer; go on reconciling.
    Present,
    /// The object is being deleted: cleanup ran and the finalizer was removed.
    Finalized,
    /// The object is being deleted and no longer carries this finalizer; nothing to do.
    Deleting,
}

impl FinalizerOutcome {
    /// Whether the object is live, i.e. the caller should carry on with its normal reconcile.
    pub fn is_live(self) -> bool {
        matches!(self, FinalizerOutcome::Added | FinalizerOutcome::Present)
    }
}

/// Errors from [`with_finalizer`].
#[derive(Debug, thiserror::Error)]
pub enum FinalizerError<E> {
    /// The cleanup failed; the finalizer stays, so the deletion is retried later.
    #[error("finalizer cleanup failed: {0}")]
    Cleanup(#[source] E),
    /// Adding or removing the finalizer failed.
    #[error("updating finalizers: {0}")]
    Kube(#[source] kube::Error),
}

/// The controller-runtime finalizer pattern. When `obj` is being deleted and carries
/// finalizer `name`, runs `cleanup` (given a copy of the object) and, if it succeeds, removes
/// the finalizer so the deletion can complete. When `obj` is live, makes sure the finalizer is
/// present. Cleanup should be idempotent: it runs again if removing the finalizer fails.
pub async fn with_finalizer<K, F, Fut, E>(
    api: &Api<K>,
    obj: &K,
    name: &str,
    cleanup: F,
) -> Result<FinalizerOutcome, FinalizerError<E>>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
    F: FnOnce(K) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    if is_being_deleted(obj) {
        if !contains_finalizer(obj, name) {
            return Ok(FinalizerOutcome::Deleting);
        }
        cleanup(obj.clone()).await.map_err(FinalizerError::Cleanup)?;
        remove_finalizer(api, obj, name).await.map_err(FinalizerError::Kube)?;
        return Ok(FinalizerOutcome::Finalized);
    }
    match ensure_finalizer(api, obj, name).await {
        Ok(true) => Ok(FinalizerOutcome::Added),
        Ok(false) => Ok(FinalizerOutcome::Present),
        Err(e) => Err(FinalizerError::Kube(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn in_memory_add_contains_strip() {
        let mut cm = ConfigMap::default();
        assert!(!contains_finalizer(&cm, "a/x"));
        assert!(add_finalizer(&mut cm, "a/x"));
        assert!(!add_finalizer(&mut cm, "a/x"));
        assert!(add_finalizer(&mut cm, "b/y"));
        assert_eq!(cm.finalizers(), ["a/x", "b/y"]);
        assert!(strip_finalizer(&mut cm, "a/x"));
        assert!(!strip_finalizer(&mut cm, "a/x"));
        assert_eq!(cm.finalizers(), ["b/y"]);
    }

    #[test]
    fn patch_carries_resource_version() {
        let p = finalizers_patch(Some("42"), &["a".to_string()]);
        assert_eq!(p, json!({"metadata": {"resourceVersion": "42", "finalizers": ["a"]}}));
        let p = finalizers_patch(Some("7"), &[]);
        assert_eq!(p["metadata"]["finalizers"], json!([]));
    }

    #[test]
    fn outcome_liveness() {
        assert!(FinalizerOutcome::Added.is_live());
        assert!(FinalizerOutcome::Present.is_live());
        assert!(!FinalizerOutcome::Finalized.is_live());
        assert!(!FinalizerOutcome::Deleting.is_live());
    }

    #[tokio::test]
    async fn finalizer_holds_deletion_until_cleanup_removes_it() {
        use kube::api::{DeleteParams, PostParams};
        use std::sync::atomic::{AtomicUsize, Ordering};

        const MINE: &str = "opkit.test/cleanup";
        const OTHER: &str = "opkit.test/other";
        let env = opkit_testenv::TestEnv::start().await.expect("test env");
        let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("guarded".into());
        let created = cms.create(&PostParams::default(), &cm).await.expect("create");
        let cleanups = AtomicUsize::new(0);
        let cleanup = |_: ConfigMap| async {
            cleanups.fetch_add(1, Ordering::SeqCst);
            Ok::<(), std::io::Error>(())
        };

        // Someone else adds a finalizer; our copy is now stale, yet both must survive.
        assert!(ensure_finalizer(&cms, &created, OTHER).await.expect("other"));
        let outcome = with_finalizer(&cms, &created, MINE, cleanup).await.expect("add");
        assert_eq!(outcome, FinalizerOutcome::Added);
        let live = cms.get("guarded").await.expect("get");
        assert_eq!(live.finalizers(), [OTHER, MINE]);
        assert_eq!(with_finalizer(&cms, &live, MINE, cleanup).await.expect("present"), FinalizerOutcome::Present);
        assert_eq!(cleanups.load(Ordering::SeqCst), 0);

        // Deleting only marks the object while finalizers remain.
        cms.delete("guarded", &DeleteParams::default()).await.expect("delete");
        let deleting = cms.get("guarded").await.expect("still there");
        assert!(is_being_deleted(&deleting));
        assert!(!ensure_finalizer(&cms, &deleting, "opkit.test/late").await.expect("no add"));

        let outcome = with_finalizer(&cms, &deleting, MINE, cleanup).await.expect("finalize");
        assert_eq!(outcome, FinalizerOutcome::Finalized);
        assert_eq!(cleanups.load(Ordering::SeqCst), 1);
        let deleting = cms.get("guarded").await.expect("held by the other finalizer");
        assert_eq!(deleting.finalizers(), [OTHER]);
        assert_eq!(with_finalizer(&cms, &deleting, MINE, cleanup).await.expect("again"), FinalizerOutcome::Deleting);
        assert_eq!(cleanups.load(Ordering::SeqCst), 1, "cleanup runs once");

        // A failing cleanup keeps the finalizer.
        let failing = |_: ConfigMap| async { Err::<(), _>(std::io::Error::other("busy")) };
        let err = with_finalizer(&cms, &deleting, OTHER, failing).await.expect_err("cleanup error");
        assert!(matches!(err, FinalizerError::Cleanup(_)));
        assert_eq!(cms.get("guarded").await.expect("kept").finalizers(), [OTHER]);

        // Removing the last finalizer (from a stale copy) lets the deletion complete.
        remove_finalizer(&cms, &live, OTHER).await.expect("remove");
        assert!(cms.get_opt("guarded").await.expect("get").is_none());
        remove_finalizer(&cms, &live, OTHER).await.expect("gone is fine");
    }
}
