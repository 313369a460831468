//! Rendering a watch's chart for one release (`helm template` with the custom resource's
//! spec as values): the objects, the manifest Helm stores, the notes and the chart.

use serde_json::Value;

use crate::OperatorError;
use crate::manifest::{RenderedObject, manifest_of, split};
use crate::release::{Release, chart_json};
use crate::watches::Watch;

/// A chart rendered for one release.
pub(super) struct Rendered {
    /// The objects, hooks included.
    pub objects: Vec<RenderedObject>,
    /// The manifest (hooks excluded), as Helm stores it.
    pub manifest: String,
    /// The root chart's rendered `NOTES.txt`.
    pub notes: String,
    /// The chart as Helm stores it.
    pub chart: Value,
}

impl Rendered {
    /// The objects of the manifest (hooks excluded).
    pub(super) fn manifest_objects(&self) -> impl Iterator<Item = &RenderedObject> {
        self.objects.iter().filter(|o| !o.is_hook())
    }
}

/// The chart version a release (or Helm's stored chart) was made with.
pub(super) fn chart_version(chart: &Value) -> &str {
    chart.pointer("/metadata/version").and_then(Value::as_str).unwrap_or_default()
}

/// Renders the watch's chart for release `name` in `namespace` with `spec` as values, as
/// revision `revision` of an install or (`is_upgrade`) an upgrade.
pub(super) fn render(
    watch: &Watch,
    name: &str,
    namespace: &str,
    spec: &Value,
    revision: i64,
    is_upgrade: bool,
) -> Result<Rendered, OperatorError> {
    let chart = opkit_helm::chart::load(&watch.chart)?;
    let chart_value = chart_json(&chart, &watch.chart);
    let options = opkit_helm::TemplateOptions {
        release_name: name.to_string(),
        namespace: namespace.to_string(),
        values_files: vec![spec.to_string()],
        set: watch.override_values.clone(),
        revision,
        is_upgrade,
        ..opkit_helm::TemplateOptions::default()
    };
    let rendered = opkit_helm::render_release(chart, &options)?;
    let objects = split(&rendered.manifest)?;
    let manifest = manifest_of(&objects);
    Ok(Rendered { objects, manifest, notes: rendered.notes, chart: chart_value })
}

/// Renders the release as its deployed revision when that still gives the deployed
/// manifest (nothing to upgrade: `.Release.Revision` and `.IsUpgrade` are the deployed
/// revision's), else as the next revision: an install (`.Release.IsInstall`) when
/// nothing is deployed, an upgrade otherwise.
pub(super) fn render_next(
    watch: &Watch,
    name: &str,
    namespace: &str,
    spec: &Value,
    history: &[Release],
    deployed: Option<&Release>,
) -> Result<Rendered, OperatorError> {
    let next = history.last().map_or(1, |r| r.version + 1);
    let Some(current) = deployed else { return render(watch, name, namespace, spec, next, false) };
    let as_deployed = render(watch, name, namespace, spec, current.version, current.version > 1)?;
    if as_deployed.manifest == current.manifest && chart_version(&as_deployed.chart) == chart_version(&current.chart) {
        return Ok(as_deployed);
    }
    render(watch, name, namespace, spec, next, true)
}
