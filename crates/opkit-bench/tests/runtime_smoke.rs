//! Smoke test: the runtime benchmark's tiny workload end to end — backlog and live runs
//! under both runtimes, and the memory child processes — against server child processes
//! spawned from the built `opkit-bench` binary.

use opkit_bench::runtime::drivers::Runtime;
use opkit_bench::runtime::report::Scenario;
use opkit_bench::runtime::{RuntimeOptions, RuntimeWorkload, render_text, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_runtime_run_measures_every_section() {
    let opts = RuntimeOptions {
        workload: RuntimeWorkload::tiny(),
        exe: env!("CARGO_BIN_EXE_opkit-bench").into(),
        progress: false,
    };
    let w = &opts.workload;
    let report = run(&opts).await.expect("benchmark runs");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let expected = w.backlog_objects.len() * 2 + 2;
    assert_eq!(report.results.len(), expected);
    for r in &report.results {
        assert_eq!(r.runs.len(), w.repeats, "{:?} {:?}", r.scenario, r.runtime);
        for s in &r.runs {
            assert!(!s.timed_out);
            assert_eq!(s.reconciled, r.objects, "{:?} {:?}", r.scenario, r.runtime);
            assert!(s.reconcile_calls >= r.objects);
            assert!(s.per_sec > 0.0 && s.p50_ms > 0.0 && s.p99_ms >= s.p50_ms && s.max_ms >= s.p99_ms);
        }
        if r.scenario == Scenario::Live {
            // The warm-up object was reconciled too.
            assert!(r.runs.iter().all(|s| s.reconcile_calls > r.objects));
        }
    }
    assert_eq!(report.ratios.len(), w.backlog_objects.len() + 1);
    assert!(report.ratios.iter().all(|x| x.throughput > 0.0 && x.p50 > 0.0));
    assert_eq!(report.memory.len(), 2);
    for m in &report.memory {
        assert_eq!((m.objects, m.reconciled), (w.memory_objects, w.memory_objects), "{:?}", m.runtime);
        assert!(m.synced);
        assert!(m.rss_bytes > m.rss_before_bytes && m.hwm_bytes >= m.rss_bytes);
        assert!(m.json_bytes > (w.memory_objects * w.payload_bytes) as u64);
    }
    assert!(report.memory.iter().any(|m| m.runtime == Runtime::Opkit));
    // Targets: one ratio per backlog size, VmRSS and VmHWM of the opkit process.
    assert_eq!(report.targets.len(), w.backlog_objects.len() + 2);
    let text = render_text(&report);
    assert!(text.contains("opkit/kube") && text.contains("kube::runtime") && text.contains("VmHWM"));
    let json = serde_json::to_value(&report).expect("report serializes");
    assert_eq!(json["results"][0]["runtime"], "opkit");
    assert!(json["memory"][0]["rss_bytes"].as_u64().is_some());
}
