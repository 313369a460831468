//! Adding and removing pods to reach `spec.replicas`: creations in slow-start batches
//! (1, 2, 4, ...) that stop at the first failure, deletions of the pods ranked first by
//! [`super::pods::pods_to_delete`], each recorded as an expectation and an event.

use futures::future::join_all;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use opkit::Context;
use opkit::events::EventType;

use super::{BURST_REPLICAS, State, pods};

/// A failed attempt to create or delete pods.
#[derive(Debug, thiserror::Error)]
pub(super) enum ManageError {
    /// Creating a pod failed.
    #[error("{0}")]
    Create(String),
    /// Deleting a pod failed.
    #[error("{0}")]
    Delete(String),
}

impl ManageError {
    /// The ReplicaFailure condition's reason for this error.
    pub(super) fn reason(&self) -> &'static str {
        match self {
            ManageError::Create(_) => "FailedCreate",
            ManageError::Delete(_) => "FailedDelete",
        }
    }
}

fn message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// Creates or deletes pods so that `owned` (active, controlled pods) reaches the desired
/// count.
pub(super) async fn manage_replicas(
    ctx: &Context<ReplicaSet>,
    st: &State,
    rs: &ReplicaSet,
    owned: &[&Pod],
    key: &str,
) -> Result<(), ManageError> {
    let desired = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as usize;
    let api: Api<Pod> = ctx.api_for();
    if owned.len() < desired {
        let Some(owner) = opkit::owner::controller_reference(rs) else { return Ok(()) };
        let template = rs.spec.as_ref().and_then(|s| s.template.clone()).unwrap_or_default();
        let ns = rs.metadata.namespace.clone().unwrap_or_default();
        let prefix = pods::generate_name_prefix(&ctx.request.name);
        let pod = pods::pod_from_template(&template, &ns, &prefix, owner);
        create_pods(&api, st, rs, key, &pod, (desired - owned.len()).min(BURST_REPLICAS)).await
    } else if owned.len() > desired {
        let victims = pods::pods_to_delete(owned, owned, (owned.len() - desired).min(BURST_REPLICAS));
        delete_pods(&api, st, rs, key, &victims).await
    } else {
        Ok(())
    }
}

/// Creates `count` copies of `pod` in slow-start batches (1, 2, 4, …), as kube does, so a
/// failing create (a quota, a webhook) fails fast instead of `count` times.
async fn create_pods(
    api: &Api<Pod>,
    st: &State,
    rs: &ReplicaSet,
    key: &str,
    pod: &Pod,
    count: usize,
) -> Result<(), ManageError> {
    let (mut remaining, mut batch) = (count, 1usize);
    while remaining > 0 {
        let n = batch.min(remaining);
        let pp = PostParams::default();
        let results = join_all((0..n).map(|_| api.create(&pp, pod))).await;
        let mut failure = None;
        for r in results {
            match r {
                Ok(created) => {
                    let name = created.metadata.name.clone().unwrap_or_default();
                    st.expectations.expect_create(key, &name);
                    publish(st, rs, EventType::Normal, "SuccessfulCreate", "Create", &format!("Created pod: {name}"));
                }
                Err(e) => {
                    let msg = message(&e);
                    publish(st, rs, EventType::Warning, "FailedCreate", "Create", &format!("Error creating: {msg}"));
                    // In a namespace being deleted every create fails: nothing to
                    // retry (kube's ReplicaSet controller counts these as done).
                    if !opkit::status::is_namespace_terminating(&e) {
                        failure = Some(ManageError::Create(msg));
                    }
                }
            }
        }
        if let Some(f) = failure {
            return Err(f);
        }
        remaining -= n;
        batch = batch.saturating_mul(2);
    }
    Ok(())
}

/// Deletes `victims` at once, expecting each deletion.
async fn delete_pods(
    api: &Api<Pod>,
    st: &State,
    rs: &ReplicaSet,
    key: &str,
    victims: &[&Pod],
) -> Result<(), ManageError> {
    let results = join_all(victims.iter().map(|p| {
        let name = p.metadata.name.clone().unwrap_or_default();
        let api = api.clone();
        async move { (name.clone(), api.delete(&name, &DeleteParams::default()).await) }
    }))
    .await;
    let mut failure = None;
    for (pod, (name, r)) in victims.iter().zip(results) {
        match r {
            Ok(_) => {
                if let Some(uid) = pod.metadata.uid.as_deref() {
                    st.expectations.expect_delete(key, uid);
                }
                publish(st, rs, EventType::Normal, "SuccessfulDelete", "Delete", &format!("Deleted pod: {name}"));
            }
            Err(e) if opkit::status::is_not_found(&e) => {}
            Err(e) => {
                let msg = message(&e);
                publish(st, rs, EventType::Warning, "FailedDelete", "Delete", &format!("Error deleting: {msg}"));
                failure = Some(ManageError::Delete(msg));
            }
        }
    }
    failure.map_or(Ok(()), Err)
}

/// Records an event about `rs` in the background.
fn publish(st: &State, rs: &ReplicaSet, type_: EventType, reason: &'static str, action: &'static str, note: &str) {
    let recorder = st.recorder.clone();
    let regarding = kube::Resource::object_ref(rs, &());
    let note = note.to_string();
    tokio::spawn(async move {
        recorder.publish(&regarding, type_, reason, action, &note).await;
    });
}
