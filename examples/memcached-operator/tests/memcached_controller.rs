// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! Tests of the Memcached controller against an in-process control plane (opkit-testenv):
//! a real API server with garbage collection and simulated nodes and pods.

use std::time::Duration;

use opkit::{Manager, ManagerOptions};
use opkit_testenv::TestEnv;
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciles_the_sample() -> Result<(), Box<dyn std::error::Error>> {
    let env = TestEnv::start().await?;
    env.install_crds(memcached_operator::api::crds()).await?;
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let metrics = mgr.metrics().clone();
    memcached_operator::controller::setup(&mgr);
    let stop = CancellationToken::new();
    let running = tokio::spawn(mgr.run_until(stop.clone()));

    env.apply_yaml(include_str!("../config/samples/cache_v1alpha1_memcached.yaml")).await?;

    // TODO(user): wait for what your reconciler does (a child object, a status condition)
    // with kube::runtime::wait::await_condition. Until then: the sample was reconciled
    // without an error.
    let success = "controller_runtime_reconcile_total{controller=\"memcached\",result=\"success\"} ";
    let reconciled = async {
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        loop {
            tick.tick().await;
            let text = metrics.encode();
            let count = text.lines().find_map(|l| l.strip_prefix(success)).and_then(|v| v.trim().parse::<f64>().ok());
            if count.is_some_and(|c| c >= 1.0) {
                break;
            }
        }
    };
    tokio::time::timeout(TIMEOUT, reconciled).await?;

    stop.cancel();
    running.await??;
    Ok(())
}
