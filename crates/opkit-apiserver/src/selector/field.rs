//! Field selectors (`k8s.io/apimachinery/pkg/fields`): parsing, escaping, per-resource
//! field-label support and the values kube exposes for each selectable field.

use std::fmt;

use serde_json::Value;

use super::SelectorError;

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    field: String,
    equals: bool,
    value: String,
}

/// A parsed field selector (`field=value`, `field==value`, `field!=value`, comma = AND).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let (mut start, mut in_slash) = (0, false);
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            out.push(&s[start..i]);
            start = i + 1;
        }
    }
    out.push(&s[start..]);
    out
}

fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    for (i, _) in term.char_indices() {
        for op in ["!=", "==", "="] {
            if term[i..].starts_with(op) {
                return Some((&term[..i], op, &term[i + op.len()..]));
            }
        }
    }
    None
}

fn unescape_value(s: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(SelectorError::Field(format!("invalid field selector: invalid escape sequence: \\{c}")));
            }
            out.push(c);
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' || c == '=' {
            return Err(SelectorError::Field(format!(
                "invalid field selector: unescaped character in value: {}",
                c as u32
            )));
        } else {
            out.push(c);
        }
    }
    if in_slash {
        return Err(SelectorError::Field("invalid field selector: invalid escape sequence: \\".into()));
    }
    Ok(out)
}

fn escape_value(s: &str) -> String {
    s.replace('\\', "\\\\").replace(',', "\\,").replace('=', "\\=")
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

impl FieldSelector {
    /// Parses a field selector string (terms are sorted, as kube does).
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let Some((lhs, op, rhs)) = split_term(part) else {
                return Err(SelectorError::Field(format!("invalid selector: '{s}'; can't understand '{part}'")));
            };
            terms.push(FieldTerm { field: lhs.to_string(), equals: op != "!=", value: unescape_value(rhs)? });
        }
        Ok(FieldSelector { terms })
    }

    /// True when there are no terms (matches everything).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The terms as `(field, equals, value)`; `equals` is false for `!=`.
    pub fn requirements(&self) -> impl Iterator<Item = (&str, bool, &str)> {
        self.terms.iter().map(|t| (t.field.as_str(), t.equals, t.value.as_str()))
    }

    /// If the selector pins `field` to a single value with `=`/`==`, that value.
    pub fn exact_value(&self, field: &str) -> Option<&str> {
        self.terms.iter().find(|t| t.equals && t.field == field).map(|t| t.value.as_str())
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
        for t in &self.terms {
            let f = t.field.as_str();
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
        for t in &self.terms {
            let have = match extra.iter().find(|(n, _)| *n == t.field) {
                Some((_, path)) => {
                    let jp = crate::jsonpath::JsonPath::parse(path)
                        .map_err(|e| SelectorError::Field(format!("invalid selectable field {}: {e}", t.field)))?;
                    scalar_string(jp.eval_first(obj))
                }
                None => field_value(group, resource, obj, &t.field).unwrap_or_default(),
            };
            if (have == t.value) != t.equals {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl fmt::Display for FieldSelector {
    /// kube's `Selector.String()` form, values escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = if t.equals { "=" } else { "!=" };
            write!(f, "{}{op}{}", t.field, escape_value(&t.value))?;
        }
        Ok(())
    }
}
