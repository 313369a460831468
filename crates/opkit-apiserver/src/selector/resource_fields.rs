//! Field selectors bound to resources: which field labels each built-in resource supports
//! (kube's per-kind field-label conversions), CRD selectable fields, and the value kube
//! exposes for each selectable field. The grammar itself is `opkit_apimachinery`'s.

use std::fmt;
use std::ops::Deref;

use opkit_apimachinery::selector::{FieldSelector as FieldSelectorGrammar, SelectorError};
use serde_json::Value;

/// A field selector of a list or watch request, checked and matched against a resource's
/// selectable fields.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceFieldSelector {
    grammar: FieldSelectorGrammar,
}

/// API groups served by kube-apiserver itself (fields there fall back to
/// `DefaultMetaV1FieldSelectorConversion`'s wording).
const BUILTIN_GROUPS: &[&str] = &[
    "",
    "apps",
    "batch",
    "autoscaling",
    "policy",
    "extensions",
    "rbac.authorization.k8s.io",
    "networking.k8s.io",
    "storage.k8s.io",
    "coordination.k8s.io",
    "events.k8s.io",
    "certificates.k8s.io",
    "discovery.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "scheduling.k8s.io",
    "node.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "resource.k8s.io",
    "storagemigration.k8s.io",
    "internal.apiserver.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
];

/// The labels a built-in kind's field-label conversion accepts (incl. metadata), or
/// `None` when kube registers no conversion for it (metadata.name/namespace only).
fn builtin_fields(group: &str, resource: &str) -> Option<&'static [&'static str]> {
    Some(match (group, resource) {
        ("", "pods") => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
            "spec.host",
        ],
        ("", "nodes") => &["metadata.name", "spec.unschedulable"],
        ("", "replicationcontrollers") => &["metadata.name", "metadata.namespace", "status.replicas"],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
            "metadata.namespace",
            "metadata.name",
        ],
        ("events.k8s.io", "events") => &[
            "reason",
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reportingController",
            "type",
            "metadata.namespace",
            "metadata.name",
        ],
        ("", "namespaces") => &["status.phase", "metadata.name"],
        ("", "secrets") => &["type", "metadata.namespace", "metadata.name"],
        ("", "services") => &["metadata.namespace", "metadata.name", "spec.clusterIP", "spec.type"],
        ("batch", "jobs") => &["metadata.name", "metadata.namespace", "status.successful"],
        ("certificates.k8s.io", "certificatesigningrequests") => &["metadata.name", "spec.signerName"],
        _ => return None,
    })
}

fn unsupported(group: &str, resource: &str, field: &str, crd: bool) -> SelectorError {
    let message = if (group, resource) == ("batch", "jobs") {
        format!("field label {field:?} not supported for batchv1.Job")
    } else if builtin_fields(group, resource).is_some() || crd || !BUILTIN_GROUPS.contains(&group) {
        format!("field label not supported: {field}")
    } else {
        format!("{field:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"")
    };
    SelectorError::UnsupportedField { field: field.to_string(), message }
}

fn scalar_string(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn at<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(obj, |v, k| v.get(k))
}

/// The field-selector value kube exposes for `field` of an object of `group`/`resource`
/// (what its `ToSelectableFields` sets; absent booleans read `false`, absent counts `0`).
/// `None` when the resource has no such selectable field.
pub fn field_value(group: &str, resource: &str, obj: &Value, field: &str) -> Option<String> {
    let s = |p: &str| scalar_string(at(obj, p));
    let or = |p: &str, d: &str| at(obj, p).map_or_else(|| d.to_string(), |v| scalar_string(Some(v)));
    if matches!(field, "metadata.name" | "metadata.namespace") {
        return Some(s(field));
    }
    let v = match (group, resource, field) {
        ("", "pods", "spec.nodeName" | "spec.host") => s("spec.nodeName"),
        ("", "pods", "spec.restartPolicy" | "spec.schedulerName" | "spec.serviceAccountName" | "status.phase")
        | ("", "pods", "status.nominatedNodeName") => s(field),
        ("", "pods", "spec.hostNetwork") => or("spec.hostNetwork", "false"),
        ("", "pods", "status.podIP") => at(obj, "status.podIPs")
            .and_then(|a| a.get(0))
            .map(|ip| scalar_string(ip.get("ip")))
            .unwrap_or_else(|| s("status.podIP")),
        ("", "pods", "status.podIPs") => String::new(),
        ("", "nodes", "spec.unschedulable") => or("spec.unschedulable", "false"),
        ("", "namespaces", "status.phase") => s(field),
        ("", "secrets", "type") => s(field),
        ("", "services", "spec.clusterIP" | "spec.type") => s(field),
        ("", "replicationcontrollers", "status.replicas") => or(field, "0"),
        ("batch", "jobs", "status.successful") => or("status.succeeded", "0"),
        ("certificates.k8s.io", "certificatesigningrequests", "spec.signerName") => s(field),
        ("", "events", "source") => {
            let c = s("source.component");
            if c.is_empty() { s("reportingComponent") } else { c }
        }
        ("", "events", f)
            if f.starts_with("involvedObject.") || matches!(f, "reason" | "reportingComponent" | "type") =>
        {
            s(f)
        }
        ("events.k8s.io", "events", f) => {
            let f = f.strip_prefix("involvedObject.").map(|r| format!("regarding.{r}")).unwrap_or(f.to_string());
            let f = if f == "reportingComponent" { "reportingController".to_string() } else { f };
            if f.starts_with("regarding.") || matches!(f.as_str(), "reason" | "reportingController" | "type") {
                s(&f)
            } else {
                return None;
            }
        }
        _ => return None,
    };
    Some(v)
}

impl ResourceFieldSelector {
    /// Parses a field selector string (terms are sorted, as kube does).
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        Ok(ResourceFieldSelector { grammar: FieldSelectorGrammar::parse(s)? })
    }

    /// Checks every field is supported by `group`/`resource` (plus CRD `extra` selectable fields).
    pub fn validate_fields(
        &self,
        group: &str,
        resource: &str,
        extra: &[(String, String)],
    ) -> Result<(), SelectorError> {
        self.validate_fields_scoped(group, resource, extra, true)
    }

    /// Like [`validate_fields`](Self::validate_fields), but for a custom resource whose scope is
    /// known: cluster-scoped CRDs reject `metadata.namespace`.
    pub fn validate_fields_scoped(
        &self,
        group: &str,
        resource: &str,
        extra: &[(String, String)],
        namespaced: bool,
    ) -> Result<(), SelectorError> {
        let crd = !extra.is_empty() || !BUILTIN_GROUPS.contains(&group);
        for (f, _, _) in self.grammar.requirements() {
            let ok = extra.iter().any(|(n, _)| n == f)
                || match builtin_fields(group, resource) {
                    Some(list) => list.contains(&f),
                    None => f == "metadata.name" || (f == "metadata.namespace" && (namespaced || !crd)),
                };
            if !ok {
                return Err(unsupported(group, resource, f, crd));
            }
        }
        Ok(())
    }

    /// Validates the fields, then reports whether `obj` matches every term.
    pub fn matches(
        &self,
        group: &str,
        resource: &str,
        obj: &Value,
        extra: &[(String, String)],
    ) -> Result<bool, SelectorError> {
        self.validate_fields(group, resource, extra)?;
        self.grammar.try_matches(|field| match extra.iter().find(|(n, _)| n == field) {
            Some((_, path)) => {
                let jp = crate::jsonpath::JsonPath::parse(path)
                    .map_err(|e| SelectorError::Field(format!("invalid selectable field {field}: {e}")))?;
                Ok(scalar_string(jp.eval_first(obj)))
            }
            None => Ok(field_value(group, resource, obj, field).unwrap_or_default()),
        })
    }
}

impl Deref for ResourceFieldSelector {
    type Target = FieldSelectorGrammar;

    /// The parsed terms (`is_empty`, `requirements`, `exact_value`).
    fn deref(&self) -> &FieldSelectorGrammar {
        &self.grammar
    }
}

impl fmt::Display for ResourceFieldSelector {
    /// kube's `Selector.String()` form, values escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.grammar.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    type FieldSelector = ResourceFieldSelector;

    fn pod() -> Value {
        json!({
            "metadata": {"name": "foo", "namespace": "ns"},
            "spec": {"nodeName": "n1", "restartPolicy": "Always"},
            "status": {"phase": "Pending", "podIPs": [{"ip": "10.0.0.9"}], "podIP": "10.0.0.9"}
        })
    }

    #[test]
    fn field_selector_on_pods() {
        let fs = FieldSelector::parse("metadata.name=foo,status.phase!=Running").unwrap();
        assert_eq!(fs.to_string(), "metadata.name=foo,status.phase!=Running");
        assert!(fs.matches("", "pods", &pod(), &[]).unwrap());
        let mut running = pod();
        running["status"]["phase"] = json!("Running");
        assert!(!fs.matches("", "pods", &running, &[]).unwrap());
        let fs2 = FieldSelector::parse("spec.host==n1,spec.hostNetwork=false,status.podIP=10.0.0.9").unwrap();
        assert!(fs2.matches("", "pods", &pod(), &[]).unwrap());
        assert_eq!(fs2.requirements().count(), 3);
    }

    #[test]
    fn field_selector_errors() {
        let fs = FieldSelector::parse("spec.foo=bar").unwrap();
        let err = fs.matches("", "pods", &pod(), &[]).unwrap_err();
        assert_eq!(err.to_string(), "field label not supported: spec.foo");
        let err = fs.validate_fields("", "configmaps", &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "\"spec.foo\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        let err = FieldSelector::parse("status.x=1").unwrap().validate_fields("batch", "jobs", &[]).unwrap_err();
        assert_eq!(err.to_string(), "field label \"status.x\" not supported for batchv1.Job");
        let ns = FieldSelector::parse("metadata.namespace=x").unwrap();
        assert!(ns.validate_fields("", "nodes", &[]).is_err());
        assert!(ns.validate_fields("", "configmaps", &[]).is_ok());
        assert!(ns.validate_fields_scoped("example.com", "widgets", &[], false).is_err());
    }

    #[test]
    fn field_selector_other_resources() {
        let ev = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"},
            "reportingComponent": "kubelet", "type": "Warning"});
        let fs = FieldSelector::parse("involvedObject.kind=Pod,source=kubelet,type=Warning").unwrap();
        assert!(fs.matches("", "events", &ev, &[]).unwrap());
        let ev2 = json!({"metadata": {"name": "e"}, "regarding": {"kind": "Pod"}, "reportingController": "x"});
        let fs2 = FieldSelector::parse("regarding.kind=Pod,reportingController=x").unwrap();
        assert!(fs2.matches("events.k8s.io", "events", &ev2, &[]).unwrap());
        let job = json!({"metadata": {"name": "j"}, "status": {}});
        assert!(FieldSelector::parse("status.successful=0").unwrap().matches("batch", "jobs", &job, &[]).unwrap());
        let node = json!({"metadata": {"name": "n"}, "spec": {}});
        assert_eq!(field_value("", "nodes", &node, "spec.unschedulable").as_deref(), Some("false"));
        assert_eq!(field_value("", "configmaps", &node, "data"), None);
    }

    #[test]
    fn field_selector_crd_selectable_fields() {
        let extra = vec![
            ("spec.color".to_string(), ".spec.color".to_string()),
            ("spec.size".to_string(), ".spec.size".to_string()),
        ];
        let w = json!({"metadata": {"name": "w"}, "spec": {"color": "red", "size": 3}});
        assert!(
            FieldSelector::parse("spec.color=red,spec.size=3")
                .unwrap()
                .matches("example.com", "widgets", &w, &extra)
                .unwrap()
        );
        assert!(
            !FieldSelector::parse("spec.color=blue").unwrap().matches("example.com", "widgets", &w, &extra).unwrap()
        );
        let err =
            FieldSelector::parse("spec.shape=x").unwrap().matches("example.com", "widgets", &w, &extra).unwrap_err();
        assert_eq!(err.to_string(), "field label not supported: spec.shape");
    }
}
