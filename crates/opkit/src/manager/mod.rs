//! The manager: owns the client, the shared cache and the metrics, runs controllers and
//! other runnables (leader-only or on every replica), serves metrics and health probes,
//! and shuts down gracefully.

mod flags;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::Client;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::cache::{Cache, CacheScope};
use crate::health::{self, Check};
use crate::leader::{LeaderElectionConfig, LeaderElector};
use crate::metrics::Metrics;

pub use flags::{FlagsError, ManagerArgs};

/// A failure of a runnable.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RunnableError(pub String);

/// Why the manager stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// The leader lease was lost; leader-only work was stopped at once.
    #[error("leader election lost")]
    LeaderElectionLost,
    /// A runnable failed.
    #[error("{name} failed: {source}")]
    Runnable {
        /// The runnable.
        name: String,
        /// Its error.
        source: RunnableError,
    },
    /// Serving metrics or probes failed.
    #[error("serving {what}: {source}")]
    Serve {
        /// Metrics or probes.
        what: &'static str,
        /// The cause.
        source: std::io::Error,
    },
    /// Waiting for signals failed.
    #[error("signal handling: {0}")]
    Signal(std::io::Error),
}

/// Something the manager starts and stops: controllers, webhook servers, your own loops.
pub trait Runnable: Send + 'static {
    /// A name for logs and errors.
    fn name(&self) -> String;
    /// Whether it runs only on the elected leader (default true).
    fn needs_leader_election(&self) -> bool {
        true
    }
    /// Runs until `shutdown` is cancelled.
    fn start(self: Box<Self>, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), RunnableError>>;
}

/// How a manager runs.
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// What the cache watches.
    pub cache: CacheScope,
    /// Where to serve `/metrics` (None: off).
    pub metrics_addr: Option<SocketAddr>,
    /// Where to serve `/healthz` and `/readyz` (None: off).
    pub health_addr: Option<SocketAddr>,
    /// Leader election (None: every replica leads).
    pub leader_election: Option<LeaderElectionConfig>,
    /// How long in-flight work may take to finish on shutdown.
    pub graceful_shutdown_timeout: Duration,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        ManagerOptions {
            cache: CacheScope::default(),
            metrics_addr: None,
            health_addr: None,
            leader_election: None,
            graceful_shutdown_timeout: Duration::from_secs(30),
        }
    }
}

struct Inner {
    client: Client,
    cache: Cache,
    metrics: Metrics,
    options: ManagerOptions,
    runnables: Mutex<Vec<Box<dyn Runnable>>>,
    bound: Mutex<(Option<SocketAddr>, Option<SocketAddr>)>,
}

/// Runs controllers against one cluster. Cheap to clone.
#[derive(Clone)]
pub struct Manager {
    inner: Arc<Inner>,
}

impl Manager {
    /// A manager over `client`.
    pub fn new(client: Client, options: ManagerOptions) -> Manager {
        let cache = Cache::new(client.clone(), options.cache.clone());
        Manager {
            inner: Arc::new(Inner {
                client,
                cache,
                metrics: Metrics::new(),
                options,
                runnables: Mutex::new(Vec::new()),
                bound: Mutex::new((None, None)),
            }),
        }
    }

    /// A client.
    pub fn client(&self) -> Client {
        self.inner.client.clone()
    }
    /// The shared cache.
    pub fn cache(&self) -> &Cache {
        &self.inner.cache
    }
    /// The metrics registry.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }
    /// The options.
    pub fn options(&self) -> &ManagerOptions {
        &self.inner.options
    }
    /// The bound metrics and health addresses, once running (useful with port 0).
    pub fn bound_addresses(&self) -> (Option<SocketAddr>, Option<SocketAddr>) {
        *self.inner.bound.lock()
    }

    /// Adds a runnable; it starts when the manager runs.
    pub fn add(&self, r: impl Runnable) {
        self.inner.runnables.lock().push(Box::new(r));
    }

    /// Runs until SIGTERM or Ctrl-C, then shuts down gracefully.
    pub async fn run(self) -> Result<(), ManagerError> {
        let shutdown = CancellationToken::new();
        let signal = shutdown.clone();
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(ManagerError::Signal)?;
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
                _ = signal.cancelled() => {},
            }
            signal.cancel();
        });
        self.run_until(shutdown).await
    }

    /// Runs until `shutdown` is cancelled (or leadership is lost).
    pub async fn run_until(self, shutdown: CancellationToken) -> Result<(), ManagerError> {
        let all = shutdown.child_token();
        let opts = self.inner.options.clone();
        if let Some(addr) = opts.metrics_addr {
            let bound = health::serve_metrics(addr, self.inner.metrics.clone(), all.clone())
                .await
                .map_err(|source| ManagerError::Serve { what: "metrics", source })?;
            self.inner.bound.lock().0 = Some(bound);
        }
        if let Some(addr) = opts.health_addr {
            let cache = self.inner.cache.clone();
            let ping: Check = Arc::new(|| Ok(()));
            let synced: Check = Arc::new(move || {
                if cache.is_synced() { Ok(()) } else { Err(format!("caches not synced: {:?}", cache.unsynced())) }
            });
            let bound = health::serve_probes(
                addr,
                vec![("ping".into(), ping)],
                vec![("informers".into(), synced)],
                all.clone(),
            )
            .await
            .map_err(|source| ManagerError::Serve { what: "health probes", source })?;
            self.inner.bound.lock().1 = Some(bound);
        }
        self.inner.cache.start(all.clone());
        let runnables: Vec<Box<dyn Runnable>> = std::mem::take(&mut *self.inner.runnables.lock());
        let (leader_only, everywhere): (Vec<_>, Vec<_>) =
            runnables.into_iter().partition(|r| r.needs_leader_election());
        let mut tasks = tokio::task::JoinSet::new();
        let spawn = |tasks: &mut tokio::task::JoinSet<Result<(), ManagerError>>,
                     r: Box<dyn Runnable>,
                     token: CancellationToken| {
            let name = r.name();
            tasks.spawn(async move { r.start(token).await.map_err(|source| ManagerError::Runnable { name, source }) });
        };
        for r in everywhere {
            spawn(&mut tasks, r, all.clone());
        }
        let leader_token = all.child_token();
        // The elector stops (and releases the lease) only after leader-only work has
        // stopped, and run_until waits for it: see the end of this function.
        let election_stop = CancellationToken::new();
        let mut elector = None;
        let mut lost = false;
        match opts.leader_election.clone() {
            None => {
                for r in leader_only {
                    spawn(&mut tasks, r, leader_token.clone());
                }
            }
            Some(cfg) => {
                let (mut rx, task) = LeaderElector::new(self.client(), cfg, Some(self.inner.metrics.clone()))
                    .start(election_stop.clone());
                elector = Some(task);
                let leading = tokio::select! {
                    _ = all.cancelled() => false,
                    r = rx.wait_for(|l| *l) => r.is_ok(),
                };
                if leading {
                    for r in leader_only {
                        spawn(&mut tasks, r, leader_token.clone());
                    }
                    let lt = leader_token.clone();
                    let watch_all = all.clone();
                    tasks.spawn(async move {
                        tokio::select! {
                            _ = watch_all.cancelled() => Ok(()),
                            _ = rx.wait_for(|l| !*l) => {
                                lt.cancel();
                                Err(ManagerError::LeaderElectionLost)
                            }
                        }
                    });
                }
            }
        }
        let mut result = Ok(());
        tokio::select! {
            _ = all.cancelled() => {},
            Some(r) = tasks.join_next() => {
                if let Ok(Err(e)) = r {
                    lost = matches!(e, ManagerError::LeaderElectionLost);
                    result = Err(e);
                }
            }
        }
        if lost {
            tracing::error!("leader election lost; stopping");
        }
        all.cancel();
        let drained = tokio::time::timeout(opts.graceful_shutdown_timeout, async {
            while let Some(r) = tasks.join_next().await {
                if let Ok(Err(e)) = r
                    && result.is_ok()
                    && !matches!(e, ManagerError::LeaderElectionLost)
                {
                    result = Err(e);
                }
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(timeout = ?opts.graceful_shutdown_timeout, "graceful shutdown timed out; abandoning in-flight work");
        }
        drop(tasks);
        // Only now may the lease go (release_on_cancel): no leader-only work is left. Wait
        // for it, since the process usually exits as soon as run_until returns and would
        // otherwise drop the release half-way.
        election_stop.cancel();
        if let Some(elector) = elector
            && let Err(e) = elector.await
        {
            tracing::warn!(error = %e, "leader election task failed");
        }
        result
    }
}
