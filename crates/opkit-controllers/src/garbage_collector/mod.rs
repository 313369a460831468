//! The garbage collector, like kube-controller-manager's: it watches every resource the
//! server serves that can be listed, watched and deleted (built-in kinds and custom
//! resources, rediscovered whenever CRDs change), keeps a graph of owner references, and
//!
//! - deletes dependents whose owners are gone (deleted in the background, never existed,
//!   or a different object with the same name), with propagationPolicy Background;
//! - for an owner deleted in the foreground (`foregroundDeletion` finalizer) deletes its
//!   dependents, waits for those that block owner deletion, then drops the finalizer;
//! - for an owner deleted with orphaning (`orphan` finalizer) removes its references from
//!   the dependents, then drops the finalizer.
//!
//! A namespaced dependent's namespaced owners are looked up in its own namespace, as
//! kube does: a reference to an object in another namespace counts as absent (and a
//! `OwnerRefInvalidNamespace` warning event is recorded).

mod graph;
mod meta;
mod monitors;
mod worker;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use kube::Client;
use opkit::controller::queue::WorkQueue;
use opkit::controller::ratelimit::RateLimiter;
use opkit::events::Recorder;
use opkit::{Manager, Runnable, RunnableError};
use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

use crate::ControllersConfig;

use graph::{Graph, ResourceKey, Work};
use monitors::{Mapper, Monitor};

/// The controller's name in [`crate::ALL`].
pub(crate) const NAME: &str = "garbagecollector";
/// The reporting controller of its events, as kube's.
pub(crate) const REPORTING_CONTROLLER: &str = "garbage-collector-controller";
/// How many objects are processed at once.
const WORKERS: usize = 4;
/// How often discovery is refreshed besides on CRD changes.
const RESYNC: Duration = Duration::from_secs(30);

/// Errors of the collector's work.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GcError {
    /// An API call failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// Discovery failed.
    #[error("discovery: {0}")]
    Discovery(kube::Error),
    /// Owner references name kinds the server does not serve.
    #[error("owner kinds not served: {0}")]
    UnknownKind(String),
    /// An update kept conflicting.
    #[error("{0}: too many conflicts")]
    Conflicts(String),
}

/// State shared by the monitors and the workers.
struct Shared {
    client: Client,
    graph: Mutex<Graph>,
    queue: Arc<WorkQueue<Work>>,
    mapper: RwLock<Arc<Mapper>>,
    monitors: Mutex<HashMap<ResourceKey, Monitor>>,
    discovered: AtomicBool,
    recorder: Recorder,
}

impl Shared {
    /// Queues the work an observed change caused.
    fn enqueue(&self, work: Vec<Work>) {
        for w in work {
            self.queue.add(w);
        }
    }

    /// Whether discovery ran and every monitor finished its initial list.
    fn all_synced(&self) -> bool {
        self.discovered.load(Ordering::Acquire)
            && self.monitors.lock().values().all(|m| m.synced.load(Ordering::Acquire))
    }

    /// The current resource mapping.
    fn mapper(&self) -> Arc<Mapper> {
        self.mapper.read().clone()
    }
}

/// The garbage collector, an [`opkit::Runnable`].
pub(crate) struct GarbageCollector {
    shared: Arc<Shared>,
}

impl GarbageCollector {
    /// A collector using `client`.
    pub(crate) fn new(client: Client) -> GarbageCollector {
        let recorder = Recorder::for_controller(client.clone(), REPORTING_CONTROLLER);
        GarbageCollector {
            shared: Arc::new(Shared {
                client,
                graph: Mutex::new(Graph::default()),
                queue: WorkQueue::new(
                    RateLimiter::exponential(Duration::from_millis(5), Duration::from_secs(60)),
                    None,
                ),
                mapper: RwLock::new(Arc::new(Mapper::default())),
                monitors: Mutex::new(HashMap::new()),
                discovered: AtomicBool::new(false),
                recorder,
            }),
        }
    }

    async fn run(self, shutdown: CancellationToken) -> Result<(), RunnableError> {
        let shared = self.shared;
        let crds_changed = Arc::new(tokio::sync::Notify::new());
        tokio::spawn(monitors::watch_crds(shared.client.clone(), crds_changed.clone(), shutdown.clone()));
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..WORKERS {
            workers.spawn(worker::run(shared.clone()));
        }
        loop {
            let delay = match monitors::sync(&shared, &shutdown).await {
                Ok(()) => RESYNC,
                Err(e) => {
                    tracing::warn!(error = %e, "garbage collector: resource discovery failed");
                    Duration::from_secs(1)
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = crds_changed.notified() => {}
                _ = tokio::time::sleep(delay) => {}
            }
        }
        shared.queue.shutdown();
        for m in shared.monitors.lock().values() {
            m.token.cancel();
        }
        while workers.join_next().await.is_some() {}
        Ok(())
    }
}

impl Runnable for GarbageCollector {
    fn name(&self) -> String {
        format!("controller/{NAME}")
    }
    fn start(self: Box<Self>, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), RunnableError>> {
        Box::pin((*self).run(shutdown))
    }
}

/// Registers the garbage collector with `mgr` (if enabled).
pub(crate) fn register(mgr: &Manager, cfg: &ControllersConfig) {
    if cfg.enabled(NAME) {
        mgr.add(GarbageCollector::new(crate::identity::client_for(mgr, cfg, "garbagecollector")));
    }
}
