//! Recovering JSON field names. prost turned the proto field names (which are the JSON names)
//! into snake_case, losing acronyms ("podIP" became `pod_ip`); the exact spelling is found by
//! matching against the OpenAPI definitions (case-insensitively, ignoring `_`, `-` and `$`),
//! falling back to lowerCamelCase.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use serde_json::Value;

/// JSONSchemaProps fields that are non-pointer Go bools with `omitempty`: `false` is unset.
pub(super) const SCHEMA_OMIT_FALSE: &[&str] = &[
    "exclusiveMaximum",
    "exclusiveMinimum",
    "uniqueItems",
    "nullable",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
];

/// Normalized property name → property name.
pub(super) type Props = HashMap<String, String>;

/// OpenAPI property names indexed for matching.
#[derive(Debug, Default)]
pub(super) struct Definitions {
    /// Lowercased definition name → (normalized property name → property name).
    by_lower: HashMap<String, Props>,
    /// Lowercased (package without version, type name) → the first version's properties.
    by_group_type: HashMap<(String, String), Props>,
    /// Lowercased type name → the first definition's properties.
    by_type: HashMap<String, Props>,
    /// Normalized property name → its spelling across all definitions (`None` if spellings
    /// disagree).
    global: HashMap<String, Option<String>>,
}

impl Definitions {
    /// Indexes definitions keyed like "io.k8s.api.core.v1.PodStatus".
    pub(super) fn new(defs: &BTreeMap<String, Value>) -> Definitions {
        let mut out = Definitions::default();
        for (name, def) in defs {
            let Some(properties) = def.get("properties").and_then(Value::as_object) else {
                continue;
            };
            let mut props = HashMap::new();
            for prop in properties.keys() {
                let key = normalize(prop);
                out.global
                    .entry(key.clone())
                    .and_modify(|seen| {
                        if seen.as_deref() != Some(prop.as_str()) {
                            *seen = None;
                        }
                    })
                    .or_insert_with(|| Some(prop.clone()));
                props.insert(key, prop.clone());
            }
            let lower = name.to_ascii_lowercase();
            let (group, ty) = group_and_type(&lower);
            out.by_group_type.entry((group.to_string(), ty.to_string())).or_insert_with(|| props.clone());
            out.by_type.entry(ty.to_string()).or_insert_with(|| props.clone());
            out.by_lower.insert(lower, props);
        }
        out
    }

    /// The properties of the definition of a message ("api.core.v1.PodStatus" →
    /// "io.k8s.api.core.v1.PodStatus"; "kube_aggregator…" → "io.k8s.kube-aggregator…").
    pub(super) fn properties(&self, message: &str) -> Option<&Props> {
        self.by_lower.get(&definition_name(message))
    }

    /// For types of versions without definitions: the properties of another version of the
    /// group (apps/v1beta1 Deployment → apps/v1), else of the same type name in another group.
    /// Good for spelling names, not for structure (fields move between versions).
    pub(super) fn borrowed_properties(&self, message: &str) -> Option<&Props> {
        let name = definition_name(message);
        let (group, ty) = group_and_type(&name);
        self.by_group_type.get(&(group.to_string(), ty.to_string())).or_else(|| self.by_type.get(ty))
    }
}

/// The definitions of this crate's OpenAPI documents, indexed once.
pub(super) fn openapi_definitions() -> &'static Definitions {
    static DEFS: OnceLock<Definitions> = OnceLock::new();
    DEFS.get_or_init(|| Definitions::new(crate::openapi::builtin_definitions()))
}

/// The lowercased definition name of a message.
fn definition_name(message: &str) -> String {
    let (root, rest) = message.split_once('.').unwrap_or(("", message));
    format!("io.k8s.{}.{rest}", root.replace('_', "-")).to_ascii_lowercase()
}

/// ("io.k8s.api.apps", "deployment") for "io.k8s.api.apps.v1.deployment".
fn group_and_type(name: &str) -> (&str, &str) {
    let (package, ty) = name.rsplit_once('.').unwrap_or(("", name));
    let group = package.rsplit_once('.').map_or(package, |(g, _)| g);
    (group, ty)
}

/// The key names are compared by: lowercase ASCII letters and digits only.
pub(super) fn normalize(name: &str) -> String {
    name.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect()
}

/// The JSON name of a field given prost's name, the message's properties (if known) and all
/// definitions. `schema_props` selects JSONSchemaProps' own spellings ("$ref",
/// "x-kubernetes-…").
pub(super) fn json_name(proto: &str, props: Option<&Props>, defs: &Definitions, schema_props: bool) -> String {
    if schema_props {
        match proto {
            "ref" => return "$ref".to_string(),
            "schema" => return "$schema".to_string(),
            _ => {}
        }
        if let Some(rest) = proto.strip_prefix("x_kubernetes_") {
            return format!("x-kubernetes-{}", rest.replace('_', "-"));
        }
    }
    let key = normalize(proto);
    if let Some(name) = props.and_then(|p| p.get(&key)) {
        return name.clone();
    }
    let camel = lower_camel(proto);
    match defs.global.get(&key) {
        Some(Some(name)) if camel_cannot_spell(name) => name.clone(),
        _ => camel,
    }
}

/// Whether a JSON name has what prost's snake_case loses (so lowerCamelCase cannot be right):
/// an acronym ("hostIP"), a leading capital ("Port") or punctuation ("$ref"). Other spellings
/// are left to lowerCamelCase, which is exact for them ("subResource", not "subresource").
fn camel_cannot_spell(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_uppercase)
        || bytes.iter().any(|b| !b.is_ascii_alphanumeric())
        || bytes.windows(2).any(|w| w[0].is_ascii_uppercase() && w[1].is_ascii_uppercase())
}

/// "pod_ip" → "podIp".
fn lower_camel(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = !out.is_empty();
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defs() -> Definitions {
        let mut map = BTreeMap::new();
        map.insert(
            "io.k8s.api.core.v1.PodStatus".to_string(),
            json!({"properties": {"podIP": {}, "hostIP": {}, "phase": {}}}),
        );
        map.insert(
            "io.k8s.api.authorization.v1.ResourceAttributes".to_string(),
            json!({"properties": {"subresource": {}}}),
        );
        map.insert(
            "io.k8s.api.core.v1.ServiceSpec".to_string(),
            json!({"properties": {"clusterIP": {}, "externalIPs": {}}}),
        );
        map.insert(
            "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceSpec".to_string(),
            json!({"properties": {"caBundle": {}}}),
        );
        Definitions::new(&map)
    }

    #[test]
    fn names_come_from_the_definition_then_globally_then_camel_case() {
        let d = defs();
        let status = d.properties("api.core.v1.PodStatus");
        assert_eq!(json_name("pod_ip", status, &d, false), "podIP");
        assert_eq!(json_name("phase", status, &d, false), "phase");
        // Not a property of PodStatus, but spelled consistently elsewhere.
        assert_eq!(json_name("external_i_ps", status, &d, false), "externalIPs");
        assert_eq!(json_name("cluster_ip", None, &d, false), "clusterIP");
        // An old version without a definition borrows the group's other version.
        assert!(d.properties("api.core.v1beta1.PodStatus").is_none());
        let old = d.borrowed_properties("api.core.v1beta1.PodStatus");
        assert_eq!(json_name("host_ip", old, &d, false), "hostIP");
        assert!(d.borrowed_properties("api.core.v1.Nothing").is_none());
        assert_eq!(json_name("nominated_node_name", status, &d, false), "nominatedNodeName");
        // A global spelling camelCase could produce itself is not trusted.
        assert_eq!(json_name("sub_resource", None, &d, false), "subResource");
        assert!(d.properties("kube_aggregator.pkg.apis.apiregistration.v1.ApiServiceSpec").is_some());
    }

    #[test]
    fn schema_props_names_are_special() {
        let d = Definitions::default();
        assert_eq!(json_name("ref", None, &d, true), "$ref");
        assert_eq!(json_name("schema", None, &d, true), "$schema");
        assert_eq!(
            json_name("x_kubernetes_preserve_unknown_fields", None, &d, true),
            "x-kubernetes-preserve-unknown-fields"
        );
        assert_eq!(json_name("schema", None, &d, false), "schema");
        assert_eq!(lower_camel("target_cpu_utilization"), "targetCpuUtilization");
    }
}
