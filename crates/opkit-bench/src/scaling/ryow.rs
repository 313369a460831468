//! Read-your-own-writes' cost: the same writing controller with the guard on and off, on
//! the same fresh server each run. The reconciler marks each ConfigMap once (a merge
//! patch of an annotation) and records the object when a reconcile sees its mark, so a
//! run ends when every object was written and read back from the cache: the work the
//! guard waits on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use opkit::{Action, CacheScope, Context, Controller, Manager, ManagerOptions, ReconcileResult};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::BenchError;
use crate::runtime::cluster::{Cluster, NAMESPACE, create_objects};
use crate::runtime::recorder::Recorder;

/// The annotation the reconciler writes.
const MARK: &str = "bench.opkit.dev/marked";

/// One run: objects, whether the guard was on, and how long until every object's mark was
/// read back.
#[derive(Debug, Clone, Serialize)]
pub struct RyowRun {
    /// Read-your-own-writes on.
    pub guarded: bool,
    /// Objects written and read back.
    pub objects: usize,
    /// Seconds from the manager's start until the last object was seen marked.
    pub seconds: f64,
    /// Objects per second.
    pub per_sec: f64,
    /// Reconciler calls (repeats included).
    pub calls: usize,
    /// Whether it timed out.
    pub timed_out: bool,
}

fn manager(client: kube::Client, guarded: bool, concurrency: usize, rec: Arc<Recorder>) -> Manager {
    let opts =
        ManagerOptions { cache: CacheScope::namespaces(vec![NAMESPACE.to_string()]), ..ManagerOptions::default() };
    let mgr = Manager::new(client, opts);
    let reconcile = move |ctx: Context<ConfigMap>| {
        let rec = rec.clone();
        async move {
            let Some(cm) = ctx.object.as_ref() else { return ReconcileResult::Ok(Action::done()) };
            if cm.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(MARK)) {
                rec.record(&ctx.request.name);
                return Ok(Action::done());
            }
            let patch = serde_json::json!({"metadata": {"annotations": {MARK: "yes"}}});
            ctx.api().patch(&ctx.request.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
            Ok(Action::done())
        }
    };
    let controller = Controller::new(&mgr, reconcile).max_concurrent_reconciles(concurrency);
    let controller = if guarded { controller } else { controller.without_read_your_writes() };
    controller.build().expect("the only controller of a fresh manager has a unique name");
    mgr
}

/// One run on a fresh server with `objects` ConfigMaps.
pub async fn one_run(
    exe: &std::path::Path,
    guarded: bool,
    objects: usize,
    concurrency: usize,
    limit: Duration,
) -> Result<RyowRun, BenchError> {
    let cluster = Cluster::start(exe).await?;
    let result = async {
        create_objects(&cluster.endpoint, objects, 512, 16, limit, None).await?;
        let rec = Arc::new(Recorder::new(objects));
        let mgr = manager(cluster.client()?, guarded, concurrency, rec.clone());
        let stop = CancellationToken::new();
        let started = Instant::now();
        let task = tokio::spawn(mgr.run_until(stop.clone()));
        let all = rec.wait_all(limit).await;
        let seconds = started.elapsed().as_secs_f64();
        stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(20), task).await;
        Ok(RyowRun {
            guarded,
            objects,
            seconds,
            per_sec: objects as f64 / seconds,
            calls: rec.calls(),
            timed_out: !all,
        })
    }
    .await;
    cluster.stop().await;
    result
}
