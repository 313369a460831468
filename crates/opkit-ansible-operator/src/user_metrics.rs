//! Custom Prometheus metrics that roles create and update with the `osdk_metric` module
//! (ansible-operator's `internal/ansible/metrics` user metrics): the module `POST`s a
//! [`UserMetric`] (a name, a description and exactly one of `counter`, `gauge`,
//! `histogram`, `summary`) to the operator's `/metrics` API, and the metric is registered
//! in the manager's registry on first use and served on the operator's `/metrics`
//! endpoint next to controller-runtime's and ansible-operator's own.
//!
//! As in ansible-operator a metric keeps the type it was created with; a counter never
//! decreases; histograms use Prometheus' default buckets. prometheus-client writes
//! OpenMetrics, so a counter is exposed as `<name>_total` (a name given with `_total`
//! keeps it once), and it has no summary type: a summary is exposed as its two series
//! `<name>_sum` and `<name>_count` (what a Go summary without objectives has), untyped.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use serde::Deserialize;

/// Prometheus' default histogram buckets (client_golang's `DefBuckets`).
const DEFAULT_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// What the `osdk_metric` module sends (ansible-operator's `UserMetric`).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct UserMetric {
    /// The metric's name.
    pub name: String,
    /// Its help text.
    #[serde(default)]
    pub description: String,
    /// Create or change a counter.
    #[serde(default)]
    pub counter: Option<CounterChange>,
    /// Create or change a gauge.
    #[serde(default)]
    pub gauge: Option<GaugeChange>,
    /// Create or observe a histogram.
    #[serde(default)]
    pub histogram: Option<Observation>,
    /// Create or observe a summary.
    #[serde(default)]
    pub summary: Option<Observation>,
}

/// A counter change (`increment` wins over `add`).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct CounterChange {
    /// Add one.
    #[serde(default, rename = "increment", deserialize_with = "null_false")]
    pub inc: bool,
    /// Add this (never negative).
    #[serde(default, deserialize_with = "null_zero")]
    pub add: f64,
}

/// A gauge change; the first that is set applies, in ansible-operator's order:
/// `increment`, `decrement`, `add`, `subtract`, `set`, `set_to_current_time`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct GaugeChange {
    /// Set to this.
    #[serde(default, deserialize_with = "null_zero")]
    pub set: f64,
    /// Add one.
    #[serde(default, rename = "increment", deserialize_with = "null_false")]
    pub inc: bool,
    /// Subtract one.
    #[serde(default, rename = "decrement", deserialize_with = "null_false")]
    pub dec: bool,
    /// Set to the current Unix time in seconds.
    #[serde(default, deserialize_with = "null_false")]
    pub set_to_current_time: bool,
    /// Add this.
    #[serde(default, deserialize_with = "null_zero")]
    pub add: f64,
    /// Subtract this.
    #[serde(default, rename = "subtract", deserialize_with = "null_zero")]
    pub sub: f64,
}

/// One observation of a histogram or summary.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Observation {
    /// The observed value.
    #[serde(default, deserialize_with = "null_zero")]
    pub observe: f64,
}

/// The module sends every suboption, unset ones as `null`.
fn null_false<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(d)?.unwrap_or(false))
}

fn null_zero<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(0.0))
}

/// Why a user metric was refused (the module's task fails with this message).
#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum UserMetricError {
    /// The request names no metric type.
    #[error("a request should contain at least one metric")]
    NoMetric,
    /// The request names more than one metric type.
    #[error("only one metric can be processed at a time")]
    SeveralMetrics,
    /// The name is not a Prometheus metric name.
    #[error("{0:?} is not a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)")]
    InvalidName(String),
    /// The metric exists with another type.
    #[error("cannot change metric type of {name}, which is a {kind}")]
    TypeChange {
        /// The metric.
        name: String,
        /// Its type.
        kind: &'static str,
    },
    /// A counter was given a negative `add`.
    #[error("counter metrics cannot decrease in value")]
    CounterDecrease,
}

/// A summary's sum and count, shared by its two exposed series.
#[derive(Debug, Default)]
struct SummaryState {
    sum: f64,
    count: u64,
}

/// One series of a summary (`_sum` or `_count`), untyped.
#[derive(Debug, Clone)]
struct SummarySeries {
    state: Arc<Mutex<SummaryState>>,
    count: bool,
}

impl TypedMetric for SummarySeries {
    const TYPE: MetricType = MetricType::Unknown;
}

impl EncodeMetric for SummarySeries {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let (sum, count) = self.state.lock().map_or((0.0, 0), |s| (s.sum, s.count));
        if self.count {
            encoder.encode_gauge(&i64::try_from(count).unwrap_or(i64::MAX))
        } else {
            encoder.encode_gauge(&sum)
        }
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Unknown
    }
}

/// A registered user metric.
#[derive(Debug, Clone)]
enum UserCollector {
    Counter(Counter<f64, AtomicU64>),
    Gauge(Gauge<f64, AtomicU64>),
    Histogram(Histogram),
    Summary(Arc<Mutex<SummaryState>>),
}

impl UserCollector {
    fn kind(&self) -> &'static str {
        match self {
            UserCollector::Counter(_) => "counter",
            UserCollector::Gauge(_) => "gauge",
            UserCollector::Histogram(_) | UserCollector::Summary(_) => "histogram or summary",
        }
    }
}

/// The user metrics of one operator, registered in its manager's registry.
#[derive(Debug)]
pub(crate) struct UserMetrics {
    registry: opkit::metrics::Metrics,
    metrics: Mutex<HashMap<String, UserCollector>>,
}

impl UserMetrics {
    /// User metrics registered in `registry` (the manager's).
    pub(crate) fn new(registry: opkit::metrics::Metrics) -> UserMetrics {
        UserMetrics { registry, metrics: Mutex::new(HashMap::new()) }
    }

    /// Creates the metric on first use and applies the change (ansible-operator's
    /// `HandleUserMetric`).
    pub(crate) fn handle(&self, metric: &UserMetric) -> Result<(), UserMetricError> {
        let given =
            [metric.counter.is_some(), metric.gauge.is_some(), metric.histogram.is_some(), metric.summary.is_some()];
        match given.iter().filter(|g| **g).count() {
            0 => return Err(UserMetricError::NoMetric),
            1 => {}
            _ => return Err(UserMetricError::SeveralMetrics),
        }
        if !valid_name(&metric.name) {
            return Err(UserMetricError::InvalidName(metric.name.clone()));
        }
        let collector = {
            let Ok(mut metrics) = self.metrics.lock() else { return Ok(()) };
            match metrics.get(&metric.name) {
                Some(existing) => existing.clone(),
                None => {
                    let created = self.register(metric);
                    metrics.insert(metric.name.clone(), created.clone());
                    created
                }
            }
        };
        let type_change = || UserMetricError::TypeChange { name: metric.name.clone(), kind: collector.kind() };
        match &collector {
            UserCollector::Counter(counter) => {
                let change = metric.counter.as_ref().ok_or_else(type_change)?;
                if change.inc {
                    counter.inc();
                } else if change.add != 0.0 {
                    if change.add < 0.0 {
                        return Err(UserMetricError::CounterDecrease);
                    }
                    counter.inc_by(change.add);
                }
            }
            UserCollector::Gauge(gauge) => {
                let change = metric.gauge.as_ref().ok_or_else(type_change)?;
                if change.inc {
                    gauge.inc();
                } else if change.dec {
                    gauge.dec();
                } else if change.add != 0.0 {
                    gauge.inc_by(change.add);
                } else if change.sub != 0.0 {
                    gauge.dec_by(change.sub);
                } else if change.set != 0.0 {
                    gauge.set(change.set);
                } else if change.set_to_current_time {
                    gauge.set(jiff::Timestamp::now().as_millisecond() as f64 / 1000.0);
                }
            }
            UserCollector::Histogram(histogram) => {
                let observation = metric.histogram.as_ref().or(metric.summary.as_ref()).ok_or_else(type_change)?;
                histogram.observe(observation.observe);
            }
            UserCollector::Summary(state) => {
                let observation = metric.summary.as_ref().or(metric.histogram.as_ref()).ok_or_else(type_change)?;
                if let Ok(mut state) = state.lock() {
                    state.sum += observation.observe;
                    state.count += 1;
                }
            }
        }
        Ok(())
    }

    /// Registers a new metric of the type `metric` names.
    fn register(&self, metric: &UserMetric) -> UserCollector {
        tracing::info!(metric = metric.name, "Registering");
        let help = metric.description.as_str();
        self.registry.with_registry(|registry| {
            if metric.counter.is_some() {
                let counter = Counter::<f64, AtomicU64>::default();
                let name = metric.name.strip_suffix("_total").unwrap_or(&metric.name);
                registry.register(name, help, counter.clone());
                UserCollector::Counter(counter)
            } else if metric.gauge.is_some() {
                let gauge = Gauge::<f64, AtomicU64>::default();
                registry.register(&metric.name, help, gauge.clone());
                UserCollector::Gauge(gauge)
            } else if metric.histogram.is_some() {
                let histogram = Histogram::new(DEFAULT_BUCKETS);
                registry.register(&metric.name, help, histogram.clone());
                UserCollector::Histogram(histogram)
            } else {
                let state = Arc::new(Mutex::new(SummaryState::default()));
                for (suffix, count) in [("_sum", false), ("_count", true)] {
                    let series = SummarySeries { state: state.clone(), count };
                    registry.register(format!("{}{suffix}", metric.name), help, series);
                }
                UserCollector::Summary(state)
            }
        })
    }
}

/// Whether `name` is a Prometheus metric name.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn metric(value: serde_json::Value) -> UserMetric {
        serde_json::from_value(value).expect("user metric")
    }

    #[test]
    fn every_type_is_created_changed_and_served() {
        let registry = opkit::metrics::Metrics::new();
        let metrics = UserMetrics::new(registry.clone());
        let counter =
            json!({"name": "things_total", "description": "Things", "counter": {"increment": true, "add": null}});
        metrics.handle(&metric(counter.clone())).expect("counter");
        metrics.handle(&metric(counter)).expect("counter again");
        metrics
            .handle(&metric(json!({"name": "things_total", "description": "Things", "counter": {"add": 0.5}})))
            .expect("add");
        metrics.handle(&metric(json!({"name": "level", "description": "Level", "gauge": {"set": 7}}))).expect("gauge");
        metrics
            .handle(&metric(json!({"name": "level", "description": "Level", "gauge": {"decrement": true}})))
            .expect("dec");
        for v in [0.2, 3.0] {
            metrics
                .handle(&metric(json!({"name": "took", "description": "Took", "histogram": {"observe": v}})))
                .expect("histogram");
            metrics
                .handle(&metric(json!({"name": "sizes", "description": "Sizes", "summary": {"observe": v}})))
                .expect("summary");
        }
        let text = registry.encode();
        assert!(text.contains("# TYPE things_total counter\nthings_total 2.5\n"), "{text}");
        assert!(text.contains("# HELP level Level\n# TYPE level gauge\nlevel 6.0\n"), "{text}");
        assert!(text.contains("took_bucket{le=\"0.25\"} 1\n"), "{text}");
        assert!(text.contains("took_count 2\n"), "{text}");
        assert!(text.contains("sizes_sum 3.2\n") && text.contains("sizes_count 2\n"), "{text}");
    }

    #[test]
    fn refusals_are_ansible_operators() {
        let metrics = UserMetrics::new(opkit::metrics::Metrics::new());
        let err = metrics.handle(&metric(json!({"name": "x", "description": "X"}))).expect_err("no type");
        assert_eq!(err, UserMetricError::NoMetric);
        let both = json!({"name": "x", "description": "X", "counter": {}, "gauge": {}});
        assert_eq!(metrics.handle(&metric(both)), Err(UserMetricError::SeveralMetrics));
        metrics.handle(&metric(json!({"name": "c", "description": "C", "counter": {}}))).expect("counter");
        let as_gauge = metrics.handle(&metric(json!({"name": "c", "description": "C", "gauge": {"set": 1}})));
        assert_eq!(
            as_gauge.expect_err("type change").to_string(),
            "cannot change metric type of c, which is a counter"
        );
        let negative = metrics.handle(&metric(json!({"name": "c", "description": "C", "counter": {"add": -1}})));
        assert_eq!(negative, Err(UserMetricError::CounterDecrease));
        let bad = metrics.handle(&metric(json!({"name": "a-b", "description": "", "gauge": {}})));
        assert_eq!(bad, Err(UserMetricError::InvalidName("a-b".into())));
    }
}
