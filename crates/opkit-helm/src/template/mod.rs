//! Go's `text/template`, written for Helm's use of it.
//!
//! The `gtmpl` crate was tried first on the corpus charts and is not faithful enough: it
//! prints maps with Rust's debug format instead of Go's `map[a:1 b:2]`, prints the
//! float64 `1000000` as `1000000` where Go prints `1e+06`, cannot take `len` of a map,
//! and has no way to add Helm's functions that need the template set (`include`, `tpl`).
//! So this module is a lexer and parser ([`parse`]) and an executor ([`exec`]) with Go's
//! semantics: `missingkey=zero` as Helm sets it, Go's truth and `%v` printing, maps
//! ranged in key order, `and`/`or` short-circuiting, `break`/`continue`, and the
//! last definition of a name winning as templates are added.

pub mod exec;
pub mod parse;

use std::collections::HashMap;
use std::rc::Rc;

pub use exec::Exec;
pub use parse::{Node, Tree};

/// An error parsing or executing a template, with Go's message.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum TemplateError {
    /// The template does not parse: `template: NAME:LINE: MSG`.
    #[error("{0}")]
    Parse(String),
    /// Executing failed: `template: NAME:LINE:COL: executing "NAME" at <...>: MSG`.
    #[error("{0}")]
    Exec(String),
    /// `fail` or `required` stopped the rendering: `execution error at (NAME:LINE:COL): MSG`.
    #[error("{0}")]
    Fail(String),
}

/// A set of named templates, as one `*template.Template` with its associated templates.
#[derive(Debug, Default, Clone)]
pub struct Templates {
    trees: HashMap<Rc<str>, Rc<Tree>>,
}

impl Templates {
    /// An empty set.
    pub fn new() -> Templates {
        Templates::default()
    }

    /// Parses `source` as the template `name` and adds it and every template it defines;
    /// a name defined again replaces the earlier definition (unless the new body is empty).
    pub fn add(&mut self, name: &str, source: &str) -> Result<(), TemplateError> {
        let (tree, defines) = parse::parse(name, source)?;
        self.trees.insert(tree.name.clone(), Rc::new(tree));
        self.trees.extend(defines);
        Ok(())
    }

    /// The template called `name`.
    pub fn get(&self, name: &str) -> Option<&Rc<Tree>> {
        self.trees.get(name)
    }

    /// Adds already parsed trees (for `tpl`, whose definitions live in a copy of the set).
    pub fn extend(&mut self, trees: HashMap<Rc<str>, Rc<Tree>>) {
        self.trees.extend(trees);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    fn run(source: &str, data: Value) -> Result<String, TemplateError> {
        let mut set = Templates::new();
        set.add("t", source)?;
        Exec::new(&set).execute("t", &data)
    }

    #[test]
    fn a_second_definition_in_one_file_is_a_parse_error() {
        let err = run("{{ define \"a\" }}1{{ end }}\n{{ define \"a\" }}2{{ end }}", Value::Nil).expect_err("redefined");
        assert_eq!(err.to_string(), "template: t:2: template: multiple definition of template \"a\"");
    }

    #[test]
    fn unknown_functions_fail_at_parse_time() {
        let err = run("{{ nosuch 1 }}", Value::Nil).expect_err("unknown function");
        assert_eq!(err.to_string(), "template: t:1: function \"nosuch\" not defined");
    }

    #[test]
    fn missing_keys_print_no_value_and_nested_ones_are_nil_pointers() {
        let data = Value::from_json(&serde_json::json!({"a": {"b": 1}}));
        assert_eq!(run("{{ .x }}|{{ .a.b }}", data.clone()).expect("renders"), "<no value>|1");
        let err = run("{{ .x.y }}", data).expect_err("nil pointer");
        assert!(err.to_string().ends_with("nil pointer evaluating interface {}.y"), "{err}");
    }

    #[test]
    fn unclosed_actions_are_errors_not_panics() {
        for source in ["{{ if .x }}", "{{ .x", "{{ (.x }}", "{{ \"unterminated }}", "{{ end }}", "{{/* open"] {
            assert!(run(source, Value::Nil).is_err(), "{source}");
        }
    }
}
