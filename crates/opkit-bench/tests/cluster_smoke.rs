//! Smoke test: the cluster benchmark's tiny workload (5 Deployments × 2 replicas on 2
//! nodes) end to end, against a control plane child process spawned from the built
//! `opkit-bench` binary, and the shape of its report.

use opkit_bench::cluster::{ClusterOptions, ClusterWorkload, render_text, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_cluster_run_measures_every_figure() {
    let opts = ClusterOptions {
        workload: ClusterWorkload::tiny(),
        exe: env!("CARGO_BIN_EXE_opkit-bench").into(),
        progress: false,
    };
    let w = &opts.workload;
    let report = run(&opts).await.expect("benchmark runs");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert!(!report.timed_out);
    assert_eq!(report.creates.ok, w.deployments);
    assert_eq!(report.deployments_available, w.deployments);
    let p = &report.pods;
    assert_eq!((p.expected, p.created, p.bound, p.ready), (10, 10, 10, 10));
    assert!(p.average_per_sec > 0.0 && p.peak_per_sec >= 1);
    assert_eq!(p.per_second.iter().sum::<usize>(), p.ready);
    let t = &report.timeline;
    let (created, bound, ready, available) = (
        t.last_pod_created_secs.expect("pods created"),
        t.last_pod_bound_secs.expect("pods bound"),
        t.last_pod_ready_secs.expect("pods ready"),
        t.all_available_secs.expect("all available"),
    );
    assert!(created <= bound && bound <= ready && ready <= available, "{t:?}");
    assert!(report.memory.hwm_bytes >= report.memory.rss_end_bytes && report.memory.rss_idle_bytes > 0);
    assert_eq!(report.targets.len(), 2);
    let text = render_text(&report);
    assert!(text.contains("pods started") && text.contains("VmHWM") && text.contains("targets"));
    let json = serde_json::to_value(&report).expect("report serializes");
    assert_eq!(json["workload"]["deployments"], 5);
    assert!(json["timeline"]["all_available_secs"].as_f64().is_some());
    assert!(json["memory"]["hwm_bytes"].as_u64().is_some());
}
