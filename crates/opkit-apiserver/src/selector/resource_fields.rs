//! Field selectors bound to resources: checked and matched against the field labels a
//! kind's strategy declares ([`FieldLabels`]: kube's per-kind field-label conversions
//! and `ToSelectableFields`) and a CRD's selectable fields. The grammar itself is
//! `opkit_apimachinery`'s.

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

/// A kind's field labels, as its strategy declares them (kube's field-label conversion
/// funcs and `ToSelectableFields`, which kube registers per kind).
#[derive(Clone, Copy)]
pub(crate) struct FieldLabels {
    /// The labels the kind accepts, `metadata.*` included; None when kube registers no
    /// conversion for it (only `metadata.name` and `metadata.namespace` then).
    pub names: Option<&'static [&'static str]>,
    /// The value of a label other than `metadata.name` and `metadata.namespace`; None
    /// when the kind has no such label.
    pub value: fn(&Value, &str) -> Option<String>,
    /// kube's error for an unsupported label, for a kind that words it its own way
    /// (Jobs); None for the generic wording.
    pub unsupported: Option<fn(&str) -> String>,
}

impl FieldLabels {
    /// A kind without a field-label conversion of its own.
    pub(crate) const NONE: FieldLabels = FieldLabels { names: None, value: |_, _| None, unsupported: None };
}

fn unsupported(group: &str, labels: &FieldLabels, field: &str, crd: bool) -> SelectorError {
    let message = if let Some(worded) = labels.unsupported {
        worded(field)
    } else if labels.names.is_some() || crd || !BUILTIN_GROUPS.contains(&group) {
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

/// The field-selector value of the scalar at the dotted `path` of `obj` ("" when it is
/// absent or not a scalar).
pub(crate) fn scalar_at(obj: &Value, path: &str) -> String {
    scalar_string(at(obj, path))
}

/// [`scalar_at`], or `default` when `path` is absent (kube's absent booleans read
/// `false`, absent counts `0`).
pub(crate) fn scalar_at_or(obj: &Value, path: &str, default: &str) -> String {
    at(obj, path).map_or_else(|| default.to_string(), |v| scalar_string(Some(v)))
}

/// The field-selector value kube exposes for `field` of an object of a kind with
/// `labels` (what its `ToSelectableFields` sets). `None` when the kind has no such
/// selectable field.
pub(crate) fn field_value(labels: &FieldLabels, obj: &Value, field: &str) -> Option<String> {
    if matches!(field, "metadata.name" | "metadata.namespace") {
        return Some(scalar_at(obj, field));
    }
    (labels.value)(obj, field)
}

impl ResourceFieldSelector {
    /// Parses a field selector string (terms are sorted, as kube does).
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        Ok(ResourceFieldSelector { grammar: FieldSelectorGrammar::parse(s)? })
    }

    /// Checks every field is supported by a kind of `group` with `labels` (plus CRD
    /// `extra` selectable fields).
    pub(crate) fn validate_fields(
        &self,
        group: &str,
        labels: &FieldLabels,
        extra: &[(String, String)],
    ) -> Result<(), SelectorError> {
        self.validate_fields_scoped(group, labels, extra, true)
    }

    /// Like [`validate_fields`](Self::validate_fields), but for a custom resource whose scope is
    /// known: cluster-scoped CRDs reject `metadata.namespace`.
    pub(crate) fn validate_fields_scoped(
        &self,
        group: &str,
        labels: &FieldLabels,
        extra: &[(String, String)],
        namespaced: bool,
    ) -> Result<(), SelectorError> {
        let crd = !extra.is_empty() || !BUILTIN_GROUPS.contains(&group);
        for (f, _, _) in self.grammar.requirements() {
            let ok = extra.iter().any(|(n, _)| n == f)
                || match labels.names {
                    Some(list) => list.contains(&f),
                    None => f == "metadata.name" || (f == "metadata.namespace" && (namespaced || !crd)),
                };
            if !ok {
                return Err(unsupported(group, labels, f, crd));
            }
        }
        Ok(())
    }

    /// Validates the fields, then reports whether `obj` matches every term.
    pub(crate) fn matches(
        &self,
        group: &str,
        labels: &FieldLabels,
        obj: &Value,
        extra: &[(String, String)],
    ) -> Result<bool, SelectorError> {
        self.validate_fields(group, labels, extra)?;
        self.grammar.try_matches(|field| match extra.iter().find(|(n, _)| n == field) {
            Some((_, path)) => {
                let jp = crate::jsonpath::JsonPath::parse(path)
                    .map_err(|e| SelectorError::Field(format!("invalid selectable field {field}: {e}")))?;
                Ok(scalar_string(jp.eval_first(obj)))
            }
            None => Ok(field_value(labels, obj, field).unwrap_or_default()),
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
mod tests;
