//! Helm chart rendering in Rust, meant to print exactly what `helm template` prints.
//!
//! The public surface:
//!
//! - [`template()`] and [`template_chart`]: `helm template` of a chart directory or a
//!   loaded chart, with [`TemplateOptions`] (release, namespace, values, `--set`, ...);
//! - [`render_release`]: the same, giving the manifest and the notes apart
//!   ([`RenderedRelease`]), as a Helm operator stores a release;
//! - [`HelmError`]: why rendering failed, with Helm's message;
//! - [`chart`]: loading a chart ([`chart::load`], [`chart::Chart`]);
//! - [`template`](mod@template): Go's `text/template` (lexer, parser, executor; see its
//!   docs for why this is not the `gtmpl` crate), which other operators use on their own;
//! - [`value`]: the values templates see, with Go's printing;
//! - [`yaml`]: YAML as Helm reads and writes it;
//! - [`objects`]: Helm's `.Files` and `.Capabilities` (and the glob `.Files.Glob` takes).
//!
//! Inside (not public): Go's builtins, Sprig's functions and Helm's (`include`, `tpl`,
//! `toYaml`, ...), JSON as Go writes it, values files and `--set`, schema checks and the
//! `helm template` pipeline.
//!
//! # Example
//! ```
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("Chart.yaml"), "apiVersion: v2\nname: demo\nversion: 0.1.0\n")?;
//! std::fs::write(dir.path().join("values.yaml"), "greeting: hello\n")?;
//! std::fs::create_dir(dir.path().join("templates"))?;
//! std::fs::write(
//!     dir.path().join("templates/cm.yaml"),
//!     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  greeting: {{ .Values.greeting | quote }}\n",
//! )?;
//! let options = opkit_helm::TemplateOptions { release_name: "web".into(), ..Default::default() };
//! let manifest = opkit_helm::template(dir.path(), &options)?;
//! assert!(manifest.contains("name: web") && manifest.contains("greeting: \"hello\""));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod chart;
mod funcs;
mod head;
mod json;
pub mod objects;
mod render;
mod schema;
pub mod template;
pub mod value;
mod values;
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
