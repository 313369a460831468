//! Label selectors (`k8s.io/apimachinery/pkg/labels`) and field selectors
//! (`k8s.io/apimachinery/pkg/fields`) with kube-apiserver's grammar, validation,
//! error wording and per-resource field-label support.

use std::fmt;

use serde_json::{Map, Value};

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
        let val = labels
            .and_then(|l| l.get(&self.key))
            .and_then(Value::as_str);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                val.is_some_and(|v| self.values.iter().any(|x| x == v))
            }
            Operator::NotIn | Operator::NotEquals => {
                val.is_none_or(|v| !self.values.iter().any(|x| x == v))
            }
            Operator::Exists => val.is_some(),
            Operator::DoesNotExist => val.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(v), Some(want)) = (val, self.values.first()) else {
                    return false;
                };
                let (Ok(have), Ok(want)) = (v.parse::<i64>(), want.parse::<i64>()) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
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
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// The selector that matches every object.
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// The selector that matches no object (a nil `metav1.LabelSelector`).
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
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
                return Err(SelectorError::Label(
                    "label selector must be an object".into(),
                ));
            }
        };
        let mut reqs = Vec::new();
        if let Some(ml) = obj.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in ml {
                let v = v.as_str().unwrap_or_default().to_string();
                reqs.push(new_requirement(k, Operator::Equals, vec![v], "key")?);
            }
        }
        for expr in obj
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = expr.get("key").and_then(Value::as_str).unwrap_or_default();
            let op_s = expr
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let op = match op_s {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(SelectorError::Label(format!(
                        "{other:?} is not a valid label selector operator"
                    )));
                }
            };
            let values = expr
                .get("values")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|v| v.as_str().unwrap_or_default().to_string())
                        .collect()
                })
                .unwrap_or_default();
            reqs.push(new_requirement(key, op, values, "key")?);
        }
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements: reqs,
            nothing: false,
        })
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

// ---------------------------------------------------------------- validation

fn regex_error(msg: &str, fmt_: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt_}')"));
    s
}

const QNAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QNAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn is_qname_body(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn is_dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    };
    if !s.split('.').all(label_ok) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
            &["example.com"],
        ));
    }
    errs
}

/// kube's `validation.IsQualifiedName`: the list of problems with a label key.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [n] => *n,
        [prefix, n] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *n
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QNAME_MSG, QNAME_FMT, &["MyName", "my.name", "123-abc"])
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !is_qname_body(name) {
        errs.push(format!(
            "name part {}",
            regex_error(QNAME_MSG, QNAME_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// kube's `validation.IsValidLabelValue`: the list of problems with a label value.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !is_qname_body(value) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?",
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {value:?}: {detail}")
}

fn aggregate(errs: Vec<String>) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for e in errs {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    match seen.len() {
        0 => None,
        1 => seen.pop(),
        _ => Some(format!("[{}]", seen.join(", "))),
    }
}

/// kube's `labels.NewRequirement`; `key_path` is the field path used for a bad key.
fn new_requirement(
    key: &str,
    op: Operator,
    values: Vec<String>,
    key_path: &str,
) -> Result<Requirement, SelectorError> {
    let mut errs = Vec::new();
    let kerrs = qualified_name_errors(key);
    if !kerrs.is_empty() {
        errs.push(invalid(key_path, key, &kerrs.join("; ")));
    }
    let vals_dbg = || {
        format!(
            "[]string{{{}}}",
            values
                .iter()
                .map(|v| format!("{v:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    match op {
        Operator::In | Operator::NotIn if values.is_empty() => errs.push(format!(
            "values: Invalid value: {}: for 'in', 'notin' operators, values set can't be empty",
            vals_dbg()
        )),
        Operator::Equals | Operator::DoubleEquals | Operator::NotEquals if values.len() != 1 => {
            errs.push(format!(
                "values: Invalid value: {}: exact-match compatibility requires one single value",
                vals_dbg()
            ))
        }
        Operator::Exists | Operator::DoesNotExist if !values.is_empty() => errs.push(format!(
            "values: Invalid value: {}: values set must be empty for exists and does not exist",
            vals_dbg()
        )),
        Operator::GreaterThan | Operator::LessThan => {
            if values.len() != 1 {
                errs.push(format!(
                    "values: Invalid value: {}: for 'Gt', 'Lt' operators, exactly one value is required",
                    vals_dbg()
                ));
            }
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(invalid(
                        &format!("values[{i}]"),
                        v,
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    ));
                }
            }
        }
        _ => {}
    }
    for (i, v) in values.iter().enumerate() {
        let verrs = label_value_errors(v);
        if !verrs.is_empty() {
            errs.push(invalid(
                &format!("values[{i}][{key}]"),
                v,
                &verrs.join("; "),
            ));
        }
    }
    match aggregate(errs) {
        Some(msg) => Err(SelectorError::Label(msg)),
        None => Ok(Requirement {
            key: key.to_string(),
            operator: op,
            values,
        }),
    }
}

// ------------------------------------------------------------------- lexing

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    In,
    NotIn,
    Bang,
    NotEq,
    Eq,
    DoubleEq,
    Gt,
    Lt,
    Open,
    Close,
    Comma,
    End,
    Error(String),
}

impl Tok {
    fn literal(&self) -> String {
        match self {
            Tok::Ident(s) | Tok::Error(s) => s.clone(),
            Tok::In => "in".into(),
            Tok::NotIn => "notin".into(),
            Tok::Bang => "!".into(),
            Tok::NotEq => "!=".into(),
            Tok::Eq => "=".into(),
            Tok::DoubleEq => "==".into(),
            Tok::Gt => ">".into(),
            Tok::Lt => "<".into(),
            Tok::Open => "(".into(),
            Tok::Close => ")".into(),
            Tok::Comma => ",".into(),
            Tok::End => String::new(),
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn symbol(s: &str) -> Option<Tok> {
    Some(match s {
        "!" => Tok::Bang,
        "!=" => Tok::NotEq,
        "=" => Tok::Eq,
        "==" => Tok::DoubleEq,
        ">" => Tok::Gt,
        "<" => Tok::Lt,
        "(" => Tok::Open,
        ")" => Tok::Close,
        "," => Tok::Comma,
        _ => return None,
    })
}

fn lex(s: &str) -> Vec<Tok> {
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    loop {
        while i < chars.len() && matches!(chars[i], ' ' | '\t' | '\r' | '\n') {
            i += 1;
        }
        if i >= chars.len() {
            out.push(Tok::End);
            return out;
        }
        if is_special(chars[i]) {
            let mut buf = String::new();
            let mut last: Option<(Tok, usize)> = None;
            while i < chars.len() && is_special(chars[i]) {
                buf.push(chars[i]);
                if let Some(t) = symbol(&buf) {
                    last = Some((t, i + 1));
                } else if last.is_some() {
                    break;
                }
                i += 1;
            }
            match last {
                Some((t, end)) => {
                    i = end;
                    out.push(t);
                }
                None => {
                    out.push(Tok::Error(format!("error expected: keyword found '{buf}'")));
                    out.push(Tok::End);
                    return out;
                }
            }
        } else {
            let mut buf = String::new();
            while i < chars.len()
                && !is_special(chars[i])
                && !matches!(chars[i], ' ' | '\t' | '\r' | '\n')
            {
                buf.push(chars[i]);
                i += 1;
            }
            out.push(match buf.as_str() {
                "in" => Tok::In,
                "notin" => Tok::NotIn,
                _ => Tok::Ident(buf),
            });
        }
    }
}

// ------------------------------------------------------------------ parsing

struct Parser {
    tokens: Vec<Tok>,
    pos: usize,
}

const BINARY_OPS: &str = "in, notin, =, ==, !=, gt, lt";

impl Parser {
    /// Look ahead in "values" context: keywords are identifiers there.
    fn peek_v(&self) -> Tok {
        match self.tokens.get(self.pos).cloned().unwrap_or(Tok::End) {
            Tok::In => Tok::Ident("in".into()),
            Tok::NotIn => Tok::Ident("notin".into()),
            t => t,
        }
    }

    fn next_v(&mut self) -> Tok {
        let t = self.peek_v();
        self.pos = (self.pos + 1).min(self.tokens.len());
        t
    }

    fn next_raw(&mut self) -> Tok {
        let t = self.tokens.get(self.pos).cloned().unwrap_or(Tok::End);
        self.pos = (self.pos + 1).min(self.tokens.len());
        t
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut reqs = Vec::new();
        loop {
            match self.peek_v() {
                Tok::Ident(_) | Tok::Bang => {
                    let r = self.parse_requirement().map_err(|e| {
                        SelectorError::Label(format!("unable to parse requirement: {e}"))
                    })?;
                    reqs.push(r);
                    match self.next_v() {
                        Tok::End => return Ok(reqs),
                        Tok::Comma => {
                            let t = self.peek_v();
                            if !matches!(t, Tok::Ident(_) | Tok::Bang) {
                                return Err(SelectorError::Label(format!(
                                    "found '{}', expected: identifier after ','",
                                    t.literal()
                                )));
                            }
                        }
                        t => {
                            return Err(SelectorError::Label(format!(
                                "found '{}', expected: ',' or 'end of string'",
                                t.literal()
                            )));
                        }
                    }
                }
                Tok::End => return Ok(reqs),
                t => {
                    return Err(SelectorError::Label(format!(
                        "found '{}', expected: !, identifier, or 'end of string'",
                        t.literal()
                    )));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let mut tok = self.next_v();
        let mut not_exists = false;
        if tok == Tok::Bang {
            not_exists = true;
            tok = self.next_v();
        }
        let Tok::Ident(key) = tok else {
            return Err(format!("found '{}', expected: identifier", tok.literal()));
        };
        let kerrs = qualified_name_errors(&key);
        if !kerrs.is_empty() {
            return Err(invalid("<nil>", &key, &kerrs.join("; ")));
        }
        if not_exists || matches!(self.peek_v(), Tok::End | Tok::Comma) {
            let op = if not_exists {
                Operator::DoesNotExist
            } else {
                Operator::Exists
            };
            return new_requirement(&key, op, Vec::new(), "key").map_err(|e| e.to_string());
        }
        let op = match self.next_raw() {
            Tok::In => Operator::In,
            Tok::NotIn => Operator::NotIn,
            Tok::Eq => Operator::Equals,
            Tok::DoubleEq => Operator::DoubleEquals,
            Tok::NotEq => Operator::NotEquals,
            Tok::Gt => Operator::GreaterThan,
            Tok::Lt => Operator::LessThan,
            t => return Err(format!("found '{}', expected: {BINARY_OPS}", t.literal())),
        };
        let values = if matches!(op, Operator::In | Operator::NotIn) {
            self.parse_values()?
        } else {
            self.parse_exact_value()?
        };
        new_requirement(&key, op, values, "key").map_err(|e| e.to_string())
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let t = self.next_v();
        if t != Tok::Open {
            return Err(format!("found '{}' expected: '('", t.literal()));
        }
        let mut set: Vec<String> = Vec::new();
        match self.peek_v() {
            Tok::Close => {
                self.next_v();
                set.push(String::new());
            }
            Tok::Ident(_) | Tok::Comma => loop {
                match self.next_v() {
                    Tok::Ident(v) => {
                        set.push(v);
                        match self.peek_v() {
                            Tok::Comma => continue,
                            Tok::Close => {
                                self.next_v();
                                break;
                            }
                            t => {
                                return Err(format!(
                                    "found '{}', expected: ',' or ')'",
                                    t.literal()
                                ));
                            }
                        }
                    }
                    Tok::Comma => {
                        if set.is_empty() {
                            set.push(String::new());
                        }
                        match self.peek_v() {
                            Tok::Close => {
                                self.next_v();
                                set.push(String::new());
                                break;
                            }
                            Tok::Comma => {
                                self.next_v();
                                set.push(String::new());
                            }
                            _ => {}
                        }
                    }
                    t => {
                        return Err(format!(
                            "found '{}', expected: ',', or identifier",
                            t.literal()
                        ));
                    }
                }
            },
            t => {
                return Err(format!(
                    "found '{}', expected: ',', ')' or identifier",
                    t.literal()
                ));
            }
        }
        set.sort();
        set.dedup();
        Ok(set)
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        if matches!(self.peek_v(), Tok::End | Tok::Comma) {
            return Ok(vec![String::new()]);
        }
        match self.next_v() {
            Tok::Ident(v) => Ok(vec![v]),
            t => Err(format!("found '{}', expected: identifier", t.literal())),
        }
    }
}

// ----------------------------------------------------------- field selectors

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
                return Err(SelectorError::Field(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                )));
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
        return Err(SelectorError::Field(
            "invalid field selector: invalid escape sequence: \\".into(),
        ));
    }
    Ok(out)
}

fn escape_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace(',', "\\,")
        .replace('=', "\\=")
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
        ("", "replicationcontrollers") => {
            &["metadata.name", "metadata.namespace", "status.replicas"]
        }
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
        ("", "services") => &[
            "metadata.namespace",
            "metadata.name",
            "spec.clusterIP",
            "spec.type",
        ],
        ("batch", "jobs") => &["metadata.name", "metadata.namespace", "status.successful"],
        ("certificates.k8s.io", "certificatesigningrequests") => {
            &["metadata.name", "spec.signerName"]
        }
        _ => return None,
    })
}

fn unsupported(group: &str, resource: &str, field: &str, crd: bool) -> SelectorError {
    let message = if (group, resource) == ("batch", "jobs") {
        format!("field label {field:?} not supported for batchv1.Job")
    } else if builtin_fields(group, resource).is_some() || crd || !BUILTIN_GROUPS.contains(&group) {
        format!("field label not supported: {field}")
    } else {
        format!(
            "{field:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        )
    };
    SelectorError::UnsupportedField {
        field: field.to_string(),
        message,
    }
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
    let or =
        |p: &str, d: &str| at(obj, p).map_or_else(|| d.to_string(), |v| scalar_string(Some(v)));
    if matches!(field, "metadata.name" | "metadata.namespace") {
        return Some(s(field));
    }
    let v = match (group, resource, field) {
        ("", "pods", "spec.nodeName" | "spec.host") => s("spec.nodeName"),
        (
            "",
            "pods",
            "spec.restartPolicy"
            | "spec.schedulerName"
            | "spec.serviceAccountName"
            | "status.phase",
        )
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
            if c.is_empty() {
                s("reportingComponent")
            } else {
                c
            }
        }
        ("", "events", f)
            if f.starts_with("involvedObject.")
                || matches!(f, "reason" | "reportingComponent" | "type") =>
        {
            s(f)
        }
        ("events.k8s.io", "events", f) => {
            let f = f
                .strip_prefix("involvedObject.")
                .map(|r| format!("regarding.{r}"))
                .unwrap_or(f.to_string());
            let f = if f == "reportingComponent" {
                "reportingController".to_string()
            } else {
                f
            };
            if f.starts_with("regarding.")
                || matches!(f.as_str(), "reason" | "reportingController" | "type")
            {
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
                return Err(SelectorError::Field(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            terms.push(FieldTerm {
                field: lhs.to_string(),
                equals: op != "!=",
                value: unescape_value(rhs)?,
            });
        }
        Ok(FieldSelector { terms })
    }

    /// True when there are no terms (matches everything).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The terms as `(field, equals, value)`; `equals` is false for `!=`.
    pub fn requirements(&self) -> impl Iterator<Item = (&str, bool, &str)> {
        self.terms
            .iter()
            .map(|t| (t.field.as_str(), t.equals, t.value.as_str()))
    }

    /// If the selector pins `field` to a single value with `=`/`==`, that value.
    pub fn exact_value(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.equals && t.field == field)
            .map(|t| t.value.as_str())
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
                    None => {
                        f == "metadata.name" || (f == "metadata.namespace" && (namespaced || !crd))
                    }
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
                    let jp = crate::jsonpath::JsonPath::parse(path).map_err(|e| {
                        SelectorError::Field(format!("invalid selectable field {}: {e}", t.field))
                    })?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn parse_and_match_set_based() {
        let s = LabelSelector::parse("app in (a,b),!legacy,tier!=db").unwrap();
        assert_eq!(s.to_string(), "app in (a,b),!legacy,tier!=db");
        assert!(s.matches(Some(&labels(json!({"app": "a", "tier": "web"})))));
        assert!(s.matches(Some(&labels(json!({"app": "b"})))));
        assert!(!s.matches(Some(&labels(json!({"app": "c"})))));
        assert!(!s.matches(Some(&labels(json!({"app": "a", "legacy": "x"})))));
        assert!(!s.matches(Some(&labels(json!({"app": "a", "tier": "db"})))));
        assert!(!s.matches(None));
    }

    #[test]
    fn equality_exists_and_everything() {
        let s = LabelSelector::parse(" env = prod , team==x, owner ").unwrap();
        assert!(s.matches(Some(&labels(
            json!({"env": "prod", "team": "x", "owner": ""})
        ))));
        assert!(!s.matches(Some(&labels(json!({"env": "prod", "team": "x"})))));
        let e = LabelSelector::parse("").unwrap();
        assert!(e.is_empty() && e.matches(None));
        assert!(LabelSelector::everything().matches(None));
        let n = LabelSelector::parse("x notin (in,notin)").unwrap();
        assert!(n.matches(Some(&labels(json!({"x": "y"})))));
        assert!(!n.matches(Some(&labels(json!({"x": "in"})))));
        let g = LabelSelector::parse("n>3").unwrap();
        assert!(
            g.matches(Some(&labels(json!({"n": "5"}))))
                && !g.matches(Some(&labels(json!({"n": "2"}))))
        );
        assert!(
            LabelSelector::parse("a=")
                .unwrap()
                .matches(Some(&labels(json!({"a": ""}))))
        );
    }

    #[test]
    fn syntax_errors() {
        let e = |s: &str| LabelSelector::parse(s).unwrap_err().to_string();
        assert_eq!(e("a,"), "found '', expected: identifier after ','");
        assert_eq!(
            e("a b"),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            e("a in b"),
            "unable to parse requirement: found 'b' expected: '('"
        );
        assert_eq!(
            e("a=(b"),
            "unable to parse requirement: found '(', expected: identifier"
        );
        assert_eq!(
            e(",a"),
            "found ',', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(e("a=b c"), "found 'c', expected: ',' or 'end of string'");
        assert!(e("a@b=c").starts_with(
            "unable to parse requirement: <nil>: Invalid value: \"a@b\": name part must consist"
        ));
        assert!(e("a=b@c").starts_with(
            "unable to parse requirement: values[0][a]: Invalid value: \"b@c\": a valid label"
        ));
        assert!(e("a>b").contains("the value must be an integer"));
        assert_eq!(
            e("a=!b"),
            "unable to parse requirement: found '!', expected: identifier"
        );
    }

    #[test]
    fn from_metav1_json() {
        let s = LabelSelector::from_label_selector_json(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["fe", "be"]},
                {"key": "legacy", "operator": "DoesNotExist"}
            ]
        }))
        .unwrap();
        assert_eq!(s.to_string(), "app=web,!legacy,tier in (be,fe)");
        assert!(s.matches(Some(&labels(json!({"app": "web", "tier": "fe"})))));
        assert!(!s.matches(Some(&labels(json!({"app": "web", "tier": "x"})))));
        assert!(
            LabelSelector::from_label_selector_json(&json!({}))
                .unwrap()
                .matches(None)
        );
        assert!(
            !LabelSelector::from_label_selector_json(&Value::Null)
                .unwrap()
                .matches(None)
        );
        let bad = LabelSelector::from_label_selector_json(
            &json!({"matchExpressions": [{"key": "a", "operator": "Foo"}]}),
        );
        assert_eq!(
            bad.unwrap_err().to_string(),
            "\"Foo\" is not a valid label selector operator"
        );
        let empty_in = LabelSelector::from_label_selector_json(
            &json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
        );
        assert!(
            empty_in
                .unwrap_err()
                .to_string()
                .contains("values set can't be empty")
        );
    }
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
        let fs2 =
            FieldSelector::parse("spec.host==n1,spec.hostNetwork=false,status.podIP=10.0.0.9")
                .unwrap();
        assert!(fs2.matches("", "pods", &pod(), &[]).unwrap());
        assert_eq!(fs2.requirements().count(), 3);
        assert!(FieldSelector::parse("").unwrap().is_empty());
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
        let err = FieldSelector::parse("status.x=1")
            .unwrap()
            .validate_fields("batch", "jobs", &[])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "field label \"status.x\" not supported for batchv1.Job"
        );
        let ns = FieldSelector::parse("metadata.namespace=x").unwrap();
        assert!(ns.validate_fields("", "nodes", &[]).is_err());
        assert!(ns.validate_fields("", "configmaps", &[]).is_ok());
        assert!(
            ns.validate_fields_scoped("example.com", "widgets", &[], false)
                .is_err()
        );
        assert_eq!(
            FieldSelector::parse("a").unwrap_err().to_string(),
            "invalid selector: 'a'; can't understand 'a'"
        );
        assert_eq!(
            FieldSelector::parse(r"a=b\\q").unwrap().exact_value("a"),
            Some(r"b\q")
        );
        assert!(FieldSelector::parse(r"a=b\").is_err());
        assert_eq!(
            FieldSelector::parse("a=b\\x").unwrap_err().to_string(),
            "invalid field selector: invalid escape sequence: \\x"
        );
        assert_eq!(
            FieldSelector::parse("a=x\\,y").unwrap().exact_value("a"),
            Some("x,y")
        );
    }

    #[test]
    fn field_selector_other_resources() {
        let ev = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"},
            "reportingComponent": "kubelet", "type": "Warning"});
        let fs =
            FieldSelector::parse("involvedObject.kind=Pod,source=kubelet,type=Warning").unwrap();
        assert!(fs.matches("", "events", &ev, &[]).unwrap());
        let ev2 = json!({"metadata": {"name": "e"}, "regarding": {"kind": "Pod"}, "reportingController": "x"});
        let fs2 = FieldSelector::parse("regarding.kind=Pod,reportingController=x").unwrap();
        assert!(fs2.matches("events.k8s.io", "events", &ev2, &[]).unwrap());
        let job = json!({"metadata": {"name": "j"}, "status": {}});
        assert!(
            FieldSelector::parse("status.successful=0")
                .unwrap()
                .matches("batch", "jobs", &job, &[])
                .unwrap()
        );
        let node = json!({"metadata": {"name": "n"}, "spec": {}});
        assert_eq!(
            field_value("", "nodes", &node, "spec.unschedulable").as_deref(),
            Some("false")
        );
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
            !FieldSelector::parse("spec.color=blue")
                .unwrap()
                .matches("example.com", "widgets", &w, &extra)
                .unwrap()
        );
        let err = FieldSelector::parse("spec.shape=x")
            .unwrap()
            .matches("example.com", "widgets", &w, &extra)
            .unwrap_err();
        assert_eq!(err.to_string(), "field label not supported: spec.shape");
    }
}
