// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The Memcached operator under perturbation (docs/perturb.md in opkit): killed right
//! after each of its writes and restarted, answered 500 or 409 instead of a write, or
//! answered 504 after a write applied. It reaches the same Memcached and Deployment as
//! without faults, creates and deletes nothing more, and goes quiet: no finding.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, PostParams};
use kube::runtime::wait::await_condition;
use memcached_operator::api::cache_v1alpha1::{Memcached, MemcachedSpec};
use opkit::{Manager, ManagerOptions};
use opkit_testenv::perturb::Perturber;
use tokio_util::sync::CancellationToken;

/// The operator, as `main` runs it: its manager with the Memcached controller.
async fn operator(client: kube::Client) {
    let mgr = Manager::new(client, ManagerOptions::default());
    if let Err(e) = memcached_operator::controller::setup(&mgr) {
        return eprintln!("setting up the controller: {e}");
    }
    let _ = mgr.run_until(CancellationToken::new()).await;
}

/// A user's Memcached of size 2, until it is Available with its 2 nodes listed.
async fn workload(client: kube::Client) -> Result<(), String> {
    let memcacheds: Api<Memcached> = Api::namespaced(client, "default");
    let m = Memcached::new("sample", MemcachedSpec { size: 2 });
    memcacheds.create(&PostParams::default(), &m).await.map_err(|e| format!("creating the Memcached: {e}"))?;
    let ready = |m: Option<&Memcached>| {
        m.and_then(|m| m.status.as_ref().map(|s| (m, s))).is_some_and(|(m, s)| {
            let available = s.conditions.iter().any(|c| {
                c.type_ == "Available" && c.status == "True" && c.observed_generation == m.metadata.generation
            });
            available && s.nodes.len() == 2
        })
    };
    await_condition(memcacheds, "sample", ready).await.map_err(|e| format!("waiting for the Memcached: {e}"))?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memcached_operator_passes_every_plan() {
    let perturber = memcached_operator::api::crds()
        .into_iter()
        .fold(Perturber::new(operator, workload), Perturber::crd)
        .compare::<Memcached>()
        .compare::<Deployment>()
        .workload_timeout(Duration::from_secs(60));
    let report = perturber.run().await.expect("perturbation run");
    eprintln!("{}masked: {:?}", report.render(), report.masked);
    assert!(!report.plans.is_empty(), "{}", report.render());
    // What is masked is what differs between any two runs (names, times), not whole
    // objects: the Memcached and its Deployment are compared.
    assert!(
        !report.masked.iter().any(|m| m == "memcacheds/sample" || m == "deployments/sample"),
        "{:?}",
        report.masked
    );
    assert!(report.findings.is_empty(), "{}", report.render());
}
