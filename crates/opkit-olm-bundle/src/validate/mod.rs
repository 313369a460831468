//! Bundle validation as `operator-sdk bundle validate` runs it: the required validators of
//! operator-framework/api and operator-registry (bundle format and annotations, CRDs owned
//! and present, the CSV's fields, formats and install modes, webhook definitions, the
//! objects' kinds) and the optional ones picked with `--select-optional` (the
//! `operatorframework` suite: operatorhubv2, capabilities, categories,
//! alpha-deprecated-apis, good-practices). Findings carry operator-framework's words,
//! and the file and field they are about.

mod optional;
mod required;

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

use crate::bundle::Bundle;

pub use optional::{OPTIONAL_VALIDATORS, OptionalValidator};
pub use required::gvk as gvk_string;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Level {
    /// The bundle is invalid.
    Error,
    /// The bundle works, but should change.
    Warning,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Error => "Error",
            Level::Warning => "Warning",
        })
    }
}

/// One finding, as operator-framework's `errors.Error`: a type, a level, the field and bad
/// value when known, a detail; and the file it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// operator-framework's error type (`CSVFileNotValid`, `BundleNotValid`, ...).
    pub error_type: &'static str,
    /// Error or warning.
    pub level: Level,
    /// The field operator-framework's message names (`Field X, ...`), when it names one.
    pub field: String,
    /// Where in the file the finding is (`spec.icon`), when known: shown beside the message.
    pub path: String,
    /// The bad value as Go's `%v` prints it, when there is one.
    pub value: Option<String>,
    /// What is wrong.
    pub detail: String,
    /// The file of the bundle the finding is about.
    pub file: Option<PathBuf>,
}

impl Finding {
    fn new(level: Level, error_type: &'static str, detail: impl Into<String>) -> Finding {
        Finding {
            error_type,
            level,
            field: String::new(),
            path: String::new(),
            value: None,
            detail: detail.into(),
            file: None,
        }
    }

    fn value(mut self, value: impl Into<String>) -> Finding {
        self.value = Some(value.into());
        self
    }

    /// Sets where in the file the finding is.
    fn field(mut self, path: impl Into<String>) -> Finding {
        self.path = path.into();
        self
    }

    /// Sets the field operator-framework's message names (and where the finding is).
    fn go_field(mut self, field: impl Into<String>) -> Finding {
        self.field = field.into();
        self.path.clone_from(&self.field);
        self
    }

    fn file(mut self, file: &std::path::Path) -> Finding {
        if !file.as_os_str().is_empty() {
            self.file = Some(file.to_path_buf());
        }
        self
    }
}

impl fmt::Display for Finding {
    /// Go's `errors.Error.Error()`: `Level: Field F, Value V: detail` (a format error of
    /// operator-registry: its detail alone).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.error_type == required::FORMAT {
            return f.write_str(&self.detail);
        }
        let mut detail = if self.detail.is_empty() { String::new() } else { format!(": {}", self.detail) };
        match (&self.field[..], &self.value) {
            ("", Some(v)) => detail = format!("Value {v}{detail}"),
            ("", None) => {}
            (field, Some(v)) => detail = format!("Field {field}, Value {v}{detail}"),
            (field, None) => detail = format!("Field {field}{detail}"),
        }
        if detail.is_empty() { f.write_str("ErrMessageMissing") } else { write!(f, "{}: {detail}", self.level) }
    }
}

/// Which optional validators to run: `--select-optional` as a label selector
/// (`suite=operatorframework`, `name=good-practices`, `name in (a,b)`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    terms: Vec<(String, Vec<String>, bool)>,
}

impl Selector {
    /// Parses a selector of `key=value`, `key!=value` and `key in (a,b)` terms.
    pub fn parse(text: &str) -> Result<Selector, String> {
        let mut terms = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            let (term, tail) = match rest.find(['(', ',']) {
                Some(i) if rest.as_bytes()[i] == b'(' => {
                    let close = rest.find(')').ok_or_else(|| format!("unable to parse requirement: {rest:?}"))?;
                    (&rest[..=close], rest[close + 1..].trim_start_matches(','))
                }
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, ""),
            };
            let term = term.trim();
            if let Some((k, v)) = term.split_once("!=") {
                terms.push((k.trim().to_string(), vec![v.trim().to_string()], false));
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                terms.push((k.trim().to_string(), vec![v.trim().to_string()], true));
            } else if let Some((k, v)) = term.split_once(" in ") {
                let values = v.trim().trim_start_matches('(').trim_end_matches(')');
                terms.push((k.trim().to_string(), values.split(',').map(|s| s.trim().to_string()).collect(), true));
            } else {
                return Err(format!("unable to parse requirement: {term:?}"));
            }
            rest = tail.trim();
        }
        Ok(Selector { terms })
    }

    /// Whether a validator with these labels is selected (an empty selector selects none).
    pub fn matches(&self, labels: &[(&str, &str)]) -> bool {
        !self.terms.is_empty()
            && self.terms.iter().all(|(key, values, positive)| {
                let value = labels.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
                let hit = value.is_some_and(|v| values.iter().any(|x| x == v));
                hit == *positive
            })
    }
}

/// What `bundle validate` is asked.
#[derive(Debug, Clone, Default)]
pub struct ValidateOptions {
    /// The optional validators to run.
    pub select_optional: Option<Selector>,
    /// `--optional-values` (`k8s-version=1.22`).
    pub optional_values: Vec<(String, String)>,
}

/// The outcome, as operator-sdk's `validate.Result`.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Every finding, in operator-sdk's order (per validator: warnings, then errors).
    pub findings: Vec<Finding>,
}

impl Report {
    /// No error among the findings.
    pub fn passed(&self) -> bool {
        !self.findings.iter().any(|f| f.level == Level::Error)
    }

    /// The errors.
    pub fn errors(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.level == Level::Error)
    }

    /// The warnings.
    pub fn warnings(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.level == Level::Warning)
    }

    /// operator-sdk's `-o json-alpha1` document: `{"passed": .., "outputs": [{"type",
    /// "message"}]}`, each output also naming its file and field.
    pub fn to_json(&self, bundle_dir: &std::path::Path) -> serde_json::Value {
        let outputs: Vec<serde_json::Value> = self
            .findings
            .iter()
            .map(|f| {
                let mut o = serde_json::json!({
                    "type": if f.level == Level::Error { "error" } else { "warning" },
                    "message": f.to_string(),
                });
                if let Some(file) = &f.file {
                    let shown = file.strip_prefix(bundle_dir).unwrap_or(file);
                    o["file"] = serde_json::Value::String(shown.display().to_string());
                }
                if !f.path.is_empty() {
                    o["field"] = serde_json::Value::String(f.path.clone());
                }
                o
            })
            .collect();
        serde_json::json!({"passed": self.passed(), "outputs": outputs})
    }

    /// operator-sdk's text output: one logrus line per finding (`WARN[0000] ...`,
    /// `ERRO[0000] ...`), the file and field as `file=` and `field=` fields.
    pub fn to_text(&self, bundle_dir: &std::path::Path) -> String {
        let mut out = String::new();
        for f in &self.findings {
            let tag = if f.level == Level::Error { "ERRO" } else { "WARN" };
            out.push_str(&format!("{tag}[0000] {f}"));
            if let Some(file) = &f.file {
                let shown = file.strip_prefix(bundle_dir).unwrap_or(file);
                out.push_str(&format!("  file={}", shown.display()));
            }
            if !f.path.is_empty() {
                out.push_str(&format!(" field={}", f.path));
            }
            out.push('\n');
        }
        out
    }
}

/// Runs the required validators, then the optional ones selected, over `bundle`. A
/// finding that a later validator makes again (the CSV validator's and OperatorHub's
/// missing `minKubeVersion`) is reported once, where it was first made, as operator-sdk
/// prints it.
pub fn validate(bundle: &Bundle, options: &ValidateOptions) -> Report {
    let mut findings = required::validate(bundle);
    if let Some(selector) = &options.select_optional {
        for finding in optional::validate(bundle, selector, &options.optional_values) {
            if !findings.contains(&finding) {
                findings.push(finding);
            }
        }
    }
    Report { findings }
}

/// Orders one validator's findings as operator-sdk prints them: warnings, then errors.
fn ordered(mut findings: Vec<Finding>) -> Vec<Finding> {
    findings.sort_by_key(|f| f.level == Level::Error);
    findings
}
