//! batch/v1 jobs and cron jobs: defaults (a job's generated selector and labels),
//! template validation, and their Table printers.

use serde_json::{Value, json};

use super::Strategy;
use super::defaulting::{default, obj_mut};
use super::pod_spec::validate_pod_spec;
use super::pods::default_template;
use crate::registry::meta::validate_subdomain;
use crate::schema::{FieldError, FieldErrorReason};
use crate::selector::{FieldLabels, scalar_at_or};
use crate::table::{self, Printer};

/// The longest CronJob name kube accepts: a DNS-1035 label's 63 less the 11 characters
/// of the Jobs' `-<scheduled time>` suffix.
const CRONJOB_NAME_MAX: usize = 52;

/// The strategy of batch/v1 jobs.
pub(super) struct Jobs;
/// The strategy of batch/v1 cron jobs.
pub(super) struct CronJobs;

impl Strategy for Jobs {
    fn default(&self, obj: &mut Value, creating: bool) {
        let uid = obj["metadata"]["uid"].as_str().unwrap_or_default().to_string();
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let spec = obj_mut(obj, "spec");
        if spec.get("completions").is_none_or(Value::is_null) && spec.get("parallelism").is_none_or(Value::is_null) {
            spec.insert("completions".into(), json!(1));
        }
        default(spec, "parallelism", json!(1));
        default(spec, "backoffLimit", json!(6));
        default(spec, "completionMode", json!("NonIndexed"));
        default(spec, "suspend", json!(false));
        default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
        let manual = spec.get("manualSelector").and_then(Value::as_bool).unwrap_or(false);
        if creating && !manual && !uid.is_empty() {
            generate_selector(obj, &uid, &name);
        }
        if obj["spec"]["template"]["spec"].is_object() {
            let s = obj_mut(&mut obj["spec"]["template"], "spec");
            default(s, "restartPolicy", json!("Never"));
        }
        default_template(&mut obj["spec"]);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_pod_spec(&obj["spec"]["template"]["spec"], "spec.template.spec")
    }

    fn field_labels(&self) -> FieldLabels {
        JOB_FIELD_LABELS
    }

    fn table(&self) -> Option<Printer> {
        Some(table::workloads::jobs())
    }
}

/// Selects the job's pods by its uid and labels the template to match, as the job
/// controller's defaulting does when `manualSelector` is not set.
fn generate_selector(obj: &mut Value, uid: &str, name: &str) {
    let labels = json!({
        "batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
        "controller-uid": uid, "job-name": name,
    });
    obj["spec"]["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
    if !obj["spec"]["template"].is_object() {
        obj["spec"]["template"] = json!({});
    }
    let meta = &mut obj["spec"]["template"]["metadata"];
    if !meta["labels"].is_object() {
        meta["labels"] = json!({});
    }
    if let (Some(l), Some(add)) = (meta["labels"].as_object_mut(), labels.as_object()) {
        for (k, v) in add {
            l.insert(k.clone(), v.clone());
        }
    }
}

impl Strategy for CronJobs {
    /// A DNS subdomain of at most 52 characters, leaving room for the 11 characters the
    /// controller appends to name its Jobs (kube's `ValidateCronJob`).
    fn validate_name(&self, name: &str) -> Option<FieldError> {
        validate_subdomain("metadata.name", name).or_else(|| {
            (name.len() > CRONJOB_NAME_MAX).then(|| FieldError {
                field: "metadata.name".into(),
                reason: FieldErrorReason::Invalid,
                message: format!("Invalid value: \"{name}\": must be no more than {CRONJOB_NAME_MAX} characters"),
            })
        })
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let template = &obj["spec"]["jobTemplate"]["spec"]["template"]["spec"];
        validate_pod_spec(template, "spec.jobTemplate.spec.template.spec")
    }

    fn default(&self, obj: &mut Value, _creating: bool) {
        let spec = obj_mut(obj, "spec");
        default(spec, "concurrencyPolicy", json!("Allow"));
        default(spec, "suspend", json!(false));
        default(spec, "successfulJobsHistoryLimit", json!(3));
        default(spec, "failedJobsHistoryLimit", json!(1));
    }

    fn table(&self) -> Option<Printer> {
        Some(table::workloads::cronjobs())
    }
}

/// The field labels of jobs (`status.successful` is `status.succeeded`), with kube's
/// own wording for one it does not support.
const JOB_FIELD_LABELS: FieldLabels = FieldLabels {
    names: Some(&["metadata.name", "metadata.namespace", "status.successful"]),
    value: |obj, field| (field == "status.successful").then(|| scalar_at_or(obj, "status.succeeded", "0")),
    unsupported: Some(|field| format!("field label {field:?} not supported for batchv1.Job")),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_defaults_generate_a_selector() {
        let mut j =
            json!({"metadata": {"name": "pi", "uid": "u1"}, "spec": {"template": {"spec": {"containers": []}}}});
        Jobs.default(&mut j, true);
        assert_eq!(j["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"], "u1");
        assert_eq!(j["spec"]["template"]["metadata"]["labels"]["job-name"], "pi");
        assert_eq!((j["spec"]["completions"].as_i64(), j["spec"]["backoffLimit"].as_i64()), (Some(1), Some(6)));
    }
}
