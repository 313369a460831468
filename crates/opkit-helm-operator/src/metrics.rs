//! Per-release metrics, registered in the manager's registry and served on its
//! `/metrics`: the deployed revision of each release, whether it is deployed, and the
//! failed installs, upgrades, reconciles and uninstalls, labelled by kind, namespace and
//! release name.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// Labels of one release.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReleaseLabels {
    kind: String,
    namespace: String,
    name: String,
}

/// Labels of one release's failures.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    kind: String,
    namespace: String,
    name: String,
    reason: String,
}

/// The operator's metric families. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct ReleaseMetrics {
    revision: Family<ReleaseLabels, Gauge>,
    deployed: Family<ReleaseLabels, Gauge>,
    failures: Family<FailureLabels, Counter>,
}

impl ReleaseMetrics {
    /// Registers `helm_operator_release_revision`, `helm_operator_release_deployed` and
    /// `helm_operator_release_failures_total` with the manager's registry.
    pub(crate) fn register(metrics: &opkit::metrics::Metrics) -> ReleaseMetrics {
        let families = ReleaseMetrics::default();
        metrics.with_registry(|registry| {
            registry.register(
                "helm_operator_release_revision",
                "The deployed revision of a Helm release",
                families.revision.clone(),
            );
            registry.register(
                "helm_operator_release_deployed",
                "Whether the last reconcile of a Helm release succeeded (1) or failed (0)",
                families.deployed.clone(),
            );
            registry.register(
                "helm_operator_release_failures",
                "Failed installs, upgrades, reconciles and uninstalls of a Helm release, by reason",
                families.failures.clone(),
            );
        });
        families
    }

    fn labels(kind: &str, namespace: &str, name: &str) -> ReleaseLabels {
        ReleaseLabels { kind: kind.to_string(), namespace: namespace.to_string(), name: name.to_string() }
    }

    /// The release is deployed at `revision`.
    pub(crate) fn deployed(&self, kind: &str, namespace: &str, name: &str, revision: i64) {
        let labels = Self::labels(kind, namespace, name);
        self.revision.get_or_create(&labels).set(revision);
        self.deployed.get_or_create(&labels).set(1);
    }

    /// An install, upgrade, reconcile or uninstall failed with `reason`.
    pub(crate) fn failed(&self, kind: &str, namespace: &str, name: &str, reason: &str) {
        self.deployed.get_or_create(&Self::labels(kind, namespace, name)).set(0);
        let labels = FailureLabels {
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            reason: reason.to_string(),
        };
        self.failures.get_or_create(&labels).inc();
    }

    /// The release is uninstalled: its series go.
    pub(crate) fn uninstalled(&self, kind: &str, namespace: &str, name: &str) {
        let labels = Self::labels(kind, namespace, name);
        self.revision.remove(&labels);
        self.deployed.remove(&labels);
    }
}
