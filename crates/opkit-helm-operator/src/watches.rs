//! `watches.yaml` in operator-sdk's format: which group/version/kind each chart serves,
//! with `watchDependentResources`, `overrideValues` (`$VAR`/`${VAR}` expanded from the
//! environment), a label `selector`, `reconcilePeriod` and `maxConcurrentReconciles`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use crate::OperatorError;

/// operator-sdk's default reconcile period (`--reconcile-period`).
pub(crate) const DEFAULT_RECONCILE_PERIOD: Duration = Duration::from_secs(60);

/// One entry of `watches.yaml`, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WatchEntry {
    group: String,
    version: String,
    kind: String,
    chart: PathBuf,
    watch_dependent_resources: Option<bool>,
    #[serde(default)]
    override_values: BTreeMap<String, String>,
    selector: Option<LabelSelector>,
    reconcile_period: Option<String>,
    max_concurrent_reconciles: Option<usize>,
}

/// A watched kind and the chart whose releases its objects stand for.
#[derive(Debug, Clone)]
pub struct Watch {
    /// The custom resource's group.
    pub group: String,
    /// The custom resource's version.
    pub version: String,
    /// The custom resource's kind.
    pub kind: String,
    /// The chart's directory (relative paths resolved against the watches file's directory).
    pub chart: PathBuf,
    /// Whether changes to the release's objects trigger a reconcile (default true).
    pub watch_dependent_resources: bool,
    /// `--set` values applied over the spec, `$VAR` expanded: `key=value`.
    pub override_values: Vec<String>,
    /// Only custom resources whose labels match are reconciled.
    pub selector: Option<LabelSelector>,
    /// How often a release is reconciled without events.
    pub reconcile_period: Duration,
    /// How many custom resources of this kind are reconciled at once (default 1).
    pub max_concurrent_reconciles: usize,
}

/// Reads `watches.yaml`.
pub fn load_watches(path: &Path) -> Result<Vec<Watch>, OperatorError> {
    let base = path.parent().unwrap_or(Path::new("."));
    Ok(opkit::watches_file::load(path, |text| parse_watches(text, base, &|name| std::env::var(name).ok()))?)
}

/// Parses the text of a watches file; relative chart paths are taken from `base`, and
/// `env` expands variables in `overrideValues`.
pub fn parse_watches(text: &str, base: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<Watch>, String> {
    let entries: Vec<WatchEntry> = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    let mut watches: Vec<Watch> = Vec::with_capacity(entries.len());
    for (i, e) in entries.into_iter().enumerate() {
        for (field, value) in [("group", &e.group), ("version", &e.version), ("kind", &e.kind)] {
            if value.is_empty() && field != "group" {
                return Err(format!("entry {i}: {field} is required"));
            }
        }
        if e.chart.as_os_str().is_empty() {
            return Err(format!("entry {i}: chart is required"));
        }
        if watches.iter().any(|w| w.group == e.group && w.version == e.version && w.kind == e.kind) {
            return Err(format!("duplicate GVK: {}/{}, Kind={}", e.group, e.version, e.kind));
        }
        let reconcile_period = match &e.reconcile_period {
            Some(p) => opkit_apimachinery::duration::parse(p)
                .map_err(|err| format!("entry {i}: reconcilePeriod {p:?}: {err}"))?,
            None => DEFAULT_RECONCILE_PERIOD,
        };
        let max_concurrent_reconciles = match e.max_concurrent_reconciles {
            Some(0) => return Err(format!("entry {i}: maxConcurrentReconciles must be at least 1")),
            Some(n) => n,
            None => 1,
        };
        if let Some(selector) = &e.selector {
            kube::core::Selector::try_from(selector.clone()).map_err(|err| format!("entry {i}: selector: {err}"))?;
        }
        let chart = if e.chart.is_absolute() { e.chart } else { base.join(e.chart) };
        watches.push(Watch {
            group: e.group,
            version: e.version,
            kind: e.kind,
            chart,
            watch_dependent_resources: e.watch_dependent_resources.unwrap_or(true),
            override_values: e.override_values.iter().map(|(k, v)| format!("{k}={}", expand_env(v, env))).collect(),
            selector: e.selector,
            reconcile_period,
            max_concurrent_reconciles,
        });
    }
    Ok(watches)
}

/// Go's `os.ExpandEnv`: `$VAR` and `${VAR}` replaced by the variable (empty when unset).
pub(crate) fn expand_env(text: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    opkit::watches_file::expand(text, &|name| env(name).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_operator_sdk_fields_and_expands_override_values() {
        let text = "- group: demo.example.com\n  version: v1alpha1\n  kind: Nginx\n  chart: helm-charts/nginx\n  watchDependentResources: false\n  overrideValues:\n    image.repository: ${IMG}\n    tag: v$TAG-x\n  selector:\n    matchLabels:\n      tier: web\n  reconcilePeriod: 2m\n  maxConcurrentReconciles: 3\n";
        let env = |name: &str| match name {
            "IMG" => Some("quay.io/nginx".to_string()),
            "TAG" => Some("1".to_string()),
            _ => None,
        };
        let watches = parse_watches(text, Path::new("/p"), &env).expect("valid watches");
        let w = &watches[0];
        assert_eq!((w.group.as_str(), w.version.as_str(), w.kind.as_str()), ("demo.example.com", "v1alpha1", "Nginx"));
        assert_eq!(w.chart, Path::new("/p/helm-charts/nginx"));
        assert!(!w.watch_dependent_resources);
        assert_eq!(w.override_values, vec!["image.repository=quay.io/nginx", "tag=v1-x"]);
        assert_eq!(w.reconcile_period, Duration::from_secs(120));
        assert_eq!(w.max_concurrent_reconciles, 3);
        assert!(w.selector.is_some());
    }

    #[test]
    fn defaults_and_errors() {
        let none = |_: &str| None;
        let w = parse_watches("- {group: g, version: v1, kind: K, chart: c}", Path::new("."), &none).expect("valid");
        assert!(w[0].watch_dependent_resources);
        assert_eq!(w[0].reconcile_period, DEFAULT_RECONCILE_PERIOD);
        let dup = "- {group: g, version: v1, kind: K, chart: c}\n- {group: g, version: v1, kind: K, chart: d}";
        assert_eq!(parse_watches(dup, Path::new("."), &none).unwrap_err(), "duplicate GVK: g/v1, Kind=K");
        assert!(parse_watches("- {group: g, version: v1, kind: K}", Path::new("."), &none).is_err());
        assert!(
            parse_watches("- {group: g, version: v1, kind: K, chart: c, reconcilePeriod: x}", Path::new("."), &none)
                .is_err()
        );
    }
}
