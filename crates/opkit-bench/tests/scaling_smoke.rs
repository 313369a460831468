//! Smoke test: the scaling benchmark's tiny workload end to end — the writing controller
//! with read-your-own-writes on and off, and the three cache-memory child processes —
//! against server child processes spawned from the built `opkit-bench` binary.

use opkit_bench::scaling::cache_memory::CacheMode;
use opkit_bench::scaling::{ScalingOptions, ScalingWorkload, render_text, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_scaling_run_measures_every_section() {
    let opts = ScalingOptions {
        workload: ScalingWorkload::tiny(),
        exe: env!("CARGO_BIN_EXE_opkit-bench").into(),
        progress: false,
    };
    let w = &opts.workload;
    let report = run(&opts).await.expect("benchmark runs");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(report.ryow.len(), 2);
    for side in &report.ryow {
        assert_eq!(side.runs.len(), w.repeats);
        // Each object was written, then seen marked (and recorded) at least once.
        assert!(side.runs.iter().all(|r| r.objects == w.ryow_objects && r.calls >= w.ryow_objects && r.per_sec > 0.0));
    }
    assert!(report.ryow_ratio.is_some_and(|r| r > 0.0));
    let modes: Vec<CacheMode> = report.cache_memory.iter().map(|c| c.mode).collect();
    assert_eq!(modes, [CacheMode::KeepManagedFields, CacheMode::Default, CacheMode::MetadataOnly]);
    assert!(report.cache_memory.iter().all(|c| c.objects == w.memory_pods && c.rss_bytes > c.rss_before_bytes));
    let text = render_text(&report);
    assert!(text.contains("read-your-own-writes on ÷ off") && text.contains("metadata only"), "{text}");
}
