//! What a Job's pods look like (labels `batch.kubernetes.io/job-name`, `controller-uid`,
//! the tracking finalizer, Indexed-mode completion indexes) and the interval notation of
//! `status.completedIndexes` (`"0-2,5"`).

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use crate::common::WorkloadError;

/// The finalizer keeping finished pods until the Job has counted them.
pub(crate) const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// The label and annotation holding an Indexed Job pod's completion index.
pub(crate) const INDEX_KEY: &str = "batch.kubernetes.io/job-completion-index";
/// The label naming the pod's Job.
pub(crate) const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// The label holding the Job's uid.
pub(crate) const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";

/// Whether the Job runs in Indexed completion mode.
pub(crate) fn is_indexed(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some("Indexed")
}

/// The completion index of an Indexed Job's pod.
pub(crate) fn index_of(pod: &Pod) -> Option<i32> {
    let from = |m: Option<&std::collections::BTreeMap<String, String>>| {
        m.and_then(|m| m.get(INDEX_KEY)).and_then(|v| v.parse().ok())
    };
    from(pod.metadata.annotations.as_ref()).or_else(|| from(pod.metadata.labels.as_ref()))
}

/// Builds a pod of `job` (with completion `index` in Indexed mode).
pub(crate) fn new_pod(job: &Job, index: Option<i32>) -> Result<Pod, WorkloadError> {
    let name = job.name_any();
    let uid = job.uid().unwrap_or_default();
    let owner =
        opkit::owner::controller_reference(job).ok_or_else(|| WorkloadError::Invalid("Job has no uid".into()))?;
    let template = job.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    let mut labels = tmeta.labels.unwrap_or_default();
    labels.insert(CONTROLLER_UID_LABEL.into(), uid.clone());
    labels.insert(JOB_NAME_LABEL.into(), name.clone());
    labels.insert("controller-uid".into(), uid);
    labels.insert("job-name".into(), name.clone());
    let mut annotations = tmeta.annotations.unwrap_or_default();
    let mut spec = template.spec.unwrap_or_default();
    let mut generate_name = format!("{name}-");
    if let Some(i) = index {
        labels.insert(INDEX_KEY.into(), i.to_string());
        annotations.insert(INDEX_KEY.into(), i.to_string());
        generate_name = format!("{name}-{i}-");
        if spec.hostname.is_none() {
            spec.hostname = Some(format!("{name}-{i}"));
        }
        for c in spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten()) {
            let env = c.env.get_or_insert_with(Vec::new);
            if !env.iter().any(|e| e.name == "JOB_COMPLETION_INDEX") {
                env.push(EnvVar {
                    name: "JOB_COMPLETION_INDEX".into(),
                    value: None,
                    value_from: Some(EnvVarSource {
                        field_ref: Some(ObjectFieldSelector {
                            api_version: None,
                            field_path: format!("metadata.annotations['{INDEX_KEY}']"),
                        }),
                        ..Default::default()
                    }),
                });
            }
        }
    }
    let mut finalizers = tmeta.finalizers.unwrap_or_default();
    finalizers.push(TRACKING_FINALIZER.into());
    Ok(Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name),
            namespace: job.namespace(),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![owner]),
            finalizers: Some(finalizers),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// Parses `"0-2,5"` into a set of indexes (ignoring malformed parts).
pub(crate) fn parse_intervals(s: &str) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(a) = part.parse() {
                    out.insert(a);
                }
            }
        }
    }
    out
}

/// Formats indexes as kube does: ascending, consecutive runs of 2+ written `a-b`.
pub(crate) fn format_intervals(set: &BTreeSet<i32>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut iter = set.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end += 1;
            iter.next();
        }
        parts.push(if end == start { start.to_string() } else { format!("{start}-{end}") });
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn intervals_round_trip() {
        let s = parse_intervals("0-2,5,7-8");
        assert_eq!(s, [0, 1, 2, 5, 7, 8].into_iter().collect());
        assert_eq!(format_intervals(&s), "0-2,5,7-8");
        assert_eq!(format_intervals(&[3, 4].into_iter().collect()), "3-4");
        assert_eq!(format_intervals(&BTreeSet::new()), "");
    }

    #[test]
    fn pods_carry_job_identity() {
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": "pi", "namespace": "default", "uid": "u1"},
            "spec": {"completionMode": "Indexed", "template": {"spec": {"containers": [{"name": "c"}], "restartPolicy": "Never"}}}
        }))
        .unwrap_or_default();
        let pod = new_pod(&job, Some(2)).unwrap_or_default();
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels[JOB_NAME_LABEL], "pi");
        assert_eq!(labels[CONTROLLER_UID_LABEL], "u1");
        assert_eq!(labels["job-name"], "pi");
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("pi-2-"));
        assert_eq!(index_of(&pod), Some(2));
        assert_eq!(pod.metadata.finalizers, Some(vec![TRACKING_FINALIZER.to_string()]));
        let spec = pod.spec.unwrap_or_default();
        assert_eq!(spec.hostname.as_deref(), Some("pi-2"));
        assert!(spec.containers[0].env.iter().flatten().any(|e| e.name == "JOB_COMPLETION_INDEX"));
    }
}
