//! Field selectors (`k8s.io/apimachinery/pkg/fields`): the grammar (`field=value`,
//! `field==value`, `field!=value`, comma = AND), value escaping and matching against the values
//! a caller looks up. Which fields a resource supports is the API server's business.

use std::fmt;

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

    /// Whether an object matches every term, `value_of` giving the object's value of a field
    /// (or the error that stops matching, e.g. an unsupported field).
    pub fn try_matches<E>(&self, mut value_of: impl FnMut(&str) -> Result<String, E>) -> Result<bool, E> {
        for t in &self.terms {
            if (value_of(&t.field)? == t.value) != t.equals {
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
