//! ansible-operator's own metrics, registered in the manager's registry next to
//! controller-runtime's: `ansible_operator_build_info`,
//! `ansible_operator_reconcile_result{GVK,result}` (succeeded/failed runs) and the
//! `ansible_operator_reconciles{GVK}` histogram of run durations in seconds.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// Labels of the result gauge (operator-sdk's label names).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
struct ResultLabels {
    GVK: String,
    result: String,
}

/// Labels of the duration histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
struct GvkLabels {
    GVK: String,
}

/// Labels of the build info gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

type DurationFamily = Family<GvkLabels, Histogram, fn() -> Histogram>;

/// The operator's metric families. Cheap to clone.
#[derive(Clone)]
pub(crate) struct RunMetrics {
    results: Family<ResultLabels, Gauge>,
    durations: DurationFamily,
}

fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

impl RunMetrics {
    /// Registers the families with the manager's registry.
    pub(crate) fn register(metrics: &opkit::metrics::Metrics) -> RunMetrics {
        let families = RunMetrics {
            results: Family::default(),
            durations: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
        };
        let build_info: Family<BuildLabels, Gauge> = Family::default();
        build_info.get_or_create(&BuildLabels { version: env!("CARGO_PKG_VERSION").to_string() }).set(1);
        metrics.with_registry(|registry| {
            registry.register(
                "ansible_operator_build_info",
                "Build information for the ansible-operator binary",
                build_info,
            );
            registry.register(
                "ansible_operator_reconcile_result",
                "Gauge of reconciles and their results.",
                families.results.clone(),
            );
            registry.register(
                "ansible_operator_reconciles",
                "How long in seconds a reconcile takes.",
                families.durations.clone(),
            );
        });
        families
    }

    /// A run of `gvk` ended; `succeeded` says how.
    pub(crate) fn finished(&self, gvk: &str, succeeded: bool, seconds: f64) {
        let result = if succeeded { "succeeded" } else { "failed" };
        self.results.get_or_create(&ResultLabels { GVK: gvk.to_string(), result: result.to_string() }).inc();
        self.durations.get_or_create(&GvkLabels { GVK: gvk.to_string() }).observe(seconds);
    }

    /// A reconcile of `gvk` failed before a run.
    pub(crate) fn failed(&self, gvk: &str) {
        self.results.get_or_create(&ResultLabels { GVK: gvk.to_string(), result: "failed".to_string() }).inc();
    }
}
