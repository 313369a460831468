//! Smoke test: the Memcached benchmark's tiny workload end to end — the control plane in
//! this process, the operator in a child process spawned from the built `opkit-bench`
//! binary — and the shape of its text and JSON reports.

use opkit_bench::memcached::{MemcachedOptions, MemcachedWorkload, render_text, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_memcached_run_measures_everything() {
    let opts = MemcachedOptions {
        workload: MemcachedWorkload::tiny(),
        exe: env!("CARGO_BIN_EXE_opkit-bench").into(),
        progress: false,
    };
    let w = opts.workload.clone();
    let report = run(&opts).await.expect("benchmark runs");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(report.runs.len(), w.repeats);
    for r in &report.runs {
        assert!(!r.timed_out);
        assert!(r.synced, "the operator's caches synced before the creates");
        let c = &r.completion;
        assert_eq!((c.crs, c.done), (w.crs, w.crs));
        assert!(c.all_seconds > 0.0 && c.first_seconds <= c.p50_seconds && c.p50_seconds <= c.p99_seconds);
        assert!(c.p99_seconds <= c.all_seconds && c.watch_events >= w.crs);
        assert_eq!(r.pods, w.crs * w.size);
        let m = &r.memory;
        assert!(m.rss_before_bytes > 0 && m.rss_ready_bytes > m.rss_before_bytes);
        assert!(m.rss_bytes > 0 && m.hwm_bytes >= m.rss_bytes);
        // Each CR: create its Deployment (requeue), then at least one status write (success).
        let rc = &r.reconciles;
        assert!(rc.requeue >= w.crs as u64, "{rc:?}");
        assert!(rc.success >= w.crs as u64, "{rc:?}");
        assert_eq!(rc.total, rc.success + rc.error + rc.requeue + rc.requeue_after);
        assert!(r.reconciles_per_cr >= 2.0);
    }
    assert_eq!(report.summary.complete_runs, w.repeats);
    assert!(report.summary.all_seconds > 0.0 && report.summary.hwm_bytes > 0);
    let text = render_text(&report);
    assert!(text.contains("opkit-bench memcached") && text.contains("VmHWM") && text.contains("reconciles per CR"));
    let json = serde_json::to_value(&report).expect("report serializes");
    assert_eq!(json["workload"]["crs"], w.crs);
    assert!(json["runs"][0]["completion"]["all_seconds"].as_f64().is_some());
    assert!(json["runs"][0]["memory"]["hwm_bytes"].as_u64().is_some());
    assert!(json["runs"][0]["reconciles"]["total"].as_u64().is_some());
    assert!(json["summary"]["reconciles_per_cr"].as_f64().is_some());
}
