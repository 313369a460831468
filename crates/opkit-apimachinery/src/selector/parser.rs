//! The label-selector parser: builds requirements from lexer tokens with
//! kube-apiserver's grammar and error messages.

use super::lexer::Tok;
use super::validation::{invalid, new_requirement, qualified_name_errors};
use super::{Operator, Requirement, SelectorError};

pub(super) struct Parser {
    pub(super) tokens: Vec<Tok>,
    pub(super) pos: usize,
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

    pub(super) fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut reqs = Vec::new();
        loop {
            match self.peek_v() {
                Tok::Ident(_) | Tok::Bang => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| SelectorError::Label(format!("unable to parse requirement: {e}")))?;
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
            let op = if not_exists { Operator::DoesNotExist } else { Operator::Exists };
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
        let values =
            if matches!(op, Operator::In | Operator::NotIn) { self.parse_values()? } else { self.parse_exact_value()? };
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
                                return Err(format!("found '{}', expected: ',' or ')'", t.literal()));
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
                        return Err(format!("found '{}', expected: ',', or identifier", t.literal()));
                    }
                }
            },
            t => {
                return Err(format!("found '{}', expected: ',', ')' or identifier", t.literal()));
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
