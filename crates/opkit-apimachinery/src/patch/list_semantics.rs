//! List semantics for merging: which lists are maps keyed by which fields, which are sets, which
//! are atomic, and which maps are atomic. Built either from the `patchMergeKey`/`patchStrategy` and
//! `x-kubernetes-list-*` markers of the built-in k8s.io/api types, or from a CRD's openAPIV3Schema.
//! Anything not described is "deduced": maps are granular, lists atomic.

use std::collections::BTreeMap;

use serde_json::Value;

/// A key field of a list-map, with the default used when an element omits it.
#[derive(Clone, Debug, PartialEq)]
pub struct MapKey {
    /// Field name.
    pub name: String,
    /// Schema default (e.g. `protocol: TCP` for ports).
    pub default: Option<Value>,
}

/// How a list is merged.
#[derive(Clone, Debug, PartialEq)]
pub enum ListType {
    /// Replaced as a whole.
    Atomic,
    /// A set of scalars.
    Set,
    /// A list of objects identified by key fields.
    Map {
        /// Server-side apply keys (`x-kubernetes-list-map-keys`).
        keys: Vec<MapKey>,
        /// Strategic merge patch key (`patchMergeKey`), when different from the first key.
        smp_key: Option<String>,
    },
}

impl ListType {
    /// The merge key used by strategic merge patch.
    pub fn smp_key(&self) -> Option<&str> {
        match self {
            ListType::Map { keys, smp_key } => smp_key.as_deref().or_else(|| keys.first().map(|k| k.name.as_str())),
            _ => None,
        }
    }
}

/// A node of the schema tree: the semantics at one field path (list items are transparent, so
/// a list node's `fields` describe the fields of its elements).
#[derive(Clone, Debug, Default)]
pub struct SchemaNode {
    fields: BTreeMap<String, SchemaNode>,
    any: Option<Box<SchemaNode>>,
    list: Option<ListType>,
    atomic_map: bool,
}

impl SchemaNode {
    /// The node for field `name` (or for any key of a map with `additionalProperties`).
    pub fn child(&self, name: &str) -> Option<&SchemaNode> {
        self.fields.get(name).or(self.any.as_deref())
    }

    /// The list type at this node (`None` = deduced, i.e. atomic).
    pub fn list_type(&self) -> Option<&ListType> {
        self.list.as_ref()
    }

    /// Whether the map at this node is atomic (`x-kubernetes-map-type: atomic`).
    pub fn is_atomic_map(&self) -> bool {
        self.atomic_map
    }

    fn node_mut(&mut self, path: &[&str]) -> &mut SchemaNode {
        let mut cur = self;
        for seg in path {
            cur = cur.fields.entry((*seg).to_string()).or_default();
        }
        cur
    }
}

/// Child lookup on an optional node.
pub fn child<'a>(node: Option<&'a SchemaNode>, name: &str) -> Option<&'a SchemaNode> {
    node.and_then(|n| n.child(name))
}

/// The list semantics of a kind.
#[derive(Clone, Debug, Default)]
pub struct ListSemantics {
    root: SchemaNode,
}

fn cat<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<&'a str> {
    a.iter().chain(b.iter()).copied().collect()
}

fn map_list(keys: &[&str]) -> ListType {
    ListType::Map {
        keys: keys.iter().map(|k| MapKey { name: (*k).to_string(), default: None }).collect(),
        smp_key: None,
    }
}

fn ports_list(first: &str) -> ListType {
    ListType::Map {
        keys: vec![
            MapKey { name: first.to_string(), default: None },
            MapKey { name: "protocol".to_string(), default: Some(Value::String("TCP".to_string())) },
        ],
        smp_key: Some(first.to_string()),
    }
}

impl ListSemantics {
    /// No knowledge: maps granular, lists atomic (structured-merge-diff's deduced type).
    pub fn deduced() -> ListSemantics {
        let mut s = ListSemantics::default();
        s.add_object_meta(&["metadata"]);
        s
    }

    /// The root schema node.
    pub fn root(&self) -> &SchemaNode {
        &self.root
    }

    /// Sets the list type at a dotted path (e.g. `spec.template.spec.containers`).
    pub fn set_list(&mut self, path: &[&str], lt: ListType) {
        self.root.node_mut(path).list = Some(lt);
    }

    /// Marks the map at a path as atomic.
    pub fn set_atomic_map(&mut self, path: &[&str]) {
        self.root.node_mut(path).atomic_map = true;
    }

    fn add_object_meta(&mut self, prefix: &[&str]) {
        let p = |s: &'static str| cat(prefix, &[s]);
        self.set_list(&p("ownerReferences"), map_list(&["uid"]));
        self.set_list(&p("finalizers"), ListType::Set);
        self.set_list(&p("managedFields"), ListType::Atomic);
    }

    fn add_container(&mut self, prefix: &[&str]) {
        let p = |s: &[&'static str]| cat(prefix, s);
        self.set_list(&p(&["ports"]), ports_list("containerPort"));
        self.set_list(&p(&["env"]), map_list(&["name"]));
        self.set_list(&p(&["volumeMounts"]), map_list(&["mountPath"]));
        self.set_list(&p(&["volumeDevices"]), map_list(&["devicePath"]));
        self.set_list(&p(&["resources", "claims"]), map_list(&["name"]));
    }

    fn add_pod_spec(&mut self, prefix: &[&str]) {
        let p = |s: &[&'static str]| cat(prefix, s);
        for c in ["containers", "initContainers", "ephemeralContainers"] {
            self.set_list(&p(&[c]), map_list(&["name"]));
            self.add_container(&p(&[c]));
        }
        self.set_list(&p(&["volumes"]), map_list(&["name"]));
        self.set_list(&p(&["imagePullSecrets"]), map_list(&["name"]));
        self.set_list(&p(&["hostAliases"]), map_list(&["ip"]));
        self.set_list(&p(&["tolerations"]), ListType::Atomic);
        self.set_list(&p(&["resourceClaims"]), map_list(&["name"]));
        self.set_list(&p(&["schedulingGates"]), map_list(&["name"]));
        self.set_list(
            &p(&["topologySpreadConstraints"]),
            ListType::Map {
                keys: vec![
                    MapKey { name: "topologyKey".into(), default: None },
                    MapKey { name: "whenUnsatisfiable".into(), default: None },
                ],
                smp_key: Some("topologyKey".into()),
            },
        );
        self.set_atomic_map(&p(&["topologySpreadConstraints", "labelSelector"]));
    }

    /// Semantics of a built-in kind (group "" for core).
    pub fn for_builtin(group: &str, kind: &str) -> ListSemantics {
        let mut s = ListSemantics::deduced();
        s.set_list(&["status", "conditions"], map_list(&["type"]));
        let pod_prefix: Option<&[&str]> = match (group, kind) {
            ("", "Pod") => Some(&["spec"]),
            ("", "PodTemplate") => Some(&["template", "spec"]),
            ("", "ReplicationController")
            | ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
            | ("batch", "Job") => Some(&["spec", "template", "spec"]),
            ("batch", "CronJob") => Some(&["spec", "jobTemplate", "spec", "template", "spec"]),
            _ => None,
        };
        if let Some(prefix) = pod_prefix {
            s.add_pod_spec(prefix);
            if prefix.len() > 1 {
                let meta = [&prefix[..prefix.len() - 1], &["metadata"]].concat();
                s.add_object_meta(&meta);
            }
        }
        match (group, kind) {
            ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") | ("batch", "Job") => {
                s.set_atomic_map(&["spec", "selector"]);
            }
            ("", "Service") => {
                s.set_list(&["spec", "ports"], ports_list("port"));
                s.set_list(&["spec", "clusterIPs"], ListType::Atomic);
                s.set_list(&["spec", "ipFamilies"], ListType::Atomic);
            }
            ("", "Pod") => {
                s.set_list(&["status", "podIPs"], map_list(&["ip"]));
                s.set_list(&["status", "hostIPs"], map_list(&["ip"]));
            }
            ("", "Node") => {
                s.set_list(&["status", "addresses"], map_list(&["type"]));
                s.set_list(&["spec", "podCIDRs"], ListType::Set);
            }
            ("", "Namespace") => s.set_list(&["spec", "finalizers"], ListType::Atomic),
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                s.set_list(&["spec", "versions"], ListType::Atomic);
            }
            _ => {}
        }
        s
    }

    /// Semantics from a CRD version's `openAPIV3Schema` (also accepts the `{openAPIV3Schema: ..}`
    /// wrapper).
    pub fn from_crd_schema(schema: &Value) -> ListSemantics {
        let schema = schema.get("openAPIV3Schema").unwrap_or(schema);
        let mut s = ListSemantics::deduced();
        walk_schema(schema, &mut s.root, 0);
        // metadata of custom resources always follows ObjectMeta.
        s.add_object_meta(&["metadata"]);
        s
    }
}

fn walk_schema(schema: &Value, node: &mut SchemaNode, depth: usize) {
    if depth > 64 {
        return;
    }
    let Some(obj) = schema.as_object() else {
        return;
    };
    if obj.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic") {
        node.atomic_map = true;
    }
    if let Some(Value::Object(props)) = obj.get("properties") {
        for (name, sub) in props {
            walk_schema(sub, node.fields.entry(name.clone()).or_default(), depth + 1);
        }
    }
    if let Some(ap @ Value::Object(_)) = obj.get("additionalProperties") {
        let any = node.any.get_or_insert_with(Default::default);
        walk_schema(ap, any, depth + 1);
    }
    for combo in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = obj.get(combo) {
            for alt in alts {
                walk_schema(alt, node, depth + 1);
            }
        }
    }
    let is_array = obj.get("type").and_then(Value::as_str) == Some("array");
    if is_array || obj.contains_key("items") {
        let items = obj.get("items");
        match obj.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => node.list = Some(ListType::Set),
            Some("map") => {
                let keys = obj
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|ks| {
                        ks.iter()
                            .filter_map(Value::as_str)
                            .map(|k| MapKey {
                                name: k.to_string(),
                                default: items
                                    .and_then(|i| i.get("properties"))
                                    .and_then(|p| p.get(k))
                                    .and_then(|p| p.get("default"))
                                    .cloned(),
                            })
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default();
                node.list =
                    Some(if keys.is_empty() { ListType::Atomic } else { ListType::Map { keys, smp_key: None } });
            }
            Some(_) if node.list.is_none() => node.list = Some(ListType::Atomic),
            _ => {}
        }
        if let Some(items) = items {
            walk_schema(items, node, depth + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builtin_deployment() {
        let s = ListSemantics::for_builtin("apps", "Deployment");
        let pod = ["spec", "template", "spec"].iter().try_fold(s.root(), |n, f| n.child(f));
        let containers = child(pod, "containers").unwrap();
        assert_eq!(containers.list_type().unwrap().smp_key(), Some("name"));
        let ports = child(Some(containers), "ports").unwrap();
        assert_eq!(ports.list_type().unwrap().smp_key(), Some("containerPort"));
        assert!(child(pod, "tolerations").unwrap().list_type() == Some(&ListType::Atomic));
        let fin = child(child(Some(s.root()), "metadata"), "finalizers").unwrap();
        assert_eq!(fin.list_type(), Some(&ListType::Set));
    }

    #[test]
    fn crd_schema() {
        let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object",
        "properties": {
            "items": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["id"],
                      "items": {"type": "object", "properties": {"id": {"type": "string"},
                          "tags": {"type": "array", "x-kubernetes-list-type": "set"}}}},
            "sel": {"type": "object", "x-kubernetes-map-type": "atomic"},
            "byName": {"type": "object", "additionalProperties": {"type": "object",
                "properties": {"l": {"type": "array", "x-kubernetes-list-type": "set"}}}}
        }}}}});
        let s = ListSemantics::from_crd_schema(&schema);
        let spec = child(Some(s.root()), "spec");
        let items = child(spec, "items").unwrap();
        assert_eq!(items.list_type().unwrap().smp_key(), Some("id"));
        assert_eq!(child(Some(items), "tags").unwrap().list_type(), Some(&ListType::Set));
        assert!(child(spec, "sel").unwrap().is_atomic_map());
        let l = child(child(child(spec, "byName"), "anything"), "l").unwrap();
        assert_eq!(l.list_type(), Some(&ListType::Set));
    }
}
