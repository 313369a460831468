//! The subset of Kubernetes JSONPath (`k8s.io/client-go/util/jsonpath`) that CRD
//! `additionalPrinterColumns` and `selectableFields` use: dotted fields, quoted
//! bracket keys (`['a.b/c']`), indices (negative allowed), slices, `*`
//! wildcards, unions, recursive descent (`..name`) and filters
//! (`[?(@.type=="Ready")]`, comparisons `== != < > <= >=` and existence).
//! Missing keys evaluate to no results, as with kube's `AllowMissingKeys(true)`.

use serde_json::Value;

/// Why a JSONPath expression could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum JsonPathError {
    /// The expression is empty (after stripping `{}` and `$`).
    #[error("empty JSONPath expression")]
    Empty,
    /// A `[` was never closed.
    #[error("unterminated array notation in {0:?}")]
    UnterminatedBracket(String),
    /// A quoted string was never closed.
    #[error("unterminated quoted string in {0:?}")]
    UnterminatedString(String),
    /// The contents of `[...]` are not understood.
    #[error("invalid array index {0:?}")]
    InvalidIndex(String),
    /// A filter `?(...)` expression is malformed.
    #[error("invalid filter expression {0:?}")]
    InvalidFilter(String),
    /// A character that cannot appear at this position.
    #[error("unrecognized character {ch:?} in {expr:?}")]
    Unexpected {
        /// The offending character.
        ch: char,
        /// The whole expression.
        expr: String,
    },
}

/// A parsed JSONPath expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JsonPath {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq)]
enum Segment {
    Field(String),
    Wildcard,
    Index(i64),
    Slice(Option<i64>, Option<i64>, Option<i64>),
    Union(Vec<Segment>),
    Filter(Box<Filter>),
    Recursive,
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Path(Vec<Segment>),
    Literal(Value),
}

#[derive(Debug, Clone, PartialEq)]
struct Filter {
    left: Operand,
    /// `None` means an existence test on `left`.
    cmp: Option<(CmpOp, Operand)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
}

impl JsonPath {
    /// Parses an expression such as `.spec.replicas` or `{.status.conditions[?(@.type=="Ready")].status}`.
    pub(crate) fn parse(s: &str) -> Result<Self, JsonPathError> {
        let mut t = s.trim();
        if t.len() >= 2 && t.starts_with('{') && t.ends_with('}') {
            t = t[1..t.len() - 1].trim();
        }
        if let Some(rest) = t.strip_prefix('$') {
            t = rest;
        }
        if t.is_empty() {
            return Err(JsonPathError::Empty);
        }
        let chars: Vec<char> = t.chars().collect();
        let mut p = PathParser { chars: &chars, pos: 0, expr: t };
        let segments = p.parse_segments(false)?;
        if p.pos < chars.len() {
            return Err(p.unexpected());
        }
        Ok(JsonPath { segments })
    }

    /// Evaluates the expression against `v`, returning every matched value in document order.
    pub(crate) fn eval<'a>(&self, v: &'a Value) -> Vec<&'a Value> {
        eval_segments(&self.segments, vec![v], v)
    }

    /// Evaluates and returns the first match, if any.
    pub(crate) fn eval_first<'a>(&self, v: &'a Value) -> Option<&'a Value> {
        self.eval(v).into_iter().next()
    }
}

struct PathParser<'c> {
    chars: &'c [char],
    pos: usize,
    expr: &'c str,
}

impl PathParser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn unexpected(&self) -> JsonPathError {
        JsonPathError::Unexpected { ch: self.peek().unwrap_or(' '), expr: self.expr.to_string() }
    }

    /// Parses segments until end of input (or, inside a filter, until an operator/`)`).
    fn parse_segments(&mut self, in_filter: bool) -> Result<Vec<Segment>, JsonPathError> {
        let mut out = Vec::new();
        let mut first = true;
        while let Some(c) = self.peek() {
            match c {
                '.' => {
                    self.pos += 1;
                    if self.peek() == Some('.') {
                        self.pos += 1;
                        out.push(Segment::Recursive);
                        if self.peek() == Some('[') {
                            continue;
                        }
                    }
                    match self.peek() {
                        None => break,
                        Some('[') => continue,
                        Some(_) => out.push(self.parse_field()?),
                    }
                }
                '[' => out.push(self.parse_bracket()?),
                c if in_filter && (c == ')' || c.is_whitespace() || "=!<>".contains(c)) => break,
                c if first && !c.is_whitespace() && !"[]()'\",".contains(c) => {
                    // Be lenient: accept `spec.replicas` without a leading dot.
                    out.push(self.parse_field()?);
                }
                _ => return Err(self.unexpected()),
            }
            first = false;
        }
        Ok(out)
    }

    fn parse_field(&mut self) -> Result<Segment, JsonPathError> {
        let mut name = String::new();
        while let Some(c) = self.peek() {
            if c == '\\'
                && let Some(&n) = self.chars.get(self.pos + 1)
            {
                name.push(n);
                self.pos += 2;
                continue;
            }
            if matches!(c, '.' | '[' | ']' | '(' | ')' | '=' | '!' | '<' | '>' | ',' | '\'' | '"') || c.is_whitespace()
            {
                break;
            }
            name.push(c);
            self.pos += 1;
        }
        if name.is_empty() {
            return Err(self.unexpected());
        }
        Ok(if name == "*" { Segment::Wildcard } else { Segment::Field(name) })
    }

    fn parse_bracket(&mut self) -> Result<Segment, JsonPathError> {
        // at '['
        let start = self.pos;
        self.pos += 1;
        if self.peek() == Some('?') {
            self.pos += 1;
            if self.peek() != Some('(') {
                return Err(JsonPathError::InvalidFilter(self.expr.to_string()));
            }
            self.pos += 1;
            let filter = self.parse_filter()?;
            if self.peek() != Some(')') {
                return Err(JsonPathError::InvalidFilter(self.expr.to_string()));
            }
            self.pos += 1;
            if self.peek() != Some(']') {
                return Err(JsonPathError::UnterminatedBracket(self.expr.to_string()));
            }
            self.pos += 1;
            return Ok(Segment::Filter(Box::new(filter)));
        }
        // Collect raw content up to the matching ']' respecting quotes.
        let mut items: Vec<Segment> = Vec::new();
        let mut raw = String::new();
        loop {
            match self.peek() {
                None => return Err(JsonPathError::UnterminatedBracket(self.expr.to_string())),
                Some(q @ ('\'' | '"')) => {
                    self.pos += 1;
                    let s = self.read_quoted(q)?;
                    items.push(Segment::Field(s));
                }
                Some(',') => {
                    self.pos += 1;
                    if !raw.trim().is_empty() {
                        items.push(parse_index(raw.trim())?);
                    }
                    raw.clear();
                }
                Some(']') => {
                    self.pos += 1;
                    if !raw.trim().is_empty() {
                        items.push(parse_index(raw.trim())?);
                    }
                    break;
                }
                Some(c) => {
                    raw.push(c);
                    self.pos += 1;
                }
            }
        }
        match items.len() {
            0 => Err(JsonPathError::InvalidIndex(self.chars[start..self.pos].iter().collect())),
            1 => Ok(items.remove(0)),
            _ => Ok(Segment::Union(items)),
        }
    }

    fn read_quoted(&mut self, q: char) -> Result<String, JsonPathError> {
        let mut s = String::new();
        loop {
            match self.peek() {
                None => return Err(JsonPathError::UnterminatedString(self.expr.to_string())),
                Some('\\') if self.chars.get(self.pos + 1).is_some() => {
                    s.push(self.chars[self.pos + 1]);
                    self.pos += 2;
                }
                Some(c) if c == q => {
                    self.pos += 1;
                    return Ok(s);
                }
                Some(c) => {
                    s.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn parse_operand(&mut self) -> Result<Operand, JsonPathError> {
        self.skip_ws();
        let bad = || JsonPathError::InvalidFilter(self.expr.to_string());
        match self.peek() {
            Some('@') | Some('$') => {
                self.pos += 1;
                Ok(Operand::Path(self.parse_segments(true)?))
            }
            Some(q @ ('\'' | '"')) => {
                self.pos += 1;
                Ok(Operand::Literal(Value::String(self.read_quoted(q)?)))
            }
            Some(_) => {
                let mut tok = String::new();
                while let Some(c) = self.peek() {
                    if c == ')' || c.is_whitespace() || "=!<>".contains(c) {
                        break;
                    }
                    tok.push(c);
                    self.pos += 1;
                }
                let lit = match tok.as_str() {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    "nil" | "null" => Value::Null,
                    t => serde_json::from_str::<serde_json::Number>(t).map(Value::Number).map_err(|_| bad())?,
                };
                Ok(Operand::Literal(lit))
            }
            None => Err(bad()),
        }
    }

    fn parse_filter(&mut self) -> Result<Filter, JsonPathError> {
        let left = self.parse_operand()?;
        self.skip_ws();
        let rest: String = self.chars[self.pos..].iter().take(2).collect();
        let op = if rest.starts_with("==") {
            Some((CmpOp::Eq, 2))
        } else if rest.starts_with("!=") {
            Some((CmpOp::Ne, 2))
        } else if rest.starts_with("<=") {
            Some((CmpOp::Le, 2))
        } else if rest.starts_with(">=") {
            Some((CmpOp::Ge, 2))
        } else if rest.starts_with('<') {
            Some((CmpOp::Lt, 1))
        } else if rest.starts_with('>') {
            Some((CmpOp::Gt, 1))
        } else {
            None
        };
        let cmp = match op {
            Some((op, n)) => {
                self.pos += n;
                let right = self.parse_operand()?;
                self.skip_ws();
                Some((op, right))
            }
            None => None,
        };
        Ok(Filter { left, cmp })
    }
}

fn parse_index(raw: &str) -> Result<Segment, JsonPathError> {
    let bad = || JsonPathError::InvalidIndex(raw.to_string());
    if raw == "*" {
        return Ok(Segment::Wildcard);
    }
    if raw.contains(':') {
        let parts: Vec<&str> = raw.split(':').collect();
        if parts.len() > 3 {
            return Err(bad());
        }
        let num = |s: &str| -> Result<Option<i64>, JsonPathError> {
            let s = s.trim();
            if s.is_empty() { Ok(None) } else { s.parse::<i64>().map(Some).map_err(|_| bad()) }
        };
        let start = num(parts[0])?;
        let end = num(parts.get(1).copied().unwrap_or(""))?;
        let step = num(parts.get(2).copied().unwrap_or(""))?;
        return Ok(Segment::Slice(start, end, step));
    }
    raw.parse::<i64>().map(Segment::Index).map_err(|_| bad())
}

fn eval_segments<'a>(segs: &[Segment], mut cur: Vec<&'a Value>, root: &'a Value) -> Vec<&'a Value> {
    for seg in segs {
        let mut next = Vec::new();
        for v in cur {
            apply(seg, v, root, &mut next);
        }
        cur = next;
        if cur.is_empty() {
            break;
        }
    }
    cur
}

fn descendants<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    out.push(v);
    match v {
        Value::Object(m) => m.values().for_each(|c| descendants(c, out)),
        Value::Array(a) => a.iter().for_each(|c| descendants(c, out)),
        _ => {}
    }
}

fn apply<'a>(seg: &Segment, v: &'a Value, root: &'a Value, out: &mut Vec<&'a Value>) {
    match seg {
        Segment::Field(name) => {
            if let Some(x) = v.as_object().and_then(|m| m.get(name)) {
                out.push(x);
            }
        }
        Segment::Wildcard => match v {
            Value::Object(m) => out.extend(m.values()),
            Value::Array(a) => out.extend(a.iter()),
            _ => {}
        },
        Segment::Index(i) => {
            if let Some(a) = v.as_array() {
                let len = a.len() as i64;
                let idx = if *i < 0 { i + len } else { *i };
                if (0..len).contains(&idx) {
                    out.push(&a[idx as usize]);
                }
            }
        }
        Segment::Slice(start, end, step) => {
            if let Some(a) = v.as_array() {
                let len = a.len() as i64;
                let norm = |x: i64| if x < 0 { (x + len).max(0) } else { x.min(len) };
                let s = start.map_or(0, norm);
                let e = end.map_or(len, norm);
                let st = step.unwrap_or(1).max(1);
                let mut i = s;
                while i < e {
                    out.push(&a[i as usize]);
                    i += st;
                }
            }
        }
        Segment::Union(items) => items.iter().for_each(|s| apply(s, v, root, out)),
        Segment::Recursive => descendants(v, out),
        Segment::Filter(f) => {
            let candidates: Vec<&Value> = match v {
                Value::Array(a) => a.iter().collect(),
                Value::Object(_) => vec![v],
                _ => Vec::new(),
            };
            out.extend(candidates.into_iter().filter(|c| filter_passes(f, c, root)));
        }
    }
}

fn operand_values<'a>(o: &'a Operand, at: &'a Value, root: &'a Value) -> Vec<&'a Value> {
    match o {
        Operand::Path(segs) => eval_segments(segs, vec![at], root),
        Operand::Literal(l) => vec![l],
    }
}

fn filter_passes(f: &Filter, at: &Value, root: &Value) -> bool {
    let lefts = operand_values(&f.left, at, root);
    let Some(left) = lefts.first() else {
        return false;
    };
    let Some((op, right)) = &f.cmp else {
        return true;
    };
    let rights = operand_values(right, at, root);
    let Some(right) = rights.first() else {
        return false;
    };
    compare(*op, left, right)
}

fn compare(op: CmpOp, l: &Value, r: &Value) -> bool {
    use std::cmp::Ordering;
    let ord: Option<Ordering> = match (l, r) {
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(x), Some(y)) => Some(x.cmp(&y)),
            _ => a.as_f64().zip(b.as_f64()).and_then(|(x, y)| x.partial_cmp(&y)),
        },
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Bool(a), Value::Bool(b)) if matches!(op, CmpOp::Eq | CmpOp::Ne) => Some(a.cmp(b)),
        (Value::Null, Value::Null) if matches!(op, CmpOp::Eq | CmpOp::Ne) => Some(Ordering::Equal),
        _ => None,
    };
    match (op, ord) {
        (_, None) => false,
        (CmpOp::Eq, Some(o)) => o == Ordering::Equal,
        (CmpOp::Ne, Some(o)) => o != Ordering::Equal,
        (CmpOp::Lt, Some(o)) => o == Ordering::Less,
        (CmpOp::Gt, Some(o)) => o == Ordering::Greater,
        (CmpOp::Le, Some(o)) => o != Ordering::Greater,
        (CmpOp::Ge, Some(o)) => o != Ordering::Less,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj() -> Value {
        json!({
            "metadata": {"name": "x", "labels": {"app": "web", "a.b/c": "dotted"}},
            "spec": {"replicas": 3, "items": [{"name": "a", "n": 1}, {"name": "b", "n": 2}, {"name": "c", "n": 3}]},
            "status": {"conditions": [
                {"type": "Progressing", "status": "True"},
                {"type": "Ready", "status": "False"}
            ]}
        })
    }

    fn eval(p: &str) -> Vec<Value> {
        let o = obj();
        JsonPath::parse(p).unwrap().eval(&o).into_iter().cloned().collect()
    }

    #[test]
    fn simple_fields() {
        assert_eq!(eval(".spec.replicas"), vec![json!(3)]);
        assert_eq!(eval("{.metadata.labels.app}"), vec![json!("web")]);
        assert_eq!(eval("$.metadata.name"), vec![json!("x")]);
        assert!(eval(".spec.missing.deep").is_empty());
    }

    #[test]
    fn filters() {
        assert_eq!(eval(r#".status.conditions[?(@.type=="Ready")].status"#), vec![json!("False")]);
        assert_eq!(eval(".status.conditions[?(@.type=='Progressing')].status"), vec![json!("True")]);
        assert_eq!(eval(".spec.items[?(@.n > 1)].name"), vec![json!("b"), json!("c")]);
        assert_eq!(eval(".spec.items[?(@.n != 2)].name"), vec![json!("a"), json!("c")]);
        assert_eq!(eval(".status.conditions[?(@.type)].type").len(), 2);
        assert!(eval(r#".status.conditions[?(@.type=="Nope")].status"#).is_empty());
    }

    #[test]
    fn indices_and_wildcards() {
        assert_eq!(eval(".spec.items[0].name"), vec![json!("a")]);
        assert_eq!(eval(".spec.items[-1].name"), vec![json!("c")]);
        assert!(eval(".spec.items[7].name").is_empty());
        assert_eq!(eval(".spec.items[*].name"), vec![json!("a"), json!("b"), json!("c")]);
        assert_eq!(eval(".spec.items[0:2].name"), vec![json!("a"), json!("b")]);
        assert_eq!(eval(".spec.items[0,2].name"), vec![json!("a"), json!("c")]);
        assert_eq!(eval("..name").len(), 4);
    }

    #[test]
    fn escaped_keys() {
        assert_eq!(eval(".metadata.labels['a.b/c']"), vec![json!("dotted")]);
        assert_eq!(eval(r#".metadata.labels["a.b/c"]"#), vec![json!("dotted")]);
        assert_eq!(eval(r".metadata.labels.a\.b/c"), vec![json!("dotted")]);
    }

    #[test]
    fn parse_errors() {
        assert_eq!(JsonPath::parse(""), Err(JsonPathError::Empty));
        assert!(matches!(JsonPath::parse(".a[0"), Err(JsonPathError::UnterminatedBracket(_))));
        assert!(matches!(JsonPath::parse(".a[x]"), Err(JsonPathError::InvalidIndex(_))));
        assert!(matches!(JsonPath::parse(".a['x]"), Err(JsonPathError::UnterminatedString(_))));
        assert!(JsonPath::parse(".a[?(@.x==)]").is_err());
    }
}
