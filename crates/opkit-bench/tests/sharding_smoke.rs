//! Smoke test: the sharding benchmark's tiny workload end to end, with an unsharded
//! replica, then 1 and 2 shard child processes of the built `opkit-bench` binary, against
//! a server child serving the benchmark's CRD.

use opkit_bench::sharding::{ShardingOptions, ShardingWorkload, render_text, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_sharding_run_reconciles_everything_and_rebalances() {
    let opts = ShardingOptions {
        workload: ShardingWorkload::tiny(),
        exe: env!("CARGO_BIN_EXE_opkit-bench").into(),
        progress: false,
    };
    let report = run(&opts).await.expect("benchmark runs");
    assert_eq!(report.runs.len(), 3);
    for run in &report.runs {
        assert_eq!(run.shard_objects.iter().sum::<usize>(), 300, "{run:?}");
        assert!(run.shard_objects.iter().all(|n| *n > 0), "every shard has a share: {run:?}");
        assert_eq!(run.shard_rss_bytes.len(), run.shards.max(1));
        assert_eq!(run.rebalance_seconds.is_some(), run.shards >= 2);
    }
    let text = render_text(&report);
    assert!(text.contains("unsharded") && text.contains("2 shard(s)") && text.contains("rebalanced"), "{text}");
}
