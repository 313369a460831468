//! Runtime metrics: the controller-runtime metric families (reconcile counters and
//! timings, worker gauges, workqueue metrics, leader-election status) kept in one
//! `prometheus-client` [`Registry`], plus the Prometheus text exposition served on
//! `/metrics` (over HTTPS with authentication and authorization: [`secure`]).

mod exposition;
pub mod secure;

pub use exposition::openmetrics_to_prometheus;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The reconcile results counted by `controller_runtime_reconcile_total`.
pub const RECONCILE_RESULTS: [&str; 4] = ["success", "error", "requeue", "requeue_after"];

/// Buckets of `controller_runtime_reconcile_time_seconds`, as in controller-runtime.
pub const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5,
    1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
];

/// Labels `{controller}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

/// Labels `{controller, result}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: String,
}

/// Labels `{controller, name}` of the workqueue metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    controller: String,
    name: String,
}

/// Labels `{ring, how}` of the sharding moves.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MoveLabels {
    ring: String,
    how: String,
}

/// Labels `{ring}` of the live shards gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RingLabels {
    ring: String,
}

/// Labels `{name}` of the leader-election gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    name: String,
}

/// A settable floating-point gauge.
type FloatGauge = Gauge<f64, AtomicU64>;
/// A histogram family with a fixed bucket layout.
type HistFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn reconcile_time_histogram() -> Histogram {
    Histogram::new(RECONCILE_TIME_BUCKETS)
}

fn workqueue_histogram() -> Histogram {
    // prometheus.ExponentialBuckets(10e-9, 10, 12): 1e-8 .. 1e3 seconds.
    Histogram::new(exponential_buckets(10e-9, 10.0, 12))
}

/// Handles on every metric family the runtime records.
#[derive(Clone)]
struct Families {
    reconcile_total: Family<ResultLabels, Counter>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    terminal_errors: Family<ControllerLabels, Counter>,
    reconcile_panics: Family<ControllerLabels, Counter>,
    reconcile_time: HistFamily<ControllerLabels>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    active_workers: Family<ControllerLabels, Gauge>,
    queue_depth: Family<QueueLabels, Gauge>,
    queue_adds: Family<QueueLabels, Counter>,
    queue_latency: HistFamily<QueueLabels>,
    work_duration: HistFamily<QueueLabels>,
    unfinished_work: Family<QueueLabels, FloatGauge>,
    longest_running: Family<QueueLabels, FloatGauge>,
    queue_retries: Family<QueueLabels, Counter>,
    leader: Family<LeaseLabels, Gauge>,
    ryow_waits: Family<ControllerLabels, Counter>,
    ryow_wait_time: HistFamily<ControllerLabels>,
    ryow_stale_requeues: Family<ControllerLabels, Counter>,
    ryow_expired: Family<ControllerLabels, Counter>,
    sharding_moves: Family<MoveLabels, Counter>,
    sharding_shards: Family<RingLabels, Gauge>,
}

impl Families {
    fn new() -> Self {
        Families {
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            terminal_errors: Family::default(),
            reconcile_panics: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_time_histogram as fn() -> _),
            max_concurrent: Family::default(),
            active_workers: Family::default(),
            queue_depth: Family::default(),
            queue_adds: Family::default(),
            queue_latency: Family::new_with_constructor(workqueue_histogram as fn() -> _),
            work_duration: Family::new_with_constructor(workqueue_histogram as fn() -> _),
            unfinished_work: Family::default(),
            longest_running: Family::default(),
            queue_retries: Family::default(),
            leader: Family::default(),
            ryow_waits: Family::default(),
            ryow_wait_time: Family::new_with_constructor(reconcile_time_histogram as fn() -> _),
            ryow_stale_requeues: Family::default(),
            ryow_expired: Family::default(),
            sharding_moves: Family::default(),
            sharding_shards: Family::default(),
        }
    }

    /// Registers every family. Counter names omit `_total`: the encoder appends it.
    fn register(&self, r: &mut Registry) {
        let f = self.clone();
        r.register("controller_runtime_reconcile", "Total number of reconciliations per controller", f.reconcile_total);
        r.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            f.reconcile_errors,
        );
        r.register(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            f.terminal_errors,
        );
        r.register(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            f.reconcile_panics,
        );
        r.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            f.reconcile_time,
        );
        r.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            f.max_concurrent,
        );
        r.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            f.active_workers,
        );
        r.register("workqueue_depth", "Current depth of workqueue", f.queue_depth);
        r.register("workqueue_adds", "Total number of adds handled by workqueue", f.queue_adds);
        r.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            f.queue_latency,
        );
        r.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            f.work_duration,
        );
        r.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been \
             observed by work_duration. Large values indicate stuck threads. One can deduce \
             the number of stuck threads by observing the rate at which this increases.",
            f.unfinished_work,
        );
        r.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            f.longest_running,
        );
        r.register("workqueue_retries", "Total number of retries handled by workqueue", f.queue_retries);
        r.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates \
             backup, 1 indicates master. 'name' is the string used to identify the lease. \
             Please make sure to group by name.",
            f.leader,
        );
        r.register(
            "opkit_read_your_writes_waits",
            "Reconciles that waited for the cache to show the controller's own earlier writes",
            f.ryow_waits,
        );
        r.register(
            "opkit_read_your_writes_wait_seconds",
            "How long reconciles waited for the cache to show the controller's own writes",
            f.ryow_wait_time,
        );
        r.register(
            "opkit_read_your_writes_stale_requeues",
            "Reconciles requeued, not run, because the cache was still older than the controller's own writes",
            f.ryow_stale_requeues,
        );
        r.register(
            "opkit_read_your_writes_expired",
            "Writes the cache never showed within the expiry, no longer waited for",
            f.ryow_expired,
        );
        r.register(
            "opkit_sharding_moves",
            "Label changes the shard coordinator made: assigned, drained, undrained, reassigned (from a dead shard), repaired (a shard that never existed), followed (an owner)",
            f.sharding_moves,
        );
        r.register("opkit_sharding_shards", "Live shards the coordinator assigns objects to", f.sharding_shards);
    }
}

struct Inner {
    registry: Mutex<Registry>,
    families: Families,
}

/// All runtime metrics, in one prometheus-client Registry. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A registry holding the controller-runtime, workqueue and leader-election families.
    pub fn new() -> Metrics {
        let families = Families::new();
        let mut registry = Registry::default();
        families.register(&mut registry);
        Metrics { inner: Arc::new(Inner { registry: Mutex::new(registry), families }) }
    }

    /// Prometheus text exposition (format 0.0.4, what /metrics returns).
    pub fn encode(&self) -> String {
        openmetrics_to_prometheus(&self.encode_openmetrics())
    }

    /// OpenMetrics 1.0 text exposition (ends with `# EOF`).
    pub fn encode_openmetrics(&self) -> String {
        let mut out = String::new();
        let registry = self.inner.registry.lock();
        // Writing into a String cannot fail; an error could only come from a user metric's
        // encoder, in which case the partial output is still returned.
        if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
            tracing::warn!("encoding metrics failed; the exposition is incomplete");
        }
        out
    }

    /// Handles for one controller (label `controller="<name>"`; workqueue metrics use
    /// label `name="<name>"`). Initialises its counters to zero, as controller-runtime does.
    pub fn controller(&self, name: &str) -> ControllerMetrics {
        let f = &self.inner.families;
        let c = ControllerLabels { controller: name.to_string() };
        let q = QueueLabels { controller: name.to_string(), name: name.to_string() };
        let reconcile_total = RECONCILE_RESULTS.map(|r| {
            f.reconcile_total.get_or_create_owned(&ResultLabels { controller: name.to_string(), result: r.to_string() })
        });
        let h = Arc::new(ControllerHandles {
            name: name.to_string(),
            total_family: f.reconcile_total.clone(),
            reconcile_total,
            reconcile_errors: f.reconcile_errors.get_or_create_owned(&c),
            terminal_errors: f.terminal_errors.get_or_create_owned(&c),
            reconcile_panics: f.reconcile_panics.get_or_create_owned(&c),
            reconcile_time: f.reconcile_time.get_or_create_owned(&c),
            max_concurrent: f.max_concurrent.get_or_create_owned(&c),
            active_workers: f.active_workers.get_or_create_owned(&c),
            queue_depth: f.queue_depth.get_or_create_owned(&q),
            queue_adds: f.queue_adds.get_or_create_owned(&q),
            queue_latency: f.queue_latency.get_or_create_owned(&q),
            work_duration: f.work_duration.get_or_create_owned(&q),
            unfinished_work: f.unfinished_work.get_or_create_owned(&q),
            longest_running: f.longest_running.get_or_create_owned(&q),
            queue_retries: f.queue_retries.get_or_create_owned(&q),
            ryow_waits: f.ryow_waits.get_or_create_owned(&c),
            ryow_wait_time: f.ryow_wait_time.get_or_create_owned(&c),
            ryow_stale_requeues: f.ryow_stale_requeues.get_or_create_owned(&c),
            ryow_expired: f.ryow_expired.get_or_create_owned(&c),
        });
        ControllerMetrics { h }
    }

    /// `leader_election_master_status{name=<lease name>} 1|0`
    pub fn set_leader(&self, lease_name: &str, leading: bool) {
        self.inner.families.leader.get_or_create(&LeaseLabels { name: lease_name.to_string() }).set(i64::from(leading));
    }

    /// `opkit_sharding_moves_total{ring,how}` += 1.
    pub fn sharding_moved(&self, ring: &str, how: &str) {
        let labels = MoveLabels { ring: ring.to_string(), how: how.to_string() };
        self.inner.families.sharding_moves.get_or_create(&labels).inc();
    }

    /// Sets `opkit_sharding_shards{ring}`.
    pub fn set_live_shards(&self, ring: &str, n: usize) {
        let labels = RingLabels { ring: ring.to_string() };
        self.inner.families.sharding_shards.get_or_create(&labels).set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Lets users register their own metrics.
    pub fn with_registry<R>(&self, f: impl FnOnce(&mut Registry) -> R) -> R {
        f(&mut self.inner.registry.lock())
    }
}

struct ControllerHandles {
    name: String,
    total_family: Family<ResultLabels, Counter>,
    reconcile_total: [Counter; 4],
    reconcile_errors: Counter,
    terminal_errors: Counter,
    reconcile_panics: Counter,
    reconcile_time: Histogram,
    max_concurrent: Gauge,
    active_workers: Gauge,
    queue_depth: Gauge,
    queue_adds: Counter,
    queue_latency: Histogram,
    work_duration: Histogram,
    unfinished_work: FloatGauge,
    longest_running: FloatGauge,
    queue_retries: Counter,
    ryow_waits: Counter,
    ryow_wait_time: Histogram,
    ryow_stale_requeues: Counter,
    ryow_expired: Counter,
}

/// Metric handles of one controller and its workqueue. Cheap to clone.
#[derive(Clone)]
pub struct ControllerMetrics {
    h: Arc<ControllerHandles>,
}

impl std::fmt::Debug for ControllerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerMetrics").field("controller", &self.h.name).finish_non_exhaustive()
    }
}

impl ControllerMetrics {
    /// The controller name these handles label.
    pub fn name(&self) -> &str {
        &self.h.name
    }

    /// Counts one reconcile in `controller_runtime_reconcile_total{controller,result}`
    /// (result ∈ success|error|requeue|requeue_after) and observes its duration in
    /// `controller_runtime_reconcile_time_seconds{controller}`.
    pub fn reconcile_done(&self, result: &'static str, took: Duration) {
        match RECONCILE_RESULTS.iter().position(|r| *r == result) {
            Some(i) => {
                self.h.reconcile_total[i].inc();
            }
            None => {
                self.h
                    .total_family
                    .get_or_create(&ResultLabels { controller: self.h.name.clone(), result: result.to_string() })
                    .inc();
            }
        }
        self.h.reconcile_time.observe(took.as_secs_f64());
    }

    /// `controller_runtime_reconcile_errors_total{controller}` += 1.
    pub fn reconcile_error(&self) {
        self.h.reconcile_errors.inc();
    }

    /// `controller_runtime_terminal_reconcile_errors_total{controller}` += 1.
    pub fn terminal_error(&self) {
        self.h.terminal_errors.inc();
    }

    /// `controller_runtime_reconcile_panics_total{controller}` += 1.
    pub fn reconcile_panic(&self) {
        self.h.reconcile_panics.inc();
    }

    /// Sets `controller_runtime_max_concurrent_reconciles{controller}`.
    pub fn set_max_concurrent(&self, n: i64) {
        self.h.max_concurrent.set(n);
    }

    /// Sets `controller_runtime_active_workers{controller}`.
    pub fn set_active_workers(&self, n: i64) {
        self.h.active_workers.set(n);
    }

    /// Sets `workqueue_depth{controller,name}`.
    pub fn queue_depth(&self, n: i64) {
        self.h.queue_depth.set(n);
    }

    /// `workqueue_adds_total{controller,name}` += 1.
    pub fn queue_add(&self) {
        self.h.queue_adds.inc();
    }

    /// Observes how long an item waited in the queue (`workqueue_queue_duration_seconds`).
    pub fn queue_latency(&self, waited: Duration) {
        self.h.queue_latency.observe(waited.as_secs_f64());
    }

    /// Observes how long processing an item took (`workqueue_work_duration_seconds`).
    pub fn work_duration(&self, took: Duration) {
        self.h.work_duration.observe(took.as_secs_f64());
    }

    /// `workqueue_retries_total{controller,name}` += 1.
    pub fn queue_retry(&self) {
        self.h.queue_retries.inc();
    }

    /// Sets `workqueue_unfinished_work_seconds{controller,name}`.
    pub fn set_unfinished_work(&self, seconds: f64) {
        self.h.unfinished_work.set(seconds);
    }

    /// Sets `workqueue_longest_running_processor_seconds{controller,name}`.
    pub fn set_longest_running_processor(&self, seconds: f64) {
        self.h.longest_running.set(seconds);
    }

    /// `opkit_read_your_writes_waits_total{controller}` += 1.
    pub fn read_your_writes_wait(&self) {
        self.h.ryow_waits.inc();
    }

    /// Observes a wait in `opkit_read_your_writes_wait_seconds{controller}`.
    pub fn read_your_writes_waited(&self, took: Duration) {
        self.h.ryow_wait_time.observe(took.as_secs_f64());
    }

    /// `opkit_read_your_writes_stale_requeues_total{controller}` += 1.
    pub fn read_your_writes_stale_requeue(&self) {
        self.h.ryow_stale_requeues.inc();
    }

    /// `opkit_read_your_writes_expired_total{controller}` += 1.
    pub fn read_your_writes_expired(&self) {
        self.h.ryow_expired.inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_metrics_are_counted_with_labels() {
        let m = Metrics::new();
        let c = m.controller("c");
        for _ in 0..3 {
            c.reconcile_done("success", Duration::from_millis(7));
        }
        c.reconcile_done("requeue_after", Duration::from_millis(30));
        c.reconcile_done("error", Duration::from_secs(2));
        c.reconcile_error();
        c.reconcile_error();
        c.terminal_error();
        c.reconcile_panic();
        c.set_max_concurrent(4);
        c.set_active_workers(2);
        let text = m.encode();
        for want in [
            "controller_runtime_reconcile_total{controller=\"c\",result=\"success\"} 3\n",
            "controller_runtime_reconcile_total{controller=\"c\",result=\"error\"} 1\n",
            "controller_runtime_reconcile_total{controller=\"c\",result=\"requeue\"} 0\n",
            "controller_runtime_reconcile_total{controller=\"c\",result=\"requeue_after\"} 1\n",
            "controller_runtime_reconcile_errors_total{controller=\"c\"} 2\n",
            "controller_runtime_terminal_reconcile_errors_total{controller=\"c\"} 1\n",
            "controller_runtime_reconcile_panics_total{controller=\"c\"} 1\n",
            "controller_runtime_reconcile_time_seconds_count{controller=\"c\"} 5\n",
            "controller_runtime_reconcile_time_seconds_bucket{controller=\"c\",le=\"0.01\"} 3\n",
            "controller_runtime_reconcile_time_seconds_bucket{controller=\"c\",le=\"0.05\"} 4\n",
            "controller_runtime_reconcile_time_seconds_bucket{controller=\"c\",le=\"+Inf\"} 5\n",
            "controller_runtime_max_concurrent_reconciles{controller=\"c\"} 4\n",
            "controller_runtime_active_workers{controller=\"c\"} 2\n",
            "# TYPE controller_runtime_reconcile_total counter\n",
            "# HELP controller_runtime_reconcile_total Total number of reconciliations per controller\n",
            "# TYPE controller_runtime_reconcile_time_seconds histogram\n",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        assert!(!text.contains("# EOF"), "{text}");
        assert!(
            m.encode_openmetrics()
                .contains("controller_runtime_reconcile_time_seconds_bucket{le=\"0.01\",controller=\"c\"} 3\n")
        );
        assert!(m.encode_openmetrics().ends_with("# EOF\n"));
    }

    #[test]
    fn workqueue_metrics_use_name_and_controller_labels() {
        let m = Metrics::new();
        let c = m.controller("pods");
        c.queue_add();
        c.queue_add();
        c.queue_depth(2);
        c.queue_retry();
        c.queue_latency(Duration::from_micros(5));
        c.work_duration(Duration::from_millis(3));
        c.set_unfinished_work(1.5);
        c.set_longest_running_processor(0.25);
        let text = m.encode();
        for want in [
            "workqueue_adds_total{controller=\"pods\",name=\"pods\"} 2\n",
            "workqueue_depth{controller=\"pods\",name=\"pods\"} 2\n",
            "workqueue_retries_total{controller=\"pods\",name=\"pods\"} 1\n",
            "workqueue_queue_duration_seconds_count{controller=\"pods\",name=\"pods\"} 1\n",
            "workqueue_work_duration_seconds_count{controller=\"pods\",name=\"pods\"} 1\n",
            "workqueue_unfinished_work_seconds{controller=\"pods\",name=\"pods\"} 1.5\n",
            "workqueue_longest_running_processor_seconds{controller=\"pods\",name=\"pods\"} 0.25\n",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        // 12 exponential buckets plus +Inf.
        let buckets = text.lines().filter(|l| l.starts_with("workqueue_queue_duration_seconds_bucket")).count();
        assert_eq!(buckets, 13, "{text}");
    }

    #[test]
    fn controllers_are_separate_and_handles_shared() {
        let m = Metrics::new();
        let a = m.controller("a");
        let a2 = m.controller("a");
        let b = m.controller("b");
        a.queue_add();
        a2.queue_add();
        b.reconcile_done("success", Duration::ZERO);
        let text = m.encode();
        assert!(text.contains("workqueue_adds_total{controller=\"a\",name=\"a\"} 2\n"));
        assert!(text.contains("workqueue_adds_total{controller=\"b\",name=\"b\"} 0\n"));
        assert!(text.contains("controller_runtime_reconcile_total{controller=\"b\",result=\"success\"} 1\n"));
        assert!(text.contains("controller_runtime_reconcile_total{controller=\"a\",result=\"success\"} 0\n"));
    }

    #[test]
    fn leader_gauge_follows_leadership() {
        let m = Metrics::new();
        m.set_leader("my-lease", true);
        assert!(m.encode().contains("leader_election_master_status{name=\"my-lease\"} 1\n"));
        m.set_leader("my-lease", false);
        assert!(m.encode().contains("leader_election_master_status{name=\"my-lease\"} 0\n"));
    }

    #[test]
    fn user_metrics_can_be_registered() {
        let m = Metrics::new();
        let hits: Counter = Counter::default();
        m.with_registry(|r| r.register("my_hits", "Hits", hits.clone()));
        hits.inc_by(5);
        let text = m.clone().encode();
        assert!(text.contains("# TYPE my_hits_total counter\n"), "{text}");
        assert!(text.contains("my_hits_total 5\n"), "{text}");
    }
}
