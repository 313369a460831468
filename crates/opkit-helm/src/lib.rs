//! Helm chart rendering in Rust, meant to print exactly what `helm template` prints.
//!
//! - [`template`](mod@template): Go's `text/template` (lexer, parser, executor; see its docs for why
//!   this is not the `gtmpl` crate);
//! - [`funcs`]: Go's builtins, Sprig's functions and Helm's (`include`, `tpl`, `toYaml`, ...);
//! - [`value`]: the values templates see, with Go's printing;
//! - [`yaml`] and [`json`]: YAML and JSON as Helm reads and writes them;
//! - [`chart`], [`values`], [`schema`]: loading charts, combining values, checking schemas;
//! - [`render`]: the `helm template` pipeline and its output.

pub mod chart;
pub mod funcs;
pub mod head;
pub mod json;
pub mod objects;
pub mod render;
pub mod schema;
pub mod template;
pub mod value;
pub mod values;
pub mod yaml;

pub use render::{RenderedRelease, TemplateOptions, render_release, template, template_chart};

/// Why rendering a chart failed; the message is Helm's (without its `Error: ` prefix).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum HelmError {
    /// The chart could not be loaded.
    #[error("{0}")]
    Load(String),
    /// Values could not be read or parsed.
    #[error("{0}")]
    Values(String),
    /// The values do not meet a chart's `values.schema.json`.
    #[error("{0}")]
    Schema(String),
    /// A template failed to parse or execute, or its output is not YAML.
    #[error("{0}")]
    Render(String),
}
