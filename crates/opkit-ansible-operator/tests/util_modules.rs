//! `operator_sdk.util`'s `k8s_event` and `osdk_metric` modules and `--ansible-log-events`,
//! from a role run by the operator against an in-process control plane
//! (`tests/fixtures/probe-operator`): the role's Event about its Probe (counted up on the
//! next run), its custom metrics on the operator's `/metrics`, and its job events logged
//! while the run goes on (the role waits for a ConfigMap the test creates only after it
//! saw the waiting task's start logged), for each log level. Needs ansible-runner,
//! ansible-core and kubernetes.core (`crates/opkit-ansible-operator/install-ansible.sh`).

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use opkit_ansible_operator::LogEvents;
use opkit_testenv::{TestEnv, wait_for, wait_for_with};
use serde_json::{Value, json};

/// Ansible runs take seconds each.
const WAIT: Duration = Duration::from_secs(120);
const CRD: &str = "config/crd/probes.yaml";
const NS: &str = "default";

fn project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/probe-operator")
}

fn probes() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("test.opkit.dev", "v1", "Probe"), "probes")
}

/// What this test binary logs, captured by a global subscriber (the operator's workers
/// log from their own tasks and threads). Tests tell their lines apart by the Probe's name.
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || CapturedWriter(writer.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        buffer
    })
    .clone()
}

struct CapturedWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CapturedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The event handler's lines about the Probe `name`.
fn event_lines(name: &str) -> Vec<String> {
    let text = logs().lock().map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let tag = format!("name=\"{name}\"");
    text.lines().filter(|l| l.contains("logging_event_handler") && l.contains(&tag)).map(str::to_string).collect()
}

/// Waits until a logged line about `name` satisfies `pred`.
async fn wait_for_line(name: &str, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let found = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(line) = event_lines(name).into_iter().find(|l| pred(l)) {
                return line;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("no line {what} about {name}: {:#?}", event_lines(name)))
}

async fn create_probe(env: &TestEnv, name: &str, spec: Value) -> Api<DynamicObject> {
    let api: Api<DynamicObject> = Api::namespaced_with(env.client(), NS, &probes());
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "test.opkit.dev/v1", "kind": "Probe", "metadata": {"name": name, "namespace": NS}, "spec": spec,
    }))
    .expect("probe");
    api.create(&PostParams::default(), &object).await.expect("create the Probe");
    api
}

/// Waits until the Probe's run for `size` succeeded (the role reports the size last).
async fn wait_successful(api: &Api<DynamicObject>, name: &str, size: i64) -> DynamicObject {
    let done = move |o: Option<&DynamicObject>| {
        o.is_some_and(|o| {
            o.data.pointer("/status/size").and_then(Value::as_i64) == Some(size)
                && o.data.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| {
                    cs.iter().any(|c| c["type"] == "Running" && c["reason"] == "Successful" && c["status"] == "True")
                })
        })
    };
    wait_for_with(api, &probes(), name, "to be reconciled", done, WAIT)
        .await
        .expect("the run succeeds")
        .expect("exists")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_metrics_and_task_logs_come_from_the_role_as_it_runs() {
    logs();
    let env = TestEnv::start().await.expect("testenv");
    let operator = support::start_operator(&env, &project(), CRD).await;
    let name = "streamed";
    let probes = create_probe(&env, name, json!({"size": 2, "waitForGo": true})).await;

    // The run is blocked on the go signal, yet its task starts and debug output are logged.
    let waiting = wait_for_line(name, "for the waiting task's start", |l| {
        l.contains("[playbook task start]") && l.contains("wait for the go signal")
    })
    .await;
    assert!(waiting.contains("INFO") && waiting.contains("gvk=\"test.opkit.dev/v1, Kind=Probe\""), "{waiting}");
    let lines = event_lines(name);
    assert!(lines.iter().any(|l| l.contains("[playbook debug]") && l.contains("size is 2")), "{lines:#?}");
    assert!(!lines.iter().any(|l| l.contains("playbook_on_stats")), "the run has not ended: {lines:#?}");
    assert!(
        !lines.iter().any(|l| l.contains("[playbook task start]") && l.contains("say the size")),
        "debug tasks' starts are not logged: {lines:#?}"
    );

    // The Event about the Probe, and the metrics, both sent before the run ends.
    let probe = probes.get(name).await.expect("the Probe");
    let events: Api<Event> = Api::namespaced(env.client(), NS);
    let event = events.get(&format!("{name}-reconciled")).await.expect("the role's Event");
    assert_eq!((event.reason.as_deref(), event.type_.as_deref()), (Some("Reconciled"), Some("Normal")));
    assert_eq!(event.message.as_deref(), Some("Reconciled with size 2"));
    assert_eq!(event.count, Some(1));
    assert_eq!(event.source.as_ref().and_then(|s| s.component.as_deref()), Some("probe-operator"));
    assert_eq!(event.involved_object.kind.as_deref(), Some("Probe"));
    assert_eq!(event.involved_object.namespace.as_deref(), Some(NS));
    assert_eq!(event.involved_object.uid, probe.metadata.uid, "the module read the Probe's uid");
    let metrics = operator.metrics.encode();
    assert!(metrics.contains("# HELP probe_runs_total Runs of the probe role\n"), "{metrics}");
    assert!(metrics.contains("\nprobe_runs_total 1.0\n") || metrics.contains("\nprobe_runs_total 1\n"), "{metrics}");
    assert!(metrics.contains("# TYPE probe_size gauge\nprobe_size 2.0\n"), "{metrics}");

    // The go signal ends the run.
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    let go: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("{name}-go")}})).expect("cm");
    configmaps.create(&PostParams::default(), &go).await.expect("the go signal");
    wait_successful(&probes, name, 2).await;

    // A second run counts the Event up and updates every metric.
    let patch = json!({"spec": {"size": 3}});
    probes.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("resize");
    wait_successful(&probes, name, 3).await;
    let counted = |e: Option<&Event>| e.and_then(|e| e.count) == Some(2);
    let event = wait_for(&events, &format!("{name}-reconciled"), "to count 2", counted, WAIT)
        .await
        .expect("counted")
        .expect("event");
    assert_eq!(event.message.as_deref(), Some("Reconciled with size 3"));
    assert!(event.first_timestamp.is_some());
    let metrics = operator.metrics.encode();
    assert!(metrics.contains("\nprobe_runs_total 2.0\n") || metrics.contains("\nprobe_runs_total 2\n"), "{metrics}");
    assert!(metrics.contains("\nprobe_size 3.0\n"), "{metrics}");
    assert!(metrics.contains("# TYPE probe_size_histogram histogram\n"), "{metrics}");
    assert!(metrics.contains("probe_size_histogram_bucket{le=\"2.5\"} 1\n"), "{metrics}");
    assert!(metrics.contains("probe_size_histogram_count 2\n"), "{metrics}");
    assert!(
        metrics.contains("probe_size_summary_sum 5.0\n") && metrics.contains("probe_size_summary_count 2\n"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_logs_every_event_and_nothing_logs_none() {
    logs();
    for (level, name) in [(LogEvents::Everything, "everything"), (LogEvents::Nothing, "nothing")] {
        let env = TestEnv::start().await.expect("testenv");
        let _operator = support::start_operator_logging(&env, &project(), CRD, level).await;
        let probes = create_probe(&env, name, json!({"size": 1})).await;
        wait_successful(&probes, name, 1).await;
        let lines = event_lines(name);
        match level {
            LogEvents::Everything => {
                for event_type in ["playbook_on_start", "playbook_on_task_start", "runner_on_ok", "playbook_on_stats"] {
                    assert!(
                        lines
                            .iter()
                            .any(|l| l.contains(&format!("event_type=\"{event_type}\"")) && l.contains("EventData")),
                        "{event_type}: {lines:#?}"
                    );
                }
            }
            _ => assert!(lines.is_empty(), "Nothing logs nothing: {lines:#?}"),
        }
    }
}
