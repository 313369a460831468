//! Smoke test: the tiny workload end to end, against a server child process spawned from
//! the built `opkit-bench` binary (etcd skipped).

use opkit_bench::{Backend, Options, Workload, render_text, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_run_measures_every_section() {
    tiny_run(Backend::Memory).await;
}

/// The durable backend under the same workload (a regression test for a deadlock between
/// durability waiters and the commit thread).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_run_durable() {
    tiny_run(Backend::Durable).await;
}

async fn tiny_run(backend: Backend) {
    let opts = Options {
        workload: Workload::tiny(),
        backends: vec![backend],
        etcd_bin: None,
        server_exe: env!("CARGO_BIN_EXE_opkit-bench").into(),
        tmp_root: None,
        progress: false,
    };
    let report = run(&opts).await.expect("benchmark runs");
    let w = &opts.workload;
    assert_eq!(report.backends.len(), 1);
    assert!(report.startup.median_ms > 0.0);
    for b in &report.backends {
        assert!(b.failures.is_empty(), "{:?}: {:?}", b.backend, b.failures);
        for op in ["create", "get", "update"] {
            for &c in &w.concurrencies {
                let p = b.phase(op, c).unwrap_or_else(|| panic!("{op} c={c} measured"));
                assert_eq!(p.ok, w.ops(c), "{:?} {op} c={c}: {:?}", b.backend, p.first_error);
                assert_eq!(p.errors, 0);
                assert!(p.ops_per_sec > 0.0 && p.p50_ms > 0.0 && p.p99_ms >= p.p50_ms);
            }
        }
        let l = b.list.as_ref().expect("list measured");
        assert_eq!(l.items_returned, w.list_objects);
        assert_eq!(l.pages, w.list_objects.div_ceil(w.page_size));
        let watch = b.watch.as_ref().expect("watch measured");
        assert_eq!(watch.complete_watchers, w.watchers);
        assert_eq!(watch.min_events_received, w.watch_events);
        let l = b.label_lists.as_ref().expect("Lease renewals under label lists measured");
        assert_eq!(l.objects, w.label_list_objects);
        assert_eq!(l.items_per_list, w.label_list_objects / w.label_values, "each list selects one label value");
        assert!(l.renewals.ok > 0 && l.renewals.errors == 0, "{:?}", l.renewals.first_error);
        assert!(l.lists.ok >= w.label_listers && l.lists.errors == 0, "{:?}", l.lists.first_error);
        let iw = l.idle_watches.as_ref().expect("idle watches measured");
        assert_eq!(iw.watches, w.idle_watches);
        assert!(iw.rss_peak_bytes >= iw.rss_before_bytes && iw.rss_before_bytes > 0);
        let m = b.memory.as_ref().expect("memory measured");
        assert_eq!(m.objects, w.memory_objects);
        assert!(m.json_bytes > (w.memory_objects * w.payload_bytes) as u64);
        assert!(m.rss_after_bytes > 0);
    }
    assert!(report.etcd.skipped.is_some());
    let text = render_text(&report);
    assert!(text.contains(&backend.to_string()) && text.contains("targets"));
    assert!(text.contains("Lease renewal p99 while 4 clients list 300 objects by label (scaled down)"), "{text}");
    let json = serde_json::to_value(&report).expect("report serializes");
    assert!(json["backends"][0]["phases"].is_array());
}
