//! Claiming pods, as kube's `PodControllerRefManager`: a ReplicaSet keeps the active pods
//! it controls that still match its selector, adopts matching orphans (adding its
//! controller reference) and releases controlled pods that no longer match.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use kube::api::{Patch, PatchParams};
use opkit::Context;
use opkit_apimachinery::selector::LabelSelector;
use serde_json::json;

use crate::common::ownership;

/// Returns the pods `rs` owns after adopting and releasing. `active` are the active pods
/// of its namespace.
pub(super) async fn claim_pods(
    ctx: &Context<ReplicaSet>,
    rs: &ReplicaSet,
    sel: &LabelSelector,
    active: &[&Pod],
) -> kube::Result<Vec<Pod>> {
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let api: Api<Pod> = ctx.api_for();
    let deleting = rs.metadata.deletion_timestamp.is_some();
    let mut owned = Vec::new();
    let mut can_adopt: Option<bool> = None;
    for pod in active {
        let matching = sel.matches_labels(pod.metadata.labels.as_ref());
        let name = pod.metadata.name.clone().unwrap_or_default();
        match opkit::owner::controller_of(*pod) {
            Some(r) if r.uid == uid => {
                if matching || deleting {
                    owned.push((*pod).clone());
                    continue;
                }
                // Release: it no longer matches.
                ownership::release(&api, &name, &pod.metadata, &uid).await?;
            }
            Some(_) => {}
            None => {
                if !matching || deleting || pod.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                // Re-check with a live read that the ReplicaSet may still adopt.
                if can_adopt.is_none() {
                    let fresh = ctx.api().get_opt(&ctx.request.name).await?;
                    can_adopt = Some(fresh.is_some_and(|f| {
                        f.metadata.uid.as_deref() == Some(uid.as_str()) && f.metadata.deletion_timestamp.is_none()
                    }));
                }
                if can_adopt != Some(true) {
                    continue;
                }
                let Some(owner) = opkit::owner::controller_reference(rs) else { continue };
                let mut refs: Vec<OwnerReference> = pod.metadata.owner_references.clone().unwrap_or_default();
                refs.push(owner);
                let body = json!({"metadata": {"ownerReferences": refs, "uid": pod.metadata.uid}});
                match api.patch(&name, &PatchParams::default(), &Patch::Merge(&body)).await {
                    Ok(adopted) => owned.push(adopted),
                    Err(e) if opkit::status::is_not_found(&e) => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(owned)
}
