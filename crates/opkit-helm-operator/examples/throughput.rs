//! Reconcile throughput of the Helm operator: N custom resources of the fixture nginx
//! chart (default 100) installed, then all upgraded, on an in-process control plane.
//!
//! `cargo run -p opkit-helm-operator --example throughput -- [COUNT] [CONCURRENCY]`

use std::path::Path;
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use opkit::{Manager, ManagerOptions};
use opkit_helm_operator::parse_watches;
use opkit_testenv::{TestEnv, wait_for_with};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(600);

fn revision(o: Option<&DynamicObject>) -> Option<i64> {
    o.and_then(|o| o.data.pointer("/status/deployedRelease/revision")).and_then(Value::as_i64)
}

async fn wait_all(
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    count: usize,
    want: i64,
) -> Result<(), Box<dyn std::error::Error>> {
    for i in 0..count {
        wait_for_with(
            api,
            resource,
            &format!("web-{i}"),
            "to reach its revision",
            move |o: Option<&DynamicObject>| revision(o) == Some(want),
            WAIT,
        )
        .await?;
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(100);
    let concurrency: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(4);
    let env = TestEnv::start().await?;
    env.install_crds([opkit_helm_operator::crd_for("demo.example.com", "v1alpha1", "Nginx", "nginxes", None)?]).await?;
    let charts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charts");
    let watches = format!(
        "- group: demo.example.com\n  version: v1alpha1\n  kind: Nginx\n  chart: nginx\n  maxConcurrentReconciles: {concurrency}\n"
    );
    let watches = parse_watches(&watches, &charts, &|_| None)?;
    let mgr = Manager::new(
        env.client(),
        ManagerOptions { metrics_addr: None, health_addr: None, ..ManagerOptions::default() },
    );
    opkit_helm_operator::setup(&mgr, watches).await?;
    let stop = CancellationToken::new();
    let operator = tokio::spawn(mgr.run_until(stop.clone()));

    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("demo.example.com", "v1alpha1", "Nginx"), "nginxes");
    let api: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &resource);
    let started = Instant::now();
    for i in 0..count {
        let cr: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "demo.example.com/v1alpha1", "kind": "Nginx",
            "metadata": { "name": format!("web-{i}"), "namespace": "default" },
            "spec": { "replicaCount": 1 },
        }))?;
        api.create(&PostParams::default(), &cr).await?;
    }
    wait_all(&api, &resource, count, 1).await?;
    let install = started.elapsed();

    let started = Instant::now();
    for i in 0..count {
        api.patch(
            &format!("web-{i}"),
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "replicaCount": 2 } })),
        )
        .await?;
    }
    wait_all(&api, &resource, count, 2).await?;
    let upgrade = started.elapsed();

    stop.cancel();
    operator.await??;
    println!(
        "{count} CRs, maxConcurrentReconciles {concurrency}: installed in {:.2} s ({:.1} releases/s), upgraded in {:.2} s ({:.1} releases/s)",
        install.as_secs_f64(),
        count as f64 / install.as_secs_f64(),
        upgrade.as_secs_f64(),
        count as f64 / upgrade.as_secs_f64()
    );
    Ok(())
}
