//! kustomize's built-in transformers: namespace, name prefix/suffix with name-reference fix-up,
//! labels (`labels` and legacy `commonLabels`), `commonAnnotations`, `images` and `replicas`.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::Res;

/// Kinds that are cluster-scoped (never get `metadata.namespace`).
const CLUSTER_SCOPED: [&str; 17] = [
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "PersistentVolume",
    "StorageClass",
    "PriorityClass",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "APIService",
    "Node",
    "CSIDriver",
    "IngressClass",
    "RuntimeClass",
    "CertificateSigningRequest",
];

/// Whether objects of `kind` are cluster-scoped.
pub(super) fn is_cluster_scoped(kind: &str) -> bool {
    CLUSTER_SCOPED.contains(&kind)
}

/// One entry of `labels:`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub(super) struct LabelSet {
    pairs: Map<String, Value>,
    include_selectors: bool,
    include_templates: bool,
}

/// One entry of `images:`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub(super) struct Image {
    name: String,
    new_name: Option<String>,
    new_tag: Option<String>,
    digest: Option<String>,
}

/// One entry of `replicas:`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct Replica {
    name: String,
    count: i64,
}

fn obj_at<'a>(v: &'a mut Value, path: &[&str], create: bool) -> Option<&'a mut Map<String, Value>> {
    let mut cur = v;
    for key in path {
        let map = cur.as_object_mut()?;
        if !map.contains_key(*key) {
            if !create {
                return None;
            }
            map.insert((*key).to_string(), Value::Object(Map::new()));
        }
        cur = map.get_mut(*key)?;
        if cur.is_null() && create {
            *cur = Value::Object(Map::new());
        }
    }
    cur.as_object_mut()
}

/// Sets the namespace on namespaced objects, renames Namespace objects, and sets it on
/// (Cluster)RoleBinding subjects named `default` (kustomize's default subject mode). Webhook and
/// CRD-conversion service references get the namespace too.
pub(super) fn set_namespace(res: &mut [Res], ns: &str) {
    for r in res.iter_mut() {
        let kind = r.kind().to_string();
        if kind == "Namespace" {
            if let Some(meta) = obj_at(&mut r.obj, &["metadata"], true) {
                meta.insert("name".into(), Value::String(ns.to_string()));
            }
            continue;
        }
        if !is_cluster_scoped(&kind)
            && let Some(meta) = obj_at(&mut r.obj, &["metadata"], true)
        {
            meta.insert("namespace".into(), Value::String(ns.to_string()));
        }
        if kind == "RoleBinding" || kind == "ClusterRoleBinding" {
            for s in r.obj.get_mut("subjects").and_then(Value::as_array_mut).into_iter().flatten() {
                if s.get("name").and_then(Value::as_str) == Some("default")
                    && let Some(m) = s.as_object_mut()
                {
                    m.insert("namespace".into(), Value::String(ns.to_string()));
                }
            }
        }
        for svc in service_refs(&mut r.obj, &kind) {
            svc.insert("namespace".into(), Value::String(ns.to_string()));
        }
    }
}

/// `clientConfig.service` maps of webhook configurations and CRD conversion webhooks.
fn service_refs<'a>(obj: &'a mut Value, kind: &str) -> Vec<&'a mut Map<String, Value>> {
    match kind {
        "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration" => obj
            .get_mut("webhooks")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter_map(|w| w.pointer_mut("/clientConfig/service").and_then(Value::as_object_mut))
            .collect(),
        "CustomResourceDefinition" => obj
            .pointer_mut("/spec/conversion/webhook/clientConfig/service")
            .and_then(Value::as_object_mut)
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

/// Applies `namePrefix`/`nameSuffix` to every object except Namespaces and CRDs.
pub(super) fn prefix_suffix(res: &mut [Res], prefix: &str, suffix: &str) {
    if prefix.is_empty() && suffix.is_empty() {
        return;
    }
    for r in res.iter_mut() {
        if matches!(r.kind(), "Namespace" | "CustomResourceDefinition") {
            continue;
        }
        let name = format!("{prefix}{}{suffix}", r.name());
        if let Some(meta) = obj_at(&mut r.obj, &["metadata"], true) {
            meta.insert("name".into(), Value::String(name));
        }
    }
}

/// Pod template paths (relative to the object) per workload kind.
fn template_paths(kind: &str) -> &'static [&'static str] {
    match kind {
        "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet" | "Job" | "ReplicationController" => {
            &["spec", "template"]
        }
        "CronJob" => &["spec", "jobTemplate", "spec", "template"],
        _ => &[],
    }
}

fn merge_into(map: &mut Map<String, Value>, pairs: &Map<String, Value>) {
    for (k, v) in pairs {
        let v = match v {
            Value::String(_) => v.clone(),
            Value::Null => Value::String(String::new()),
            other => Value::String(other.to_string()),
        };
        map.insert(k.clone(), v);
    }
}

fn add_labels(r: &mut Res, pairs: &Map<String, Value>, selectors: bool, templates: bool) {
    if pairs.is_empty() {
        return;
    }
    let kind = r.kind().to_string();
    if let Some(m) = obj_at(&mut r.obj, &["metadata", "labels"], true) {
        merge_into(m, pairs);
    }
    let tpl = template_paths(&kind);
    if templates && !tpl.is_empty() {
        let path: Vec<&str> = tpl.iter().copied().chain(["metadata", "labels"]).collect();
        if let Some(m) = obj_at(&mut r.obj, &path, true) {
            merge_into(m, pairs);
        }
        if kind == "CronJob"
            && let Some(m) = obj_at(&mut r.obj, &["spec", "jobTemplate", "metadata", "labels"], true)
        {
            merge_into(m, pairs);
        }
    }
    if selectors {
        let (path, create): (&[&str], bool) = match kind.as_str() {
            "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet" => (&["spec", "selector", "matchLabels"], true),
            "Service" | "ReplicationController" => (&["spec", "selector"], true),
            "Job" | "PodDisruptionBudget" => (&["spec", "selector", "matchLabels"], false),
            "CronJob" => (&["spec", "jobTemplate", "spec", "selector", "matchLabels"], false),
            _ => (&[], false),
        };
        if !path.is_empty()
            && let Some(m) = obj_at(&mut r.obj, path, create)
        {
            merge_into(m, pairs);
        }
    }
}

/// `commonLabels` (labels, selectors and templates) and each `labels` entry.
pub(super) fn labels(res: &mut [Res], common: &Map<String, Value>, sets: &[LabelSet]) {
    for r in res.iter_mut() {
        add_labels(r, common, true, true);
        for set in sets {
            add_labels(r, &set.pairs, set.include_selectors, set.include_templates || set.include_selectors);
        }
    }
}

/// `commonAnnotations`: object metadata and pod templates.
pub(super) fn annotations(res: &mut [Res], common: &Map<String, Value>) {
    if common.is_empty() {
        return;
    }
    for r in res.iter_mut() {
        let kind = r.kind().to_string();
        if let Some(m) = obj_at(&mut r.obj, &["metadata", "annotations"], true) {
            merge_into(m, common);
        }
        let tpl = template_paths(&kind);
        if !tpl.is_empty() {
            let path: Vec<&str> = tpl.iter().copied().chain(["metadata", "annotations"]).collect();
            if let Some(m) = obj_at(&mut r.obj, &path, true) {
                merge_into(m, common);
            }
        }
    }
}

/// `replicas`: sets `spec.replicas` on scalable workloads with a matching (current or earlier)
/// name.
pub(super) fn replicas(res: &mut [Res], reps: &[Replica]) {
    for rep in reps {
        for r in res.iter_mut() {
            if matches!(r.kind(), "Deployment" | "ReplicaSet" | "StatefulSet" | "ReplicationController")
                && r.had_name(&rep.name)
                && let Some(spec) = obj_at(&mut r.obj, &["spec"], true)
            {
                spec.insert("replicas".into(), Value::from(rep.count));
            }
        }
    }
}

/// Splits an image reference into (name, tag-or-digest suffix including its `:`/`@`).
fn split_image(image: &str) -> (&str, &str) {
    if let Some(at) = image.find('@') {
        return (&image[..at], &image[at..]);
    }
    let slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[slash..].rfind(':') {
        Some(c) => (&image[..slash + c], &image[slash + c..]),
        None => (image, ""),
    }
}

/// Pod specs inside an object (Pod itself, workload templates, CronJob job templates).
fn pod_specs(obj: &mut Value) -> Vec<&mut Map<String, Value>> {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
    let tpl = template_paths(&kind);
    let ptr = if kind == "Pod" {
        "/spec".to_string()
    } else if tpl.is_empty() {
        return Vec::new();
    } else {
        format!("/{}/spec", tpl.join("/"))
    };
    obj.pointer_mut(&ptr).and_then(Value::as_object_mut).into_iter().collect()
}

/// `images`: rewrites container and initContainer images whose name matches.
pub(super) fn images(res: &mut [Res], imgs: &[Image]) {
    images_in(res.iter_mut().map(|r| &mut r.obj), imgs);
}

/// The `images` rewrite over any objects; returns how many containers changed.
pub(super) fn images_in<'a>(objs: impl Iterator<Item = &'a mut Value>, imgs: &[Image]) -> usize {
    let mut changed = 0;
    if imgs.is_empty() {
        return changed;
    }
    for obj in objs {
        for spec in pod_specs(obj) {
            for list in ["containers", "initContainers"] {
                for c in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
                    let Some(current) = c.get("image").and_then(Value::as_str) else { continue };
                    let (name, suffix) = split_image(current);
                    let Some(img) = imgs.iter().find(|i| i.name == name) else { continue };
                    let new_name = img.new_name.as_deref().unwrap_or(name);
                    let new_suffix = match (&img.digest, &img.new_tag) {
                        (Some(d), _) => format!("@{d}"),
                        (None, Some(t)) => format!(":{t}"),
                        (None, None) => suffix.to_string(),
                    };
                    let image = format!("{new_name}{new_suffix}");
                    if let Some(m) = c.as_object_mut() {
                        m.insert("image".into(), Value::String(image));
                        changed += 1;
                    }
                }
            }
        }
    }
    changed
}

impl Image {
    /// The rule `kustomize edit set image NAME=IMAGE` writes: IMAGE split into the new
    /// name and its tag or digest.
    pub(super) fn set(name: &str, image: &str) -> Image {
        let (new_name, suffix) = split_image(image);
        let (new_tag, digest) = match suffix.strip_prefix('@') {
            Some(d) => (None, Some(d.to_string())),
            None => (suffix.strip_prefix(':').map(String::from), None),
        };
        Image { name: name.to_string(), new_name: Some(new_name.to_string()), new_tag, digest }
    }
}

/// An object's identity change: kind, earlier (namespace, name)s, current namespace and name.
struct Rename {
    kind: String,
    previous: Vec<(String, String)>,
    namespace: String,
    name: String,
}

impl Rename {
    fn matches(&self, kind: &str, name: &str, ns: Option<&str>) -> bool {
        self.kind == kind
            && self.previous.iter().any(|(pns, pn)| pn == name && ns.is_none_or(|n| n.is_empty() || n == pns))
    }
}

fn lookup<'a>(renames: &'a [Rename], kind: &str, name: &str, ns: Option<&str>) -> Option<&'a Rename> {
    renames.iter().find(|r| r.matches(kind, name, ns)).or_else(|| renames.iter().find(|r| r.matches(kind, name, None)))
}

fn fix_field(map: &mut Map<String, Value>, field: &str, kind: &str, renames: &[Rename]) {
    if let Some(old) = map.get(field).and_then(Value::as_str)
        && let Some(r) = lookup(renames, kind, old, None)
    {
        map.insert(field.to_string(), Value::String(r.name.clone()));
    }
}

/// Rewrites references to renamed objects: RoleBinding `roleRef` and ServiceAccount `subjects`
/// (name and namespace), pod `serviceAccountName`, ConfigMap/Secret/PVC references in volumes,
/// `envFrom`, `env[].valueFrom` and `imagePullSecrets`, and webhook/conversion Service refs.
pub(super) fn fix_name_references(res: &mut [Res]) {
    let renames: Vec<Rename> = res
        .iter()
        .filter(|r| !r.previous.is_empty())
        .map(|r| Rename {
            kind: r.kind().to_string(),
            previous: r.previous.clone(),
            namespace: r.namespace().to_string(),
            name: r.name().to_string(),
        })
        .collect();
    if renames.is_empty() {
        return;
    }
    for r in res.iter_mut() {
        let kind = r.kind().to_string();
        if kind == "RoleBinding" || kind == "ClusterRoleBinding" {
            if let Some(role_ref) = r.obj.get_mut("roleRef").and_then(Value::as_object_mut) {
                let rk = role_ref.get("kind").and_then(Value::as_str).unwrap_or("ClusterRole").to_string();
                fix_field(role_ref, "name", &rk, &renames);
            }
            for s in r.obj.get_mut("subjects").and_then(Value::as_array_mut).into_iter().flatten() {
                let Some(s) = s.as_object_mut() else { continue };
                if s.get("kind").and_then(Value::as_str) != Some("ServiceAccount") {
                    continue;
                }
                let name = s.get("name").and_then(Value::as_str).unwrap_or_default();
                let ns = s.get("namespace").and_then(Value::as_str);
                if let Some(hit) = lookup(&renames, "ServiceAccount", name, ns) {
                    s.insert("name".into(), Value::String(hit.name.clone()));
                    if !hit.namespace.is_empty() {
                        s.insert("namespace".into(), Value::String(hit.namespace.clone()));
                    }
                }
            }
        }
        for svc in service_refs(&mut r.obj, &kind) {
            fix_field(svc, "name", "Service", &renames);
        }
        for spec in pod_specs(&mut r.obj) {
            fix_pod_spec(spec, &renames);
        }
    }
}

fn fix_pod_spec(spec: &mut Map<String, Value>, renames: &[Rename]) {
    fix_field(spec, "serviceAccountName", "ServiceAccount", renames);
    for s in spec.get_mut("imagePullSecrets").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(m) = s.as_object_mut() {
            fix_field(m, "name", "Secret", renames);
        }
    }
    for v in spec.get_mut("volumes").and_then(Value::as_array_mut).into_iter().flatten() {
        let Some(v) = v.as_object_mut() else { continue };
        if let Some(m) = v.get_mut("configMap").and_then(Value::as_object_mut) {
            fix_field(m, "name", "ConfigMap", renames);
        }
        if let Some(m) = v.get_mut("secret").and_then(Value::as_object_mut) {
            fix_field(m, "secretName", "Secret", renames);
        }
        if let Some(m) = v.get_mut("persistentVolumeClaim").and_then(Value::as_object_mut) {
            fix_field(m, "claimName", "PersistentVolumeClaim", renames);
        }
        for src in v
            .get_mut("projected")
            .and_then(|p| p.get_mut("sources"))
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(m) = src.get_mut("configMap").and_then(Value::as_object_mut) {
                fix_field(m, "name", "ConfigMap", renames);
            }
            if let Some(m) = src.get_mut("secret").and_then(Value::as_object_mut) {
                fix_field(m, "name", "Secret", renames);
            }
        }
    }
    for list in ["containers", "initContainers"] {
        for c in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
            for ef in c.get_mut("envFrom").and_then(Value::as_array_mut).into_iter().flatten() {
                if let Some(m) = ef.get_mut("configMapRef").and_then(Value::as_object_mut) {
                    fix_field(m, "name", "ConfigMap", renames);
                }
                if let Some(m) = ef.get_mut("secretRef").and_then(Value::as_object_mut) {
                    fix_field(m, "name", "Secret", renames);
                }
            }
            for e in c.get_mut("env").and_then(Value::as_array_mut).into_iter().flatten() {
                if let Some(m) = e.pointer_mut("/valueFrom/configMapKeyRef").and_then(Value::as_object_mut) {
                    fix_field(m, "name", "ConfigMap", renames);
                }
                if let Some(m) = e.pointer_mut("/valueFrom/secretKeyRef").and_then(Value::as_object_mut) {
                    fix_field(m, "name", "Secret", renames);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_image_handles_registry_ports_tags_digests() {
        assert_eq!(split_image("controller:latest"), ("controller", ":latest"));
        assert_eq!(split_image("controller"), ("controller", ""));
        assert_eq!(split_image("localhost:5000/app:v1"), ("localhost:5000/app", ":v1"));
        assert_eq!(split_image("localhost:5000/app"), ("localhost:5000/app", ""));
        assert_eq!(split_image("app@sha256:abc"), ("app", "@sha256:abc"));
    }
}
