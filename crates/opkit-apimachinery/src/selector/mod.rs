//! Label selectors (`k8s.io/apimachinery/pkg/labels`) and field selectors
//! (`k8s.io/apimachinery/pkg/fields`) with kube-apiserver's grammar, validation and
//! error wording.
//!
//! This module holds the shared error type and the label-selector types: a [`LabelSelector`]
//! is parsed from a string (`app in (a,b),!legacy`), built from a `metav1.LabelSelector`
//! (typed or JSON) and matched against labels (JSON or typed maps). The submodules hold
//! label-key/value validation (`validation`), the label-selector lexer (`lexer`) and parser
//! (`parser`), and the field-selector grammar (`field`).

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use serde_json::{Map, Value};

mod field;
mod lexer;
mod parser;
mod validation;

#[cfg(test)]
mod tests;

pub use field::FieldSelector;
pub use validation::{label_value_errors, qualified_name_errors};

use lexer::lex;
use parser::Parser;
use validation::new_requirement;

/// A selector failed to parse, validate, or names an unsupported field.
/// Messages are worded as kube-apiserver words them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A label selector string or object is invalid.
    #[error("{0}")]
    Label(String),
    /// A field selector string is syntactically invalid.
    #[error("{0}")]
    Field(String),
    /// A field selector names a field the resource does not support.
    #[error("{message}")]
    UnsupportedField {
        /// The rejected field label.
        field: String,
        /// kube's message for this resource.
        message: String,
    },
}

/// A label-selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `key in (a,b)`
    In,
    /// `key notin (a,b)`
    NotIn,
    /// `key=value`
    Equals,
    /// `key==value`
    DoubleEquals,
    /// `key!=value`
    NotEquals,
    /// `key`
    Exists,
    /// `!key`
    DoesNotExist,
    /// `key>1`
    GreaterThan,
    /// `key<1`
    LessThan,
}

impl Operator {
    /// The operator of a `metav1.LabelSelectorRequirement` (`In`, `NotIn`, `Exists`,
    /// `DoesNotExist`).
    pub fn from_label_selector_operator(op: &str) -> Option<Operator> {
        Some(match op {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            _ => return None,
        })
    }

    /// The operator of a `core/v1.NodeSelectorRequirement`: the label-selector operators plus
    /// `Gt` and `Lt`.
    pub fn from_node_selector_operator(op: &str) -> Option<Operator> {
        match op {
            "Gt" => Some(Operator::GreaterThan),
            "Lt" => Some(Operator::LessThan),
            other => Operator::from_label_selector_operator(other),
        }
    }

    /// Whether a label with `value` (`None`: the label is absent) satisfies `op values`.
    /// `Gt`/`Lt` compare integers and fail when either side is not one.
    pub fn evaluate(self, value: Option<&str>, values: &[String]) -> bool {
        match self {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                value.is_some_and(|v| values.iter().any(|x| x == v))
            }
            Operator::NotIn | Operator::NotEquals => value.is_none_or(|v| !values.iter().any(|x| x == v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(have), Some(bound)) =
                    (value.and_then(|v| v.parse::<i64>().ok()), values.first().and_then(|b| b.parse::<i64>().ok()))
                else {
                    return false;
                };
                if self == Operator::GreaterThan { have > bound } else { have < bound }
            }
        }
    }
}

/// One label requirement (`key op values`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// Label key.
    pub key: String,
    /// Operator.
    pub operator: Operator,
    /// Values (empty for exists / does-not-exist).
    pub values: Vec<String>,
}

impl Requirement {
    /// Whether this requirement holds for the labels `label` looks up.
    pub fn matches_with<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.operator.evaluate(label(&self.key), &self.values)
    }

    /// Whether this requirement holds for the given (JSON) label set.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.matches_with(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str))
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.operator {
            Operator::DoesNotExist => return write!(f, "!{}", self.key),
            Operator::Exists => return write!(f, "{}", self.key),
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
        };
        let mut vals = self.values.clone();
        vals.sort();
        let joined = vals.join(",");
        if matches!(self.operator, Operator::In | Operator::NotIn) {
            write!(f, "{}{op}({joined})", self.key)
        } else {
            write!(f, "{}{op}{joined}", self.key)
        }
    }
}

/// A parsed label selector. Requirements are ANDed; an empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl LabelSelector {
    /// Parses a selector string such as `app in (a,b),!legacy,tier!=db`.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let tokens = lex(s);
        let mut p = Parser { tokens, pos: 0 };
        let mut requirements = p.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements, nothing: false })
    }

    /// The selector that matches every object.
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// The selector that matches no object (a nil `metav1.LabelSelector`).
    pub fn nothing() -> Self {
        LabelSelector { requirements: Vec::new(), nothing: true }
    }

    /// True when the selector has no requirements (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty() && !self.nothing
    }

    /// The (key-sorted) requirements.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether an object with these (JSON) `metadata.labels` matches.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.matches_with(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str))
    }

    /// Whether an object with these (typed) `metadata.labels` matches.
    pub fn matches_labels(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.matches_with(|k| labels.and_then(|l| l.get(k)).map(String::as_str))
    }

    /// Whether the labels `label` looks up match.
    pub fn matches_with<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches_with(&label))
    }

    /// Builds a selector from a typed `metav1.LabelSelector`, as
    /// `metav1.LabelSelectorAsSelector` does: `None` selects nothing, an empty selector
    /// everything; keys, values and operators are validated.
    pub fn from_k8s(sel: Option<&metav1::LabelSelector>) -> Result<Self, SelectorError> {
        let Some(sel) = sel else { return Ok(Self::nothing()) };
        let labels = sel.match_labels.iter().flatten().map(|(k, v)| (k.as_str(), v.clone()));
        let expressions = sel
            .match_expressions
            .iter()
            .flatten()
            .map(|e| (e.key.as_str(), e.operator.as_str(), e.values.clone().unwrap_or_default()));
        Self::from_parts(labels, expressions)
    }

    /// Builds the selector from `matchLabels` pairs and `matchExpressions` triples.
    fn from_parts<'a>(
        match_labels: impl Iterator<Item = (&'a str, String)>,
        match_expressions: impl Iterator<Item = (&'a str, &'a str, Vec<String>)>,
    ) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for (key, value) in match_labels {
            reqs.push(new_requirement(key, Operator::Equals, vec![value], "key")?);
        }
        for (key, op, values) in match_expressions {
            let Some(op) = Operator::from_label_selector_operator(op) else {
                return Err(SelectorError::Label(format!("{op:?} is not a valid label selector operator")));
            };
            reqs.push(new_requirement(key, op, values, "key")?);
        }
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements: reqs, nothing: false })
    }

    /// Builds a selector from a `metav1.LabelSelector` JSON (`{matchLabels, matchExpressions}`),
    /// as `metav1.LabelSelectorAsSelector` does: `null` selects nothing, `{}` everything.
    pub fn from_label_selector_json(sel: &Value) -> Result<Self, SelectorError> {
        let obj = match sel {
            Value::Null => return Ok(Self::nothing()),
            Value::Object(o) => o,
            _ => {
                return Err(SelectorError::Label("label selector must be an object".into()));
            }
        };
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let labels = obj.get("matchLabels").and_then(Value::as_object).into_iter().flatten();
        let expressions = obj.get("matchExpressions").and_then(Value::as_array).into_iter().flatten().map(|e| {
            let field = |name: &str| e.get(name).and_then(Value::as_str).unwrap_or_default();
            let values = e.get("values").and_then(Value::as_array).map(|a| a.iter().map(text).collect());
            (field("key"), field("operator"), values.unwrap_or_default())
        });
        Self::from_parts(labels.map(|(k, v)| (k.as_str(), text(v))), expressions)
    }
}

impl fmt::Display for LabelSelector {
    /// kube's canonical `Selector.String()` form (`a=b,c in (d,e)`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}
