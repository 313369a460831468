//! KUDO's health rules (`pkg/kubernetes/status/health.go`), on objects as JSON:
//! Deployments and StatefulSets rolled out (kubectl's rollout status), Jobs succeeded
//! (a failed Job is a terminal failure), Pods running and ready, CRDs established,
//! Namespaces active, Services with a cluster IP (and a load balancer address when they
//! ask for one), Instances with no active plan; anything else is healthy once it exists.

use serde_json::Value;

/// What an object's health is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Health {
    /// Healthy.
    Healthy,
    /// Not yet healthy; the message says why.
    Waiting(String),
    /// Failed for good (a failed Job); the step fails fatally.
    Failed(String),
}

fn int(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

fn condition_true(v: &Value, type_: &str) -> bool {
    v.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| str_at(c, "/type") == type_ && str_at(c, "/status") == "True"))
}

/// The health of `obj` by KUDO's rules.
pub(crate) fn check(obj: &Value) -> Health {
    let kind = str_at(obj, "/kind");
    let group = str_at(obj, "/apiVersion").rsplit_once('/').map(|(g, _)| g).unwrap_or_default();
    let name = str_at(obj, "/metadata/name");
    match (group, kind) {
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            if condition_true(obj, "Established") {
                Health::Healthy
            } else {
                Health::Waiting(format!("CRD {name} is not healthy ( Conditions: not Established )"))
            }
        }
        ("apps", "Deployment") => deployment(obj, name),
        ("apps", "StatefulSet") => stateful_set(obj, name),
        ("batch", "Job") => {
            let failed = obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|cs| cs.iter().find(|c| str_at(c, "/type") == "Failed" && str_at(c, "/status") == "True"));
            if let Some(c) = failed {
                return Health::Failed(format!("job {name:?} has failed terminally: {}", str_at(c, "/message")));
            }
            if int(obj, "/status/succeeded") == 1 {
                Health::Healthy
            } else {
                Health::Waiting(format!("job {name:?} still running or failed"))
            }
        }
        ("", "Pod") => {
            let phase = str_at(obj, "/status/phase");
            if phase == "Running" && condition_true(obj, "Ready") {
                Health::Healthy
            } else {
                let ns = str_at(obj, "/metadata/namespace");
                Health::Waiting(format!("pod {ns}/{name} is not running yet: {phase}"))
            }
        }
        ("", "Namespace") => match str_at(obj, "/status/phase") {
            "Active" => Health::Healthy,
            phase => Health::Waiting(format!("namespace {name} is not active: {phase}")),
        },
        ("", "Service") => service(obj, name),
        ("kudo.dev", "Instance") => {
            if str_at(obj, "/spec/planExecution/planName").is_empty() {
                Health::Healthy
            } else {
                let ns = str_at(obj, "/metadata/namespace");
                Health::Waiting(format!(
                    "instance {ns}/{name} active plan is in state {}",
                    str_at(obj, "/spec/planExecution/status")
                ))
            }
        }
        _ => Health::Healthy,
    }
}

/// kubectl's `DeploymentStatusViewer`.
fn deployment(obj: &Value, name: &str) -> Health {
    let generation = int(obj, "/metadata/generation");
    let observed = int(obj, "/status/observedGeneration");
    if generation > observed {
        return Health::Waiting(format!(
            "deployment {name:?} is not healthy: Waiting for deployment spec update to be observed..."
        ));
    }
    let progress_deadline = obj.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| {
        cs.iter().any(|c| str_at(c, "/type") == "Progressing" && str_at(c, "/reason") == "ProgressDeadlineExceeded")
    });
    if progress_deadline {
        return Health::Waiting(format!("deployment {name:?} exceeded its progress deadline"));
    }
    let replicas = obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
    let updated = int(obj, "/status/updatedReplicas");
    let current = int(obj, "/status/replicas");
    let available = int(obj, "/status/availableReplicas");
    let waiting = |m: String| {
        Health::Waiting(format!(
            "deployment {name:?} is not healthy: Waiting for deployment {name:?} rollout to finish: {m}"
        ))
    };
    if updated < replicas {
        return waiting(format!("{updated} out of {replicas} new replicas have been updated..."));
    }
    if current > updated {
        return waiting(format!("{} old replicas are pending termination...", current - updated));
    }
    if available < updated {
        return waiting(format!("{available} of {updated} updated replicas are available..."));
    }
    Health::Healthy
}

/// kubectl's `StatefulSetStatusViewer`.
fn stateful_set(obj: &Value, name: &str) -> Health {
    let generation = int(obj, "/metadata/generation");
    let observed = int(obj, "/status/observedGeneration");
    if observed == 0 || generation > observed {
        return Health::Waiting(format!(
            "statefulset {name:?} is not healthy: Waiting for statefulset spec update to be observed..."
        ));
    }
    let replicas = obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
    let ready = int(obj, "/status/readyReplicas");
    if ready < replicas {
        return Health::Waiting(format!(
            "statefulset {name:?} is not healthy: Waiting for {} pods to be ready...",
            replicas - ready
        ));
    }
    let strategy = str_at(obj, "/spec/updateStrategy/type");
    if strategy.is_empty() || strategy == "RollingUpdate" {
        let partition = int(obj, "/spec/updateStrategy/rollingUpdate/partition");
        if partition > 0 {
            let updated = int(obj, "/status/updatedReplicas");
            if updated < replicas - partition {
                return Health::Waiting(format!(
                    "statefulset {name:?} is not healthy: Waiting for partitioned roll out to finish: {updated} out of {} new pods have been updated...",
                    replicas - partition
                ));
            }
            return Health::Healthy;
        }
        let update = str_at(obj, "/status/updateRevision");
        if update != str_at(obj, "/status/currentRevision") {
            return Health::Waiting(format!(
                "statefulset {name:?} is not healthy: waiting for statefulset rolling update to complete {} pods at revision {update}...",
                int(obj, "/status/updatedReplicas")
            ));
        }
    }
    Health::Healthy
}

fn service(obj: &Value, name: &str) -> Health {
    let ns = str_at(obj, "/metadata/namespace");
    let type_ = str_at(obj, "/spec/type");
    if type_ == "ExternalName" {
        return Health::Healthy;
    }
    if str_at(obj, "/spec/clusterIP").is_empty() {
        return Health::Waiting(format!("service {ns}/{name} does not have cluster IP address"));
    }
    if type_ == "LoadBalancer"
        && obj.pointer("/spec/externalIPs").and_then(Value::as_array).is_none_or(Vec::is_empty)
        && obj.pointer("/status/loadBalancer/ingress").and_then(Value::as_array).is_none_or(Vec::is_empty)
    {
        return Health::Waiting(format!("service {ns}/{name} does not have load balancer ingress IP address"));
    }
    Health::Healthy
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deployments_and_statefulsets_follow_rollout_status() {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "generation": 2},
            "spec": {"replicas": 2}, "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 1}});
        assert!(matches!(check(&d), Health::Waiting(m) if m.ends_with("1 of 2 updated replicas are available...")));
        d["status"]["availableReplicas"] = json!(2);
        assert_eq!(check(&d), Health::Healthy);
        let s = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s", "generation": 1},
            "spec": {"replicas": 3}, "status": {"observedGeneration": 1, "readyReplicas": 1}});
        assert!(matches!(check(&s), Health::Waiting(m) if m.contains("Waiting for 2 pods to be ready")));
    }

    #[test]
    fn failed_jobs_are_terminal_and_unknown_kinds_healthy() {
        let j = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "status": {"conditions": [{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}]}});
        assert!(matches!(check(&j), Health::Failed(_)));
        assert_eq!(
            check(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})),
            Health::Healthy
        );
    }
}
