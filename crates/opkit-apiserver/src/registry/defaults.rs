//! Defaulting of built-in kinds, as kube-apiserver's `SetDefaults_*` functions do, for the
//! fields clients and controllers rely on (rollout strategies, history limits, pod
//! template defaults, Job selectors, Service cluster IPs).

use serde_json::{Map, Value, json};

fn obj_mut<'a>(v: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !v[key].is_object() {
        v[key] = json!({});
    }
    match v.get_mut(key).and_then(Value::as_object_mut) {
        Some(m) => m,
        None => unreachable!("just made an object"),
    }
}

fn default(m: &mut Map<String, Value>, key: &str, value: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), value);
    }
}

fn pod_spec(spec: &mut Value) {
    let Some(s) = spec.as_object_mut() else { return };
    default(s, "restartPolicy", json!("Always"));
    default(s, "dnsPolicy", json!("ClusterFirst"));
    default(s, "schedulerName", json!("default-scheduler"));
    default(s, "terminationGracePeriodSeconds", json!(30));
    default(s, "securityContext", json!({}));
    for list in ["containers", "initContainers"] {
        let Some(containers) = s.get_mut(list).and_then(Value::as_array_mut) else { continue };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
            let tag = image.rsplit('/').next().and_then(|last| last.split_once(':')).map(|(_, t)| t);
            let pull =
                if image.contains('@') || tag.is_some_and(|t| t != "latest") { "IfNotPresent" } else { "Always" };
            default(c, "imagePullPolicy", json!(pull));
            default(c, "terminationMessagePath", json!("/dev/termination-log"));
            default(c, "terminationMessagePolicy", json!("File"));
            if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                    default(p, "protocol", json!("TCP"));
                }
            }
        }
    }
}

fn template(spec: &mut Value) {
    if spec["template"]["spec"].is_object() {
        pod_spec(&mut spec["template"]["spec"]);
    }
}

/// A cluster IP in 10.96.0.0/16 derived from the Service's uid (collisions are harmless:
/// nothing routes to these addresses).
fn cluster_ip(uid: &str) -> String {
    let h = uid.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    format!("10.96.{}.{}", (h >> 8) % 256, (h % 254) + 1)
}

/// Fills defaults of built-in kinds in place. `creating` enables create-only defaults
/// (generated selectors, allocated cluster IPs).
pub(crate) fn apply(group: &str, resource: &str, obj: &mut Value, creating: bool) {
    let uid = obj["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    match (group, resource) {
        ("", "pods") => pod_spec(&mut obj["spec"]),
        ("apps", "deployments") => {
            let spec = obj_mut(obj, "spec");
            default(spec, "replicas", json!(1));
            default(spec, "revisionHistoryLimit", json!(10));
            default(spec, "progressDeadlineSeconds", json!(600));
            default(spec, "strategy", json!({}));
            let strategy = obj_mut(&mut obj["spec"], "strategy");
            default(strategy, "type", json!("RollingUpdate"));
            if strategy.get("type") == Some(&json!("RollingUpdate")) {
                default(strategy, "rollingUpdate", json!({}));
                let ru = obj_mut(&mut obj["spec"]["strategy"], "rollingUpdate");
                default(ru, "maxUnavailable", json!("25%"));
                default(ru, "maxSurge", json!("25%"));
            }
            template(&mut obj["spec"]);
        }
        ("apps", "replicasets") => {
            default(obj_mut(obj, "spec"), "replicas", json!(1));
            template(&mut obj["spec"]);
        }
        ("apps", "statefulsets") => {
            let spec = obj_mut(obj, "spec");
            default(spec, "replicas", json!(1));
            default(spec, "podManagementPolicy", json!("OrderedReady"));
            default(spec, "revisionHistoryLimit", json!(10));
            default(spec, "updateStrategy", json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}));
            default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
            template(&mut obj["spec"]);
        }
        ("apps", "daemonsets") => {
            let spec = obj_mut(obj, "spec");
            default(spec, "revisionHistoryLimit", json!(10));
            default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
            template(&mut obj["spec"]);
        }
        ("batch", "jobs") => {
            let spec = obj_mut(obj, "spec");
            if spec.get("completions").is_none_or(Value::is_null) && spec.get("parallelism").is_none_or(Value::is_null)
            {
                spec.insert("completions".into(), json!(1));
            }
            default(spec, "parallelism", json!(1));
            default(spec, "backoffLimit", json!(6));
            default(spec, "completionMode", json!("NonIndexed"));
            default(spec, "suspend", json!(false));
            default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
            let manual = spec.get("manualSelector").and_then(Value::as_bool).unwrap_or(false);
            if creating && !manual && !uid.is_empty() {
                let labels = json!({
                    "batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                    "controller-uid": uid, "job-name": name,
                });
                spec.insert("selector".into(), json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}));
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
            if obj["spec"]["template"]["spec"].is_object() {
                let s = obj_mut(&mut obj["spec"]["template"], "spec");
                default(s, "restartPolicy", json!("Never"));
            }
            template(&mut obj["spec"]);
        }
        ("batch", "cronjobs") => {
            let spec = obj_mut(obj, "spec");
            default(spec, "concurrencyPolicy", json!("Allow"));
            default(spec, "suspend", json!(false));
            default(spec, "successfulJobsHistoryLimit", json!(3));
            default(spec, "failedJobsHistoryLimit", json!(1));
        }
        ("", "services") => {
            let spec = obj_mut(obj, "spec");
            default(spec, "type", json!("ClusterIP"));
            default(spec, "sessionAffinity", json!("None"));
            default(spec, "internalTrafficPolicy", json!("Cluster"));
            let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
            let external = spec.get("type").and_then(Value::as_str) == Some("ExternalName");
            if creating
                && !headless
                && !external
                && spec.get("clusterIP").is_none_or(|v| v.as_str().is_none_or(str::is_empty))
            {
                let ip = cluster_ip(&uid);
                spec.insert("clusterIP".into(), json!(ip));
                spec.insert("clusterIPs".into(), json!([ip]));
            }
            if !external {
                default(spec, "ipFamilies", json!(["IPv4"]));
                default(spec, "ipFamilyPolicy", json!("SingleStack"));
            }
            if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                    default(p, "protocol", json!("TCP"));
                    if let Some(port) = p.get("port").cloned() {
                        default(p, "targetPort", port);
                    }
                }
            }
        }
        ("", "persistentvolumeclaims") => {
            default(obj_mut(obj, "spec"), "volumeMode", json!("Filesystem"));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_and_job_defaults() {
        let mut d = json!({"metadata": {"name": "web"}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}}}});
        apply("apps", "deployments", &mut d, true);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        assert_eq!(d["spec"]["replicas"], 1);
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            (c["imagePullPolicy"].as_str(), c["ports"][0]["protocol"].as_str()),
            (Some("IfNotPresent"), Some("TCP"))
        );
        let mut j =
            json!({"metadata": {"name": "pi", "uid": "u1"}, "spec": {"template": {"spec": {"containers": []}}}});
        apply("batch", "jobs", &mut j, true);
        assert_eq!(j["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"], "u1");
        assert_eq!(j["spec"]["template"]["metadata"]["labels"]["job-name"], "pi");
        assert_eq!((j["spec"]["completions"].as_i64(), j["spec"]["backoffLimit"].as_i64()), (Some(1), Some(6)));
        let mut s = json!({"metadata": {"uid": "x"}, "spec": {"ports": [{"port": 80}]}});
        apply("", "services", &mut s, true);
        assert!(s["spec"]["clusterIP"].as_str().is_some_and(|ip| ip.starts_with("10.96.")));
        assert_eq!(s["spec"]["ports"][0]["targetPort"], 80);
    }
}
