//! Rule normalisation and `role.yaml` rendering, following controller-gen's rbac generator:
//! rules are split per resource, merged per (groups, resource, resourceNames, urls) with verbs
//! unioned, then rules differing only in resources / groups / urls are merged, and the result is
//! sorted by its `groups + resources + resourceNames + urls` key. Output is one `---`-prefixed
//! document per role (ClusterRole first, then Roles by namespace), keys in alphabetical order
//! and lists in block style, as controller-gen's YAML writer produces.

use std::collections::{BTreeMap, BTreeSet};

use super::RbacMarker;

/// One normalised policy rule (every list sorted and deduplicated).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Rule {
    groups: Vec<String>,
    resources: Vec<String>,
    resource_names: Vec<String>,
    urls: Vec<String>,
    verbs: Vec<String>,
}

fn norm(v: &[String]) -> Vec<String> {
    v.iter().cloned().collect::<BTreeSet<_>>().into_iter().collect()
}

impl Rule {
    fn normalize(&mut self) {
        self.groups = norm(&self.groups);
        self.resources = norm(&self.resources);
        self.resource_names = norm(&self.resource_names);
        self.urls = norm(&self.urls);
        self.verbs = norm(&self.verbs);
    }

    /// controller-gen's sort key: the four lists joined with `&`, separated by ` + `.
    fn key(&self) -> String {
        format!(
            "{} + {} + {} + {}",
            self.groups.join("&"),
            self.resources.join("&"),
            self.resource_names.join("&"),
            self.urls.join("&")
        )
    }
}

/// Merges rules that agree on everything but one list, concatenating (then normalising) that
/// list. `field` picks the list; `key` is the grouping key without it.
fn merge_on(
    rules: Vec<Rule>,
    key: impl Fn(&Rule) -> Vec<&Vec<String>>,
    field: impl Fn(&mut Rule) -> &mut Vec<String>,
) -> Vec<Rule> {
    let mut groups: BTreeMap<Vec<Vec<String>>, Rule> = BTreeMap::new();
    for rule in rules {
        let k: Vec<Vec<String>> = key(&rule).into_iter().cloned().collect();
        match groups.get_mut(&k) {
            Some(existing) => {
                let extra = field(&mut rule.clone()).clone();
                field(existing).extend(extra);
                existing.normalize();
            }
            None => {
                groups.insert(k, rule);
            }
        }
    }
    groups.into_values().collect()
}

/// Normalises the rules of one role as controller-gen does.
fn normalize_rules(markers: &[&RbacMarker]) -> Vec<Rule> {
    // Split per resource and union verbs of identical (groups, resource, names, urls).
    let mut by_key: BTreeMap<String, Rule> = BTreeMap::new();
    for m in markers {
        let resources: Vec<Vec<String>> = if m.resources.is_empty() {
            vec![Vec::new()]
        } else {
            m.resources.iter().map(|r| vec![r.clone()]).collect()
        };
        for res in resources {
            let mut rule = Rule {
                groups: m.groups.clone(),
                resources: res,
                resource_names: m.resource_names.clone(),
                urls: m.urls.clone(),
                verbs: m.verbs.clone(),
            };
            rule.normalize();
            match by_key.get_mut(&rule.key()) {
                Some(existing) => {
                    existing.verbs.extend(rule.verbs);
                    existing.normalize();
                }
                None => {
                    by_key.insert(rule.key(), rule);
                }
            }
        }
    }
    let rules: Vec<Rule> = by_key.into_values().collect();
    let rules = merge_on(rules, |r| vec![&r.groups, &r.resource_names, &r.urls, &r.verbs], |r| &mut r.resources);
    let rules = merge_on(rules, |r| vec![&r.resources, &r.resource_names, &r.urls, &r.verbs], |r| &mut r.groups);
    let rules = merge_on(rules, |r| vec![&r.groups, &r.resources, &r.resource_names, &r.verbs], |r| &mut r.urls);
    let mut keyed: Vec<(String, Rule)> = rules.into_iter().map(|r| (r.key(), r)).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed
        .into_iter()
        .map(|(_, mut r)| {
            if r.verbs.iter().any(|v| v == "*") {
                r.verbs = vec!["*".to_string()];
            }
            r
        })
        .collect()
}

/// A role to render: `namespace` is `None` for the ClusterRole.
struct RoleDoc {
    name: String,
    namespace: Option<String>,
    rules: Vec<Rule>,
}

fn role_docs(markers: &[RbacMarker], role_name: &str) -> Vec<RoleDoc> {
    // Key (namespace, name): "" sorts the cluster-wide role first, like controller-gen.
    let mut by_role: BTreeMap<(String, String), Vec<&RbacMarker>> = BTreeMap::new();
    for m in markers {
        let name = m.role_name.clone().unwrap_or_else(|| role_name.to_string());
        by_role.entry((m.namespace.clone().unwrap_or_default(), name)).or_default().push(m);
    }
    let mut docs: Vec<RoleDoc> = by_role
        .into_iter()
        .map(|((ns, name), ms)| RoleDoc {
            name,
            namespace: (!ns.is_empty()).then_some(ns),
            rules: normalize_rules(&ms),
        })
        .filter(|d| !d.rules.is_empty())
        .collect();
    if docs.is_empty() {
        docs.push(RoleDoc { name: role_name.to_string(), namespace: None, rules: Vec::new() });
    }
    docs
}

/// Renders `config/rbac/role.yaml` for `markers`: a `ClusterRole` named `role_name` holding the
/// cluster-wide rules, then one `Role` per namespace (sorted) for markers with `namespace=`.
///
/// controller-gen writes no file at all when there are no markers; since the scaffolded
/// kustomization lists `role.yaml`, this returns a `ClusterRole` with `rules: []` instead, so the
/// file stays valid. With only namespaced markers no ClusterRole is emitted (as controller-gen).
pub fn render_roles(markers: &[RbacMarker], role_name: &str) -> String {
    let mut out = String::new();
    for doc in role_docs(markers, role_name) {
        out.push_str("---\napiVersion: rbac.authorization.k8s.io/v1\n");
        out.push_str(if doc.namespace.is_some() { "kind: Role\n" } else { "kind: ClusterRole\n" });
        out.push_str("metadata:\n");
        out.push_str(&format!("  name: {}\n", scalar(&doc.name)));
        if let Some(ns) = &doc.namespace {
            out.push_str(&format!("  namespace: {}\n", scalar(ns)));
        }
        if doc.rules.is_empty() {
            out.push_str("rules: []\n");
            continue;
        }
        out.push_str("rules:\n");
        for rule in &doc.rules {
            // Alphabetical key order, as controller-gen's YAML marshalling sorts map keys.
            let fields = [
                ("apiGroups", &rule.groups),
                ("nonResourceURLs", &rule.urls),
                ("resourceNames", &rule.resource_names),
                ("resources", &rule.resources),
                ("verbs", &rule.verbs),
            ];
            let mut first = true;
            for (key, items) in fields {
                if items.is_empty() {
                    continue;
                }
                out.push_str(if first { "- " } else { "  " });
                first = false;
                out.push_str(key);
                out.push_str(":\n");
                for item in items {
                    out.push_str(&format!("  - {}\n", scalar(item)));
                }
            }
        }
    }
    out
}

/// The same roles as [`render_roles`], as JSON objects (for applying directly).
pub fn role_objects(markers: &[RbacMarker], role_name: &str) -> Vec<serde_json::Value> {
    role_docs(markers, role_name)
        .into_iter()
        .map(|doc| {
            let rules: Vec<serde_json::Value> = doc
                .rules
                .iter()
                .map(|r| {
                    let mut o = serde_json::Map::new();
                    for (k, v) in [
                        ("apiGroups", &r.groups),
                        ("nonResourceURLs", &r.urls),
                        ("resourceNames", &r.resource_names),
                        ("resources", &r.resources),
                        ("verbs", &r.verbs),
                    ] {
                        if !v.is_empty() {
                            o.insert(k.to_string(), serde_json::json!(v));
                        }
                    }
                    serde_json::Value::Object(o)
                })
                .collect();
            let mut meta = serde_json::json!({ "name": doc.name });
            if let (Some(ns), Some(m)) = (&doc.namespace, meta.as_object_mut()) {
                m.insert("namespace".into(), serde_json::json!(ns));
            }
            serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": if doc.namespace.is_some() { "Role" } else { "ClusterRole" },
                "metadata": meta,
                "rules": rules,
            })
        })
        .collect()
}

/// Formats a string scalar the way go-yaml does: plain when unambiguous, otherwise single-quoted
/// (or `""` for the empty string).
fn scalar(s: &str) -> String {
    if s.is_empty() {
        return "\"\"".to_string();
    }
    let reserved = ["true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", ".inf", "-.inf", ".nan"];
    let lower = s.to_ascii_lowercase();
    let first = s.chars().next().unwrap_or(' ');
    let looks_numeric = s.parse::<f64>().is_ok() || s.starts_with("0x") || s.starts_with("0o");
    let needs_quote = reserved.contains(&lower.as_str())
        || looks_numeric
        || "-?:,[]{}#&*!|>'\"%@`".contains(first)
        || s.contains(": ")
        || s.contains(" #")
        || s.ends_with(':')
        || s.starts_with(' ')
        || s.ends_with(' ')
        || s.chars().any(|c| c.is_control());
    if needs_quote { format!("'{}'", s.replace('\'', "''")) } else { s.to_string() }
}

#[cfg(test)]
mod tests {
    use super::super::parse_markers;
    use super::*;
    use std::path::Path;

    fn markers(text: &str) -> Vec<RbacMarker> {
        parse_markers(text, Path::new("src/main.rs")).expect("markers parse")
    }

    const MEMCACHED: &str = "\
//+kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=get;list;watch;create;update;patch;delete
//+kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=get;update;patch
//+kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/finalizers,verbs=update
//+kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
//+kubebuilder:rbac:groups=core,resources=pods,verbs=get;list;watch
";

    #[test]
    fn memcached_role_yaml_matches_controller_gen() {
        let expected = "---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: manager-role
rules:
- apiGroups:
  - \"\"
  resources:
  - pods
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - apps
  resources:
  - deployments
  verbs:
  - create
  - delete
  - get
  - list
  - patch
  - update
  - watch
- apiGroups:
  - cache.example.com
  resources:
  - memcacheds
  verbs:
  - create
  - delete
  - get
  - list
  - patch
  - update
  - watch
- apiGroups:
  - cache.example.com
  resources:
  - memcacheds/finalizers
  verbs:
  - update
- apiGroups:
  - cache.example.com
  resources:
  - memcacheds/status
  verbs:
  - get
  - patch
  - update
";
        let m = markers(MEMCACHED);
        assert_eq!(render_roles(&m, "manager-role"), expected);
        assert_eq!(render_roles(&m, "manager-role"), render_roles(&m, "manager-role"));
        let objs = role_objects(&m, "manager-role");
        assert_eq!(objs.len(), 1);
        assert_eq!(objs[0]["rules"][0]["apiGroups"][0], "");
    }

    #[test]
    fn merges_resources_groups_and_verbs() {
        let m = markers(
            "// +kubebuilder:rbac:groups=core,resources=secrets,verbs=get\n\
             // +kubebuilder:rbac:groups=core,resources=configmaps,verbs=list;get\n\
             // +kubebuilder:rbac:groups=core,resources=secrets,verbs=list;list\n\
             // +kubebuilder:rbac:groups=batch,resources=jobs,verbs=*;get\n\
             // +kubebuilder:rbac:groups=apps,resources=jobs,verbs=*;get\n\
             // +kubebuilder:rbac:urls=/metrics,verbs=get\n\
             // +kubebuilder:rbac:urls=/healthz,verbs=get\n\
             // +kubebuilder:rbac:groups=core,resources=configmaps,resourceNames=cfg,verbs=update\n",
        );
        let expected = "---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: r
rules:
- nonResourceURLs:
  - /healthz
  - /metrics
  verbs:
  - get
- apiGroups:
  - \"\"
  resourceNames:
  - cfg
  resources:
  - configmaps
  verbs:
  - update
- apiGroups:
  - \"\"
  resources:
  - configmaps
  - secrets
  verbs:
  - get
  - list
- apiGroups:
  - apps
  - batch
  resources:
  - jobs
  verbs:
  - '*'
";
        assert_eq!(render_roles(&m, "r"), expected);
    }

    #[test]
    fn namespaced_roles_follow_cluster_role_sorted() {
        let m = markers(
            "// +kubebuilder:rbac:groups=core,resources=secrets,verbs=get,namespace=zeta\n\
             // +kubebuilder:rbac:groups=core,resources=pods,verbs=get\n\
             // +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get,namespace=alpha\n",
        );
        let out = render_roles(&m, "manager-role");
        let docs: Vec<&str> = out.split("---\n").filter(|d| !d.is_empty()).collect();
        assert_eq!(docs.len(), 3);
        assert!(docs[0].contains("kind: ClusterRole\n") && docs[0].contains("- pods\n"));
        assert!(docs[1].contains("kind: Role\nmetadata:\n  name: manager-role\n  namespace: alpha\n"));
        assert!(docs[1].contains("- deployments\n") && !docs[1].contains("pods"));
        assert!(docs[2].contains("namespace: zeta\n") && docs[2].contains("- secrets\n"));

        let only_ns = markers("// +kubebuilder:rbac:groups=core,resources=secrets,verbs=get,namespace=a\n");
        assert!(!render_roles(&only_ns, "manager-role").contains("ClusterRole"));
    }

    #[test]
    fn no_markers_give_empty_cluster_role() {
        let out = render_roles(&[], "manager-role");
        assert_eq!(
            out,
            "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: manager-role\nrules: []\n"
        );
    }

    #[test]
    fn scalar_quoting() {
        assert_eq!(scalar(""), "\"\"");
        assert_eq!(scalar("*"), "'*'");
        assert_eq!(scalar("yes"), "'yes'");
        assert_eq!(scalar("123"), "'123'");
        assert_eq!(scalar("/metrics"), "/metrics");
        assert_eq!(scalar("cache.example.com"), "cache.example.com");
    }
}
