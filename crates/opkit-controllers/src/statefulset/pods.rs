//! What a StatefulSet's pods and PersistentVolumeClaims look like: stable names
//! (`<sts>-<ordinal>`, `<claim>-<sts>-<ordinal>`), identity labels, hostname/subdomain and
//! claim volumes.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use crate::common::WorkloadError;

/// The pod label naming the pod (`statefulset.kubernetes.io/pod-name`).
pub(crate) const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The pod label carrying the ordinal (`apps.kubernetes.io/pod-index`).
pub(crate) const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// The pod label naming the pod's ControllerRevision.
pub(crate) const REVISION_LABEL: &str = "controller-revision-hash";

/// The ordinal of a pod of StatefulSet `sts`, parsed from its name.
pub(crate) fn ordinal_of(sts: &str, pod: &str) -> Option<i32> {
    let rest = pod.strip_prefix(sts)?.strip_prefix('-')?;
    if rest.starts_with('+') || (rest.len() > 1 && rest.starts_with('0')) {
        return None;
    }
    rest.parse().ok()
}

/// The name of claim `claim` for ordinal `ordinal`.
pub(crate) fn claim_name(claim: &str, sts: &str, ordinal: i32) -> String {
    format!("{claim}-{sts}-{ordinal}")
}

/// The revision (`controller-revision-hash` label) a pod was created from.
pub(crate) fn revision_of(pod: &Pod) -> Option<&str> {
    pod.metadata.labels.as_ref()?.get(REVISION_LABEL).map(String::as_str)
}

/// Builds pod `ordinal` of `sts` from `template` (of revision `revision`).
pub(crate) fn new_pod(
    sts: &StatefulSet,
    template: &PodTemplateSpec,
    revision: &str,
    ordinal: i32,
) -> Result<Pod, WorkloadError> {
    let set = sts.name_any();
    let name = format!("{set}-{ordinal}");
    let owner = opkit::owner::controller_reference(sts)
        .ok_or_else(|| WorkloadError::Invalid("StatefulSet has no uid".into()))?;
    let tmeta = template.metadata.clone().unwrap_or_default();
    let mut labels = tmeta.labels.unwrap_or_default();
    labels.insert(POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(REVISION_LABEL.into(), revision.to_string());
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.hostname = Some(name.clone());
    let svc = sts.spec.as_ref().and_then(|s| s.service_name.clone()).unwrap_or_default();
    if !svc.is_empty() {
        spec.subdomain = Some(svc);
    }
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    for claim in sts.spec.as_ref().and_then(|s| s.volume_claim_templates.as_ref()).into_iter().flatten() {
        let cname = claim.name_any();
        volumes.retain(|v| v.name != cname);
        volumes.push(Volume {
            name: cname.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(&cname, &set, ordinal),
                read_only: None,
            }),
            ..Default::default()
        });
    }
    if volumes.is_empty() {
        spec.volumes = None;
    }
    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: sts.namespace(),
            labels: Some(labels),
            annotations: tmeta.annotations,
            owner_references: Some(vec![owner]),
            finalizers: tmeta.finalizers,
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// The claims pod `ordinal` of `sts` needs, as they would be created. With a retention
/// policy of `Delete` the claim is owned by the StatefulSet (`whenDeleted`) so the garbage
/// collector removes it with the set.
pub(crate) fn new_claims(sts: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let set = sts.name_any();
    let Some(spec) = sts.spec.as_ref() else { return Vec::new() };
    let selector_labels = spec.selector.match_labels.clone().unwrap_or_default();
    let delete_with_set =
        spec.persistent_volume_claim_retention_policy.as_ref().and_then(|p| p.when_deleted.as_deref())
            == Some("Delete");
    spec.volume_claim_templates
        .iter()
        .flatten()
        .map(|tmpl| {
            let mut labels: BTreeMap<String, String> = tmpl.metadata.labels.clone().unwrap_or_default();
            labels.extend(selector_labels.clone());
            let owners = if delete_with_set { opkit::owner::controller_reference(sts).map(|r| vec![r]) } else { None };
            PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name(&tmpl.name_any(), &set, ordinal)),
                    namespace: sts.namespace(),
                    labels: Some(labels),
                    annotations: tmpl.metadata.annotations.clone(),
                    owner_references: owners,
                    ..Default::default()
                },
                spec: tmpl.spec.clone(),
                status: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sts() -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
            "spec": {
                "serviceName": "nginx",
                "selector": {"matchLabels": {"app": "nginx"}},
                "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [{"name": "c"}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
            }
        }))
        .unwrap_or_default()
    }

    #[test]
    fn ordinals_parse_strictly() {
        assert_eq!(ordinal_of("web", "web-0"), Some(0));
        assert_eq!(ordinal_of("web", "web-12"), Some(12));
        assert_eq!(ordinal_of("web", "web-01"), None);
        assert_eq!(ordinal_of("web", "webx-1"), None);
        assert_eq!(ordinal_of("web", "web-a"), None);
    }

    #[test]
    fn pod_has_identity() {
        let s = sts();
        let tmpl = s.spec.as_ref().map(|x| x.template.clone()).unwrap_or_default();
        let pod = new_pod(&s, &tmpl, "web-abc", 2).unwrap_or_default();
        assert_eq!(pod.metadata.name.as_deref(), Some("web-2"));
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels[POD_NAME_LABEL], "web-2");
        assert_eq!(labels[POD_INDEX_LABEL], "2");
        assert_eq!(labels[REVISION_LABEL], "web-abc");
        let spec = pod.spec.unwrap_or_default();
        assert_eq!(spec.hostname.as_deref(), Some("web-2"));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        let vol = &spec.volumes.unwrap_or_default()[0];
        assert_eq!(vol.persistent_volume_claim.as_ref().map(|c| c.claim_name.as_str()), Some("www-web-2"));
        let claims = new_claims(&s, 2);
        assert_eq!(claims[0].metadata.name.as_deref(), Some("www-web-2"));
        assert_eq!(claims[0].metadata.labels.as_ref().map(|l| l["app"].as_str()), Some("nginx"));
        assert!(claims[0].metadata.owner_references.is_none());
    }
}
