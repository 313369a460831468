//! Built-in type definitions, generated once from k8s-openapi's schemars implementations and
//! cached: definition names like kube's ("io.k8s.api.apps.v1.Deployment"), the
//! `x-kubernetes-group-version-kind` extension on every kind, synthesized `...List` kinds, and
//! the strategic-merge-patch extensions kubectl needs for client-side apply.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::builtin_list::{BuiltinKind, register_all};
use super::refs::ref_v2;
use super::{LIST_METADATA_DESCRIPTION, add_definition_gvk, gvk_object, names};

/// The generated built-in definitions and the index from group/version/kind to names.
struct Builtins {
    definitions: BTreeMap<String, Value>,
    by_gvk: HashMap<(String, String, String), String>,
}

static BUILTINS: OnceLock<Builtins> = OnceLock::new();

fn builtins() -> &'static Builtins {
    BUILTINS.get_or_init(generate)
}

/// All built-in definitions keyed by definition name (e.g. "io.k8s.api.apps.v1.Deployment",
/// "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"), with swagger 2.0 style references
/// (`#/definitions/<name>`). Generated once, lazily.
pub(crate) fn builtin_definitions() -> &'static BTreeMap<String, Value> {
    &builtins().definitions
}

/// The definition name of a built-in kind (list kinds included), e.g.
/// ("apps","v1","Deployment") -> "io.k8s.api.apps.v1.Deployment".
pub(crate) fn builtin_definition_name(group: &str, version: &str, kind: &str) -> Option<String> {
    builtins().by_gvk.get(&(group.to_string(), version.to_string(), kind.to_string())).cloned()
}

/// Generates every built-in definition.
fn generate() -> Builtins {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.definitions_path = "/definitions".into();
        s.meta_schema = None;
        s.transforms = Vec::new();
    });
    let mut generator = SchemaGenerator::new(settings);
    let kinds = register_all(&mut generator);
    let mut definitions: BTreeMap<String, Value> =
        generator.take_definitions(false).into_iter().map(|(name, def)| (name, normalize(def))).collect();

    let mut by_gvk = HashMap::new();
    for k in &kinds {
        if let Some(def) = definitions.get_mut(&k.definition) {
            add_definition_gvk(def, gvk_object(k.group, k.version, k.kind));
        }
        by_gvk.insert((k.group.to_string(), k.version.to_string(), k.kind.to_string()), k.definition.clone());
        if let Some(list_kind) = k.list_kind {
            let list_name = format!("{}List", k.definition);
            definitions.insert(list_name.clone(), list_definition(k, list_kind));
            by_gvk.insert((k.group.to_string(), k.version.to_string(), list_kind.to_string()), list_name);
        }
    }
    add_patch_extensions(&mut definitions);
    Builtins { definitions, by_gvk }
}

/// Replaces boolean schemas (`true`/`false`, which OpenAPI v2 cannot express) by objects,
/// wherever a keyword holds a schema (a boolean `additionalProperties` is kept: v2 allows it).
fn normalize(v: Value) -> Value {
    match v {
        Value::Bool(true) => json!({}),
        Value::Bool(false) => json!({"not": {}}),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, child)| {
                    let child = match k.as_str() {
                        "properties" | "patternProperties" | "definitions" => match child {
                            Value::Object(m) => Value::Object(m.into_iter().map(|(n, s)| (n, normalize(s))).collect()),
                            other => other,
                        },
                        "additionalProperties" if child.is_boolean() => child,
                        "items" | "additionalProperties" | "not" => normalize(child),
                        "allOf" | "anyOf" | "oneOf" => match child {
                            Value::Array(items) => Value::Array(items.into_iter().map(normalize).collect()),
                            other => other,
                        },
                        _ => child,
                    };
                    (k, child)
                })
                .collect(),
        ),
        other => other,
    }
}

/// The synthesized list definition for a listable kind, shaped like kube's.
fn list_definition(k: &BuiltinKind, list_kind: &str) -> Value {
    let mut items = Map::new();
    items.insert("description".into(), Value::String(format!("List of {}.", k.kind)));
    items.insert("type".into(), Value::String("array".into()));
    items.insert("items".into(), ref_v2(&k.definition));
    let mut metadata = ref_v2(names::LIST_META);
    if let Some(m) = metadata.as_object_mut() {
        m.insert("description".into(), Value::String(LIST_METADATA_DESCRIPTION.into()));
    }
    let mut def = json!({
        "description": format!("{list_kind} is a list of {}.", k.kind),
        "type": "object",
        "properties": {
            "apiVersion": {"description": "APIVersion defines the versioned schema of this representation of an object.", "type": "string"},
            "items": Value::Object(items),
            "kind": {"description": "Kind is a string value representing the REST resource this object represents.", "type": "string"},
            "metadata": metadata,
        },
        "required": ["items"],
    });
    add_definition_gvk(&mut def, gvk_object(k.group, k.version, list_kind));
    def
}

/// (definition, property, patch strategy, merge key) of the well-known strategic-merge-patch
/// directives of the built-in types, which kubectl's client-side apply reads from
/// `x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key`.
const PATCH_DIRECTIVES: &[(&str, &str, &str, Option<&str>)] = &[
    ("io.k8s.api.core.v1.PodSpec", "containers", "merge", Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "initContainers", "merge", Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "ephemeralContainers", "merge", Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "volumes", "merge,retainKeys", Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "imagePullSecrets", "merge", Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "hostAliases", "merge", Some("ip")),
    ("io.k8s.api.core.v1.PodSpec", "topologySpreadConstraints", "merge", Some("topologyKey")),
    ("io.k8s.api.core.v1.PodSpec", "resourceClaims", "merge,retainKeys", Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "schedulingGates", "merge", Some("name")),
    ("io.k8s.api.core.v1.Container", "env", "merge", Some("name")),
    ("io.k8s.api.core.v1.Container", "ports", "merge", Some("containerPort")),
    ("io.k8s.api.core.v1.Container", "volumeMounts", "merge", Some("mountPath")),
    ("io.k8s.api.core.v1.Container", "volumeDevices", "merge", Some("devicePath")),
    ("io.k8s.api.core.v1.EphemeralContainer", "env", "merge", Some("name")),
    ("io.k8s.api.core.v1.EphemeralContainer", "ports", "merge", Some("containerPort")),
    ("io.k8s.api.core.v1.EphemeralContainer", "volumeMounts", "merge", Some("mountPath")),
    ("io.k8s.api.core.v1.EphemeralContainer", "volumeDevices", "merge", Some("devicePath")),
    ("io.k8s.api.core.v1.ServiceSpec", "ports", "merge", Some("port")),
    ("io.k8s.api.core.v1.ServiceAccount", "secrets", "merge", Some("name")),
    ("io.k8s.api.core.v1.PodStatus", "conditions", "merge", Some("type")),
    ("io.k8s.api.core.v1.PodStatus", "podIPs", "merge", Some("ip")),
    ("io.k8s.api.core.v1.PodStatus", "hostIPs", "merge", Some("ip")),
    ("io.k8s.api.core.v1.NodeStatus", "conditions", "merge", Some("type")),
    ("io.k8s.api.core.v1.NodeStatus", "addresses", "merge", Some("type")),
    ("io.k8s.api.core.v1.NamespaceStatus", "conditions", "merge", Some("type")),
    ("io.k8s.api.core.v1.PersistentVolumeClaimStatus", "conditions", "merge", Some("type")),
    ("io.k8s.api.core.v1.ServiceStatus", "conditions", "merge", Some("type")),
    ("io.k8s.api.apps.v1.DeploymentSpec", "strategy", "retainKeys", None),
    ("io.k8s.api.apps.v1.DeploymentStatus", "conditions", "merge", Some("type")),
    ("io.k8s.api.apps.v1.ReplicaSetStatus", "conditions", "merge", Some("type")),
    ("io.k8s.api.apps.v1.StatefulSetStatus", "conditions", "merge", Some("type")),
    ("io.k8s.api.apps.v1.DaemonSetStatus", "conditions", "merge", Some("type")),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "finalizers", "merge", None),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "ownerReferences", "merge", Some("uid")),
];

fn add_patch_extensions(definitions: &mut BTreeMap<String, Value>) {
    for (def, prop, strategy, key) in PATCH_DIRECTIVES {
        let Some(p) = definitions
            .get_mut(*def)
            .and_then(|d| d.get_mut("properties"))
            .and_then(|ps| ps.get_mut(*prop))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        p.insert("x-kubernetes-patch-strategy".into(), Value::String((*strategy).into()));
        if let Some(key) = key {
            p.insert("x-kubernetes-patch-merge-key".into(), Value::String((*key).into()));
        }
    }
}

/// The description k8s-openapi gives the `apiVersion` / `kind` / `metadata` fields of a
/// kind, used for custom resources as kube-apiserver does.
pub(crate) fn type_meta_description(field: &str) -> Option<String> {
    builtin_definitions()
        .get("io.k8s.api.core.v1.ConfigMap")?
        .get("properties")?
        .get(field)?
        .get("description")?
        .as_str()
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::super::refs::{REF_V2, collect_refs};
    use super::*;

    #[test]
    fn names_and_gvks() {
        assert_eq!(
            builtin_definition_name("apps", "v1", "Deployment").as_deref(),
            Some("io.k8s.api.apps.v1.Deployment")
        );
        assert_eq!(builtin_definition_name("", "v1", "Pod").as_deref(), Some("io.k8s.api.core.v1.Pod"));
        assert_eq!(
            builtin_definition_name("apps", "v1", "DeploymentList").as_deref(),
            Some("io.k8s.api.apps.v1.DeploymentList")
        );
        assert!(builtin_definition_name("flights.com", "v1", "FlightTicket").is_none());
        let defs = builtin_definitions();
        assert_eq!(
            defs["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        assert!(defs.contains_key(names::OBJECT_META));
        assert!(defs.contains_key(names::DELETE_OPTIONS));
        assert!(defs.contains_key(names::PATCH));
        assert!(defs.contains_key(names::WATCH_EVENT));
        assert_eq!(
            defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]["x-kubernetes-patch-merge-key"],
            "name"
        );
    }

    #[test]
    fn every_reference_resolves_and_no_boolean_schemas() {
        let defs = builtin_definitions();
        for (name, def) in defs {
            let mut refs = std::collections::BTreeSet::new();
            collect_refs(def, &mut refs);
            for r in refs {
                assert!(defs.contains_key(&r), "{name} references missing {r}");
            }
            assert!(def.is_object(), "{name} is not an object schema");
        }
        let text = defs["io.k8s.api.core.v1.Pod"].to_string();
        assert!(text.contains(&format!("{REF_V2}io.k8s.api.core.v1.PodSpec")));
    }
}
