//! Label selectors (`k8s.io/apimachinery/pkg/labels`) and field selectors
//! (`k8s.io/apimachinery/pkg/fields`) with kube-apiserver's grammar, validation,
//! error wording and per-resource field-label support.
//!
//! This module holds the shared error type and the label-selector types; the
//! submodules hold label-key/value validation (`validation`), the label-selector
//! lexer (`lexer`) and parser (`parser`), and field selectors (`field`).

use std::fmt;

use serde_json::{Map, Value};

mod field;
mod lexer;
mod parser;
mod validation;

#[cfg(test)]
mod tests;

pub use field::{FieldSelector, field_value};
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
    /// Whether this requirement holds for the given label set.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let val = labels.and_then(|l| l.get(&self.key)).and_then(Value::as_str);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                val.is_some_and(|v| self.values.iter().any(|x| x == v))
            }
            Operator::NotIn | Operator::NotEquals => val.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            Operator::Exists => val.is_some(),
            Operator::DoesNotExist => val.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(v), Some(want)) = (val, self.values.first()) else {
                    return false;
                };
                let (Ok(have), Ok(want)) = (v.parse::<i64>(), want.parse::<i64>()) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan { have > want } else { have < want }
            }
        }
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

    /// Whether an object with these `metadata.labels` matches.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
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
        let mut reqs = Vec::new();
        if let Some(ml) = obj.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in ml {
                let v = v.as_str().unwrap_or_default().to_string();
                reqs.push(new_requirement(k, Operator::Equals, vec![v], "key")?);
            }
        }
        for expr in obj.get("matchExpressions").and_then(Value::as_array).into_iter().flatten() {
            let key = expr.get("key").and_then(Value::as_str).unwrap_or_default();
            let op_s = expr.get("operator").and_then(Value::as_str).unwrap_or_default();
            let op = match op_s {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(SelectorError::Label(format!("{other:?} is not a valid label selector operator")));
                }
            };
            let values = expr
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|v| v.as_str().unwrap_or_default().to_string()).collect())
                .unwrap_or_default();
            reqs.push(new_requirement(key, op, values, "key")?);
        }
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements: reqs, nothing: false })
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
