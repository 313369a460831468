//! ControllerRevisions of StatefulSets and DaemonSets: the stored pod-template patch, its
//! hash (the `controller-revision-hash` pod label), creating the revision for the current
//! template, and pruning history beyond `revisionHistoryLimit`.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use opkit::Cache;
use serde_json::{Value, json};

use super::WorkloadError;
use super::hash::{fnv32a, safe_encode};
use super::ownership::controlled_by;

/// The label ControllerRevisions carry their hash in.
pub(crate) const REVISION_HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// The revision data kube stores: a strategic-merge patch replacing `spec.template`.
pub(crate) fn template_patch(template: &PodTemplateSpec) -> Result<Value, WorkloadError> {
    let mut t = serde_json::to_value(template)?;
    if let Some(o) = t.as_object_mut() {
        o.insert("$patch".into(), json!("replace"));
    }
    Ok(json!({"spec": {"template": t}}))
}

/// The pod template stored in a revision's data.
pub(crate) fn template_of(rev: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut t = rev.data.as_ref()?.0.get("spec")?.get("template")?.clone();
    if let Some(o) = t.as_object_mut() {
        o.remove("$patch");
    }
    serde_json::from_value(t).ok()
}

/// The hash of revision data (and the collision count), rendered safely.
pub(crate) fn revision_hash(data: &Value, collision_count: i32) -> String {
    let mut bytes = data.to_string().into_bytes();
    if collision_count > 0 {
        bytes.extend_from_slice(&collision_count.to_le_bytes());
    }
    safe_encode(fnv32a(&bytes))
}

/// The ControllerRevisions the owner with `uid` controls in `ns`, oldest revision first.
pub(crate) fn owned_revisions(cache: &Cache, ns: &str, uid: &str) -> Vec<ControllerRevision> {
    let mut revs: Vec<ControllerRevision> = cache
        .list::<ControllerRevision>()
        .into_iter()
        .filter(|r| r.metadata.namespace.as_deref() == Some(ns) && controlled_by(&r.metadata, uid))
        .map(|r| (*r).clone())
        .collect();
    revs.sort_by_key(|r| r.revision);
    revs
}

/// Returns the revision holding `template` for `owner`, creating it (or bumping an older
/// equal revision to the newest number) as kube's history code does.
pub(crate) async fn ensure_revision<O>(
    client: &kube::Client,
    owner: &O,
    existing: &[ControllerRevision],
    template: &PodTemplateSpec,
    collision_count: i32,
) -> Result<ControllerRevision, WorkloadError>
where
    O: Resource<DynamicType = ()>,
{
    let ns = owner.namespace().unwrap_or_default();
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), &ns);
    let data = template_patch(template)?;
    let hash = revision_hash(&data, collision_count);
    let name = format!("{}-{hash}", owner.name_any());
    let max = existing.iter().map(|r| r.revision).max().unwrap_or(0);
    if let Some(r) = existing.iter().find(|r| r.metadata.name.as_deref() == Some(&name)) {
        if r.revision == max {
            return Ok(r.clone());
        }
        let patch = json!({"revision": max + 1});
        return Ok(api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?);
    }
    let owner_ref =
        opkit::owner::controller_reference(owner).ok_or_else(|| WorkloadError::Invalid("owner has no uid".into()))?;
    let mut labels = template.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default();
    labels.insert(REVISION_HASH_LABEL.into(), hash);
    let rev = ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns),
            labels: Some(labels),
            owner_references: Some(vec![owner_ref]),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision: max + 1,
    };
    match api.create(&PostParams::default(), &rev).await {
        Ok(r) => Ok(r),
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(api.get(&name).await?),
        Err(e) => Err(e.into()),
    }
}

/// Deletes the oldest revisions not in `live` (names in use by pods or status) beyond
/// `limit`.
pub(crate) async fn truncate_history(
    client: &kube::Client,
    ns: &str,
    revisions: &[ControllerRevision],
    live: &BTreeSet<String>,
    limit: i32,
) -> Result<(), WorkloadError> {
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), ns);
    let history: Vec<&ControllerRevision> = revisions.iter().filter(|r| !live.contains(&r.name_any())).collect();
    let excess = history.len().saturating_sub(usize::try_from(limit.max(0)).unwrap_or(0));
    for r in history.into_iter().take(excess) {
        match api.delete(&r.name_any(), &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_round_trips_and_hash_tracks_template() {
        let t: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}
        }))
        .unwrap_or_default();
        let data = template_patch(&t).unwrap_or_default();
        assert_eq!(data["spec"]["template"]["$patch"], "replace");
        let rev = ControllerRevision { data: Some(RawExtension(data.clone())), ..Default::default() };
        assert_eq!(template_of(&rev), Some(t.clone()));
        let mut t2 = t;
        if let Some(s) = t2.spec.as_mut() {
            s.containers[0].image = Some("nginx:2".into());
        }
        let data2 = template_patch(&t2).unwrap_or_default();
        assert_ne!(revision_hash(&data, 0), revision_hash(&data2, 0));
        assert_ne!(revision_hash(&data, 0), revision_hash(&data, 1));
    }
}
