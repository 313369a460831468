//! KUDO's enhancer: what the engine adds to every rendered object before applying it —
//! the `heritage`, `kudo.dev/operator` and `kudo.dev/instance` labels (also on pod
//! templates and volume claim templates), the plan/phase/step/execution annotations, the
//! operator version on pod templates, the Instance's namespace and controller reference
//! for namespaced objects, and `kudo.dev/dependencies-hash` on pod templates: a hash of
//! the ConfigMaps and Secrets the pods use, so a config change rolls them.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::{Client, ResourceExt};
use serde_json::{Map, Value, json};

use super::OperatorVersion;
use super::step::StepMeta;
use crate::resources::{self, DEPENDENCIES_HASH_ANNOTATION, SKIP_HASH_ANNOTATION};

/// The kinds with a pod template at `spec/template`.
const POD_TEMPLATE_KINDS: &[&str] =
    &["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController", "Job"];

fn object_at<'a>(v: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    let mut cur = v;
    for p in path {
        let map = cur.as_object_mut()?;
        cur = map.entry(p.to_string()).or_insert_with(|| json!({}));
        if cur.is_null() {
            *cur = json!({});
        }
    }
    cur.as_object_mut()
}

fn insert_all(target: Option<&mut Map<String, Value>>, fields: &[(&str, &str)]) {
    if let Some(t) = target {
        for (k, v) in fields {
            t.insert((*k).to_string(), Value::String((*v).to_string()));
        }
    }
}

/// Adds KUDO's labels, annotations, namespace and owner to `objects`; `namespaced[i]`
/// says whether `objects[i]` is namespaced.
pub(crate) fn enhance(objects: &mut [Value], namespaced: &[bool], meta: &StepMeta, ov: &OperatorVersion) {
    let instance = meta.name();
    let namespace = meta.namespace();
    let labels = [
        (resources::HERITAGE_LABEL, "kudo"),
        (resources::OPERATOR_LABEL, ov.operator_name.as_str()),
        (resources::INSTANCE_LABEL, instance.as_str()),
    ];
    let annotations = [
        (resources::PLAN_ANNOTATION, meta.plan.as_str()),
        (resources::PHASE_ANNOTATION, meta.phase.as_str()),
        (resources::STEP_ANNOTATION, meta.step.as_str()),
        (resources::PLAN_UID_ANNOTATION, meta.uid.as_str()),
    ];
    let template_annotations = [(resources::OPERATOR_VERSION_ANNOTATION, ov.version.as_str())];
    for (obj, namespaced) in objects.iter_mut().zip(namespaced) {
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
        insert_all(object_at(obj, &["metadata", "labels"]), &labels);
        insert_all(object_at(obj, &["metadata", "annotations"]), &annotations);
        if POD_TEMPLATE_KINDS.contains(&kind.as_str()) {
            insert_all(object_at(obj, &["spec", "template", "metadata", "labels"]), &labels);
            insert_all(object_at(obj, &["spec", "template", "metadata", "annotations"]), &template_annotations);
        }
        if kind == "CronJob" {
            insert_all(object_at(obj, &["spec", "jobTemplate", "spec", "template", "metadata", "labels"]), &labels);
        }
        if kind == "StatefulSet"
            && let Some(claims) = obj.pointer_mut("/spec/volumeClaimTemplates").and_then(Value::as_array_mut)
        {
            for claim in claims {
                insert_all(object_at(claim, &["metadata", "labels"]), &labels);
            }
        }
        if *namespaced && let Some(m) = object_at(obj, &["metadata"]) {
            m.insert("namespace".into(), Value::String(namespace.clone()));
            m.insert(
                "ownerReferences".into(),
                json!([{
                    "apiVersion": resources::API_VERSION,
                    "kind": "Instance",
                    "name": instance,
                    "uid": meta.instance.uid().unwrap_or_default(),
                    "controller": true,
                    "blockOwnerDeletion": true,
                }]),
            );
        }
    }
}

/// The ConfigMaps and Secrets a pod spec refers to (volumes, projected volumes, envFrom,
/// env valueFrom).
fn dependencies(pod_spec: &Value) -> BTreeSet<(&'static str, String)> {
    let mut out = BTreeSet::new();
    let mut add = |kind: &'static str, name: Option<&str>| {
        if let Some(n) = name.filter(|n| !n.is_empty()) {
            out.insert((kind, n.to_string()));
        }
    };
    for volume in pod_spec.get("volumes").and_then(Value::as_array).into_iter().flatten() {
        add("ConfigMap", volume.pointer("/configMap/name").and_then(Value::as_str));
        add("Secret", volume.pointer("/secret/secretName").and_then(Value::as_str));
        for source in volume.pointer("/projected/sources").and_then(Value::as_array).into_iter().flatten() {
            add("ConfigMap", source.pointer("/configMap/name").and_then(Value::as_str));
            add("Secret", source.pointer("/secret/name").and_then(Value::as_str));
        }
    }
    for list in ["containers", "initContainers"] {
        for c in pod_spec.get(list).and_then(Value::as_array).into_iter().flatten() {
            for from in c.get("envFrom").and_then(Value::as_array).into_iter().flatten() {
                add("ConfigMap", from.pointer("/configMapRef/name").and_then(Value::as_str));
                add("Secret", from.pointer("/secretRef/name").and_then(Value::as_str));
            }
            for env in c.get("env").and_then(Value::as_array).into_iter().flatten() {
                add("ConfigMap", env.pointer("/valueFrom/configMapKeyRef/name").and_then(Value::as_str));
                add("Secret", env.pointer("/valueFrom/secretKeyRef/name").and_then(Value::as_str));
            }
        }
    }
    out
}

/// The data of a dependency: from the objects being applied, else from the cluster.
async fn dependency_data(client: &Client, namespace: &str, objects: &[Value], kind: &str, name: &str) -> Option<Value> {
    let pick = |o: &Value| json!({"data": o.get("data"), "binaryData": o.get("binaryData"), "stringData": o.get("stringData")});
    if let Some(o) = objects.iter().find(|o| {
        o.get("kind").and_then(Value::as_str) == Some(kind)
            && o.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
    }) {
        if o.pointer(&format!("/metadata/annotations/{}", SKIP_HASH_ANNOTATION.replace('/', "~1"))).is_some() {
            return None;
        }
        return Some(pick(o));
    }
    let found = match kind {
        "ConfigMap" => Api::<ConfigMap>::namespaced(client.clone(), namespace)
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .filter(|c| !c.annotations().contains_key(SKIP_HASH_ANNOTATION))
            .and_then(|c| serde_json::to_value(c).ok()),
        _ => Api::<Secret>::namespaced(client.clone(), namespace)
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .filter(|s| !s.annotations().contains_key(SKIP_HASH_ANNOTATION))
            .and_then(|s| serde_json::to_value(s).ok()),
    };
    found.map(|o| pick(&o))
}

/// Sets `kudo.dev/dependencies-hash` on the pod templates of `objects` that use
/// ConfigMaps or Secrets.
pub(crate) async fn add_dependency_hashes(client: &Client, namespace: &str, objects: &mut [Value]) {
    let snapshot: Vec<Value> = objects.to_vec();
    for obj in objects.iter_mut() {
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        if !POD_TEMPLATE_KINDS.contains(&kind) {
            continue;
        }
        let Some(pod_spec) = obj.pointer("/spec/template/spec") else { continue };
        let deps = dependencies(pod_spec);
        if deps.is_empty() {
            continue;
        }
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        for (kind, name) in &deps {
            ctx.update(kind.as_bytes());
            ctx.update(name.as_bytes());
            if let Some(data) = dependency_data(client, namespace, &snapshot, kind, name).await {
                ctx.update(data.to_string().as_bytes());
            }
        }
        let digest = ctx.finish();
        let hash: String = digest.as_ref()[..16].iter().map(|b| format!("{b:02x}")).collect();
        insert_all(
            object_at(obj, &["spec", "template", "metadata", "annotations"]),
            &[(DEPENDENCIES_HASH_ANNOTATION, hash.as_str())],
        );
    }
}
